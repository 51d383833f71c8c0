//! Handing the write-ahead log's new pages to the disk as they are written, so that a
//! checkpoint's flush of the log finds little left to write.
//!
//! With `synchronous=NORMAL` a commit writes its pages into the log file without flushing it;
//! the checkpoint ([`super::Checkpoints`], every 100 ms) flushes the log before it copies it.
//! A chat turn writes 13 pages of log (about 53 KB), so at `chat_latency`'s pace every
//! checkpoint flushed about 5 MB at once, and the turns that met such a flush lost 0.5–1 ms:
//! `chat_latency 1000 20` added p99 1.0–1.6 ms with the checkpoints, 0.6–1.0 with none in the
//! run. A flush of a few hundred kilobytes costs nothing measurable (benches/README.md, the
//! forty-fourth to forty-sixth sessions).
//!
//! So a thread of its own asks the kernel, every [`PERIOD`] while the log is being written, to
//! start writing out its dirty pages (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`: it starts
//! the writes, waits for none and flushes no device cache); a log nobody writes it looks at less
//! and less often, up to every [`QUIET_PERIOD`]. This is PostgreSQL's `wal_writer_flush_after` and
//! `checkpoint_flush_after`, for the same reason. It changes nothing SQLite relies on: the kernel
//! may write those pages whenever it likes, and only the checkpoint's own flush makes the log
//! durable, as before.
//!
//! Linux only (the call is Linux's); elsewhere [`WriteBehind::start`] starts nothing.

// One call into the C library: `sync_file_range`, which neither std nor rustix wraps.
#![allow(unsafe_code)]

use std::fs::{File, Metadata};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use sea_orm::{DatabaseConnection, DbBackend};

/// How often the log's new pages are handed to the disk: at `chat_latency`'s 48 MB of log a
/// second, about 500 KB each time. Every 2, 5, 20 ms did as well; every 50 ms less well.
const PERIOD: Duration = Duration::from_millis(10);

/// The longest wait between two looks at a log that was not written: the checkpoints' default
/// period, so the first checkpoint after a quiet spell flushes at most what came in one wait.
/// An idle server's thread woke every 10 ms and took about 1 % of a core (a debug build).
const QUIET_PERIOD: Duration = Duration::from_millis(100);

/// The thread handing one SQLite database's log to the disk (see the module's notes); it stops
/// when [`WriteBehind::stop`] is called or the value is dropped.
#[derive(Debug)]
pub struct WriteBehind {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    /// How many times it has handed the log's pages to the disk.
    passes: Arc<AtomicU64>,
}

impl WriteBehind {
    /// Starts the thread for `db`'s log; `None` on PostgreSQL, for a database with no file (an
    /// in-memory one), off Linux, or when the thread cannot be started (the checkpoints then
    /// flush the log alone, as before).
    pub fn start(db: &DatabaseConnection) -> Option<Self> {
        if db.get_database_backend() != DbBackend::Sqlite || !cfg!(target_os = "linux") {
            return None;
        }
        let database = db
            .get_sqlite_connection_pool()
            .connect_options()
            .get_filename()
            .to_path_buf();
        // An in-memory database (named `:memory:` or `file:sqlx-in-memory-…` by sqlx) has no
        // file, nor a log.
        if !database.is_file() {
            return None;
        }
        let mut log = database.into_os_string();
        log.push("-wal");
        let log = PathBuf::from(log);
        let (stop, stopped) = mpsc::channel();
        let passes = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&passes);
        let thread = std::thread::Builder::new()
            .name("parley-log-writeback".into())
            .spawn(move || {
                let mut log = Log::new(log);
                let mut wait = PERIOD;
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                    wait = if log.write_back() {
                        counted.fetch_add(1, Ordering::Relaxed);
                        PERIOD
                    } else {
                        (wait * 2).min(QUIET_PERIOD)
                    };
                }
            });
        match thread {
            Ok(thread) => Some(Self {
                stop,
                thread,
                passes,
            }),
            Err(error) => {
                tracing::warn!(%error, "could not start the log's write-back thread");
                None
            }
        }
    }

    /// Stops the thread and answers how many times it handed the log's pages to the disk.
    pub fn stop(self) -> u64 {
        drop(self.stop);
        if self.thread.join().is_err() {
            tracing::warn!("the log's write-back thread panicked");
        }
        self.passes.load(Ordering::Relaxed)
    }
}

