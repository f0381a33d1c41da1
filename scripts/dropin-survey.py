#!/usr/bin/env python3
"""Everyday statements through Python's sqlite3 on a 100,000-row table: a load, counts,
sums, LIKE, GROUP BY, ORDER BY ... LIMIT, DISTINCT, an index made and used, IN lists and
subqueries, joins, window functions, a recursive CTE, bulk UPDATE and DELETE, auto-commit
inserts, DROP INDEX after a reopen, VACUUM, ADD COLUMN; each timed (the best of its runs).
Run once on SQLite and once with LD_LIBRARY_PATH naming a directory holding BeechDB's
library as libsqlite3.so.0, to find where one engine is far slower than the other.

    python3 scripts/dropin-survey.py PATH
"""
import sqlite3, sys, time, os
p = sys.argv[1]
for s in ("", "-log.0000000001", "-wal", "-shm"):
    if os.path.exists(p + s): os.remove(p + s)
c = sqlite3.connect(p)
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, score REAL, note TEXT)")
N = 100000
t0 = time.perf_counter()
c.executemany("INSERT INTO t(name, grp, score, note) VALUES (?,?,?,?)",
              [(f"name{i}", i % 100, (i * 37) % 1000 / 10.0, "x" * (i % 50)) for i in range(N)])
c.commit()
res = {"load": time.perf_counter() - t0}
def q(label, sql, args=(), n=1):
    best = None
    for _ in range(n):
        t = time.perf_counter()
        r = c.execute(sql, args).fetchall()
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
    res[label] = best
    return r
def once(label, sql):
    t = time.perf_counter()
    c.execute(sql)
    c.commit()
    res[label] = time.perf_counter() - t
q("count(*)", "SELECT count(*) FROM t", n=5)
q("sum where", "SELECT sum(score) FROM t WHERE grp = 7", n=5)
q("like prefix", "SELECT count(*) FROM t WHERE name LIKE 'name99%'", n=5)
q("like infix", "SELECT count(*) FROM t WHERE note LIKE '%xxxxx%'", n=5)
q("group by", "SELECT grp, count(*), avg(score) FROM t GROUP BY grp", n=3)
q("order by limit (no index)", "SELECT * FROM t ORDER BY score DESC LIMIT 10", n=3)
q("distinct", "SELECT DISTINCT grp FROM t", n=3)
once("create index", "CREATE INDEX t_grp ON t(grp)")
q("count via index", "SELECT count(*) FROM t WHERE grp = 7", n=20)
q("in list", "SELECT count(*) FROM t WHERE grp IN (1,2,3,4,5)", n=10)
q("or of equalities", "SELECT count(*) FROM t WHERE grp = 1 OR grp = 2", n=10)
q("between via index", "SELECT count(*) FROM t WHERE grp BETWEEN 1 AND 5", n=10)
q("subquery in", "SELECT count(*) FROM t WHERE id IN (SELECT id FROM t WHERE grp = 3)", n=5)
q("self join", "SELECT count(*) FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.grp = 5", n=3)
q("correlated", "SELECT id, (SELECT max(score) FROM t b WHERE b.grp = a.grp) FROM t a WHERE a.id < 200", n=3)
q("window", "SELECT id, row_number() OVER (PARTITION BY grp ORDER BY score) FROM t WHERE id < 20000", n=1)
q("cte recursive", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100000) SELECT sum(x) FROM c", n=1)
once("update half", "UPDATE t SET score = score + 1 WHERE grp < 50")
once("delete 10%", "DELETE FROM t WHERE grp >= 90")
t = time.perf_counter()
for i in range(2000):
    c.execute("INSERT INTO t(name, grp) VALUES (?, ?)", (f"n{i}", i % 100)); c.commit()
res["2000 autocommit inserts"] = time.perf_counter() - t
c.close()
c = sqlite3.connect(p)  # the index's pages no longer in memory, as after a restart
once("drop index", "DROP INDEX t_grp")
once("vacuum", "VACUUM")
once("add column", "ALTER TABLE t ADD COLUMN extra INTEGER DEFAULT 5")
q("select after add column", "SELECT sum(extra) FROM t", n=3)
print(sqlite3.sqlite_version)
for k, v in res.items():
    print(f"{k:32s} {v*1000:10.2f} ms")
