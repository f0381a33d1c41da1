#!/usr/bin/env python3
"""The latest rows of a 100,000-row table, and a page past the first 500, by rowid order
(`ORDER BY id DESC LIMIT 20`, `ORDER BY id LIMIT 20 OFFSET 500`) and by an indexed column
(`ORDER BY created DESC, id DESC LIMIT 20`, and the same for one user's rows, which an
index on (user, created) finds in order) through Python's sqlite3:
run once on SQLite and once with LD_LIBRARY_PATH naming a directory holding BeechDB's
library as libsqlite3.so.0. Milliseconds per query, mean of 20.

    python3 scripts/dropin-page.py PATH
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
c.execute("CREATE INDEX t_user ON t(user, created)")
c.executemany("INSERT INTO t(v, created, user) VALUES (?, ?, ?)",
              [(f"v{i}", (i * 7919) % 100000, i % 100) for i in range(100000)])
c.commit()
for q in ["SELECT * FROM t ORDER BY id DESC LIMIT 20", "SELECT * FROM t ORDER BY id LIMIT 20 OFFSET 500",
          "SELECT * FROM t ORDER BY created DESC, id DESC LIMIT 20",
          "SELECT * FROM t WHERE user = 42 ORDER BY created DESC LIMIT 20"]:
    t = time.perf_counter()
    for _ in range(20):
        r = c.execute(q).fetchall()
    print(f"{q}: {(time.perf_counter() - t) / 20 * 1000:.2f} ms ({len(r)} rows, first {r[0][0]})")
