//! Berkeley DB 5.3 through the C shim in `csrc/bdb_shim.c`: Data Store (DB_PRIVATE |
//! DB_INIT_MPOOL), or Transactional Data Store (DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG,
//! DB_THREAD, the mode's commit flag or DB_LOG_IN_MEMORY, a 128 MiB log buffer as in the
//! paper's Table 2) with auto-commit operations, retried on DB_LOCK_DEADLOCK.

use super::{BenchResult, KvEngine, KvStore, Mode, Setup};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

#[repr(C)]
struct BdbHandle {
    _private: [u8; 0],
}

extern "C" {
    fn bdb_open(
        dir: *const c_char,
        cache: c_ulonglong,
        tds: c_int,
        commit_flag: c_uint,
        inmem: c_int,
        log_buffer: c_uint,
        page_size: c_uint,
        out: *mut *mut BdbHandle,
    ) -> c_int;
    fn bdb_put(
        h: *mut BdbHandle,
        k: *const c_void,
        kl: usize,
        v: *const c_void,
        vl: usize,
    ) -> c_int;
    fn bdb_get(
        h: *mut BdbHandle,
        k: *const c_void,
        kl: usize,
        buf: *mut c_void,
        cap: usize,
        len: *mut usize,
    ) -> c_int;
    fn bdb_del(h: *mut BdbHandle, k: *const c_void, kl: usize) -> c_int;
    fn bdb_close(h: *mut BdbHandle) -> c_int;
    fn bdb_checkpoint(h: *mut BdbHandle) -> c_int;
    fn bdb_strerror(err: c_int) -> *const c_char;
    fn bdb_notfound() -> c_int;
    fn bdb_deadlock() -> c_int;
    fn bdb_flag_txn_nosync() -> c_uint;
    fn bdb_flag_txn_write_nosync() -> c_uint;
}

fn check(ret: c_int) -> BenchResult<()> {
    if ret == 0 {
        return Ok(());
    }
    // SAFETY: db_strerror returns a pointer to a static, NUL-terminated message.
    let msg = unsafe { CStr::from_ptr(bdb_strerror(ret)) }
        .to_string_lossy()
        .into_owned();
    Err(format!("Berkeley DB error {ret}: {msg}").into())
}

pub struct BdbStore {
    h: *mut BdbHandle,
    inmem: bool,
    ops: AtomicU64,
}

// SAFETY: the environment and database are opened with DB_THREAD (TDS) and are then safe to
// share between threads; in DS mode the benchmark uses one thread.
unsafe impl Send for BdbStore {}
unsafe impl Sync for BdbStore {}

impl BdbStore {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<BdbStore> {
        let cdir = CString::new(dir.as_os_str().as_bytes())?;
        let mut h = std::ptr::null_mut();
        let ps = s.bdb_page_size as c_uint;
        let cache = s.cache_bytes as u64;
        // SAFETY: plain FFI calls; `h` is written only on success.
        unsafe {
            let flag = match s.mode {
                Mode::TdsNosync => bdb_flag_txn_nosync(),
                Mode::TdsWriteNosync => bdb_flag_txn_write_nosync(),
                _ => 0,
            };
            let (tds, inmem) = (
                (s.mode != Mode::Ds) as c_int,
                (s.mode == Mode::TdsInmem) as c_int,
            );
            check(bdb_open(
                cdir.as_ptr(),
                cache,
                tds,
                flag,
                inmem,
                128 << 20,
                ps,
                &mut h,
            ))?;
        }
        Ok(BdbStore {
            h,
            inmem: s.mode == Mode::TdsInmem,
            ops: AtomicU64::new(0),
        })
    }
}

impl KvStore for BdbStore {
    fn handle(&self) -> BenchResult<Box<dyn KvEngine + '_>> {
        // SAFETY: plain FFI calls returning constants.
        let (notfound, deadlock) = unsafe { (bdb_notfound(), bdb_deadlock()) };
        Ok(Box::new(Bdb {
            store: self,
            notfound,
            deadlock,
        }))
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        // SAFETY: closes the handle exactly once; `self` is consumed.
        check(unsafe { bdb_close(self.h) })
    }
}

struct Bdb<'a> {
    store: &'a BdbStore,
    notfound: c_int,
    deadlock: c_int,
}

// SAFETY: see `BdbStore`.
unsafe impl Send for Bdb<'_> {}

impl Bdb<'_> {
    /// Retries an auto-committed operation that lost a deadlock, as Berkeley DB requires.
    fn retry(&self, mut op: impl FnMut() -> c_int) -> c_int {
        loop {
            let ret = op();
            if ret != self.deadlock {
                return ret;
            }
        }
    }

    /// The in-memory log frees space only at checkpoints: take one now and then.
    fn wrote(&self) -> BenchResult<()> {
        if self.store.inmem && self.store.ops.fetch_add(1, Ordering::Relaxed) % 20_000 == 19_999 {
            // SAFETY: the handle is open; txn_checkpoint is thread-safe.
            check(unsafe { bdb_checkpoint(self.store.h) })?;
        }
        Ok(())
    }
}

impl KvEngine for Bdb<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        let h = self.store.h;
        // SAFETY: `h` is open; the slices outlive the call.
        check(self.retry(|| unsafe {
            bdb_put(
                h,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        }))?;
        self.wrote()
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        buf.resize(buf.capacity().max(256), 0);
        let mut len = 0usize;
        let (h, cap, ptr) = (self.store.h, buf.len(), buf.as_mut_ptr());
        // SAFETY: `buf` has `cap` writable bytes; BDB writes at most that (USERMEM).
        let ret = self.retry(|| unsafe {
            bdb_get(h, key.as_ptr().cast(), key.len(), ptr.cast(), cap, &mut len)
        });
        if ret == self.notfound {
            return Ok(false);
        }
        check(ret)?;
        buf.truncate(len);
        Ok(true)
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        let h = self.store.h;
        // SAFETY: as in `put`.
        let ret = self.retry(|| unsafe { bdb_del(h, key.as_ptr().cast(), key.len()) });
        if ret == self.notfound {
            return Ok(false);
        }
        check(ret)?;
        self.wrote()?;
        Ok(true)
    }
}
