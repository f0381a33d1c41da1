/*
** A C program written against SQLite's API, run on BeechDB's libsqlite3 (tests/dropin.rs
** compiles it against include/sqlite3.h and links it with the library).
**
**     api_test DIR
**
** DIR: a fresh directory to create databases in. Prints "ok" and exits 0 when every check
** passes; otherwise names the failed check and exits 1.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sqlite3.h"

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

#define CHECK_RC(db, expr, want)                                                          \
    do {                                                                                  \
        int rc_ = (expr);                                                                 \
        if (rc_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s gave %d (want %d): %s\n", __FILE__, __LINE__, #expr, \
                    rc_, (want), sqlite3_errmsg(db));                                     \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static char dir[4096];

static void path(char *out, const char *name) { snprintf(out, 4200, "%s/%s", dir, name); }

static int rows_seen;
static int count_rows(void *arg, int n, char **values, char **names) {
    (void)values;
    CHECK(n == 2);
    CHECK(strcmp(names[0], "a") == 0 && strcmp(names[1], "b") == 0);
    CHECK(arg == (void *)&rows_seen);
    rows_seen++;
    return 0;
}

static void basics(void) {
    char p[4200];
    path(p, "basics");
    sqlite3 *db;
    CHECK_RC(db, sqlite3_open(p, &db), SQLITE_OK);
    CHECK(sqlite3_threadsafe() == 1);
    CHECK(strcmp(sqlite3_libversion(), SQLITE_VERSION) == 0);
    CHECK(sqlite3_libversion_number() == SQLITE_VERSION_NUMBER);
    /* The math functions are built in, and the library says so, with or without the
       prefix; an option it lacks is 0, and the list ends after the last. */
    CHECK(sqlite3_compileoption_used("ENABLE_MATH_FUNCTIONS") == 1);
    CHECK(sqlite3_compileoption_used("SQLITE_ENABLE_MATH_FUNCTIONS") == 1);
    CHECK(sqlite3_compileoption_used("OMIT_TRIGGER") == 0);
    CHECK(sqlite3_compileoption_used(NULL) == 0);
    CHECK(strcmp(sqlite3_compileoption_get(0), "ENABLE_MATH_FUNCTIONS") == 0);
    CHECK(sqlite3_compileoption_get(1) == NULL && sqlite3_compileoption_get(-1) == NULL);
    CHECK_RC(db, sqlite3_exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL, d BLOB);", 0, 0, 0), SQLITE_OK);

    sqlite3_stmt *ins;
    CHECK_RC(db, sqlite3_prepare_v2(db, "INSERT INTO t(b, c, d) VALUES (?1, :c, ?)", -1, &ins, 0), SQLITE_OK);
    CHECK(sqlite3_bind_parameter_count(ins) == 3);
    CHECK(strcmp(sqlite3_bind_parameter_name(ins, 2), ":c") == 0);
    CHECK(sqlite3_bind_parameter_index(ins, ":c") == 2);
    CHECK(sqlite3_stmt_readonly(ins) == 0);
    for (int i = 0; i < 100; i++) {
        char text[32];
        snprintf(text, sizeof text, "row %d", i);
        CHECK_RC(db, sqlite3_bind_text(ins, 1, text, -1, SQLITE_TRANSIENT), SQLITE_OK);
        CHECK_RC(db, sqlite3_bind_double(ins, 2, i * 0.5), SQLITE_OK);
        unsigned char blob[3] = {0, (unsigned char)i, 255};
        CHECK_RC(db, sqlite3_bind_blob(ins, 3, blob, 3, SQLITE_STATIC), SQLITE_OK);
        CHECK_RC(db, sqlite3_step(ins), SQLITE_DONE);
        CHECK(sqlite3_changes(db) == 1);
        CHECK(sqlite3_last_insert_rowid(db) == i + 1);
        CHECK_RC(db, sqlite3_reset(ins), SQLITE_OK);
    }
    CHECK_RC(db, sqlite3_bind_int(ins, 4, 1), SQLITE_RANGE);
    /* A value past SQLITE_LIMIT_LENGTH is refused, never cut. */
    int old_limit = sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 8);
    CHECK_RC(db, sqlite3_bind_blob64(ins, 3, "0123456789", 10, SQLITE_STATIC), SQLITE_TOOBIG);
    CHECK_RC(db, sqlite3_bind_text(ins, 1, "0123456789", -1, SQLITE_STATIC), SQLITE_TOOBIG);
    CHECK_RC(db, sqlite3_bind_blob64(ins, 3, "01234567", 8, SQLITE_STATIC), SQLITE_OK);
    CHECK(sqlite3_limit(db, SQLITE_LIMIT_LENGTH, old_limit) == 8);
    CHECK_RC(db, sqlite3_finalize(ins), SQLITE_OK);
    CHECK(sqlite3_total_changes(db) == 100);

    sqlite3_stmt *sel;
    const char *sql = "SELECT a, b, c, d FROM t WHERE a > ? ORDER BY a; SELECT 2";
    const char *tail;
    CHECK_RC(db, sqlite3_prepare_v2(db, sql, -1, &sel, &tail), SQLITE_OK);
    CHECK(strcmp(tail, " SELECT 2") == 0);
    CHECK(sqlite3_stmt_readonly(sel) == 1);
    CHECK(sqlite3_column_count(sel) == 4);
    CHECK(strcmp(sqlite3_column_name(sel, 1), "b") == 0);
    CHECK(strcmp(sqlite3_column_decltype(sel, 2), "REAL") == 0);
    sqlite3_bind_int64(sel, 1, 97);
    char *expanded = sqlite3_expanded_sql(sel);
    CHECK(expanded && strstr(expanded, "a > 97"));
    sqlite3_free(expanded);
    int n = 0;
    while (sqlite3_step(sel) == SQLITE_ROW) {
        n++;
        CHECK(sqlite3_data_count(sel) == 4);
        CHECK(sqlite3_column_type(sel, 0) == SQLITE_INTEGER);
        CHECK(sqlite3_column_int64(sel, 0) == 97 + n);
        CHECK(sqlite3_column_type(sel, 1) == SQLITE_TEXT);
        char want[32];
        snprintf(want, sizeof want, "row %d", 96 + n);
        CHECK(strcmp((const char *)sqlite3_column_text(sel, 1), want) == 0);
        CHECK(sqlite3_column_bytes(sel, 1) == (int)strlen(want));
        CHECK(sqlite3_column_type(sel, 2) == SQLITE_FLOAT);
        CHECK(sqlite3_column_double(sel, 2) == (96 + n) * 0.5);
        CHECK(sqlite3_column_type(sel, 3) == SQLITE_BLOB);
        CHECK(sqlite3_column_bytes(sel, 3) == 3);
        const unsigned char *b = sqlite3_column_blob(sel, 3);
        CHECK(b[0] == 0 && b[1] == 96 + n && b[2] == 255);
    }
    CHECK(n == 3);
    CHECK_RC(db, sqlite3_finalize(sel), SQLITE_OK);

    rows_seen = 0;
    CHECK_RC(db, sqlite3_exec(db, "SELECT a, b FROM t WHERE a <= 10", count_rows, &rows_seen, 0), SQLITE_OK);
    CHECK(rows_seen == 10);

    /* Errors: codes, extended codes, messages. */
    char *err = 0;
    CHECK_RC(db, sqlite3_exec(db, "INSERT INTO t(a) VALUES (1)", 0, 0, &err), SQLITE_CONSTRAINT);
    CHECK(err && strstr(err, "UNIQUE constraint failed: t.a"));
    sqlite3_free(err);
    CHECK(sqlite3_errcode(db) == SQLITE_CONSTRAINT);
    CHECK(sqlite3_extended_errcode(db) == SQLITE_CONSTRAINT_PRIMARYKEY);
    sqlite3_stmt *bad = (sqlite3_stmt *)1;
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELEC 1", -1, &bad, 0), SQLITE_ERROR);
    CHECK(bad == 0);
    CHECK(strstr(sqlite3_errmsg(db), "syntax error"));
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT * FROM missing", -1, &bad, 0), SQLITE_ERROR);
    CHECK(strstr(sqlite3_errmsg(db), "no such table: missing"));
    CHECK(strcmp(sqlite3_errstr(SQLITE_BUSY), "database is locked") == 0);

    /* Transactions. */
    CHECK(sqlite3_get_autocommit(db) == 1);
    CHECK_RC(db, sqlite3_exec(db, "BEGIN; DELETE FROM t WHERE a > 50;", 0, 0, 0), SQLITE_OK);
    CHECK(sqlite3_get_autocommit(db) == 0);
    CHECK(sqlite3_changes(db) == 50);
    CHECK_RC(db, sqlite3_exec(db, "ROLLBACK", 0, 0, 0), SQLITE_OK);
    CHECK(sqlite3_get_autocommit(db) == 1);
    CHECK(sqlite3_complete("SELECT 1;") == 1);
    CHECK(sqlite3_complete("SELECT 'a;") == 0);

    /* A statement not finalized keeps the connection open under sqlite3_close. */
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &sel, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(sel), SQLITE_ROW);
    CHECK(sqlite3_column_int(sel, 0) == 100);
    CHECK_RC(db, sqlite3_close(db), SQLITE_BUSY);
    CHECK_RC(db, sqlite3_finalize(sel), SQLITE_OK);
    CHECK_RC(db, sqlite3_close(db), SQLITE_OK);

    /* Reopened: everything committed is there. */
    CHECK_RC(db, sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT count(*), sum(a) FROM t", -1, &sel, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(sel), SQLITE_ROW);
    CHECK(sqlite3_column_int(sel, 0) == 100 && sqlite3_column_int(sel, 1) == 5050);
    sqlite3_finalize(sel);

    /* The legacy table interface. */
    char **table;
    int nrow, ncol;
    CHECK_RC(db, sqlite3_get_table(db, "SELECT a, b FROM t WHERE a <= 2 ORDER BY a; SELECT a, NULL FROM t WHERE a = 3", &table, &nrow, &ncol, 0), SQLITE_OK);
    CHECK(nrow == 3 && ncol == 2);
    CHECK(strcmp(table[0], "a") == 0 && strcmp(table[1], "b") == 0);
    CHECK(strcmp(table[2], "1") == 0 && strcmp(table[3], "row 0") == 0);
    CHECK(strcmp(table[6], "3") == 0 && table[7] == 0);
    sqlite3_free_table(table);
    err = 0;
    CHECK_RC(db, sqlite3_get_table(db, "SELECT missing_col FROM t", &table, &nrow, &ncol, &err), SQLITE_ERROR);
    CHECK(err && strstr(err, "no such column: missing_col"));
    sqlite3_free(err);
    sqlite3_close_v2(db);

    /* Opening a missing database without SQLITE_OPEN_CREATE fails with a handle. */
    path(p, "missing");
    CHECK_RC(db, sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, 0), SQLITE_CANTOPEN);
    CHECK(db != 0 && strstr(sqlite3_errmsg(db), "unable to open database file"));
    sqlite3_close(db);
}

