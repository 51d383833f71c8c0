//! Where SQLite's own memory comes from: mimalloc, the allocator the rest of Parley uses,
//! instead of the C library's malloc.
//!
//! SQLite allocates its page caches, prepared statements and schemas for itself. Left to
//! glibc's malloc, they were spread over one arena per thread that touched them (sqlx runs
//! each connection on a thread of its own, so about a dozen arenas): `idle_identities 100000
//! 150 --inbound` found glibc's arenas holding about twice what SQLite said it used, memory
//! that stays with the process once SQLite frees it. mimalloc gives freed pages back to the
//! system after a moment, whichever thread freed them.

// SQLite takes its allocator only through its C API.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::Once;

use libmimalloc_sys::{mi_free, mi_good_size, mi_malloc, mi_realloc, mi_usable_size};
use libsqlite3_sys::{SQLITE_CONFIG_MALLOC, SQLITE_OK, sqlite3_config, sqlite3_mem_methods};

/// Hands SQLite mimalloc's functions, once per process, before its first connection opens
/// (SQLite takes an allocator only before it initialises itself). When SQLite was already
/// initialised (something else in the process opened a database first) it keeps the C
/// library's malloc, which works as well, with the memory cost above: logged, not an error.
pub(super) fn use_mimalloc() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let methods = sqlite3_mem_methods {
            xMalloc: Some(allocate),
            xFree: Some(free),
            xRealloc: Some(reallocate),
            xSize: Some(size),
            xRoundup: Some(round_up),
            xInit: Some(init),
            xShutdown: Some(shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: `SQLITE_CONFIG_MALLOC` takes one pointer to a `sqlite3_mem_methods`, which
        // SQLite copies before returning; every function in it is a plain wrapper of
        // mimalloc's, valid for the life of the program. SQLite answers `SQLITE_MISUSE`
        // (and changes nothing) once it is initialised.
        let code = unsafe {
            sqlite3_config(
                SQLITE_CONFIG_MALLOC,
                std::ptr::from_ref(&methods).cast::<c_void>(),
            )
        };
        if code != SQLITE_OK {
            tracing::debug!(
                code,
                "SQLite was already in use: it keeps the C library's malloc"
            );
        }
    });
}

/// A size SQLite asks for, as mimalloc takes it (SQLite never asks for a negative one).
fn bytes(n: c_int) -> usize {
    usize::try_from(n).unwrap_or(0)
}

unsafe extern "C" fn allocate(n: c_int) -> *mut c_void {
    // SAFETY: any size may be asked of mimalloc; its blocks are aligned to 8 bytes at least,
    // as SQLite needs.
    unsafe { mi_malloc(bytes(n)) }
}

unsafe extern "C" fn free(block: *mut c_void) {
    // SAFETY: SQLite frees only what `allocate` or `reallocate` gave it.
    unsafe { mi_free(block) }
}

unsafe extern "C" fn reallocate(block: *mut c_void, n: c_int) -> *mut c_void {
    // SAFETY: as `free`: `block` came from mimalloc.
    unsafe { mi_realloc(block, bytes(n)) }
}

unsafe extern "C" fn size(block: *mut c_void) -> c_int {
    // SAFETY: as `free`: `block` came from mimalloc (SQLite asks only of its own blocks).
    let usable = unsafe { mi_usable_size(block) };
    c_int::try_from(usable).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn round_up(n: c_int) -> c_int {
    // SAFETY: a pure computation of mimalloc's.
    let good = unsafe { mi_good_size(bytes(n)) };
    c_int::try_from(good).unwrap_or(n)
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    SQLITE_OK
}

unsafe extern "C" fn shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    use libmimalloc_sys::mi_is_in_heap_region;
    use libsqlite3_sys::{sqlite3_free, sqlite3_malloc, sqlite3_memory_used};

    #[tokio::test]
    async fn sqlite_allocates_from_mimalloc_once_parley_connected() {
        let (_dir, db) = crate::test_support::migrated().await;
        // SAFETY: SQLite is initialised (a connection is open); a block asked of its
        // allocator is given back to it at once.
        let (in_mimalloc, used) = unsafe {
            let block = sqlite3_malloc(1000);
            assert!(!block.is_null());
            let in_mimalloc = mi_is_in_heap_region(block.cast_const());
            sqlite3_free(block);
            (in_mimalloc, sqlite3_memory_used())
        };
        assert!(in_mimalloc, "SQLite's block is not mimalloc's");
        // SQLite still counts what it holds (through `size`).
        assert!(used > 0, "SQLite counts no memory");
        db.close().await.expect("close");
    }
}
