//! The allocator the `parley` binary runs on, and the runtime that gives back to the system
//! what it freed.
//!
//! mimalloc, rather than the system's malloc: fewer cycles per turn and no consolidation
//! pauses on the hot path (benches/README.md). It gives a page of freed memory back to the
//! system a while after the page emptied (its purge delay, 1 s), but only when some thread
//! frees a page again later, and a page freed from another thread waits until its own thread
//! collects. A server that goes quiet after a wave of conversations (their actors rest, then
//! are forgotten) would keep all of it. So each worker of [`runtime`], about to park because
//! it has nothing to do, collects its heap, at most once a second: the pages it emptied go
//! back, and so do those of every thread whose purge delay has passed.
//!
//! `idle_identities` measures what it gives back: with 100,000 rested identities, about
//! 0.6 KiB less RSS each (benches/README.md). A collection takes about 0.14 ms on a worker
//! holding a few hundred MB (2.4 ms at most), once a second at most, and only as it parks.

// One unsafe block: the call into mimalloc's C API in `give_back_freed`.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The global allocator of the `parley` binary, and of the benches so that they measure what
/// the server runs.
pub use mimalloc::MiMalloc as Allocator;

/// Most often a worker collects its heap.
const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// The multi-thread runtime the server runs on: tokio's default one, whose workers give
/// back what they freed when they park ([`Allocator`] must be the global allocator).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(give_back_freed)
        .build()
}

/// Collects this thread's heap if it has not for [`COLLECT_EVERY`].
fn give_back_freed() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    if LAST.with(|last| due(last, Instant::now())) {
        // SAFETY: `mi_collect` takes no pointer and may be called from any thread at any
        // time; it frees only pages of the calling thread's heap that hold no live block,
        // and purges only memory that mimalloc owns and has scheduled to purge.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

/// Whether a thread that last collected at `last` collects `now` (and, if so, notes it).
fn due(last: &Cell<Option<Instant>>, now: Instant) -> bool {
    let due = last
        .get()
        .is_none_or(|at| now.saturating_duration_since(at) >= COLLECT_EVERY);
    if due {
        last.set(Some(now));
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_collects_when_it_first_parks_then_at_most_once_a_second() {
        let last = Cell::new(None);
        let start = Instant::now();
        assert!(due(&last, start), "the first park collects");
        assert!(!due(&last, start + Duration::from_millis(10)));
        assert!(!due(
            &last,
            start + COLLECT_EVERY - Duration::from_millis(1)
        ));
        assert!(
            due(&last, start + COLLECT_EVERY),
            "a second later it collects again"
        );
        assert!(!due(
            &last,
            start + COLLECT_EVERY + Duration::from_millis(500)
        ));
    }

    #[test]
    fn the_runtime_runs_and_its_parking_workers_collect() {
        let runtime = runtime().expect("runtime");
        // Workers park between these tasks and collect; the work is unaffected.
        let sum: u64 = runtime.block_on(async {
            let mut total = 0;
            for n in 0..10u64 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                total += tokio::spawn(async move { vec![n; 1024].iter().sum::<u64>() })
                    .await
                    .expect("task");
            }
            total
        });
        assert_eq!(sum, 45 * 1024);
    }
}
