"""The `beechdb` module as Python programs use it; run by tests/python.rs with the built
extension on PYTHONPATH and a scratch directory as the first argument."""

import os
import sys
import threading
import time
import unittest

import beechdb

SCRATCH = sys.argv.pop(1)


def fresh(name):
    path = os.path.join(SCRATCH, name)
    assert not os.path.exists(path), path
    return path


class KeyValue(unittest.TestCase):
    def test_put_get_insert_delete_and_the_mapping_protocol(self):
        with beechdb.Env(fresh("kv")) as env:
            db = env.open_db("inventory")
            self.assertEqual(db.name, "inventory")
            db.put(b"apple", b"12")
            db[b"banana"] = b"7"
            self.assertEqual(db.get(b"apple"), b"12")
            self.assertEqual(db[b"banana"], b"7")
            self.assertIsNone(db.get(b"cherry"))
            with self.assertRaises(KeyError):
                db[b"cherry"]
            with self.assertRaises(beechdb.KeyExistsError) as caught:
                db.insert(b"apple", b"13")
            self.assertEqual(caught.exception.code, -30994)
            self.assertEqual(caught.exception.code_name, "DB_KEYEXIST")
            self.assertIsInstance(caught.exception, beechdb.Error)
            db.insert(b"cherry", b"")
            self.assertEqual(db[b"cherry"], b"")
            self.assertIn(b"apple", db)
            self.assertNotIn(b"date", db)
            self.assertEqual(len(db), 3)
            self.assertTrue(db.delete(b"banana"))
            self.assertFalse(db.delete(b"banana"))
            del db[b"cherry"]
            with self.assertRaises(KeyError):
                del db[b"cherry"]
            self.assertEqual(list(db), [b"apple"])
        self.assertTrue(env.closed)

    def test_ranges_in_both_directions(self):
        with beechdb.Env(fresh("ranges")) as env:
            db = env.open_db("d")
            for i in range(100):
                db.put(b"k%03d" % i, b"v%d" % i)
            items = list(db.items(start=b"k010", stop=b"k015"))
            self.assertEqual(items, [(b"k%03d" % i, b"v%d" % i) for i in range(10, 15)])
            self.assertEqual(list(db.keys(stop=b"k003", reverse=True)), [b"k002", b"k001", b"k000"])
            self.assertEqual(len(list(db.items())), 100)

    def test_bad_input_is_a_clear_error(self):
        with beechdb.Env(fresh("bad")) as env:
            db = env.open_db("d")
            with self.assertRaises(TypeError):
                db.put("text", b"v")
            with self.assertRaises(beechdb.InvalidArgumentError) as caught:
                db.put(b"k" * (32 << 20), b"v")
            self.assertEqual(caught.exception.code_name, "EINVAL")
            with self.assertRaises(beechdb.NoSuchDatabaseError):
                env.open_db("missing", create=False)
            with self.assertRaises(beechdb.LockedError):
                beechdb.Env(os.path.join(SCRATCH, "bad"))
        with self.assertRaises(ValueError):
            beechdb.Env(fresh("bad2"), durability="sometimes")
        with self.assertRaises(beechdb.ClosedError):
            db.get(b"k")
        with self.assertRaises(beechdb.ClosedError):
            env.open_db("d")
        env.close()  # closing twice does nothing

    def test_a_failed_system_call_is_an_io_error(self):
        blocker = fresh("blocker")
        with open(blocker, "wb") as f:
            f.write(b"a file, where a directory would have to be")
        with self.assertRaises(beechdb.IOError) as caught:
            beechdb.Env(os.path.join(blocker, "env"))
        self.assertIsInstance(caught.exception, beechdb.Error)
        self.assertIn("blocker", str(caught.exception))

    def test_a_read_only_environment_refuses_writes(self):
        path = fresh("ro")
        with beechdb.Env(path) as env:
            env.open_db("d")[b"k"] = b"v"
        with beechdb.Env(path, read_only=True, create=False) as env:
            db = env.open_db("d", create=False)
            self.assertEqual(db[b"k"], b"v")
            with self.assertRaises(beechdb.ReadOnlyError) as caught:
                db[b"k"] = b"w"
            self.assertIsInstance(caught.exception, beechdb.Error)
            self.assertEqual(db[b"k"], b"v")

    def test_a_damaged_page_is_a_corruption_error(self):
        path = fresh("corrupt")
        with beechdb.Env(path) as env:
            db = env.open_db("d")
            for i in range(20000):
                db[b"k%06d" % i] = b"v" * 50
        pages = os.path.join(path, "beech.db")
        size = os.path.getsize(pages)
        with open(pages, "r+b") as f:
            # Past the two meta pages: a run of garbage in the middle of every 4 KiB.
            for at in range(3 * 16384 + 2048, size, 4096):
                f.seek(at)
                f.write(b"\xa5" * 64)
        with self.assertRaises(beechdb.CorruptError) as caught:
            with beechdb.Env(path, create=False) as env:
                db = env.open_db("d", create=False)
                for i in range(20000):
                    db.get(b"k%06d" % i)
        self.assertIsInstance(caught.exception, beechdb.Error)

    def test_everything_is_there_after_a_reopen(self):
        path = fresh("reopen")
        with beechdb.Env(path) as env:
            env.open_db("a")[b"x"] = b"1"
            env.open_db("b")[b"y"] = b"2"
            env.sync()
        with beechdb.Env(path, create=False) as env:
            self.assertEqual(sorted(env.db_names()), ["a", "b"])
            self.assertEqual(env.open_db("a")[b"x"], b"1")
            env.remove_db("b")
            self.assertEqual(env.db_names(), ["a"])
            self.assertIn("pages", env.stat())


