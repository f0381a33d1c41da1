"""Python's own sqlite3 module (DB-API 2.0) on BeechDB's libsqlite3.

Run by tests/dropin.rs with LD_LIBRARY_PATH naming a directory whose libsqlite3.so.0 is
BeechDB's library; the first test checks that it is the library in use.

    python3 -m unittest test_dbapi      (BEECH_DROPIN_DIR: a scratch directory)
"""
import datetime
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SCRATCH = os.environ.get("BEECH_DROPIN_DIR") or tempfile.mkdtemp()


def fresh(name):
    """A path for a new database (a file, its log beside it)."""
    return os.path.join(tempfile.mkdtemp(dir=SCRATCH), name)


class Library(unittest.TestCase):
    def test_runs_on_beechdb(self):
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "sqlite3" in line and "/" in line}
        real = {os.path.realpath(p) for p in libs}
        self.assertTrue(any("beechdb_sqlite3" in p for p in real), real)
        self.assertEqual(sqlite3.sqlite_version, "3.46.0")
        self.assertEqual(sqlite3.threadsafety, 3)


class Basics(unittest.TestCase):
    def setUp(self):
        self.path = fresh("basics")
        self.con = sqlite3.connect(self.path)
        self.con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB)")

    def tearDown(self):
        self.con.close()

    def test_execute_parameters_and_fetch(self):
        cur = self.con.cursor()
        cur.execute("INSERT INTO t(name, score) VALUES (?, ?)", ("ann", 1.5))
        self.assertEqual(cur.lastrowid, 1)
        self.assertEqual(cur.rowcount, 1)
        cur.execute("INSERT INTO t(name, score) VALUES (:n, :s)", {"n": "bob", "s": 2})
        cur.executemany("INSERT INTO t(name, data) VALUES (?, ?)", [(f"x{i}", bytes([i, 0, 255])) for i in range(10)])
        self.assertEqual(cur.rowcount, 10)
        cur.execute("SELECT id, name, score, data FROM t ORDER BY id")
        self.assertEqual([d[0] for d in cur.description], ["id", "name", "score", "data"])
        self.assertEqual(cur.fetchone(), (1, "ann", 1.5, None))
        self.assertEqual(cur.fetchmany(2), [(2, "bob", 2.0, None), (3, "x0", None, b"\x00\x00\xff")])
        self.assertEqual(len(cur.fetchall()), 9)
        self.assertIsNone(cur.fetchone())
        self.assertEqual(self.con.execute("SELECT count(*), sum(length(data)) FROM t").fetchone(), (12, 30))
        self.assertEqual(self.con.total_changes, 12)

    def test_types_round_trip(self):
        values = [None, 0, -1, 2**63 - 1, -(2**63), 3.25, float("inf"), "", "héllo ✓", b"", b"\x00\x01"]
        for v in values:
            got = self.con.execute("SELECT ?", (v,)).fetchone()[0]
            self.assertEqual(got, v, repr(v))
            self.assertEqual(type(got), type(v), repr(v))
        with self.assertRaises(OverflowError):
            self.con.execute("SELECT ?", (2**64,))

    def test_transactions(self):
        self.con.execute("INSERT INTO t(name) VALUES ('a')")
        self.assertTrue(self.con.in_transaction)
        self.con.rollback()
        self.assertFalse(self.con.in_transaction)
        self.assertEqual(self.con.execute("SELECT count(*) FROM t").fetchone()[0], 0)
        with self.con:
            self.con.execute("INSERT INTO t(name) VALUES ('b')")
        with self.assertRaises(sqlite3.IntegrityError):
            with self.con:
                self.con.execute("INSERT INTO t(name) VALUES ('c')")
                self.con.execute("INSERT INTO t(id) SELECT id FROM t WHERE name = 'b'")
        self.assertEqual(self.con.execute("SELECT name FROM t").fetchall(), [("b",)])
        # Another connection sees only what was committed.
        other = sqlite3.connect(self.path)
        self.con.execute("INSERT INTO t(name) VALUES ('d')")
        self.assertEqual(other.execute("SELECT count(*) FROM t").fetchone()[0], 1)
        self.con.commit()
        self.assertEqual(other.execute("SELECT count(*) FROM t").fetchone()[0], 2)
        other.close()

    def test_isolation_level_none_is_autocommit(self):
        self.con.isolation_level = None
        self.con.execute("INSERT INTO t(name) VALUES ('auto')")
        self.assertFalse(self.con.in_transaction)
        self.con.execute("BEGIN IMMEDIATE")
        self.con.execute("INSERT INTO t(name) VALUES ('explicit')")
        self.assertTrue(self.con.in_transaction)
        self.con.execute("ROLLBACK")
        self.assertEqual(self.con.execute("SELECT name FROM t").fetchall(), [("auto",)])

    def test_row_factories(self):
        self.con.execute("INSERT INTO t(name, score) VALUES ('r', 7)")
        self.con.row_factory = sqlite3.Row
        row = self.con.execute("SELECT id, name AS who, score FROM t").fetchone()
        self.assertEqual(row["who"], "r")
        self.assertEqual(row[2], 7.0)
        self.assertEqual(row.keys(), ["id", "who", "score"])
        self.con.row_factory = lambda cur, r: {d[0]: v for d, v in zip(cur.description, r)}
        self.assertEqual(self.con.execute("SELECT name FROM t").fetchone(), {"name": "r"})
        self.con.text_factory = bytes
        self.con.row_factory = None
        self.assertEqual(self.con.execute("SELECT name FROM t").fetchone(), (b"r",))

    def test_declared_types_and_converters(self):
        con = sqlite3.connect(fresh("types"), detect_types=sqlite3.PARSE_DECLTYPES)
        con.execute("CREATE TABLE e(d DATE, ts TIMESTAMP)")
        day = datetime.date(2026, 11, 24)
        at = datetime.datetime(2026, 11, 24, 6, 58, 49)
        sqlite3.register_adapter(datetime.date, lambda d: d.isoformat())
        sqlite3.register_adapter(datetime.datetime, lambda d: d.isoformat(" "))
        sqlite3.register_converter("DATE", lambda b: datetime.date.fromisoformat(b.decode()))
        sqlite3.register_converter("TIMESTAMP", lambda b: datetime.datetime.fromisoformat(b.decode()))
        con.execute("INSERT INTO e VALUES (?, ?)", (day, at))
        self.assertEqual(con.execute("SELECT d, ts FROM e").fetchone(), (day, at))
        con.close()

    def test_errors(self):
        with self.assertRaises(sqlite3.OperationalError) as cm:
            self.con.execute("SELEC 1")
        self.assertIn("syntax error", str(cm.exception))
        with self.assertRaises(sqlite3.OperationalError) as cm:
            self.con.execute("SELECT * FROM nowhere")
        self.assertIn("no such table: nowhere", str(cm.exception))
        self.con.execute("INSERT INTO t(id) VALUES (1)")
        with self.assertRaises(sqlite3.IntegrityError) as cm:
            self.con.execute("INSERT INTO t(id) VALUES (1)")
        self.assertEqual(cm.exception.sqlite_errorname, "SQLITE_CONSTRAINT_PRIMARYKEY")
        with self.assertRaises(sqlite3.ProgrammingError):
            self.con.execute("SELECT ?", (1, 2))
        with self.assertRaises(sqlite3.ProgrammingError):
            self.con.execute("SELECT 1; SELECT 2")
        self.assertTrue(sqlite3.complete_statement("SELECT 1;"))
        self.assertFalse(sqlite3.complete_statement("SELECT 1"))

    def test_executescript_and_iterdump(self):
        self.con.executescript(
            """
            CREATE TABLE s(a, b);
            INSERT INTO s VALUES (1, 'x');
            INSERT INTO s VALUES (2, 'it''s');
            CREATE INDEX s_a ON s(a);
            """
        )
        self.assertEqual(self.con.execute("SELECT b FROM s ORDER BY a").fetchall(), [("x",), ("it's",)])
        dump = list(self.con.iterdump())
        self.assertIn("INSERT INTO \"s\" VALUES(2,'it''s');", dump)
        self.assertIn("CREATE INDEX s_a ON s(a);", dump)
        self.assertIn("CREATE TABLE s(a, b);", dump)


