/*
** The SQL benchmarks of seeds 004 and 000 (Tables 6-7), written once against SQLite's C
** API. `beechdb-bench sql` builds this program once, linked against `libsqlite3.so.0`, and
** runs it on each engine by pointing the dynamic linker at a directory whose
** `libsqlite3.so.0` is that engine's library: SQLite, Berkeley DB SQL or BeechDB. The same
** binary, unchanged, on every engine, as seed 004 did.
**
**   sqlbench KIND seed004 DIR THREADS SECONDS
**   sqlbench KIND tpcb DIR THREADS SECONDS
**   sqlbench KIND wisconsin DIR TUPLES RUNS QUERIES_FILE
**
** KIND: sqlite (rollback journal, BEGIN as in the paper), sqlite-wal (WAL, BEGIN
** IMMEDIATE), bdb, beechdb. Each engine keeps its default durable setting. Prints one JSON
** object per result line on stdout; exits 1 on a setup failure.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sqlite3.h"

static const char *kind;
static char db_path[4096];
static atomic_int stop;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlbench: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    exit(1);
}

static sqlite3 *open_db(void) {
    sqlite3 *db;
    if (sqlite3_open(db_path, &db) != SQLITE_OK) die(db, "open");
    sqlite3_busy_timeout(db, 10000);
    if (strcmp(kind, "sqlite-wal") == 0 && sqlite3_exec(db, "PRAGMA journal_mode=WAL", 0, 0, 0) != SQLITE_OK)
        die(db, "journal_mode=WAL");
    /* A 256 MiB cache where the engine takes one through SQL (BeechDB sizes its own). */
    if (strcmp(kind, "bdb") == 0)
        sqlite3_exec(db, "PRAGMA cache_size=16384", 0, 0, 0);
    else if (strncmp(kind, "sqlite", 6) == 0)
        sqlite3_exec(db, "PRAGMA cache_size=-262144", 0, 0, 0);
    return db;
}

static void exec_or_die(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlbench: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, sql, -1, &s, 0) != SQLITE_OK) die(db, sql);
    return s;
}

static long long scalar(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = prep(db, sql);
    if (sqlite3_step(s) != SQLITE_ROW) die(db, sql);
    long long v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Runs a prepared statement to the end; returns SQLITE_OK or the error code. */
static int run(sqlite3_stmt *s) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    int code = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(sqlite3_db_handle(s));
    sqlite3_reset(s);
    return code;
}

static int begin_sql_exec(sqlite3 *db) {
    return sqlite3_exec(db, strcmp(kind, "sqlite-wal") == 0 ? "BEGIN IMMEDIATE" : "BEGIN", 0, 0, 0);
}

static int is_contention(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

/* What every worker thread reports. */
struct worker {
    pthread_t th;
    int id;
    long long commits, retries, errors;
    char first_error[256];
};

static void note_error(struct worker *w, sqlite3 *db, int rc) {
    if (w->errors++ == 0) snprintf(w->first_error, sizeof w->first_error, "%d: %s", rc, sqlite3_errmsg(db));
}

/* One transaction's outcome: commit it, or roll back and count a retry or an error. */
static void finish(struct worker *w, sqlite3 *db, int rc) {
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
    if (rc == SQLITE_OK) {
        w->commits++;
        return;
    }
    if (is_contention(rc))
        w->retries++;
    else
        note_error(w, db, rc);
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
    if (!is_contention(rc)) usleep(1000);
}

/* Starts THREADS workers on `body`, stops them after SECONDS, sums their counts. */
static void run_workers(int threads, double seconds, void *(*body)(void *), struct worker *out, double *elapsed) {
    struct worker *ws = calloc(threads, sizeof *ws);
    atomic_store(&stop, 0);
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        ws[i].id = i;
        pthread_create(&ws[i].th, 0, body, &ws[i]);
    }
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(ws[i].th, 0);
    *elapsed = now() - t0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < threads; i++) {
        out->commits += ws[i].commits;
        out->retries += ws[i].retries;
        out->errors += ws[i].errors;
        if (!out->first_error[0]) memcpy(out->first_error, ws[i].first_error, sizeof out->first_error);
    }
    free(ws);
}