/* A function that runs SQL on its own connection: refused with SQLITE_MISUSE, which it
   returns as its result. */
static void reentrant(sqlite3_context *ctx, int n, sqlite3_value **args) {
    (void)n;
    (void)args;
    sqlite3_result_int(ctx, sqlite3_exec(sqlite3_context_db_handle(ctx), "SELECT 1", 0, 0, 0));
}

/* A scalar function: the product of its arguments. */
static void product(sqlite3_context *ctx, int n, sqlite3_value **args) {
    CHECK(*(int *)sqlite3_user_data(ctx) == 42);
    double p = 1;
    for (int i = 0; i < n; i++) {
        if (sqlite3_value_type(args[i]) == SQLITE_NULL) {
            sqlite3_result_error(ctx, "product of NULL", -1);
            return;
        }
        p *= sqlite3_value_double(args[i]);
    }
    sqlite3_result_double(ctx, p);
}

/* An aggregate: the longest text. */
struct longest {
    char best[64];
};
static void longest_step(sqlite3_context *ctx, int n, sqlite3_value **args) {
    (void)n;
    struct longest *s = sqlite3_aggregate_context(ctx, sizeof *s);
    const char *t = (const char *)sqlite3_value_text(args[0]);
    if (t && strlen(t) > strlen(s->best) && strlen(t) < sizeof s->best) strcpy(s->best, t);
}
static void longest_final(sqlite3_context *ctx) {
    struct longest *s = sqlite3_aggregate_context(ctx, 0);
    if (s)
        sqlite3_result_text(ctx, s->best, -1, SQLITE_TRANSIENT);
    else
        sqlite3_result_null(ctx);
}

