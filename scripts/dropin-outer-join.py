#!/usr/bin/env python3
"""RIGHT and FULL joins of two tables of N rows (default 20,000) through Python's sqlite3,
an equality join where a fifth of each side's keys find no partner, beside the LEFT join of
the same tables; median of 3 runs of each, with a checksum of the rows read (which must
agree between engines): run once on SQLite and once with LD_LIBRARY_PATH naming a
directory holding BeechDB's library as libsqlite3.so.0.

    python3 scripts/dropin-outer-join.py PATH [N]
"""
import os
import sqlite3
import statistics
import sys
import time

p = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
for s in ("", "-log.0000000001"):
    if os.path.exists(p + s):
        os.remove(p + s)
c = sqlite3.connect(p)
c.execute("CREATE TABLE a(k INTEGER, v TEXT)")
c.execute("CREATE TABLE b(k INTEGER, w TEXT)")
c.executemany("INSERT INTO a VALUES (?, ?)", [(i, f"a{i}") for i in range(n)])
c.executemany("INSERT INTO b VALUES (?, ?)", [(i + n // 5, f"b{i}") for i in range(n)])
c.commit()
print(f"SQLite library {sqlite3.sqlite_version}, {n:,} rows a side")
for q in ["SELECT a.k, b.k FROM a LEFT JOIN b ON a.k = b.k",
          "SELECT a.k, b.k FROM a RIGHT JOIN b ON a.k = b.k",
          "SELECT a.k, b.k FROM a FULL JOIN b ON a.k = b.k",
          "SELECT k FROM a FULL JOIN b USING (k)"]:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        rows = c.execute(q).fetchall()
        times.append(time.perf_counter() - t)
    sums = sum((r[0] or 0) * 3 + (r[-1] or 0) for r in rows)
    ms = [x * 1000 for x in times]
    print(f"{q}: {len(rows):,} rows, checksum {sums}, "
          f"{statistics.median(ms):.1f} ms ({min(ms):.1f}-{max(ms):.1f})")