class Functions(unittest.TestCase):
    def setUp(self):
        self.con = sqlite3.connect(":memory:")
        self.con.execute("CREATE TABLE v(x INTEGER, s TEXT)")
        self.con.executemany("INSERT INTO v VALUES (?, ?)", [(i, "abcdefghij"[: i + 1]) for i in range(6)])

    def tearDown(self):
        self.con.close()

    def test_scalar_function(self):
        self.con.create_function("twice", 1, lambda v: None if v is None else v * 2, deterministic=True)
        self.assertEqual(self.con.execute("SELECT twice(x), twice(s) FROM v WHERE x = 2").fetchone(), (4, "abcabc"))
        self.assertEqual(self.con.execute("SELECT twice(NULL)").fetchone(), (None,))

        def boom(v):
            raise ValueError("no")

        self.con.create_function("boom", 1, boom)
        with self.assertRaises(sqlite3.OperationalError) as cm:
            self.con.execute("SELECT boom(1)").fetchone()
        self.assertIn("user-defined function raised exception", str(cm.exception))

    def test_aggregate(self):
        class Spread:
            def __init__(self):
                self.values = []

            def step(self, v):
                self.values.append(v)

            def finalize(self):
                return max(self.values) - min(self.values) if self.values else None

        self.con.create_aggregate("spread", 1, Spread)
        self.assertEqual(self.con.execute("SELECT spread(x) FROM v").fetchone(), (5,))
        self.assertEqual(
            self.con.execute("SELECT x % 2, spread(x) FROM v GROUP BY x % 2 ORDER BY 1").fetchall(),
            [(0, 4), (1, 4)],
        )
        self.assertEqual(self.con.execute("SELECT spread(x) FROM v WHERE x > 99").fetchone(), (None,))

    def test_window_function(self):
        class Total:
            def __init__(self):
                self.n = 0

            def step(self, v):
                self.n += v

            def inverse(self, v):
                self.n -= v

            def value(self):
                return self.n

            def finalize(self):
                return self.n

        self.con.create_window_function("total_of", 1, Total)
        rows = self.con.execute(
            "SELECT x, total_of(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM v"
        ).fetchall()
        self.assertEqual(rows, [(0, 0), (1, 1), (2, 3), (3, 5), (4, 7), (5, 9)])

    def test_collation(self):
        self.con.create_collation("reverse", lambda a, b: (a < b) - (a > b))
        rows = self.con.execute("SELECT s FROM v WHERE x < 3 ORDER BY s COLLATE reverse").fetchall()
        self.assertEqual(rows, [("abc",), ("ab",), ("a",)])
        self.con.create_collation("reverse", None)
        with self.assertRaises(sqlite3.OperationalError):
            self.con.execute("SELECT s FROM v ORDER BY s COLLATE reverse")