/// The log file, opened once it exists, and opened again once SQLite has deleted it (the last
/// connection to close deletes it; a new one makes another).
struct Log {
    path: PathBuf,
    file: Option<File>,
    /// When the log was last written, as of the last pass that handed it over.
    written: Option<SystemTime>,
}

impl Log {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            written: None,
        }
    }

    /// Starts writing out the log's dirty pages if it was written since the last pass; answers
    /// whether it did.
    ///
    /// A file's time moves in the kernel's ticks (a few milliseconds), so a write in the same
    /// tick as the last one seen waits for the next write, or for the checkpoint's flush.
    fn write_back(&mut self) -> bool {
        let mut seen = self.file.as_ref().and_then(|f| f.metadata().ok());
        if seen.as_ref().is_none_or(unlinked) {
            self.file = File::open(&self.path).ok();
            self.written = None;
            seen = self.file.as_ref().and_then(|f| f.metadata().ok());
        }
        let (Some(file), Some(seen)) = (&self.file, seen) else {
            return false;
        };
        let written = seen.modified().ok();
        if written.is_some() && written == self.written {
            return false;
        }
        self.written = written;
        match start_writing(file) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(%error, "the log's pages could not be handed to the disk");
                false
            }
        }
    }
}

/// Whether the file has been deleted since it was opened.
#[cfg(unix)]
fn unlinked(metadata: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    metadata.nlink() == 0
}

#[cfg(not(unix))]
fn unlinked(_: &Metadata) -> bool {
    false
}

/// Has the kernel start writing out every dirty page of `file`, without waiting for them.
#[cfg(target_os = "linux")]
fn start_writing(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: a plain system call on a descriptor `file` keeps open for the call's length; it
    // touches no memory of ours.
    let code =
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writing(_: &File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::Instant;

    use super::*;

    #[tokio::test]
    async fn the_log_is_handed_to_the_disk_each_time_it_is_written_until_stopped() {
        let (_dir, db) = crate::test_support::migrated().await;
        crate::test_support::fill_log(&db, 1).await;
        let started = WriteBehind::start(&db).expect("SQLite's write-back thread");
        let passes = || started.passes.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while passes() < 1 && Instant::now() < deadline {
            tokio::time::sleep(PERIOD).await;
        }
        crate::test_support::fill_log(&db, 1).await;
        while passes() < 2 && Instant::now() < deadline {
            tokio::time::sleep(PERIOD).await;
        }
        let passes = started.stop();
        assert!(
            passes >= 2,
            "the log was handed over {passes} times for two writes"
        );
    }

    #[test]
    fn a_log_not_made_yet_is_skipped_an_unchanged_one_too_and_a_deleted_one_opened_again() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("parley.db-wal");
        let at = |seconds| SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
        let write = |body: &[u8], seconds| {
            std::fs::write(&path, body).expect("write");
            File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(at(seconds)))
                .expect("time");
        };
        let mut log = Log::new(path.clone());
        assert!(!log.write_back(), "no log yet");
        write(b"first", 1);
        assert!(log.write_back(), "the log made since");
        assert!(!log.write_back(), "nothing written since");
        write(b"more", 2);
        assert!(log.write_back(), "written since");
        std::fs::remove_file(&path).expect("deleted");
        write(b"second", 2);
        assert!(log.write_back(), "the new log");
        let opened = log.file.as_ref().and_then(|f| f.metadata().ok());
        assert!(
            !opened.as_ref().is_none_or(unlinked),
            "the new log is the one held open"
        );
    }

    #[tokio::test]
    async fn nothing_starts_for_an_in_memory_database() {
        let db = crate::connect("sqlite::memory:").await.expect("memory");
        assert!(WriteBehind::start(&db).is_none());
    }
}
