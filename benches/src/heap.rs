//! The bytes of heap a bench holds, beside the RSS the allocator keeps for them: the
//! difference is memory freed but not given back, or given back only in whole pages.
//!
//! Counting is off until [`count`] turns it on, and costs one relaxed load per allocation
//! until then, so the latency benches run on the allocator as the server does. Once on, the
//! count's change between two readings is exactly what was allocated less what was freed in
//! between, whenever the freed blocks were allocated.

// The one unsafe piece of the benches: a `GlobalAlloc` must be an `unsafe impl`, and each
// call hands the caller's layout and pointer to mimalloc unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

use mimalloc::MiMalloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static HELD: AtomicIsize = AtomicIsize::new(0);

/// Turns counting on (it stays on).
pub fn count() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// Bytes allocated less bytes freed since [`count`] (as asked for, not as rounded up by the
/// allocator).
pub fn held() -> isize {
    HELD.load(Ordering::Relaxed)
}

/// Bytes SQLite holds for itself (its page caches, statements, schema), allocated with the C
/// library's malloc, outside the heap [`held`] counts: part of the RSS beside it.
pub fn sqlite_held() -> i64 {
    // SAFETY: a read of SQLite's global counter, valid at any time, before or without any
    // connection.
    unsafe { libsqlite3_sys::sqlite3_memory_used() }
}

/// mimalloc, counting.
pub(crate) struct Counted;

fn add(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        HELD.fetch_add(bytes.cast_signed(), Ordering::Relaxed);
    }
}

fn sub(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        HELD.fetch_sub(bytes.cast_signed(), Ordering::Relaxed);
    }
}

// SAFETY: every method passes its arguments to mimalloc's as they came, so each keeps the
// contract the caller met; the counting touches only two atomics.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for the impl.
        let block = unsafe { MiMalloc.alloc(layout) };
        if !block.is_null() {
            add(layout.size());
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for the impl.
        let block = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !block.is_null() {
            add(layout.size());
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: as for the impl.
        unsafe { MiMalloc.dealloc(block, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for the impl.
        let moved = unsafe { MiMalloc.realloc(block, layout, new_size) };
        if !moved.is_null() {
            add(new_size);
            sub(layout.size());
        }
        moved
    }
}