class Hooks(unittest.TestCase):
    def setUp(self):
        self.con = sqlite3.connect(":memory:")
        self.con.execute("CREATE TABLE h(a)")

    def tearDown(self):
        self.con.close()

    def test_trace_callback(self):
        seen = []
        self.con.set_trace_callback(seen.append)
        self.con.execute("INSERT INTO h VALUES (?)", ("it's",))
        self.con.set_trace_callback(None)
        self.con.execute("SELECT 1")
        self.assertIn("INSERT INTO h VALUES ('it''s')", seen)
        self.assertNotIn("SELECT 1", seen)

    def test_authorizer(self):
        def deny_deletes(action, arg1, arg2, db, source):
            return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_DELETE else sqlite3.SQLITE_OK

        self.con.set_authorizer(deny_deletes)
        self.con.execute("INSERT INTO h VALUES (1)")
        with self.assertRaises(sqlite3.DatabaseError) as cm:
            self.con.execute("DELETE FROM h")
        self.assertIn("not authorized", str(cm.exception))
        self.con.set_authorizer(None)
        self.con.execute("DELETE FROM h")

    def test_progress_handler_interrupts(self):
        self.con.set_progress_handler(lambda: 1, 1)
        with self.assertRaises(sqlite3.OperationalError) as cm:
            self.con.execute("SELECT 1")
        self.assertIn("interrupted", str(cm.exception))
        self.con.set_progress_handler(None, 1)
        self.assertEqual(self.con.execute("SELECT 1").fetchone(), (1,))

    def test_limits(self):
        old = self.con.getlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH)
        self.con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 20)
        with self.assertRaises(sqlite3.DataError):
            self.con.execute("SELECT 'a long statement text'")
        self.con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, old)


