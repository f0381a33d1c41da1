#!/usr/bin/env python3
"""100,000 rows loaded through Python's sqlite3 (executemany, one transaction), the commit
timed, then the statements after it, the first of them `SELECT 1`, and the process's
resident memory: run once on SQLite and once with LD_LIBRARY_PATH naming a directory
holding BeechDB's library as libsqlite3.so.0.

    python3 scripts/dropin-first-statement.py PATH
"""
import os
import sqlite3
import sys
import time
p = sys.argv[1]
for s in ("", "-log.0000000001"):
    if os.path.exists(p + s): os.remove(p + s)
c = sqlite3.connect(p)
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, created INTEGER, user INTEGER)")
c.execute("CREATE INDEX t_created ON t(created)")
c.executemany("INSERT INTO t(v, created, user) VALUES (?, ?, ?)",
              [(f"v{i}", (i * 7919) % 100000, i % 100) for i in range(100000)])
t = time.perf_counter()
c.commit()
print(f"commit {(time.perf_counter() - t) * 1000:.1f} ms")
for q in ["SELECT 1", "SELECT 2", "SELECT * FROM t WHERE id = 5",
          "SELECT * FROM t ORDER BY created DESC, id DESC LIMIT 20"]:
    t = time.perf_counter()
    c.execute(q).fetchall()
    print(f"{q}: {(time.perf_counter() - t) * 1000:.2f} ms")
print([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].strip())
