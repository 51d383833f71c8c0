//! Transparent huge pages off for the whole process.
//!
//! mimalloc asks the kernel for huge pages on its arena (`allow_thp`, on by default), and a
//! kernel that gives them on `madvise` (Debian's default) backs the arena with 2 MiB pages.
//! A page is then resident as long as any block in its 2 MiB lives, so what the turns freed
//! stays in the RSS. Measured with `idle_identities 100000 200 --inbound` (benches/README.md,
//! twenty-seventh session): without them the server starts 31–45 MiB smaller and keeps 70 MiB
//! less once every person is forgotten, and `chat_latency` and `webhook_throughput` show no
//! difference. mimalloc's own switch (`MIMALLOC_ALLOW_THP=0`) does the same, but it is read
//! from the environment only; this is the same call, made by the program.
// The one system call, which has no safe wrapper in `libc`.
#![allow(unsafe_code)]

/// Turns transparent huge pages off for this process (Linux; nothing elsewhere). Pages
/// already huge stay so; every page faulted in afterwards is a small one. Call it first.
pub fn turn_off() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes one integer argument and the rest as zero; it touches
    // no memory of ours.
    unsafe {
        let _ = libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_process_asks_for_no_huge_pages_once_turned_off() {
        super::turn_off();
        // SAFETY: as in `turn_off`; the answer is the flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1);
    }
}
