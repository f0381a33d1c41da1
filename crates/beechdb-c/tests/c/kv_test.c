/* The C API as a program meets it: run by tests/capi.rs with the environment directory as
 * its argument. Prints the first failed check and exits 1. */
#include "beechdb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #cond, beech_last_error());                               \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

#define OK(call) CHECK((call) == 0)

static int put_str(beech_db *db, beech_txn *txn, const char *k, const char *v, uint32_t flags) {
    return beech_put(db, txn, k, strlen(k), v, strlen(v), flags);
}

/* The value under k as a NUL-terminated string (the caller frees it), or NULL if absent. */
static char *get_str(beech_db *db, beech_txn *txn, const char *k) {
    void *data = NULL;
    size_t len = 0;
    int rc = beech_get(db, txn, k, strlen(k), &data, &len);
    if (rc == BEECH_NOTFOUND) return NULL;
    CHECK(rc == 0);
    char *s = malloc(len + 1);
    memcpy(s, data, len);
    s[len] = 0;
    beech_free(data);
    return s;
}

static int value_is(beech_db *db, beech_txn *txn, const char *k, const char *want) {
    char *got = get_str(db, txn, k);
    int same = got && strcmp(got, want) == 0;
    free(got);
    return same;
}

/* Steps the cursor with op and checks it lands on key k (NULL: runs off the end). */
static void step_to(beech_cursor *c, int op, const char *k) {
    void *key = NULL, *data = NULL;
    size_t klen = 0, dlen = 0;
    int rc = beech_cursor_get(c, op, &key, &klen, &data, &dlen);
    if (!k) {
        CHECK(rc == BEECH_NOTFOUND);
        return;
    }
    CHECK(rc == 0);
    CHECK(klen == strlen(k) && memcmp(key, k, klen) == 0);
    beech_free(key);
    beech_free(data);
}

struct writer {
    beech_db *db;
    int id;
};