static int destroyed = 0;
static void destroy(void *p) {
    (void)p;
    destroyed++;
}

/* A collation: by length, then bytes. */
static int by_length(void *arg, int na, const void *a, int nb, const void *b) {
    (void)arg;
    if (na != nb) return na - nb;
    return memcmp(a, b, na);
}

static void functions(void) {
    sqlite3 *db;
    CHECK_RC(db, sqlite3_open(":memory:", &db), SQLITE_OK);
    static int answer = 42;
    CHECK_RC(db, sqlite3_create_function_v2(db, "product", -1, SQLITE_UTF8, &answer, product, 0, 0, destroy), SQLITE_OK);
    CHECK_RC(db, sqlite3_create_function(db, "longest", 1, SQLITE_UTF8, 0, 0, longest_step, longest_final), SQLITE_OK);
    CHECK_RC(db, sqlite3_create_collation(db, "BYLEN", SQLITE_UTF8, 0, by_length), SQLITE_OK);
    CHECK_RC(db, sqlite3_exec(db, "CREATE TABLE w(x TEXT); INSERT INTO w VALUES ('ccc'), ('a'), ('bb'), ('dddd'), ('b');", 0, 0, 0), SQLITE_OK);

    sqlite3_stmt *s;
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT product(2, 3.5, 4), longest(x) FROM w", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    CHECK(sqlite3_column_double(s, 0) == 28.0);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 1), "dddd") == 0);
    sqlite3_finalize(s);

    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT product(1, NULL)", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ERROR);
    CHECK(strcmp(sqlite3_errmsg(db), "product of NULL") == 0);
    sqlite3_finalize(s);

    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT group_concat(x, ',') FROM (SELECT x FROM w ORDER BY x COLLATE bylen)", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 0), "a,b,bb,ccc,dddd") == 0);
    sqlite3_finalize(s);

    /* A window function from an aggregate: a running longest. */
    CHECK_RC(db, sqlite3_create_window_function(db, "wlongest", 1, SQLITE_UTF8, 0, longest_step, longest_final, longest_final, 0, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT wlongest(x) OVER (ORDER BY rowid) FROM w", -1, &s, 0), SQLITE_OK);
    const char *want[] = {"ccc", "ccc", "ccc", "dddd", "dddd"};
    for (int i = 0; i < 5; i++) {
        CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
        CHECK(strcmp((const char *)sqlite3_column_text(s, 0), want[i]) == 0);
    }
    CHECK_RC(db, sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);

    /* A callback that re-enters its own connection gets SQLITE_MISUSE, not a deadlock. */
    CHECK_RC(db, sqlite3_create_function(db, "reentrant", 0, SQLITE_UTF8, 0, reentrant, 0, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT reentrant()", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    CHECK(sqlite3_column_int(s, 0) == SQLITE_MISUSE);
    /* Binding a statement that is running is misuse too; after a reset it binds. */
    sqlite3_stmt *bound;
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT x FROM w WHERE ? IS NULL", -1, &bound, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(bound), SQLITE_ROW);
    CHECK_RC(db, sqlite3_bind_int(bound, 1, 1), SQLITE_MISUSE);
    sqlite3_reset(bound);
    CHECK_RC(db, sqlite3_bind_int(bound, 1, 1), SQLITE_OK);
    sqlite3_finalize(bound);
    sqlite3_finalize(s);

    /* Replacing the function releases the old one's data. */
    CHECK_RC(db, sqlite3_create_function_v2(db, "product", -1, SQLITE_UTF8, 0, 0, 0, 0, 0), SQLITE_OK);
    CHECK(destroyed == 1);
    /* Gone, the call is refused when prepared, as SQLite refuses it. */
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT product(2)", -1, &s, 0), SQLITE_ERROR);
    CHECK(strstr(sqlite3_errmsg(db), "no such function"));
    sqlite3_close(db);
}

static void blobs_and_backup(void) {
    char p[4200], q[4200];
    path(p, "blobs");
    path(q, "backup");
    sqlite3 *db, *copy;
    CHECK_RC(db, sqlite3_open(p, &db), SQLITE_OK);
    CHECK_RC(db, sqlite3_exec(db, "CREATE TABLE b(id INTEGER PRIMARY KEY, data BLOB); INSERT INTO b VALUES (7, zeroblob(16)); CREATE INDEX bi ON b(data); CREATE TABLE plain(x, y); INSERT INTO plain VALUES (1, 'one'), (2, 'two');", 0, 0, 0), SQLITE_OK);
    sqlite3_blob *blob;
    CHECK_RC(db, sqlite3_blob_open(db, "main", "b", "data", 7, 1, &blob), SQLITE_OK);
    CHECK(sqlite3_blob_bytes(blob) == 16);
    CHECK_RC(db, sqlite3_blob_write(blob, "hello", 5, 4), SQLITE_OK);
    CHECK_RC(db, sqlite3_blob_write(blob, "x", 1, 16), SQLITE_ERROR);
    char buf[5];
    CHECK_RC(db, sqlite3_blob_read(blob, buf, 5, 4), SQLITE_OK);
    CHECK(memcmp(buf, "hello", 5) == 0);
    CHECK_RC(db, sqlite3_blob_close(blob), SQLITE_OK);
    CHECK_RC(db, sqlite3_blob_open(db, "main", "b", "data", 8, 0, &blob), SQLITE_ERROR);

    CHECK_RC(copy, sqlite3_open(q, &copy), SQLITE_OK);
    CHECK_RC(copy, sqlite3_exec(copy, "CREATE TABLE old(z)", 0, 0, 0), SQLITE_OK);
    sqlite3_backup *bk = sqlite3_backup_init(copy, "main", db, "main");
    CHECK(bk != 0);
    CHECK_RC(copy, sqlite3_backup_step(bk, -1), SQLITE_DONE);
    CHECK(sqlite3_backup_remaining(bk) == 0);
    CHECK(sqlite3_backup_pagecount(bk) == 3);
    CHECK_RC(copy, sqlite3_backup_finish(bk), SQLITE_OK);
    sqlite3_stmt *s;
    CHECK_RC(copy, sqlite3_prepare_v2(copy, "SELECT substr(data, 5, 5), (SELECT group_concat(y) FROM plain), (SELECT count(*) FROM sqlite_schema WHERE name = 'old') FROM b WHERE id = 7", -1, &s, 0), SQLITE_OK);
    CHECK_RC(copy, sqlite3_step(s), SQLITE_ROW);
    CHECK(sqlite3_column_bytes(s, 0) == 5 && memcmp(sqlite3_column_blob(s, 0), "hello", 5) == 0);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 1), "one,two") == 0);
    CHECK(sqlite3_column_int(s, 2) == 0);
    sqlite3_finalize(s);

    /* An image: none kept in memory to lend (NOCOPY), none of an unknown schema; the one
       made deserializes into another connection, and a damaged one is refused whole. */
    sqlite3_int64 size = 0;
    CHECK(sqlite3_serialize(db, "main", &size, SQLITE_SERIALIZE_NOCOPY) == 0 && size == -1);
    CHECK(sqlite3_serialize(db, "other", &size, 0) == 0);
    CHECK(sqlite3_errcode(db) == SQLITE_ERROR && strstr(sqlite3_errmsg(db), "unknown database"));
    unsigned char *image = sqlite3_serialize(db, 0, &size, 0);
    CHECK(image != 0 && size > 0);
    unsigned char *bad = sqlite3_malloc64(size);
    memcpy(bad, image, size);
    bad[size / 2] ^= 1;
    CHECK_RC(copy, sqlite3_deserialize(copy, "main", bad, size, size, SQLITE_DESERIALIZE_FREEONCLOSE), SQLITE_NOTADB);
    CHECK_RC(copy, sqlite3_deserialize(copy, "other", image, size, size, 0), SQLITE_ERROR);
    CHECK_RC(copy, sqlite3_deserialize(copy, "main", image, size, size, SQLITE_DESERIALIZE_FREEONCLOSE), SQLITE_OK);
    CHECK_RC(copy, sqlite3_prepare_v2(copy, "SELECT group_concat(y) FROM plain", -1, &s, 0), SQLITE_OK);
    CHECK_RC(copy, sqlite3_step(s), SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(s, 0), "one,two") == 0);
    sqlite3_finalize(s);
    sqlite3_close(copy);
    sqlite3_close(db);
}

