//! Background work that a request starts but does not wait for (a read ahead of a cache
//! entry's expiry, a bookkeeping write), started a moment after the request that asked for it.

use std::time::Duration;

/// How long such work waits before it starts.
///
/// A request that finds a cached entry due for a read goes on first: on a small machine the
/// read (and the database's own process, when it shares the host) would otherwise take the
/// cores that request needs on its way to the model. `stream_latency` on PostgreSQL, five runs
/// of each build alternately: 0.90–0.94 ms added at p50 with the reads started at once,
/// 0.78–0.84 ms with them started this much later (benches/README.md). Nothing waits for the
/// work, so the delay only makes a cached answer that much older, within the caches' lifetimes
/// of 10 s to a minute.
pub const BEHIND_BY: Duration = Duration::from_millis(50);

/// Spawns `work` to run once [`BEHIND_BY`] has passed.
pub fn spawn_behind(work: impl Future<Output = ()> + Send + 'static) {
    tokio::spawn(async move {
        tokio::time::sleep(BEHIND_BY).await;
        work.await;
    });
}
