"""Differential run of Python's sqlite3 module: random statements on a database file
(with triggers and a view; queries with CTEs, windows, date, JSON and string functions),
through the module's own transaction handling (implicit BEGIN before writes, commit(),
rollback(), isolation_level None), parameters, executemany, executescript, fetches and the
cursor's rowcount, lastrowid and description, and the connection's total_changes. Prints
one line per step; run under SQLite's library and under BeechDB's, the two outputs must be
equal.

    python3 differential.py DIR SEEDS [STEPS]
"""
import os
import random
import sqlite3
import sys

SETUP = """
CREATE TABLE t1(a INTEGER PRIMARY KEY, b TEXT, c REAL);
CREATE TABLE t2(k TEXT UNIQUE NOT NULL, v INTEGER DEFAULT 0, w BLOB);
CREATE INDEX t1_b ON t1(b);
CREATE TABLE log(id INTEGER PRIMARY KEY, msg);
CREATE TABLE audit(what, k);
CREATE TRIGGER t2_del AFTER DELETE ON t2 BEGIN INSERT INTO audit VALUES ('del', old.k); END;
CREATE TRIGGER t2_upd AFTER UPDATE OF v ON t2 WHEN new.v > 20 BEGIN INSERT INTO audit VALUES ('big', new.k); END;
CREATE VIEW big AS SELECT k, v * 2 AS dbl FROM t2 WHERE v > 5;
"""


def value(rng):
    return rng.choice([
        None, rng.randint(-5, 30), rng.randint(0, 10) / 4, "s%d" % rng.randint(0, 9),
        b"\x00\x01" * rng.randint(0, 2), "", 2**40 + rng.randint(0, 3),
    ])


def statement(rng):
    k = rng.randint(0, 15)
    r = rng.randint(0, 28)
    if r < 4:
        # New rowids only where nothing is deleted: SQLite takes a deleted largest rowid
        # again, BeechDB does not (docs/sql-compat.md).
        return "INSERT INTO log(msg) VALUES (?)", (value(rng),)
    if r < 6:
        return "INSERT INTO t1 VALUES (?, ?, ?)", (k, value(rng), value(rng))
    if r < 8:
        return "INSERT INTO t2(k, v, w) VALUES (?, ?, ?)", ("k%d" % k, value(rng), value(rng))
    if r == 8:
        return "INSERT OR REPLACE INTO t2(k, v) VALUES (?, ?)", ("k%d" % k, k)
    if r == 9:
        return "INSERT INTO t2(k) VALUES (?) ON CONFLICT(k) DO UPDATE SET v = v + 1", ("k%d" % k,)
    if r == 10:
        return "UPDATE t1 SET c = coalesce(c, 0) + ? WHERE a % 4 = ?", (value(rng), k % 4)
    if r == 11:
        return "UPDATE t2 SET v = ? WHERE k > ?", (value(rng), "k%d" % k)
    if r == 12:
        return "DELETE FROM t1 WHERE a > ?", (k * 3,)
    if r == 13:
        return "DELETE FROM t2 WHERE v IS NULL OR v < ?", (k,)
    if r == 14:
        return "SELECT a, b, c, typeof(c) FROM t1 WHERE b IS NOT NULL ORDER BY a LIMIT ?", (k,)
    if r == 15:
        return "SELECT k, v, length(w) FROM t2 ORDER BY k", ()
    if r == 16:
        return "SELECT count(*), sum(c), max(b), group_concat(a) FROM t1", ()
    if r == 17:
        return "SELECT b, count(*) AS n FROM t1 GROUP BY b HAVING n > ? ORDER BY n DESC, b", (k % 3,)
    if r == 18:
        return "INSERT INTO log(msg) SELECT k FROM t2 WHERE v > ?", (k,)
    if r == 19:
        return "UPDATE t2 SET k = ? WHERE k = ?", ("k%d" % rng.randint(0, 15), "k%d" % k)
    if r == 20:
        return "INSERT INTO t2(k, v) VALUES (?, ?) RETURNING k, v * 2", ("r%d" % k, k)
    if r == 21:
        return "CREATE TABLE IF NOT EXISTS t3(x, y)", ()
    if r == 22:
        return "INSERT INTO t3 VALUES (?, ?)", (value(rng), value(rng))
    if r == 23:
        return "DROP TABLE IF EXISTS t3", ()
    if r == 24:
        return "SELECT * FROM nosuch", ()
    if r == 25:
        return "INSERT INTO t1 VALUES (?)", (1,)
    if r == 26:
        return "SELECT a, b FROM t1 WHERE a = ?", (k,)
    if r == 27:
        return rng.choice([
            ("SELECT * FROM big ORDER BY k", ()),
            ("SELECT what, count(*) FROM audit GROUP BY what", ()),
            ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT sum(x) FROM c", (k,)),
            ("SELECT k, v, rank() OVER (ORDER BY v DESC), count(v) OVER (ORDER BY k ROWS 1 PRECEDING) FROM t2 ORDER BY k", ()),
            ("SELECT count(DISTINCT v), max(k) FILTER (WHERE v > 1) FROM t2", ()),
            ("SELECT date('2024-01-31', ?), strftime('%W %j', '2024-03-01'), julianday('2000-01-01')", ("+%d month" % k,)),
            ("SELECT json_object('k', k, 'v', v), json_array(v, w) FROM t2 WHERE typeof(w) != 'blob' ORDER BY k LIMIT 3", ()),
            ("SELECT k FROM t2 WHERE k LIKE ? ESCAPE '!' ORDER BY k", ("k1%",)),
            ("SELECT upper(k), substr(k, 2), instr(k, '1'), printf('%5.2f|%d|%s', v, v, k) FROM t2 ORDER BY k", ()),
            ("SELECT a, c FROM t1 WHERE c BETWEEN ? AND ? ORDER BY a", (k / 4, k)),
            ("SELECT count(*) FROM t1 AS x JOIN t2 AS y ON y.v = x.a", ()),
            ("SELECT b, group_concat(a, ';') FROM t1 GROUP BY b ORDER BY b", ()),
            ("SELECT CAST(v AS TEXT), CAST(k AS INTEGER), v / 3, v % 3, -v FROM t2 ORDER BY k", ()),
        ])
    return "SELEC 1", ()


