/*
 * BeechDB's key/value engine from C (libbeechdb_c).
 *
 * Every call that can fail returns 0 or an error code: Berkeley DB 5.3's numbers for the
 * failures Berkeley DB programs already handle (BEECH_NOTFOUND is DB_NOTFOUND, and so on),
 * an errno value for the others (EINVAL for misuse and bad arguments, EIO, ENOSPC, EBUSY,
 * ENOENT, EEXIST, EACCES). beech_last_error() gives the message of the calling thread's
 * last failure.
 *
 * Handles: an environment (beech_env), a database in it (beech_db), a transaction
 * (beech_txn) and a cursor (beech_cursor). Each is freed by its own close call (a
 * transaction by commit or abort); a handle may be used from any thread, one call at a
 * time for a cursor. Closing the environment first leaves the others valid to free, and
 * their other calls then fail with EINVAL.
 *
 * Buffers returned through void ** are the caller's: free them with beech_free().
 */
#ifndef BEECHDB_H
#define BEECHDB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct beech_env beech_env;
typedef struct beech_db beech_db;
typedef struct beech_txn beech_txn;
typedef struct beech_cursor beech_cursor;

/* Return codes beyond errno values: Berkeley DB's. */
#define BEECH_KEYEXIST (-30994)        /* DB_KEYEXIST: the key is already there */
#define BEECH_LOCK_DEADLOCK (-30993)   /* DB_LOCK_DEADLOCK: abort and retry (a deadlock or a write conflict) */
#define BEECH_LOCK_NOTGRANTED (-30992) /* DB_LOCK_NOTGRANTED: a lock wait timed out */
#define BEECH_NOTFOUND (-30988)        /* DB_NOTFOUND: no such key, or the cursor ran off the end */
#define BEECH_RUNRECOVERY (-30973)     /* DB_RUNRECOVERY: reopen the environment */
#define BEECH_VERIFY_BAD (-30970)      /* DB_VERIFY_BAD: stored data failed a check */
#define BEECH_REP_NOTPERM (-30976)     /* DB_REP_NOTPERM: a commit lacked its acknowledgements */
#define BEECH_REP_UNAVAIL (-30975)     /* DB_REP_UNAVAIL: not enough members reachable */

/* beech_env_open flags. Commits are SYNC unless WRITE_NOSYNC or NOSYNC is given. */
#define BEECH_TRANSACTIONAL 0x01u  /* Transactional Data Store: a write-ahead log, transactions */
#define BEECH_READ_ONLY 0x02u      /* open beside a writer, for reading */
#define BEECH_IN_MEMORY_LOG 0x04u  /* the log in memory only (durable at checkpoints) */
#define BEECH_WRITE_NOSYNC 0x08u   /* a commit is written to the OS, not synced */
#define BEECH_NOSYNC 0x10u         /* a commit stays in memory until the log fills or syncs */

/* beech_db_open flags */
#define BEECH_CREATE 0x01u         /* create the database if it does not exist */

/* beech_put flags */
#define BEECH_NOOVERWRITE 0x01u    /* fail with BEECH_KEYEXIST if the key is there */

/* beech_txn_begin flags */
#define BEECH_READ_COMMITTED 0x01u /* each read sees the latest commit (default: a snapshot) */

/* beech_cursor_get operations */
#define BEECH_FIRST 1
#define BEECH_LAST 2
#define BEECH_NEXT 3     /* from an unpositioned cursor: the first */
#define BEECH_PREV 4     /* from an unpositioned cursor: the last */
#define BEECH_SET_RANGE 5 /* the first key at or after the key given */
#define BEECH_CURRENT 6  /* the pair the cursor is on */

/* Opens (creating if needed) the environment in directory path. cache_bytes 0: the default. */
int beech_env_open(const char *path, uint32_t flags, uint64_t cache_bytes, beech_env **envp);
/* Makes every change so far durable (a checkpoint). */
int beech_env_sync(beech_env *env);
/* Closes the environment (a final checkpoint) and frees the handle, whatever it returns. */
int beech_env_close(beech_env *env);

/* Opens database name; with BEECH_CREATE, creates it if absent (else ENOENT). */
int beech_db_open(beech_env *env, const char *name, uint32_t flags, beech_db **dbp);
/* Removes database name and everything in it. */
int beech_db_remove(beech_env *env, const char *name);
/* Frees a database handle. */
void beech_db_close(beech_db *db);

/* With txn NULL each call is a transaction of its own (in a transactional environment). */
int beech_put(beech_db *db, beech_txn *txn, const void *key, size_t key_len, const void *data,
              size_t data_len, uint32_t flags);
/* *data receives a copy of the value (free it with beech_free), BEECH_NOTFOUND if absent. */
int beech_get(beech_db *db, beech_txn *txn, const void *key, size_t key_len, void **data,
              size_t *data_len);
/* BEECH_NOTFOUND if the key was absent. */
int beech_del(beech_db *db, beech_txn *txn, const void *key, size_t key_len);

int beech_txn_begin(beech_env *env, uint32_t flags, beech_txn **txnp);
/* Commits and frees the handle, whatever it returns (a failed commit is rolled back). */
int beech_txn_commit(beech_txn *txn);
/* Rolls back and frees the handle. */
void beech_txn_abort(beech_txn *txn);

/* A cursor over db; in txn (which must outlive it) it sees the transaction's writes. */
int beech_cursor_open(beech_db *db, beech_txn *txn, beech_cursor **cursorp);
/* Moves the cursor (op: BEECH_FIRST ...) and returns copies of the key and the value there
 * (either pointer may be NULL if not wanted); BEECH_NOTFOUND past either end. For
 * BEECH_SET_RANGE, *key and *key_len give the key to look for on entry. */
int beech_cursor_get(beech_cursor *cursor, int op, void **key, size_t *key_len, void **data,
                     size_t *data_len);
void beech_cursor_close(beech_cursor *cursor);

/* Frees a buffer returned by beech_get or beech_cursor_get. */
void beech_free(void *p);
/* A short description of a return code. */
const char *beech_strerror(int code);
/* The calling thread's last failure, in full ("" if none); valid until its next failure. */
const char *beech_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* BEECHDB_H */
