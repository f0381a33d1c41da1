//! Berkeley DB 5.3 through the C shim in `csrc/bdb_shim.c`.

use super::{BenchResult, KvEngine, Setup};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;

#[repr(C)]
struct BdbHandle {
    _private: [u8; 0],
}

extern "C" {
    fn bdb_open(
        dir: *const c_char,
        cache: c_ulonglong,
        flags: c_uint,
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
    fn bdb_strerror(err: c_int) -> *const c_char;
    fn bdb_notfound() -> c_int;
    fn bdb_flag_private() -> c_uint;
    fn bdb_flag_init_mpool() -> c_uint;
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

pub struct Bdb {
    h: *mut BdbHandle,
    notfound: c_int,
}

impl Bdb {
    /// Data Store: DB_PRIVATE | DB_INIT_MPOOL, the configured cache, a B-tree.
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<Bdb> {
        let cdir = CString::new(dir.as_os_str().as_bytes())?;
        let mut h = std::ptr::null_mut();
        // SAFETY: plain FFI calls; `h` is written only on success.
        unsafe {
            let flags = bdb_flag_private() | bdb_flag_init_mpool();
            check(bdb_open(
                cdir.as_ptr(),
                s.cache_bytes as u64,
                flags,
                s.bdb_page_size as c_uint,
                &mut h,
            ))?;
            Ok(Bdb {
                h,
                notfound: bdb_notfound(),
            })
        }
    }
}

impl KvEngine for Bdb {
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        // SAFETY: `self.h` is open; the slices outlive the call.
        check(unsafe {
            bdb_put(
                self.h,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        })
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        buf.resize(buf.capacity().max(256), 0);
        let mut len = 0usize;
        // SAFETY: `buf` has `buf.len()` writable bytes; BDB writes at most that (USERMEM).
        let ret = unsafe {
            bdb_get(
                self.h,
                key.as_ptr().cast(),
                key.len(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
            )
        };
        if ret == self.notfound {
            return Ok(false);
        }
        check(ret)?;
        buf.truncate(len);
        Ok(true)
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        // SAFETY: as in `put`.
        let ret = unsafe { bdb_del(self.h, key.as_ptr().cast(), key.len()) };
        if ret == self.notfound {
            return Ok(false);
        }
        check(ret).map(|_| true)
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        // SAFETY: closes the handle exactly once; `self` is consumed.
        check(unsafe { bdb_close(self.h) })
    }
}