/* Auto-committed puts from several threads at once. */
static void *write_many(void *arg) {
    struct writer *w = arg;
    char key[32];
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "t%d-%04d", w->id, i);
        if (put_str(w->db, NULL, key, "v", 0) != 0) return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    const char *dir = argv[1];
    beech_env *env = NULL;
    beech_db *db = NULL;
    beech_txn *txn = NULL;
    beech_cursor *cur = NULL;

    /* Misuse is an error code, never a crash. */
    CHECK(beech_env_open(NULL, 0, 0, &env) == EINVAL && env == NULL);
    CHECK(strstr(beech_last_error(), "path is NULL") != NULL);
    CHECK(beech_env_open(dir, BEECH_NOSYNC | BEECH_WRITE_NOSYNC, 0, &env) == EINVAL);
    CHECK(beech_env_open(dir, 0x8000, 0, &env) == EINVAL);
    CHECK(beech_put(NULL, NULL, "k", 1, "v", 1, 0) == EINVAL);
    CHECK(beech_txn_commit(NULL) == EINVAL);
    CHECK(strcmp(beech_strerror(BEECH_NOTFOUND), "DB_NOTFOUND: no such key") == 0);

    OK(beech_env_open(dir, BEECH_TRANSACTIONAL | BEECH_WRITE_NOSYNC, 16 << 20, &env));
    CHECK(beech_db_open(env, "missing", 0, &db) == ENOENT && db == NULL);
    OK(beech_db_open(env, "kv", BEECH_CREATE, &db));

    /* Auto-commits: put, get, insert over an existing key, delete, absent keys. */
    OK(put_str(db, NULL, "apple", "12", 0));
    OK(put_str(db, NULL, "banana", "7", 0));
    CHECK(value_is(db, NULL, "apple", "12"));
    CHECK(put_str(db, NULL, "apple", "13", BEECH_NOOVERWRITE) == BEECH_KEYEXIST);
    CHECK(value_is(db, NULL, "apple", "12"));
    CHECK(get_str(db, NULL, "cherry") == NULL);
    OK(beech_del(db, NULL, "banana", 6));
    CHECK(beech_del(db, NULL, "banana", 6) == BEECH_NOTFOUND);
    CHECK(beech_put(db, NULL, NULL, 4, "v", 1, 0) == EINVAL);
    /* An empty value is a value. */
    OK(beech_put(db, NULL, "empty", 5, NULL, 0, 0));
    CHECK(value_is(db, NULL, "empty", ""));

    /* An oversized key: EINVAL with the limit in the message. */
    size_t big = 32 << 20;
    char *huge = calloc(big, 1);
    CHECK(beech_put(db, NULL, huge, big, "v", 1, 0) == EINVAL);
    CHECK(strstr(beech_last_error(), "key") != NULL);
    free(huge);

    /* A transaction sees its writes; others see them only once it commits. */
    OK(beech_txn_begin(env, 0, &txn));
    OK(put_str(db, txn, "cherry", "250", 0));
    CHECK(put_str(db, txn, "cherry", "1", BEECH_NOOVERWRITE) == BEECH_KEYEXIST);
    CHECK(value_is(db, txn, "cherry", "250"));
    CHECK(get_str(db, NULL, "cherry") == NULL);
    /* A cursor in the transaction walks its own writes with the committed ones. */
    OK(beech_cursor_open(db, txn, &cur));
    step_to(cur, BEECH_NEXT, "apple");
    step_to(cur, BEECH_NEXT, "cherry");
    step_to(cur, BEECH_NEXT, "empty");
    step_to(cur, BEECH_NEXT, NULL);
    step_to(cur, BEECH_PREV, "cherry");
    step_to(cur, BEECH_LAST, "empty");
    OK(beech_txn_commit(txn));
    /* The cursor outlives its transaction: it reports the misuse. */
    CHECK(beech_cursor_get(cur, BEECH_FIRST, NULL, NULL, NULL, NULL) == EINVAL);
    beech_cursor_close(cur);
    CHECK(value_is(db, NULL, "cherry", "250"));

    /* Abort leaves nothing. */
    OK(beech_txn_begin(env, 0, &txn));
    OK(put_str(db, txn, "date", "3", 0));
    beech_txn_abort(txn);
    CHECK(get_str(db, NULL, "date") == NULL);

    /* Two snapshot transactions writing one key: the second to commit... never gets that
     * far: its write meets the first's lock, or the first's commit (first committer wins). */
    beech_txn *t1 = NULL, *t2 = NULL;
    OK(beech_txn_begin(env, 0, &t1));
    OK(beech_txn_begin(env, 0, &t2));
    CHECK(value_is(db, t2, "apple", "12"));
    OK(put_str(db, t1, "apple", "20", 0));
    OK(beech_txn_commit(t1));
    CHECK(put_str(db, t2, "apple", "30", 0) == BEECH_LOCK_DEADLOCK);
    beech_txn_abort(t2);
    CHECK(value_is(db, NULL, "apple", "20"));

    /* A cursor outside transactions: both directions and a range search. */
    OK(beech_cursor_open(db, NULL, &cur));
    step_to(cur, BEECH_FIRST, "apple");
    step_to(cur, BEECH_NEXT, "cherry");
    void *key = "b";
    size_t klen = 1;
    void *data = NULL;
    size_t dlen = 0;
    OK(beech_cursor_get(cur, BEECH_SET_RANGE, &key, &klen, &data, &dlen));
    CHECK(klen == 6 && memcmp(key, "cherry", 6) == 0 && dlen == 3 && memcmp(data, "250", 3) == 0);
    beech_free(key);
    beech_free(data);
    step_to(cur, BEECH_PREV, "apple");
    step_to(cur, BEECH_PREV, NULL);
    CHECK(beech_cursor_get(cur, 99, NULL, NULL, NULL, NULL) == EINVAL);
    beech_cursor_close(cur);

    /* Several threads at once. */
    pthread_t threads[4];
    struct writer writers[4];
    for (int i = 0; i < 4; i++) {
        writers[i] = (struct writer){db, i};
        CHECK(pthread_create(&threads[i], NULL, write_many, &writers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        void *failed = NULL;
        CHECK(pthread_join(threads[i], &failed) == 0 && failed == NULL);
    }
    CHECK(value_is(db, NULL, "t3-0499", "v"));

    /* Closing the environment leaves the database handle safe to use (EINVAL) and free. */
    OK(beech_env_close(env));
    CHECK(beech_get(db, NULL, "apple", 5, &data, &dlen) == EINVAL);
    beech_db_close(db);

    /* Everything committed is there after a reopen; a removed database is gone. */
    OK(beech_env_open(dir, BEECH_TRANSACTIONAL, 0, &env));
    OK(beech_db_open(env, "kv", 0, &db));
    CHECK(value_is(db, NULL, "apple", "20"));
    CHECK(value_is(db, NULL, "cherry", "250"));
    CHECK(value_is(db, NULL, "t0-0000", "v"));
    beech_db_close(db);
    OK(beech_db_remove(env, "kv"));
    CHECK(beech_db_open(env, "kv", 0, &db) == ENOENT);
    /* A second handle on an open environment is refused. */
    beech_env *again = NULL;
    CHECK(beech_env_open(dir, BEECH_TRANSACTIONAL, 0, &again) == EBUSY && again == NULL);
    OK(beech_env_sync(env));
    OK(beech_env_close(env));
    puts("ok");
    return 0;
}