/* Many connections writing at once: each thread moves amounts between accounts with
   retries on SQLITE_BUSY; the total never changes and every commit counts. */
#define THREADS 4
#define TXNS 200
static char shared_path[4200];
static int commits[THREADS], busy[THREADS];

static void *writer(void *arg) {
    int t = (int)(long)arg;
    sqlite3 *db;
    if (sqlite3_open(shared_path, &db) != SQLITE_OK) return 0;
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *up, *log;
    sqlite3_prepare_v2(db, "UPDATE acct SET bal = bal + ?2 WHERE id = ?1", -1, &up, 0);
    sqlite3_prepare_v2(db, "INSERT INTO history(t, n) VALUES (?, ?)", -1, &log, 0);
    unsigned seed = 1234 + t;
    for (int i = 0; i < TXNS; i++) {
        for (;;) {
            int from = rand_r(&seed) % 10, to = rand_r(&seed) % 10;
            int rc = sqlite3_exec(db, "BEGIN", 0, 0, 0);
            sqlite3_bind_int(up, 1, from);
            sqlite3_bind_int(up, 2, -5);
            rc = rc == SQLITE_OK && sqlite3_step(up) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
            sqlite3_reset(up);
            if (rc == SQLITE_OK) {
                sqlite3_bind_int(up, 1, to);
                sqlite3_bind_int(up, 2, 5);
                rc = sqlite3_step(up) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
                sqlite3_reset(up);
            }
            if (rc == SQLITE_OK) {
                sqlite3_bind_int(log, 1, t);
                sqlite3_bind_int(log, 2, i);
                rc = sqlite3_step(log) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
                sqlite3_reset(log);
            }
            if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
            if (rc == SQLITE_OK) {
                commits[t]++;
                break;
            }
            if (rc != SQLITE_BUSY) {
                fprintf(stderr, "thread %d: unexpected error %d: %s\n", t, rc, sqlite3_errmsg(db));
                failures++;
                break;
            }
            busy[t]++;
            if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
        }
    }
    sqlite3_finalize(up);
    sqlite3_finalize(log);
    sqlite3_close(db);
    return 0;
}