def shown(x):
    if isinstance(x, float):
        return repr(round(x, 9))
    return repr(x)


def run(path, seed, steps):
    rng = random.Random(seed)
    for suffix in ("",):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    con = sqlite3.connect(path)
    con.executescript(SETUP)
    out = []
    for step in range(steps):
        r = rng.random()
        try:
            if r < 0.06:
                con.commit()
                out.append("commit in_transaction=%s" % con.in_transaction)
                continue
            if r < 0.10:
                con.rollback()
                out.append("rollback in_transaction=%s" % con.in_transaction)
                continue
            if r < 0.12:
                con.isolation_level = rng.choice([None, "", "DEFERRED", "IMMEDIATE"])
                out.append("isolation_level=%r in_transaction=%s" % (con.isolation_level, con.in_transaction))
                continue
            if r < 0.16:
                rows = [("m%d" % rng.randint(0, 20), rng.randint(0, 9)) for _ in range(rng.randint(0, 5))]
                cur = con.executemany("INSERT OR IGNORE INTO t2(k, v) VALUES (?, ?)", rows)
                out.append("executemany %d rowcount=%d" % (len(rows), cur.rowcount))
                continue
            if r < 0.18:
                con.executescript("INSERT INTO log(msg) VALUES ('script'); UPDATE t2 SET v = 0 WHERE v IS NULL;")
                out.append("executescript in_transaction=%s" % con.in_transaction)
                continue
            if r < 0.20:
                # A row, its duplicate: the second fails, the first stays (in the
                # transaction the module began).
                k = "d%d" % rng.randint(0, 5)
                try:
                    con.executemany("INSERT INTO t2(k, v) VALUES (?, ?)", [(k, 1), (k, 2)])
                    out.append("executemany duplicate: no error")
                except sqlite3.IntegrityError as e:
                    out.append("executemany duplicate: %s in_transaction=%s total_changes=%d" % (
                        e, con.in_transaction, con.total_changes))
                continue
            if r < 0.22:
                # A query read in part, then a write on the same connection.
                cur = con.execute("SELECT a, b FROM t1 ORDER BY a")
                first = cur.fetchone()
                con.execute("UPDATE t1 SET c = 1 WHERE a = ?", (first[0] if first else -1,))
                out.append("partial read %s, then %s more" % (
                    [shown(v) for v in first] if first else None, len(cur.fetchall())))
                continue
            if r < 0.24:
                v = value(rng)
                row = con.execute("SELECT ?, typeof(?), ? + 0, quote(?)", (v, v, v, v)).fetchone()
                out.append("round trip %s -> %s" % (shown(v), [shown(x) for x in row]))
                continue
            sql, params = statement(rng)
            cur = con.execute(sql, params)
            rows = cur.fetchall()
            desc = [d[0] for d in cur.description] if cur.description else None
            # lastrowid only after rows inserted into `log` (the rowids of other tables
            # differ once their largest row was deleted).
            logged = sql.startswith("INSERT INTO log") and cur.rowcount > 0
            last = cur.lastrowid if logged else "-"
            out.append("%s %s -> rows=%s desc=%s rowcount=%d lastrowid=%s in_transaction=%s" % (
                sql, [shown(p) for p in params],
                [[shown(v) for v in row] for row in rows],
                desc, cur.rowcount, last, con.in_transaction))
        except sqlite3.Error as e:
            out.append("error %s: %s in_transaction=%s" % (type(e).__name__, e, con.in_transaction))
    con.commit()
    for table in ("t1", "t2", "log", "audit"):
        out.append("%s: %s" % (table, con.execute("SELECT * FROM %s ORDER BY 1" % table).fetchall()))
    con.close()
    # A second connection reads what was committed.
    con = sqlite3.connect(path)
    out.append("reopened t1 count %s" % con.execute("SELECT count(*) FROM t1").fetchone())
    con.close()
    return out


def main():
    directory, seeds = sys.argv[1], int(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 80
    for seed in range(seeds):
        for line in run(os.path.join(directory, "diff.db"), seed, steps):
            print("seed %d: %s" % (seed, line))


if __name__ == "__main__":
    main()