class BlobsAndBackup(unittest.TestCase):
    def test_blob_io(self):
        con = sqlite3.connect(fresh("blobs"))
        con.execute("CREATE TABLE b(id INTEGER PRIMARY KEY, data BLOB)")
        con.execute("INSERT INTO b VALUES (1, zeroblob(10))")
        con.commit()
        with con.blobopen("b", "data", 1) as blob:
            self.assertEqual(len(blob), 10)
            blob.write(b"hello")
            blob.seek(0)
            self.assertEqual(blob.read(5), b"hello")
            with self.assertRaises(ValueError):
                blob.write(b"x" * 20)
        self.assertEqual(con.execute("SELECT data FROM b").fetchone()[0], b"hello" + bytes(5))
        con.close()

    def test_backup(self):
        src = sqlite3.connect(fresh("src"))
        src.executescript("CREATE TABLE k(a TEXT UNIQUE, b); INSERT INTO k VALUES ('one', 1), ('two', 2);")
        dst = sqlite3.connect(fresh("dst"))
        progress = []
        src.backup(dst, progress=lambda status, remaining, total: progress.append((remaining, total)))
        self.assertEqual(dst.execute("SELECT a, b FROM k ORDER BY b").fetchall(), [("one", 1), ("two", 2)])
        with self.assertRaises(sqlite3.IntegrityError):
            dst.execute("INSERT INTO k VALUES ('one', 3)")
        self.assertEqual(progress[-1], (0, 2))
        src.close()
        dst.close()

    def stepped_source(self):
        path = fresh("stepped")
        src = sqlite3.connect(path)
        src.execute("CREATE TABLE big(id INTEGER PRIMARY KEY, v TEXT)")
        src.executemany("INSERT INTO big VALUES (?, ?)", [(i, "x" * 200) for i in range(2000)])
        src.execute("CREATE INDEX big_v ON big(v)")
        src.commit()
        return path, src

    def test_backup_in_steps_commits_with_the_last(self):
        _, src = self.stepped_source()
        dst_path = fresh("stepped-dst")
        dst = sqlite3.connect(dst_path)
        dst.execute("CREATE TABLE old(z)")
        dst.commit()
        watcher = sqlite3.connect(dst_path)
        seen = []

        def progress(status, remaining, total):
            # Another connection sees the destination as it was until the copy commits.
            tables = [r[0] for r in watcher.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
            seen.append((status, remaining, total, tables))

        src.backup(dst, pages=3, progress=progress)
        totals = {t for _, _, t, _ in seen}
        self.assertEqual(len(totals), 1)
        total = totals.pop()
        self.assertGreater(total, 20)  # 400 KB of text in pages of 16 KiB, and the schema
        self.assertEqual([r for _, r, _, _ in seen], [max(total - 3 * i, 0) for i in range(1, len(seen) + 1)])
        self.assertEqual([s for s, _, _, _ in seen[:-1]], [sqlite3.SQLITE_OK] * (len(seen) - 1))
        self.assertEqual(seen[-1][0], sqlite3.SQLITE_DONE)
        self.assertTrue(all(t == ["old"] for _, _, _, t in seen[:-1]))
        self.assertEqual(watcher.execute("SELECT count(*), sum(length(v)) FROM big").fetchone(), (2000, 400000))
        self.assertEqual(watcher.execute("SELECT name FROM sqlite_schema WHERE name = 'old'").fetchall(), [])
        self.assertEqual(watcher.execute("SELECT count(*) FROM big INDEXED BY big_v WHERE v > ''").fetchone(), (2000,))
        for c in (src, dst, watcher):
            c.close()

    def test_backup_starts_again_after_a_commit_on_the_source(self):
        path, src = self.stepped_source()
        other = sqlite3.connect(path)
        dst = sqlite3.connect(fresh("restart-dst"))
        remaining = []

        def progress(status, left, total):
            if len(remaining) == 2:
                other.execute("UPDATE big SET v = 'changed' WHERE id = 0")
                other.execute("INSERT INTO big VALUES (5000, 'new')")
                other.commit()
            remaining.append(left)

        src.backup(dst, pages=4, progress=progress)
        total = remaining[0] + 4
        self.assertEqual(remaining[:5], [total - 4, total - 8, total - 12, total - 4, total - 8])
        self.assertEqual(remaining[-1], 0)
        self.assertEqual(dst.execute("SELECT v FROM big WHERE id IN (0, 5000) ORDER BY id").fetchall(), [("changed",), ("new",)])
        self.assertEqual(dst.execute("SELECT count(*) FROM big").fetchone(), (2001,))
        for c in (src, other, dst):
            c.close()

    def test_backup_stopped_early_leaves_the_destination(self):
        _, src = self.stepped_source()
        dst = sqlite3.connect(fresh("stopped-dst"))
        dst.execute("CREATE TABLE old(z)")
        dst.execute("INSERT INTO old VALUES (1)")
        dst.commit()

        def progress(status, remaining, total):
            raise RuntimeError("stop here")

        with self.assertRaises(RuntimeError):
            src.backup(dst, pages=2, progress=progress)
        self.assertFalse(dst.in_transaction)
        self.assertEqual(dst.execute("SELECT name FROM sqlite_schema").fetchall(), [("old",)])
        self.assertEqual(dst.execute("SELECT z FROM old").fetchall(), [(1,)])
        for c in (src, dst):
            c.close()


class Images(unittest.TestCase):
    """serialize() and deserialize(): BeechDB's own image of a whole database."""

    VALUES = [(1, None), (2, -(2**63)), (3, 2**63 - 1), (4, -0.0), (5, 1e308), (6, 2.5),
              (7, "text with \u00e6 and \0 inside"), (8, b"\x00\xff blob"), (9, "")]

    def source(self):
        con = sqlite3.connect(fresh("image-src"))
        con.executescript("""
            CREATE TABLE v(id INTEGER PRIMARY KEY, x);
            CREATE TABLE plain(a TEXT, b);
            CREATE INDEX plain_a ON plain(a);
            CREATE VIEW evens AS SELECT id FROM v WHERE id % 2 = 0;
            CREATE TABLE log(msg);
            CREATE TRIGGER v_ins AFTER INSERT ON v BEGIN INSERT INTO log VALUES ('v ' || new.id); END;
        """)
        con.executemany("INSERT INTO v VALUES (?, ?)", self.VALUES)
        con.executemany("INSERT INTO plain(rowid, a, b) VALUES (?, ?, ?)", [(10, "k", 1), (20, "j", 2)])
        con.execute("DELETE FROM log")
        con.commit()
        return con

    def test_round_trip_into_a_connection_on_another_file(self):
        src = self.source()
        image = src.serialize()
        self.assertIsInstance(image, bytes)
        other_path = fresh("image-dst")
        dst = sqlite3.connect(other_path)
        dst.execute("CREATE TABLE mine(z)")
        dst.execute("INSERT INTO mine VALUES (42)")
        dst.commit()
        cached = "SELECT count(*) FROM sqlite_schema"
        self.assertEqual(dst.execute(cached).fetchone(), (1,))
        dst.deserialize(image)
        self.assertEqual(dst.execute(cached).fetchone(), (6,))
        self.assertEqual(dst.execute("SELECT id, x FROM v ORDER BY id").fetchall(), self.VALUES)
        self.assertEqual(dst.execute("SELECT rowid, a, b FROM plain ORDER BY rowid").fetchall(), [(10, "k", 1), (20, "j", 2)])
        self.assertEqual(dst.execute("SELECT b FROM plain INDEXED BY plain_a WHERE a = 'j'").fetchall(), [(2,)])
        self.assertEqual(dst.execute("SELECT id FROM evens ORDER BY id").fetchall(), [(2,), (4,), (6,), (8,)])
        dst.execute("INSERT INTO v VALUES (10, 'new')")
        self.assertEqual(dst.execute("SELECT msg FROM log").fetchall(), [("v 10",)])
        dst.commit()
        # The file the connection used is left as it was, and so is the source.
        again = sqlite3.connect(other_path)
        self.assertEqual(again.execute("SELECT name FROM sqlite_schema").fetchall(), [("mine",)])
        self.assertEqual(src.execute("SELECT count(*) FROM v").fetchone(), (9,))
        for c in (src, dst, again):
            c.close()

    def test_a_bad_image_is_refused_whole(self):
        image = self.source().serialize()
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE kept(k)")
        con.execute("INSERT INTO kept VALUES (1)")
        con.commit()
        flipped = bytearray(image)
        flipped[len(image) // 2] ^= 0x40
        for bad in (b"\0\1\3", image[:-1], image[:40], bytes(flipped), b"SQLite format 3\0" + bytes(100)):
            with self.assertRaisesRegex(sqlite3.DatabaseError, "file is not a database"):
                con.deserialize(bad)
            self.assertEqual(con.execute("SELECT k FROM kept").fetchall(), [(1,)])

    def test_not_inside_a_transaction(self):
        image = self.source().serialize()
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE t(a)")
        con.execute("INSERT INTO t VALUES (1)")
        self.assertTrue(con.in_transaction)
        with self.assertRaises(sqlite3.OperationalError):
            con.deserialize(image)
        con.rollback()
        con.deserialize(image)
        self.assertEqual(con.execute("SELECT count(*) FROM v").fetchone(), (9,))


class ConcurrentWriters(unittest.TestCase):
    def test_threads_with_own_connections(self):
        path = fresh("threads")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER)")
        con.executemany("INSERT INTO acct VALUES (?, 100)", [(i,) for i in range(20)])
        con.execute("CREATE TABLE history(thread, n)")
        con.commit()
        threads, per_thread = 4, 50
        errors, retries = [], [0]

        def work(t):
            c = sqlite3.connect(path, timeout=10, isolation_level=None)
            import random

            rnd = random.Random(t)
            for n in range(per_thread):
                while True:
                    try:
                        c.execute("BEGIN")
                        a, b = rnd.randrange(20), rnd.randrange(20)
                        c.execute("UPDATE acct SET bal = bal - 1 WHERE id = ?", (a,))
                        c.execute("UPDATE acct SET bal = bal + 1 WHERE id = ?", (b,))
                        c.execute("INSERT INTO history VALUES (?, ?)", (t, n))
                        c.execute("COMMIT")
                        break
                    except sqlite3.OperationalError as e:
                        if "locked" not in str(e):
                            errors.append(e)
                            return
                        retries[0] += 1
                        if c.in_transaction:
                            c.execute("ROLLBACK")
            c.close()

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        self.assertEqual(errors, [])
        self.assertEqual(con.execute("SELECT sum(bal) FROM acct").fetchone()[0], 2000)
        self.assertEqual(con.execute("SELECT count(*) FROM history").fetchone()[0], threads * per_thread)
        con.close()

    def test_one_connection_shared_by_threads(self):
        con = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        con.execute("CREATE TABLE c(n)")

        def work():
            for i in range(100):
                con.execute("INSERT INTO c VALUES (?)", (i,))

        pool = [threading.Thread(target=work) for _ in range(3)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        self.assertEqual(con.execute("SELECT count(*), sum(n) FROM c").fetchone(), (300, 3 * 4950))
        con.close()


class TwoProcesses(unittest.TestCase):
    """Processes take turns at a database, as SQLite's take turns at its lock: one that
    has it hands it over when another waits and none of its connections is inside a
    transaction; one that waits gets "database is locked" (SQLITE_BUSY) when its busy
    timeout runs out first."""

    # A second process, driven line by line: SQL to run (its rows printed back as a
    # list), or "commit".
    PEER = """if 1:
        import sqlite3, sys
        con = sqlite3.connect(sys.argv[1], timeout=20)
        print("ready", flush=True)
        for line in sys.stdin:
            line = line.strip()
            try:
                if line == "commit":
                    con.commit()
                    print("ok", flush=True)
                else:
                    print(repr(con.execute(line).fetchall()), flush=True)
            except sqlite3.Error as e:
                print("error: %s" % e, flush=True)
        con.close()
    """

    def peer(self, path):
        proc = subprocess.Popen([sys.executable, "-c", self.PEER, path], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=os.environ)
        self.assertEqual(proc.stdout.readline().strip(), "ready")
        self.addCleanup(self.stop, proc)
        return proc

    def ask(self, proc, line):
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    def stop(self, proc):
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()

    def test_a_transaction_keeps_the_database_until_it_ends(self):
        path = fresh("turns.db")
        other = self.peer(path)
        self.assertEqual(self.ask(other, "CREATE TABLE t(x)"), "[]")
        self.assertEqual(self.ask(other, "INSERT INTO t VALUES (1)"), "[]")  # a transaction begins
        con = sqlite3.connect(path, timeout=0.3)
        con.create_function("twice", 1, lambda v: 2 * v)
        with self.assertRaisesRegex(sqlite3.OperationalError, "database is locked") as cm:
            con.execute("SELECT count(*) FROM t")
        self.assertEqual(cm.exception.sqlite_errorname, "SQLITE_BUSY")
        self.assertEqual(self.ask(other, "commit"), "ok")
        # Idle now, the other process hands the database over; a function registered
        # while this connection waited works.
        self.assertEqual(con.execute("SELECT twice(x) FROM t").fetchall(), [(2,)])
        con.execute("INSERT INTO t VALUES (2)")
        con.commit()
        # And back: the other process waits for this one, which is idle.
        self.assertEqual(self.ask(other, "SELECT sum(x) FROM t"), "[(3,)]")
        self.assertEqual(con.execute("SELECT count(*) FROM t").fetchall(), [(2,)])
        con.close()

    def database(self, name, *statements):
        """A new database file with `statements` committed, and a connection to it."""
        path = fresh(name)
        con = sqlite3.connect(path, timeout=20)
        for sql in statements:
            con.execute(sql)
        con.commit()
        return path, con

    def test_turns_lose_no_write(self):
        path, con = self.database(
            "counter.db", "CREATE TABLE c(id INTEGER PRIMARY KEY, n INTEGER)", "INSERT INTO c VALUES (1, 0)")
        other = self.peer(path)
        for _ in range(40):
            self.assertEqual(self.ask(other, "UPDATE c SET n = n + 1 WHERE id = 1"), "[]")
            self.assertEqual(self.ask(other, "commit"), "ok")
            con.execute("UPDATE c SET n = n + 1 WHERE id = 1")
            con.commit()
        self.assertEqual(con.execute("SELECT n FROM c").fetchall(), [(80,)])
        self.assertEqual(self.ask(other, "SELECT n FROM c"), "[(80,)]")
        con.close()

    WRITER = """if 1:
        import sqlite3, sys
        con = sqlite3.connect(sys.argv[1], timeout=60)
        i = 0
        while True:
            con.execute("INSERT INTO log VALUES (?, ?)", (sys.argv[2], i))
            con.commit()
            print(i, flush=True)
            i += 1
    """

    def test_writers_taking_turns_killed_lose_no_acknowledged_commit(self):
        # Three processes commit in turn, each printing what it has had acknowledged,
        # until all are SIGKILLed at a random moment; four rounds.
        path, con = self.database("kills.db", "CREATE TABLE log(w, i)")
        con.close()
        rng, acked = random.Random(7), {}
        for rnd in range(4):
            procs = {"%d.%d" % (rnd, k): subprocess.Popen(
                [sys.executable, "-c", self.WRITER, path, "%d.%d" % (rnd, k)],
                stdout=subprocess.PIPE, text=True, env=os.environ) for k in range(3)}
            # Each has had a commit acknowledged; then the kill comes at a random moment.
            first = {w: p.stdout.readline().strip() for w, p in procs.items()}
            self.assertEqual(set(first.values()), {"0"})
            time.sleep(rng.uniform(0.0, 0.2))
            for p in procs.values():
                p.kill()
            for w, p in procs.items():
                p.wait(timeout=30)
                acked[w] = 1 + len(p.stdout.read().split())
                p.stdout.close()
        con = sqlite3.connect(path, timeout=30)
        rows = con.execute(
            "SELECT w, count(*), count(DISTINCT i), max(i) FROM log GROUP BY w").fetchall()
        con.close()
        have = {w: n for w, n, _, _ in rows}
        self.assertGreater(sum(acked.values()), 0)
        for w, n in acked.items():
            self.assertGreaterEqual(have.get(w, 0), n, "writer %s" % w)
        # Each writer's commits a prefix of its sequence, none twice.
        for w, n, distinct, top in rows:
            self.assertEqual((n, distinct), (top + 1, top + 1), "writer %s" % w)

    def test_a_forked_child_opens_the_database_anew(self):
        # As a pre-forking server does: the parent has the database open when it forks; the
        # child's own connection gets it in turn, and its commits reach the parent.
        path, con = self.database("forked.db", "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)")
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                child = sqlite3.connect(path, timeout=20)
                child.execute("INSERT INTO t VALUES (2)")
                child.commit()
                code = 0 if child.execute("SELECT count(*) FROM t").fetchone() == (2,) else 3
                child.close()
                # The connection the child inherited waits its turn like any other and then
                # reads the database as it is (SQLite asks that it not be used at all).
                if code == 0 and con.execute("SELECT count(*) FROM t").fetchone() != (2,):
                    code = 4
            finally:
                os._exit(code)
        # Waited for with a deadline: a child that hangs fails the test, not the suite.
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                self.fail("the forked child did not finish within 60 s")
            time.sleep(0.05)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(con.execute("SELECT x FROM t ORDER BY x").fetchall(), [(1,), (2,)])
        con.execute("INSERT INTO t VALUES (3)")
        con.commit()
        con.close()
        con = sqlite3.connect(path)
        self.assertEqual(con.execute("SELECT count(*) FROM t").fetchone(), (3,))
        con.close()

    def test_a_killed_holder_leaves_every_commit(self):
        path = fresh("killed.db")
        other = self.peer(path)
        self.assertEqual(self.ask(other, "CREATE TABLE t(x)"), "[]")
        for i in range(5):
            self.assertEqual(self.ask(other, "INSERT INTO t VALUES (%d)" % i), "[]")
            self.assertEqual(self.ask(other, "commit"), "ok")
        self.assertEqual(self.ask(other, "INSERT INTO t VALUES (99)"), "[]")  # never committed
        other.kill()
        other.wait(timeout=30)
        con = sqlite3.connect(path, timeout=20)
        self.assertEqual(con.execute("SELECT x FROM t ORDER BY x").fetchall(), [(i,) for i in range(5)])
        con.close()


class Files(unittest.TestCase):
    """A database is a file, as in SQLite: removed, it is gone; a directory is no database."""

    def test_a_database_is_a_file_that_can_be_removed(self):
        path = fresh("app.db")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t(x)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
        con.commit()
        con.close()
        self.assertTrue(os.path.isfile(path))
        beside = sorted(os.listdir(os.path.dirname(path)))
        self.assertTrue(all(n == "app.db" or n.startswith("app.db-") for n in beside), beside)
        con = sqlite3.connect(path)
        self.assertEqual(con.execute("SELECT count(*) FROM t").fetchone(), (100,))
        con.close()
        # Removed as a SQLite file is, the database is gone: its log beside it is not
        # brought back into the new one.
        os.remove(path)
        con = sqlite3.connect(path)
        self.assertEqual(con.execute("SELECT count(*) FROM sqlite_master").fetchone(), (0,))
        con.close()

    def test_a_closed_database_is_its_file_and_the_files_beside_it(self):
        path = fresh("whole.db")
        one, two = sqlite3.connect(path), sqlite3.connect(path)
        one.execute("CREATE TABLE t(x)")
        one.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
        one.commit()
        one.close()
        two.execute("INSERT INTO t VALUES (50)")
        two.commit()
        two.close()
        # A copy of the file and the files beside it opens whole.
        copy = fresh("copy.db")
        for name in os.listdir(os.path.dirname(path)):
            if name == "whole.db" or name.startswith("whole.db-"):
                with open(os.path.join(os.path.dirname(path), name), "rb") as src:
                    with open(copy + name[len("whole.db"):], "wb") as dst:
                        dst.write(src.read())
        con = sqlite3.connect(copy)
        self.assertEqual(con.execute("SELECT count(*), sum(x) FROM t").fetchone(), (51, 1275))
        con.close()
        # Closed, the file alone holds the database too, as a SQLite file does.
        alone = fresh("alone.db")
        with open(path, "rb") as src, open(alone, "wb") as dst:
            dst.write(src.read())
        con = sqlite3.connect(alone)
        self.assertEqual(con.execute("SELECT count(*), sum(x) FROM t").fetchone(), (51, 1275))
        con.execute("INSERT INTO t VALUES (51)")
        con.commit()
        con.close()
        con = sqlite3.connect(alone)
        self.assertEqual(con.execute("SELECT count(*), sum(x) FROM t").fetchone(), (52, 1326))
        # Copied while a connection has it open, the file alone lacks the commits its log
        # holds: refused, saying what is missing, never opened without them.
        con.execute("INSERT INTO t VALUES (52)")
        con.commit()
        early = fresh("early.db")
        with open(alone, "rb") as src, open(early, "wb") as dst:
            dst.write(src.read())
        with self.assertRaisesRegex(sqlite3.DatabaseError, "beside its file") as cm:
            sqlite3.connect(early)
        self.assertEqual(cm.exception.sqlite_errorname, "SQLITE_CORRUPT")
        con.close()

    def test_an_empty_file_is_an_empty_database(self):
        with tempfile.NamedTemporaryFile(dir=SCRATCH, suffix=".db") as f:
            con = sqlite3.connect(f.name)
            con.execute("CREATE TABLE t(x)")
            con.execute("INSERT INTO t VALUES (1)")
            con.commit()
            con.close()
            con = sqlite3.connect(f.name)
            self.assertEqual(con.execute("SELECT x FROM t").fetchall(), [(1,)])
            con.close()

    def test_directories_and_foreign_files_are_refused(self):
        with self.assertRaisesRegex(sqlite3.OperationalError, "unable to open database file") as cm:
            sqlite3.connect(tempfile.mkdtemp(dir=SCRATCH))
        self.assertEqual(cm.exception.sqlite_errorname, "SQLITE_CANTOPEN")
        text = fresh("notes.txt")
        with open(text, "wb") as f:
            f.write(b"plain text, not a database " * 200)
        with self.assertRaisesRegex(sqlite3.DatabaseError, "file is not a database") as cm:
            sqlite3.connect(text).execute("SELECT 1")
        self.assertEqual(cm.exception.sqlite_errorname, "SQLITE_NOTADB")
        with open(text, "rb") as f:
            self.assertEqual(f.read(), b"plain text, not a database " * 200)
        missing = os.path.join(SCRATCH, "no-such-dir", "x.db")
        with self.assertRaises(sqlite3.OperationalError):
            sqlite3.connect(missing)
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

    def test_read_only_uri(self):
        path = fresh("ro.db")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t(x)")
        con.commit()
        con.close()
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.assertEqual(con.execute("SELECT count(*) FROM t").fetchone(), (0,))
        with self.assertRaises(sqlite3.OperationalError):
            con.execute("INSERT INTO t VALUES (1)")
        con.close()
        with self.assertRaises(sqlite3.OperationalError):
            sqlite3.connect(f"file:{fresh('none.db')}?mode=ro", uri=True)
        with self.assertRaisesRegex(sqlite3.OperationalError, "no such access mode: rx"):
            sqlite3.connect(f"file:{path}?mode=rx", uri=True)


class SqliteBehaviour(unittest.TestCase):
    """Details programs rely on, found with CPython's own test_sqlite3 on this library."""

    def test_a_table_another_connection_created_is_seen_at_once(self):
        path = fresh("two.db")
        one, two = sqlite3.connect(path), sqlite3.connect(path)
        one.execute("CREATE TABLE t(i)")
        one.execute("INSERT INTO t VALUES (5)")  # an implicit transaction, still open
        self.assertEqual(two.execute("SELECT i FROM t").fetchall(), [])
        one.commit()
        self.assertEqual(two.execute("SELECT i FROM t").fetchall(), [(5,)])
        one.close()
        two.close()

    def test_trace_shows_the_text_as_given(self):
        con = sqlite3.connect(":memory:")
        seen = []
        con.set_trace_callback(seen.append)
        con.execute("CREATE TABLE t(x)")
        con.execute("INSERT INTO t VALUES (1)")
        con.commit()
        self.assertEqual(seen, ["CREATE TABLE t(x)", "BEGIN ", "INSERT INTO t VALUES (1)", "COMMIT"])
        con.close()

    def test_function_errors_keep_their_class(self):
        con = sqlite3.connect(":memory:")

        def no_memory():
            raise MemoryError

        con.create_function("no_memory", 0, no_memory)
        con.create_function("too_large", 0, lambda: 1 << 70)
        with self.assertRaises(MemoryError):
            con.execute("SELECT no_memory()")
        with self.assertRaisesRegex(sqlite3.DataError, "string or blob too big"):
            con.execute("SELECT too_large()")
        con.close()

    def test_text_keeps_its_nul_characters(self):
        con = sqlite3.connect(":memory:")
        self.assertEqual(con.execute("SELECT ?", ("a\x00b",)).fetchone(), ("a\x00b",))
        con.close()

    def test_window_functions_slide_with_value_and_inverse(self):
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE t(x, y)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [("a", 4), ("b", 5), ("c", 3), ("d", 8), ("e", 1)])
        calls = []

        class SumInt:
            def __init__(self):
                self.count = 0

            def step(self, v):
                self.count += v

            def inverse(self, v):
                calls.append("inverse")
                self.count -= v

            def value(self):
                return self.count

            def finalize(self):
                raise ValueError("not a window's result")

        con.create_window_function("sumint", 1, SumInt)
        rows = con.execute(
            "SELECT x, sumint(y) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t ORDER BY x"
        ).fetchall()
        self.assertEqual(rows, [("a", 9), ("b", 12), ("c", 16), ("d", 12), ("e", 9)])
        self.assertEqual(len(calls), 3)
        con.close()

    def test_or_rollback_ends_the_transaction_and_failed_inserts_take_no_rowid(self):
        con = sqlite3.connect(":memory:", isolation_level=None)
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name, u UNIQUE)")
        con.execute("BEGIN")
        con.execute("INSERT INTO t(name) VALUES ('kept only if no rollback')")
        con.execute("INSERT OR ROLLBACK INTO t(u) VALUES ('x')")
        with self.assertRaises(sqlite3.IntegrityError):
            con.execute("INSERT OR ROLLBACK INTO t(u) VALUES ('x')")
        self.assertFalse(con.in_transaction)
        self.assertEqual(con.execute("SELECT count(*) FROM t").fetchone(), (0,))
        con.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, u UNIQUE)")
        cur = con.cursor()
        cur.execute("INSERT INTO r(u) VALUES ('a')")
        self.assertEqual(cur.lastrowid, 1)
        with self.assertRaises(sqlite3.IntegrityError):
            cur.execute("INSERT INTO r(u) VALUES ('a')")
        cur.execute("INSERT INTO r(u) VALUES ('b')")
        self.assertEqual(cur.lastrowid, 2)
        con.close()

    def test_a_removed_collation_is_missed_by_a_cached_statement(self):
        con = sqlite3.connect(":memory:")
        con.create_collation("rev", lambda a, b: (a < b) - (a > b))
        sql = "SELECT x FROM (SELECT 'a' AS x UNION SELECT 'b') ORDER BY x COLLATE rev"
        self.assertEqual(con.execute(sql).fetchall(), [("b",), ("a",)])
        con.create_collation("rev", None)
        with self.assertRaisesRegex(sqlite3.OperationalError, "no such collation sequence: rev"):
            con.execute(sql).fetchall()
        con.close()

    def test_variable_limit(self):
        con = sqlite3.connect(":memory:")
        con.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 1)
        con.execute("SELECT ?", (1,))
        with self.assertRaisesRegex(sqlite3.OperationalError, "too many SQL variables"):
            con.execute("SELECT ?, ?", (1, 2))
        con.close()

    def test_a_blob_whose_row_changed_expires(self):
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE t(b BLOB)")
        con.execute("INSERT INTO t VALUES (zeroblob(8))")
        other = con.execute("INSERT INTO t VALUES (zeroblob(8))").lastrowid
        blob = con.blobopen("t", "b", 1)
        blob.write(b"12345678")
        con.execute("UPDATE t SET b = x'00' WHERE rowid = ?", (other,))
        blob.seek(0)
        self.assertEqual(blob.read(), b"12345678")  # another row changed: still current
        con.execute("UPDATE t SET b = 'aaaa' WHERE rowid = 1")
        blob.seek(0)
        with self.assertRaises(sqlite3.OperationalError):
            blob.read()
        blob.close()
        ro = con.blobopen("t", "b", other, readonly=True)
        with self.assertRaisesRegex(sqlite3.OperationalError, "readonly"):
            ro.write(b"x")
        ro.close()
        con.close()

    def test_a_dump_restores_in_creation_order_with_autoincrement_counters(self):
        con = sqlite3.connect(":memory:")
        con.executescript("""
            CREATE TABLE b(id INTEGER PRIMARY KEY AUTOINCREMENT, x);
            CREATE TABLE a(y);
            CREATE VIEW vb AS SELECT x FROM b;
            CREATE VIEW va AS SELECT * FROM vb;
            CREATE TRIGGER ta AFTER INSERT ON a BEGIN INSERT INTO b(x) VALUES (new.y); END;
            INSERT INTO a VALUES (1), (2), (3);
            DELETE FROM b WHERE id = 3;
        """)
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master")]
        self.assertEqual(names, ["b", "sqlite_sequence", "a", "vb", "va", "ta"])
        dump = "\n".join(con.iterdump())
        self.assertIn('INSERT INTO "sqlite_sequence" VALUES(\'b\',3);', dump)
        copy = sqlite3.connect(":memory:")
        copy.executescript(dump)
        self.assertEqual(copy.execute("SELECT * FROM va").fetchall(), [(1,), (2,)])
        self.assertEqual(copy.execute("SELECT seq FROM sqlite_sequence WHERE name = 'b'").fetchone(), (3,))
        # The counter restored: the next rowid is past the deleted 3, as in the original.
        copy.execute("INSERT INTO b(x) VALUES (9)")
        self.assertEqual(copy.execute("SELECT max(id) FROM b").fetchone(), (4,))
        copy.execute("UPDATE sqlite_sequence SET seq = 10 WHERE name = 'b'")
        copy.execute("INSERT INTO b(x) VALUES (10)")
        self.assertEqual(copy.execute("SELECT max(id) FROM b").fetchone(), (11,))
        copy.close()
        con.close()

    def test_the_authorizer_is_asked_about_each_column_read(self):
        con = sqlite3.connect(":memory:")
        con.executescript("""
            CREATE TABLE people(name, salary);
            CREATE TABLE teams(name, lead);
            CREATE VIEW pay AS SELECT salary FROM people;
            CREATE TABLE log(x);
            CREATE TRIGGER leak AFTER INSERT ON log BEGIN
                UPDATE teams SET lead = (SELECT salary FROM people) WHERE name = new.x;
            END;
            INSERT INTO people VALUES ('ann', 10);
        """)
        reads = []

        def guard(action, arg1, arg2, db, source):
            if action == sqlite3.SQLITE_READ:
                reads.append((arg1, arg2))
                if arg2 == "salary":
                    return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK

        con.set_authorizer(guard)
        self.assertEqual(con.execute("SELECT name FROM people").fetchall(), [("ann",)])
        self.assertEqual(reads, [("people", "name")])
        for hidden in [
            "SELECT salary FROM people",
            "SELECT * FROM people",
            "SELECT name FROM people WHERE salary > 5",
            "SELECT (SELECT max(salary) FROM people) FROM teams",
            "SELECT * FROM pay",
            "UPDATE teams SET lead = (SELECT salary FROM people)",
            "INSERT INTO log VALUES ('x')",
            "INSERT INTO people(name) VALUES ('bo') ON CONFLICT DO UPDATE SET name = salary",
        ]:
            with self.assertRaisesRegex(sqlite3.DatabaseError, "prohibited"):
                con.execute(hidden)

        def ignore_salary(action, arg1, arg2, db, source):
            if action == sqlite3.SQLITE_READ and arg2 == "salary":
                return sqlite3.SQLITE_IGNORE
            return sqlite3.SQLITE_OK

        # SQLite would read it as NULL; BeechDB refuses rather than hand it out.
        con.set_authorizer(ignore_salary)
        with self.assertRaisesRegex(sqlite3.DatabaseError, "prohibited"):
            con.execute("SELECT salary FROM people")
        con.set_authorizer(None)
        self.assertEqual(con.execute("SELECT salary FROM people").fetchall(), [(10,)])
        con.close()


if __name__ == "__main__":
    unittest.main()