/* A busy handler that always asks to try again, counting its calls. */
static int handler_calls[THREADS];
static int retry_always(void *arg, int count) {
    (void)count;
    (*(int *)arg)++;
    return 1;
}

/* Auto-commit increments of one hot row: conflicts go to the busy handler, which retries;
   every increment lands. */
static void *hot_row(void *arg) {
    int t = (int)(long)arg;
    sqlite3 *db;
    if (sqlite3_open(shared_path, &db) != SQLITE_OK) return 0;
    sqlite3_busy_handler(db, retry_always, &handler_calls[t]);
    for (int i = 0; i < 100; i++) {
        int rc = sqlite3_exec(db, "UPDATE acct SET bal = bal + 1 WHERE id = 0", 0, 0, 0);
        if (rc != SQLITE_OK) {
            fprintf(stderr, "hot row: %d: %s\n", rc, sqlite3_errmsg(db));
            failures++;
        }
    }
    sqlite3_close(db);
    return 0;
}

static void concurrent_writers(void) {
    path(shared_path, "bank");
    sqlite3 *db;
    CHECK_RC(db, sqlite3_open(shared_path, &db), SQLITE_OK);
    CHECK_RC(db, sqlite3_exec(db, "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER); CREATE TABLE history(t, n);"
                                  "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 9) INSERT INTO acct SELECT i, 1000 FROM c;",
                             0, 0, 0),
             SQLITE_OK);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], 0, writer, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], 0);
    int total = 0, retries = 0;
    for (int t = 0; t < THREADS; t++) total += commits[t], retries += busy[t];
    CHECK(total == THREADS * TXNS);
    sqlite3_stmt *s;
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT (SELECT sum(bal) FROM acct), (SELECT count(*) FROM history)", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    CHECK(sqlite3_column_int(s, 0) == 10000);
    CHECK(sqlite3_column_int(s, 1) == THREADS * TXNS);
    sqlite3_finalize(s);
    CHECK_RC(db, sqlite3_prepare_v2(db, "SELECT bal FROM acct WHERE id = 0", -1, &s, 0), SQLITE_OK);
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    int before = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], 0, hot_row, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], 0);
    int calls = 0;
    for (int t = 0; t < THREADS; t++) calls += handler_calls[t];
    CHECK_RC(db, sqlite3_step(s), SQLITE_ROW);
    CHECK(sqlite3_column_int(s, 0) == before + THREADS * 100);
    sqlite3_finalize(s);
    sqlite3_close(db);
    printf("concurrent writers: %d commits, %d retries on SQLITE_BUSY; hot row: %d busy handler calls\n", total, retries, calls);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: api_test DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    basics();
    functions();
    blobs_and_backup();
    concurrent_writers();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
