/* A thin C layer over Berkeley DB 5.3 for the benchmark: one environment, one B-tree. */
#include <db.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    DB_ENV *env;
    DB *db;
} bdb_t;

/* Opens an environment and one B-tree. tds = 0: Data Store (DB_PRIVATE | DB_INIT_MPOOL).
 * tds = 1: Transactional Data Store (adds DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG |
 * DB_THREAD, deadlock detection, a log buffer of log_buffer bytes); commit_flag is 0,
 * DB_TXN_NOSYNC or DB_TXN_WRITE_NOSYNC for the whole environment; inmem selects
 * DB_LOG_IN_MEMORY. Single operations then auto-commit. page_size 0 keeps the default. */
int bdb_open(const char *dir, unsigned long long cache_bytes, int tds, unsigned int commit_flag,
             int inmem, unsigned int log_buffer, unsigned int page_size, bdb_t **out) {
    bdb_t *h = calloc(1, sizeof *h);
    u_int32_t env_flags = DB_CREATE | DB_PRIVATE | DB_INIT_MPOOL;
    u_int32_t db_flags = DB_CREATE;
    int ret;
    if (h == NULL) return ENOMEM;
    if ((ret = db_env_create(&h->env, 0)) != 0) goto fail;
    if ((ret = h->env->set_cachesize(h->env, (u_int32_t)(cache_bytes >> 30),
                                     (u_int32_t)(cache_bytes & ((1u << 30) - 1)), 1)) != 0)
        goto fail;
    if (tds) {
        env_flags |= DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG | DB_THREAD;
        db_flags |= DB_AUTO_COMMIT | DB_THREAD;
        if ((ret = h->env->set_lk_detect(h->env, DB_LOCK_DEFAULT)) != 0) goto fail;
        if ((ret = h->env->set_lg_bsize(h->env, log_buffer)) != 0) goto fail;
        if ((ret = h->env->set_lk_max_locks(h->env, 100000)) != 0) goto fail;
        if ((ret = h->env->set_lk_max_objects(h->env, 100000)) != 0) goto fail;
        if (inmem && (ret = h->env->log_set_config(h->env, DB_LOG_IN_MEMORY, 1)) != 0) goto fail;
        if (commit_flag != 0 && (ret = h->env->set_flags(h->env, commit_flag, 1)) != 0) goto fail;
    }
    if ((ret = h->env->open(h->env, dir, env_flags, 0644)) != 0) goto fail;
    if ((ret = db_create(&h->db, h->env, 0)) != 0) goto fail;
    if (page_size != 0 && (ret = h->db->set_pagesize(h->db, page_size)) != 0) goto fail;
    if ((ret = h->db->open(h->db, NULL, "bench.db", NULL, DB_BTREE, db_flags, 0644)) != 0)
        goto fail;
    *out = h;
    return 0;
fail:
    if (h->db) h->db->close(h->db, 0);
    if (h->env) h->env->close(h->env, 0);
    free(h);
    return ret;
}

static void fill(DBT *d, const void *p, size_t n) {
    memset(d, 0, sizeof *d);
    d->data = (void *)p;
    d->size = (u_int32_t)n;
}

int bdb_put(bdb_t *h, const void *k, size_t kl, const void *v, size_t vl) {
    DBT key, data;
    fill(&key, k, kl);
    fill(&data, v, vl);
    return h->db->put(h->db, NULL, &key, &data, 0);
}

/* Copies the value into buf (DB_DBT_USERMEM: no allocation); returns DB_NOTFOUND if absent. */
int bdb_get(bdb_t *h, const void *k, size_t kl, void *buf, size_t cap, size_t *len) {
    DBT key, data;
    int ret;
    fill(&key, k, kl);
    memset(&data, 0, sizeof data);
    data.data = buf;
    data.ulen = (u_int32_t)cap;
    data.flags = DB_DBT_USERMEM;
    ret = h->db->get(h->db, NULL, &key, &data, 0);
    if (ret == 0) *len = data.size;
    return ret;
}

int bdb_del(bdb_t *h, const void *k, size_t kl) {
    DBT key;
    fill(&key, k, kl);
    return h->db->del(h->db, NULL, &key, 0);
}

int bdb_checkpoint(bdb_t *h) { return h->env->txn_checkpoint(h->env, 0, 0, 0); }

int bdb_close(bdb_t *h) {
    int ret = h->db->close(h->db, 0);
    int ret2 = h->env->close(h->env, 0);
    free(h);
    return ret != 0 ? ret : ret2;
}

const char *bdb_strerror(int err) { return db_strerror(err); }
int bdb_notfound(void) { return DB_NOTFOUND; }
int bdb_deadlock(void) { return DB_LOCK_DEADLOCK; }
unsigned int bdb_flag_txn_nosync(void) { return DB_TXN_NOSYNC; }
unsigned int bdb_flag_txn_write_nosync(void) { return DB_TXN_WRITE_NOSYNC; }