static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void report(const char *bench, int threads, double secs, struct worker *w, int invariant_ok) {
    printf("{\"bench\":\"%s\",\"threads\":%d,\"secs\":%.3f,\"commits\":%lld,\"retries\":%lld,\"errors\":%lld,"
           "\"tps\":%.1f,\"invariant_ok\":%s,\"first_error\":",
           bench, threads, secs, w->commits, w->retries, w->errors, w->commits / secs, invariant_ok ? "true" : "false");
    print_json_string(w->first_error);
    printf("}\n");
    fflush(stdout);
}

/* ---- Seed 004: BEGIN; SELECT by a random id; UPDATE by a random id; COMMIT. ---- */

#define SEED004_ROWS 10000

static void *seed004_worker(void *arg) {
    struct worker *w = arg;
    sqlite3 *db = open_db();
    sqlite3_stmt *sel = prep(db, "SELECT payload FROM t WHERE id = ?");
    sqlite3_stmt *upd = prep(db, "UPDATE t SET counter = counter + 1 WHERE id = ?");
    unsigned seed = 0x5eed + w->id * 7919;
    while (!atomic_load(&stop)) {
        int rc = begin_sql_exec(db);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int(sel, 1, rand_r(&seed) % SEED004_ROWS + 1);
            rc = run(sel);
        }
        if (rc == SQLITE_OK) {
            sqlite3_bind_int(upd, 1, rand_r(&seed) % SEED004_ROWS + 1);
            rc = run(upd);
        }
        finish(w, db, rc);
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    sqlite3_close(db);
    return 0;
}

static void seed004(int threads, double seconds) {
    sqlite3 *db = open_db();
    exec_or_die(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, counter INTEGER NOT NULL, payload TEXT)");
    exec_or_die(db, "BEGIN");
    sqlite3_stmt *ins = prep(db, "INSERT INTO t VALUES (?, 0, ?)");
    char payload[401];
    unsigned seed = 4;
    for (int i = 1; i <= SEED004_ROWS; i++) {
        for (int j = 0; j < 400; j++) payload[j] = 'a' + rand_r(&seed) % 26;
        payload[400] = 0;
        sqlite3_bind_int(ins, 1, i);
        sqlite3_bind_text(ins, 2, payload, 400, SQLITE_STATIC);
        if (run(ins) != SQLITE_OK) die(db, "load");
    }
    sqlite3_finalize(ins);
    exec_or_die(db, "COMMIT");
    long long before = scalar(db, "SELECT sum(counter) FROM t");
    struct worker total;
    double secs;
    run_workers(threads, seconds, seed004_worker, &total, &secs);
    long long after = scalar(db, "SELECT sum(counter) FROM t");
    report("seed004", threads, secs, &total, after - before == total.commits);
    sqlite3_close(db);
}

/* ---- TPC-B-like: 1,000 branches, 10,000 tellers, 100,000 accounts. ---- */

#define BRANCHES 1000
#define TELLERS 10000
#define ACCOUNTS 100000

