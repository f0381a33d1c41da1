#!/usr/bin/env python3
"""Statements where a planner without SQLite's shortcuts goes quadratic: set operations,
recursive CTEs under UNION, joins on expressions and on text with no index, correlated
subqueries, long IN lists, window frames that move, walks over a tree through a recursive
CTE; each run once on tables of N rows (default 20,000) through Python's sqlite3, printing
its time and the first row of its answer. Run once on SQLite and once with LD_LIBRARY_PATH
naming a directory holding BeechDB's library as libsqlite3.so.0, and compare: the answers
must agree, the times show where one engine is far slower than the other.

    python3 scripts/dropin-pathologies.py [N]
"""
import sqlite3, sys, time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
c = sqlite3.connect(":memory:")
c.executescript("""
    CREATE TABLE a(x, y, s TEXT);
    CREATE TABLE b(x, y, s TEXT);
    CREATE TABLE d(x, y, s TEXT);
    CREATE TABLE tree(id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);
""")
c.executemany("INSERT INTO a VALUES(?, ?, ?)", [(i, i % 100, "name%d" % (i % 777)) for i in range(n)])
c.executemany("INSERT INTO b VALUES(?, ?, ?)", [(i, i % 7, "Name%d" % (i % 555)) for i in range(0, 2 * n, 2)])
c.executemany("INSERT INTO d VALUES(?, ?, ?)", [(i, i % 7, "name%d" % (i % 555)) for i in range(0, 2 * n, 2)])
c.executemany("INSERT INTO tree VALUES(?, ?, ?)",
              [(i, (i - 1) // 3 if i > 0 else None, "n%d" % i) for i in range(n)])
c.commit()
in_list = ",".join(str(i * 3) for i in range(1000))
statements = [
    ("EXCEPT", "SELECT count(*) FROM (SELECT x FROM a EXCEPT SELECT x FROM b)"),
    ("INTERSECT", "SELECT count(*) FROM (SELECT x FROM a INTERSECT SELECT x FROM b)"),
    ("recursive CTE, UNION",
     "WITH RECURSIVE c(x) AS (SELECT 1 UNION SELECT x + 1 FROM c WHERE x < %d) SELECT count(*) FROM c" % n),
    ("join on an expression", "SELECT count(*) FROM a, b WHERE a.x = b.x + 1"),
    ("join on text, NOCASE", "SELECT count(*) FROM a JOIN b ON a.s = b.s COLLATE NOCASE"),
    ("correlated EXISTS", "SELECT count(*) FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.x = a.x)"),
    ("correlated NOT EXISTS", "SELECT count(*) FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.x = a.x)"),
    ("correlated scalar", "SELECT sum((SELECT count(*) FROM b WHERE b.x = a.x)) FROM a"),
    ("IN 1,000 constants", "SELECT count(*) FROM a WHERE x IN (%s)" % in_list),
    ("sum() OVER (ORDER BY)", "SELECT count(*), sum(s) FROM (SELECT sum(x) OVER (ORDER BY x) s FROM a)"),
    ("max() over a moving frame",
     "SELECT sum(m) FROM (SELECT max(x) OVER (ORDER BY x ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) m FROM a)"),
    ("min() over +-5,000 rows",
     "SELECT sum(m) FROM (SELECT min(x) OVER (ORDER BY x ROWS BETWEEN 5000 PRECEDING AND 5000 FOLLOWING) m FROM a)"),
    ("walk up a tree",
     "WITH RECURSIVE anc(id) AS (SELECT %d UNION ALL SELECT parent FROM tree JOIN anc ON tree.id = anc.id "
     "WHERE parent IS NOT NULL) SELECT count(*) FROM anc" % (n - 1)),
    ("correlated EXISTS, text", "SELECT count(*) FROM a WHERE EXISTS (SELECT 1 FROM d WHERE d.s = a.s)"),
    ("correlated scalar, text", "SELECT sum((SELECT count(*) FROM d WHERE d.s = a.s)) FROM a"),
    ("correlated, text, NOCASE",
     "SELECT count(*) FROM a WHERE (SELECT max(x) FROM d WHERE d.s = a.s COLLATE NOCASE) > 10"),
    ("UPDATE from a correlated subquery",
     "UPDATE a SET y = (SELECT b.y FROM b WHERE b.x = a.x) WHERE x % 2 = 0"),
]
print("SQLite %s (the library loaded), %d rows" % (sqlite3.sqlite_version, n))
for label, sql in statements:
    t = time.perf_counter()
    row = c.execute(sql).fetchone()
    took = time.perf_counter() - t
    print("%-34s %10.1f ms  %s" % (label, took * 1000, row))
