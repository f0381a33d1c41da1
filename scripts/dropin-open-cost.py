#!/usr/bin/env python3
"""What opening a database costs through Python's sqlite3 module: run once on SQLite and
once on BeechDB's libsqlite3.so.0, to compare in the same hour.

    python3 scripts/dropin-open-cost.py                                  # SQLite
    LD_LIBRARY_PATH=DIR python3 scripts/dropin-open-cost.py              # DIR/libsqlite3.so.0

DIR holds BeechDB's library under SQLite's name (`ln -s .../libbeechdb_sqlite3.so
DIR/libsqlite3.so.0`). Prints, as median (min-max) of 5 rounds of 50: a ':memory:'
connection that creates a table, inserts a row and closes; a file database opened,
given one committed insert and closed; two processes taking turns at one file database,
each committing an update per turn (turns per second); and, the last line, 10,000 rows
inserted in one transaction (`executemany`) into a table with an index and a UNIQUE
column, median (min-max) of 5. Each line checks the work it timed (rows counted).
"""
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS, EACH = 5, 50


def rounds(f):
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) / EACH)
    return times


def memory():
    for _ in range(EACH):
        c = sqlite3.connect(":memory:")
        c.execute("CREATE TABLE t(x)")
        c.execute("INSERT INTO t VALUES (1)")
        assert c.execute("SELECT count(*) FROM t").fetchone() == (1,)
        c.close()


def file_cycle(path):
    def run():
        for _ in range(EACH):
            c = sqlite3.connect(path)
            c.execute("INSERT INTO t VALUES (1)")
            c.commit()
            c.close()
    return run


PEER = """if 1:
    import sqlite3, sys
    c = sqlite3.connect(sys.argv[1], timeout=60)
    for line in sys.stdin:
        c.execute("UPDATE n SET v = v + 1")
        c.commit()
        print("ok", flush=True)
    c.close()
"""


def turns(path):
    def run():
        peer = subprocess.Popen([sys.executable, "-c", PEER, path], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        c = sqlite3.connect(path, timeout=60)
        for _ in range(EACH):
            peer.stdin.write("go\n")
            peer.stdin.flush()
            assert peer.stdout.readline().strip() == "ok"
            c.execute("UPDATE n SET v = v + 1")
            c.commit()
        peer.stdin.close()
        peer.wait()
        c.close()
    return run


def bulk(d):
    times = []
    for r in range(ROUNDS):
        c = sqlite3.connect(os.path.join(d, "bulk%d.db" % r))
        c.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, email TEXT UNIQUE, age INT)")
        c.execute("CREATE INDEX u_age ON u(age)")
        c.commit()
        rows = [("e%d@x" % i, i % 90) for i in range(10000)]
        t = time.perf_counter()
        c.executemany("INSERT INTO u(email, age) VALUES (?, ?)", rows)
        c.commit()
        times.append(time.perf_counter() - t)
        assert c.execute("SELECT count(*) FROM u").fetchone() == (10000,)
        c.close()
    return times


def show(name, times, unit):
    ms = sorted(t * 1000 for t in times)
    if unit == "ms":
        print(f"{name}: {statistics.median(ms):.2f} ms ({ms[0]:.2f}-{ms[-1]:.2f})")
    else:
        per = sorted(2000 / m for m in ms)  # two turns per round trip
        print(f"{name}: {statistics.median(per):.0f} turns/s ({per[0]:.0f}-{per[-1]:.0f})")


def main():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "cost.db")
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t(x)")
    c.execute("CREATE TABLE n(v)")
    c.execute("INSERT INTO n VALUES (0)")
    c.commit()
    c.close()
    show(":memory: open, create, insert, close", rounds(memory), "ms")
    show("file open, insert, commit, close", rounds(file_cycle(path)), "ms")
    show("two processes taking turns, a commit each", rounds(turns(path)), "turns")
    show("10,000 rows in one transaction", bulk(d), "ms")
    c = sqlite3.connect(path)
    assert c.execute("SELECT count(*) FROM t").fetchone() == (ROUNDS * EACH,)
    assert c.execute("SELECT v FROM n").fetchone() == (2 * ROUNDS * EACH,)
    c.close()


if __name__ == "__main__":
    main()