static void *tpcb_worker(void *arg) {
    struct worker *w = arg;
    sqlite3 *db = open_db();
    sqlite3_stmt *acct = prep(db, "UPDATE accounts SET abalance = abalance + ?1 WHERE aid = ?2");
    sqlite3_stmt *read = prep(db, "SELECT abalance FROM accounts WHERE aid = ?1");
    sqlite3_stmt *tell = prep(db, "UPDATE tellers SET tbalance = tbalance + ?1 WHERE tid = ?2");
    sqlite3_stmt *bran = prep(db, "UPDATE branches SET bbalance = bbalance + ?1 WHERE bid = ?2");
    sqlite3_stmt *hist = prep(db, "INSERT INTO history(tid, bid, aid, delta, mtime, filler) VALUES (?1, ?2, ?3, ?4, ?5, 'tpcb history filler')");
    unsigned seed = 0x7bcb + w->id * 104729;
    while (!atomic_load(&stop)) {
        int tid = rand_r(&seed) % TELLERS + 1;
        int bid = (tid - 1) / (TELLERS / BRANCHES) + 1;
        /* 85% of accounts from the teller's own branch, as TPC-B specifies. */
        int aid = rand_r(&seed) % 100 < 85 ? (bid - 1) * (ACCOUNTS / BRANCHES) + rand_r(&seed) % (ACCOUNTS / BRANCHES) + 1
                                            : rand_r(&seed) % ACCOUNTS + 1;
        int delta = rand_r(&seed) % 199999 - 99999;
        int rc = begin_sql_exec(db);
        sqlite3_bind_int(acct, 1, delta);
        sqlite3_bind_int(acct, 2, aid);
        if (rc == SQLITE_OK) rc = run(acct);
        sqlite3_bind_int(read, 1, aid);
        if (rc == SQLITE_OK) rc = run(read);
        sqlite3_bind_int(tell, 1, delta);
        sqlite3_bind_int(tell, 2, tid);
        if (rc == SQLITE_OK) rc = run(tell);
        sqlite3_bind_int(bran, 1, delta);
        sqlite3_bind_int(bran, 2, bid);
        if (rc == SQLITE_OK) rc = run(bran);
        sqlite3_bind_int(hist, 1, tid);
        sqlite3_bind_int(hist, 2, bid);
        sqlite3_bind_int(hist, 3, aid);
        sqlite3_bind_int(hist, 4, delta);
        sqlite3_bind_int64(hist, 5, (long long)time(0));
        if (rc == SQLITE_OK) rc = run(hist);
        finish(w, db, rc);
    }
    sqlite3_finalize(acct);
    sqlite3_finalize(read);
    sqlite3_finalize(tell);
    sqlite3_finalize(bran);
    sqlite3_finalize(hist);
    sqlite3_close(db);
    return 0;
}

static void load_rows(sqlite3 *db, const char *sql, int n, int per_branch) {
    sqlite3_stmt *s = prep(db, sql);
    for (int i = 1; i <= n; i++) {
        sqlite3_bind_int(s, 1, i);
        sqlite3_bind_int(s, 2, per_branch ? (i - 1) / per_branch + 1 : 0);
        if (run(s) != SQLITE_OK) die(db, sql);
    }
    sqlite3_finalize(s);
}

static void tpcb(int threads, double seconds) {
    sqlite3 *db = open_db();
    exec_or_die(db,
                "CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER NOT NULL, filler CHAR(88));"
                "CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, tbalance INTEGER NOT NULL, filler CHAR(84));"
                "CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, abalance INTEGER NOT NULL, filler CHAR(84));"
                "CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER, filler CHAR(22));");
    exec_or_die(db, "BEGIN");
    load_rows(db, "INSERT INTO branches VALUES (?1, 0 * ?2, 'branch filler: 88 bytes in the TPC-B specification')", BRANCHES, 0);
    load_rows(db, "INSERT INTO tellers VALUES (?1, ?2, 0, 'teller filler: 84 bytes in the TPC-B specification')", TELLERS, TELLERS / BRANCHES);
    load_rows(db, "INSERT INTO accounts VALUES (?1, ?2, 0, 'account filler: 84 bytes in the TPC-B specification')", ACCOUNTS, ACCOUNTS / BRANCHES);
    exec_or_die(db, "COMMIT");
    struct worker total;
    double secs;
    run_workers(threads, seconds, tpcb_worker, &total, &secs);
    long long b = scalar(db, "SELECT sum(bbalance) FROM branches");
    long long t = scalar(db, "SELECT sum(tbalance) FROM tellers");
    long long a = scalar(db, "SELECT sum(abalance) FROM accounts");
    long long h = scalar(db, "SELECT coalesce(sum(delta), 0) FROM history");
    long long n = scalar(db, "SELECT count(*) FROM history");
    int ok = b == t && t == a && a == h && n == total.commits;
    if (!ok)
        fprintf(stderr, "sqlbench: tpcb invariants: branches %lld tellers %lld accounts %lld history %lld (%lld rows, %lld commits)\n",
                b, t, a, h, n, total.commits);
    report("tpcb", threads, secs, &total, ok);
    sqlite3_close(db);
}

