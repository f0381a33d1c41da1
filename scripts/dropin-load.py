#!/usr/bin/env python3
"""A load through Python's sqlite3 in one transaction (executemany, then commit) into a table
with a secondary index and a UNIQUE column, then three indexes made over the loaded rows;
each step timed. Run once on SQLite and once with LD_LIBRARY_PATH naming a directory holding
BeechDB's library as libsqlite3.so.0.

    python3 scripts/dropin-load.py ROWS
"""
import os, sqlite3, sys, tempfile, time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
with tempfile.TemporaryDirectory() as d:
    c = sqlite3.connect(os.path.join(d, "t.db"))
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, k TEXT UNIQUE)")
    c.execute("CREATE INDEX t_name ON t(name)")
    rows = [(f"n{i % 100}", i * 0.5, f"k{i}") for i in range(n)]
    t0 = time.perf_counter()
    c.executemany("INSERT INTO t(name, v, k) VALUES (?,?,?)", rows)
    c.commit()
    took = time.perf_counter() - t0
    count, keys = c.execute("SELECT count(*), count(DISTINCT k) FROM t").fetchone()
    assert count == keys == n, (count, keys)
    print(f"SQLite {sqlite3.sqlite_version}, {n} rows")
    print(f"load (executemany + commit)  {took * 1e3:9.1f} ms  {took * 1e6 / n:6.2f} us a row")
    c.execute("CREATE TABLE u(id INTEGER PRIMARY KEY, name TEXT, v REAL, k TEXT)")
    c.execute("INSERT INTO u SELECT id, name || (id * 7919 % 100003), v, k FROM t")
    c.commit()
    for stmt in ("CREATE INDEX u_name ON u(name)", "CREATE UNIQUE INDEX u_k ON u(k)",
                 "CREATE INDEX u_v ON u(v)"):
        t0 = time.perf_counter()
        c.execute(stmt)
        c.commit()
        print(f"{stmt:29} {(time.perf_counter() - t0) * 1e3:9.1f} ms")
