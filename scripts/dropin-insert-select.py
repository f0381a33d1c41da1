#!/usr/bin/env python3
"""50,000 rows inserted through Python's sqlite3 (executemany, one transaction, a table with
an index and a UNIQUE column), then 20,000 point selects by rowid: run once on SQLite and
once with LD_LIBRARY_PATH naming a directory holding BeechDB's library as
libsqlite3.so.0, to compare in the same hour.

    python3 scripts/dropin-insert-select.py PATH
"""
import os
import sqlite3
import sys
import time
path = sys.argv[1]
for suffix in ("", "-log.0000000001"):
    if os.path.exists(path + suffix): os.remove(path + suffix)
c = sqlite3.connect(path)
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, k TEXT UNIQUE)")
c.execute("CREATE INDEX t_name ON t(name)")
rows = [(f"n{i%100}", i * 0.5, f"k{i}") for i in range(50000)]
t = time.perf_counter()
c.executemany("INSERT INTO t(name, v, k) VALUES (?, ?, ?)", rows)
c.commit()
t1 = time.perf_counter()
n = 0
for i in range(0, 20000):
    n += len(c.execute("SELECT v FROM t WHERE id = ?", (i + 1,)).fetchall())
t2 = time.perf_counter()
print(f"insert 50k: {(t1-t)*1000:.0f} ms; 20k point selects: {(t2-t1)*1000:.0f} ms ({n})")