/* ---- Wisconsin: DeWitt's relations and queries, as SQL from a file. ---- */

/* Runs a query: steps through every row, adding up a checksum of what it read. */
static int run_query(sqlite3 *db, const char *sql, long long *rows, unsigned long long *checksum) {
    const char *rest = sql;
    while (*rest) {
        sqlite3_stmt *s;
        const char *tail;
        int rc = sqlite3_prepare_v2(db, rest, -1, &s, &tail);
        if (rc != SQLITE_OK) return rc;
        rest = tail;
        if (!s) continue;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            (*rows)++;
            /* A row's hash, summed over rows: the same whatever order the rows come in. */
            unsigned long long h = 0;
            for (int c = 0; c < sqlite3_column_count(s); c++) {
                const unsigned char *t = sqlite3_column_text(s, c);
                for (; t && *t; t++) h = h * 31 + *t;
                h = h * 31 + 0xff;
            }
            *checksum += h;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) return rc;
    }
    return SQLITE_OK;
}

/* The queries file: one query per line, "N<TAB>SQL" (the SQL may hold several statements
   separated by ';'); lines "setup<TAB>SQL" (loading the relations, creating indices) run
   once, untimed, where they stand. */
static void wisconsin(int tuples, int runs, const char *queries) {
    sqlite3 *db = open_db();
    FILE *f = fopen(queries, "r");
    if (!f) {
        perror(queries);
        exit(1);
    }
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab || line[0] == '#') continue;
        *tab = 0;
        const char *sql = tab + 1;
        if (strcmp(line, "setup") == 0) {
            exec_or_die(db, sql);
            continue;
        }
        double total = 0;
        long long rows = 0;
        unsigned long long checksum = 0;
        int rc = SQLITE_OK;
        for (int r = 0; r < runs && rc == SQLITE_OK; r++) {
            double t0 = now();
            rc = run_query(db, sql, &rows, &checksum);
            total += now() - t0;
        }
        printf("{\"bench\":\"wisconsin\",\"tuples\":%d,\"query\":\"%s\",\"runs\":%d,\"ms\":%.3f,\"rows\":%lld,\"checksum\":\"%llx\",\"error\":",
               tuples, line, runs, total / runs * 1000, rows / runs, checksum);
        print_json_string(rc == SQLITE_OK ? "" : sqlite3_errmsg(db));
        printf("}\n");
        fflush(stdout);
    }
    fclose(f);
    sqlite3_close(db);
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: sqlbench KIND seed004|tpcb DIR THREADS SECONDS\n"
                        "       sqlbench KIND wisconsin DIR TUPLES RUNS QUERIES_FILE\n");
        return 2;
    }
    kind = argv[1];
    snprintf(db_path, sizeof db_path, "%s/bench.db", argv[3]);
    if (strcmp(argv[2], "seed004") == 0)
        seed004(atoi(argv[4]), atof(argv[5]));
    else if (strcmp(argv[2], "tpcb") == 0)
        tpcb(atoi(argv[4]), atof(argv[5]));
    else if (strcmp(argv[2], "wisconsin") == 0 && argc == 7)
        wisconsin(atoi(argv[4]), atoi(argv[5]), argv[6]);
    else {
        fprintf(stderr, "sqlbench: unknown benchmark %s\n", argv[2]);
        return 2;
    }
    return 0;
}