class Transactions(unittest.TestCase):
    def test_a_block_commits_and_an_exception_aborts(self):
        with beechdb.Env(fresh("txn"), transactional=True, durability="write_nosync") as env:
            db = env.open_db("accounts")
            with env.begin() as txn:
                txn.put(db, b"alice", b"100")
                self.assertEqual(txn.get(db, b"alice"), b"100")
                self.assertIsNone(db.get(b"alice"))
            self.assertEqual(db[b"alice"], b"100")
            with self.assertRaises(RuntimeError):
                with env.begin() as txn:
                    txn.put(db, b"bob", b"50")
                    raise RuntimeError("changed my mind")
            self.assertNotIn(b"bob", db)
            txn = env.begin()
            txn.delete(db, b"alice")
            self.assertGreater(txn.commit(), 0)
            with self.assertRaises(beechdb.ClosedError):
                txn.put(db, b"carol", b"1")
            self.assertNotIn(b"alice", db)

    def test_savepoints_and_iteration_over_own_writes(self):
        with beechdb.Env(fresh("savepoints"), transactional=True, durability="nosync") as env:
            db = env.open_db("d")
            db[b"a"] = b"1"
            with env.begin() as txn:
                txn.put(db, b"b", b"2")
                sp = txn.savepoint()
                txn.put(db, b"c", b"3")
                txn.delete(db, b"a")
                txn.rollback_to(sp)
                self.assertEqual(list(txn.items(db)), [(b"a", b"1"), (b"b", b"2")])
                txn.release(sp)
                with self.assertRaises(beechdb.ClosedError):
                    txn.rollback_to(sp)
            self.assertEqual(list(db.items()), [(b"a", b"1"), (b"b", b"2")])

    def test_two_writers_of_one_key_conflict(self):
        with beechdb.Env(fresh("conflict"), transactional=True, durability="nosync") as env:
            db = env.open_db("d")
            db[b"k"] = b"0"
            first, second = env.begin(), env.begin()
            self.assertEqual(second.get(db, b"k"), b"0")
            first.put(db, b"k", b"1")
            first.commit()
            with self.assertRaises(beechdb.DeadlockError) as caught:
                second.put(db, b"k", b"2")
            self.assertEqual(caught.exception.code_name, "DB_LOCK_DEADLOCK")
            second.abort()
            self.assertEqual(db[b"k"], b"1")

    def test_a_key_lock_wait_times_out(self):
        with beechdb.Env(fresh("timeout"), transactional=True, durability="nosync",
                         lock_timeout=0.05) as env:
            db = env.open_db("d")
            holder = env.begin()
            holder.put(db, b"k", b"held")
            started = time.monotonic()
            waiter = env.begin(read_committed=True)
            with self.assertRaises(beechdb.LockTimeoutError) as caught:
                waiter.get_for_update(db, b"k")
            waiter.abort()
            self.assertIsInstance(caught.exception, beechdb.Error)
            self.assertEqual(caught.exception.code_name, "DB_LOCK_NOTGRANTED")
            self.assertLess(time.monotonic() - started, 5)
            holder.commit()
        with self.assertRaises(ValueError):
            beechdb.Env(fresh("bad-timeout"), lock_timeout=-1)

    def test_a_thread_waiting_for_a_key_lock_lets_the_others_run(self):
        # The waiter releases the GIL while it waits: otherwise this thread could not run
        # the commit that frees the key, and the waiter would time out (after 10 s).
        with beechdb.Env(fresh("gil"), transactional=True, durability="nosync") as env:
            db = env.open_db("d")
            holder = env.begin()
            holder.put(db, b"k", b"new")
            seen = []

            def wait_for_the_key():
                with env.begin(read_committed=True) as txn:
                    seen.append(txn.get_for_update(db, b"k"))

            waiter = threading.Thread(target=wait_for_the_key)
            started = time.monotonic()
            waiter.start()
            time.sleep(0.2)
            holder.commit()
            waiter.join()
            self.assertEqual(seen, [b"new"])
            self.assertLess(time.monotonic() - started, 5)

    def test_threads_write_at_once(self):
        with beechdb.Env(fresh("threads"), transactional=True, durability="nosync") as env:
            db = env.open_db("d")
            failures = []

            def work(t):
                try:
                    for i in range(500):
                        with env.begin() as txn:
                            txn.put(db, b"t%d-%03d" % (t, i), b"v")
                except Exception as e:  # reported below
                    failures.append(e)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
            self.assertEqual(len(db), 2000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
