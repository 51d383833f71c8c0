//! The pace of one WhatsApp number: its throughput (Meta's default is 80 messages per second,
//! 1,000 after the automatic upgrade; received messages count in it as sent ones do) and the
//! spacing per recipient (Meta's pair limit, about one message per 6 s with bursts). Shared by
//! every send job of the channel, so the limits hold across conversations, flows and tasks.
//! Campaign sends take the number's room only while no direct message waits for it ([`Lane`]).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use tokio::sync::Notify;
use tokio::time::Instant;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::{ChannelSettings, Lane};

/// Recipients the pair limiter holds before it first forgets those whose limit has refilled.
const PAIRS_KEPT: usize = 1_024;

/// The limiters of one number; cheap to clone.
#[derive(Clone)]
pub(super) struct Limits {
    number: Arc<DefaultDirectRateLimiter>,
    /// One state per recipient written to lately. A recipient whose limit has refilled has
    /// nothing to remember and is forgotten once the map doubles since the last sweep, so a
    /// channel's memory follows the people it writes to now, not every person it ever wrote to.
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
    /// The pair limiter's size after its last sweep.
    pairs_after_sweep: Arc<AtomicUsize>,
    /// Until when the whole number waits after Meta said it is over its throughput (130429).
    slowed_until: Arc<Mutex<Option<Instant>>>,
    /// Messages received when the number had no room left: the next sends wait for them too.
    owed: Arc<AtomicU32>,
    /// The direct messages waiting for the number's room, ahead of campaign sends.
    ahead: Arc<Ahead>,
}

impl Limits {
    /// Limiters for `settings`; zero values count as one.
    pub(super) fn new(settings: &ChannelSettings) -> Self {
        let per_second = NonZeroU32::new(settings.per_second).unwrap_or(NonZeroU32::MIN);
        let pair_burst = NonZeroU32::new(settings.pair_burst).unwrap_or(NonZeroU32::MIN);
        let pair_quota = Quota::with_period(settings.pair_period.max(Duration::from_millis(1)))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(pair_burst);
        Self {
            number: Arc::new(RateLimiter::direct(number_quota(per_second))),
            pairs: Arc::new(RateLimiter::keyed(pair_quota)),
            pairs_after_sweep: Arc::new(AtomicUsize::new(0)),
            slowed_until: Arc::new(Mutex::new(None)),
            owed: Arc::new(AtomicU32::new(0)),
            ahead: Arc::new(Ahead::default()),
        }
    }

    /// A person's message reached the number: Meta counts it in the number's throughput, so it
    /// takes the room of one send (now, or from the next sends when there is none left).
    pub(super) fn received(&self) {
        if self.number.check().is_err() {
            self.owed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until one more message may go to `recipient`, and one more from the number: for
    /// a campaign's send, with no direct message waiting.
    pub(super) async fn until_ready(&self, recipient: &String, lane: Lane) {
        let slowed = *self
            .slowed_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(until) = slowed {
            tokio::time::sleep_until(until).await;
        }
        self.pairs.until_key_ready(recipient).await;
        self.forget_refilled_pairs();
        self.number_room(lane).await;
    }

    /// Takes one message's room of the number. A direct message takes the next room there
    /// is; a campaign's send checks that none waits before each try, so at the number's full
    /// rate a person's answer waits for a room or two, not behind every campaign send waiting
    /// (each of which governor would wake at once for the same room). Before either, a room
    /// goes to a received message that found none: Meta counted it when it came, and paid
    /// only by the senders that came after it (behind every one already waiting) it was paid
    /// a second or more late, past the window Meta counted it in (130429 at a full number).
    async fn number_room(&self, lane: Lane) {
        let _waiting = (lane == Lane::Direct).then(|| self.ahead.enter());
        loop {
            match lane {
                Lane::Direct => self.number.until_ready().await,
                Lane::Campaign => self.campaign_room().await,
            }
            let owed = self
                .owed
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            if owed.is_err() {
                return;
            }
        }
    }

    /// Takes a room of the number for a campaign's send, while no direct message waits.
    async fn campaign_room(&self) {
        loop {
            self.ahead.none_waiting().await;
            match self.number.check() {
                Ok(()) => return,
                Err(not_until) => {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    futures_timer::Delay::new(wait).await;
                }
            }
        }
    }

    /// Forgets recipients whose pair limit has refilled, once the map has doubled since the
    /// last sweep (and holds more than `PAIRS_KEPT`): each sweep costs the map's size, and the
    /// doubling spreads that over as many sends.
    fn forget_refilled_pairs(&self) {
        let kept = self.pairs_after_sweep.load(Ordering::Relaxed);
        if self.pairs.len() > PAIRS_KEPT.max(kept.saturating_mul(2)) {
            self.pairs.retain_recent();
            self.pairs.shrink_to_fit();
            self.pairs_after_sweep
                .store(self.pairs.len(), Ordering::Relaxed);
        }
    }

    /// Meta said the number is over its throughput: every sender of the number waits `wait`.
    pub(super) fn slow_down(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut slowed = self
            .slowed_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slowed.is_none_or(|current| current < until) {
            *slowed = Some(until);
        }
    }
}

/// The direct messages waiting for a number's room; campaign sends wait until none does.
#[derive(Debug, Default)]
struct Ahead {
    waiting: AtomicUsize,
    /// Told when the last one waiting took its room (or stopped waiting).
    none_left: Notify,
}

impl Ahead {
    /// Counts one more direct message waiting, until the answer is dropped.
    fn enter(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(self)
    }

    /// Returns once no direct message waits.
    async fn none_waiting(&self) {
        loop {
            let none_left = self.none_left.notified();
            tokio::pin!(none_left);
            // Listening before the count is read: a last one leaving in between is heard.
            none_left.as_mut().enable();
            if self.waiting.load(Ordering::Acquire) == 0 {
                return;
            }
            none_left.await;
        }
    }
}

/// A direct message waiting for its number's room (dropped: it took it, or its send was
/// dropped).
struct Waiting<'a>(&'a Ahead);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

/// A number's messages evenly spaced, with a burst of a hundredth of a second's worth (one at
/// least), so that in any one second no more than `per_second` go out: Meta counts messages per
/// second, and a burst of a full second (what a plain per-second quota allows) plus a second's
/// pace after it would be twice the rate within one of Meta's seconds. The pace is set so that
/// the burst and one second's pace add up to 1% under `per_second`; the margin absorbs jitter on
/// the way.
///
/// The small burst is what lets a fast number reach its rate: the timer wakes a waiting send on
/// the millisecond, so at 1,000 messages a second (one every 1.01 ms) a limiter without any burst
/// lost the time each wake-up came late, and with it about half the number's throughput.
fn number_quota(per_second: NonZeroU32) -> Quota {
    let burst = (per_second.get() / 100).max(1);
    let paced = per_second.get() - burst + 1;
    let spacing = Duration::from_secs(1).mul_f64(1.01) / paced;
    Quota::with_period(spacing.max(Duration::from_micros(1)))
        .unwrap_or_else(|| Quota::per_second(per_second))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits of a number that is never the bottleneck, one message per recipient per `period`.
    fn one_per_recipient_every(period: Duration) -> Limits {
        Limits::new(&ChannelSettings {
            per_second: 1_000_000,
            pair_burst: 1,
            pair_period: period,
            max_retries: 0,
            retry_backoff: Duration::from_millis(1),
            public_url: None,
        })
    }

    #[tokio::test]
    async fn recipients_whose_pair_limit_refilled_are_forgotten() {
        let limits = one_per_recipient_every(Duration::from_millis(1));
        for round in 0..4 {
            for person in 0..3_000 {
                limits
                    .until_ready(&format!("{round}-{person}"), Lane::Direct)
                    .await;
            }
            // Every limit refills in a millisecond.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // 12,000 recipients were written to; the limiter holds at most about two rounds'.
        let held = limits.pairs.len();
        assert!(held <= 6_000, "{held} recipients held");
    }

    #[test]
    fn a_recipient_within_its_limit_is_not_forgotten() {
        let limits = one_per_recipient_every(Duration::from_secs(60));
        for person in 0..3_000 {
            assert!(limits.pairs.check_key(&format!("{person}")).is_ok());
            limits.forget_refilled_pairs();
        }
        // None has refilled: all are held, and each one's next message must wait.
        assert_eq!(limits.pairs.len(), 3_000);
        assert!(limits.pairs.check_key(&"0".to_owned()).is_err());
    }

    /// The most messages `quota` lets through in one second: its burst, then one per interval.
    fn most_in_one_second(quota: Quota) -> u32 {
        let paced = Duration::from_secs(1).as_nanos() / quota.replenish_interval().as_nanos();
        quota.burst_size().get() + u32::try_from(paced).unwrap_or(u32::MAX)
    }

    #[test]
    fn a_numbers_messages_never_exceed_its_rate_in_any_second() {
        for per_second in [1, 20, 80, 250, 1_000, 10_000] {
            let quota = number_quota(NonZeroU32::new(per_second).expect("non-zero"));
            let most = most_in_one_second(quota);
            assert!(most <= per_second, "{per_second}/s: {most} in one second");
            // And it comes within 2% of the rate (the burst counts once, not every second).
            let sustained = 1.0 / quota.replenish_interval().as_secs_f64();
            assert!(
                sustained >= 0.97 * f64::from(per_second) - 1.0,
                "{per_second}/s: {sustained:.1} sustained"
            );
        }
        assert_eq!(
            number_quota(NonZeroU32::new(80).expect("80"))
                .burst_size()
                .get(),
            1
        );
        assert_eq!(
            number_quota(NonZeroU32::new(1_000).expect("1000"))
                .burst_size()
                .get(),
            10
        );
    }

    /// Limits of a number sending `per_second` messages, any number to one recipient.
    fn a_number_at(per_second: u32) -> Limits {
        Limits::new(&ChannelSettings {
            per_second,
            pair_burst: 1_000,
            pair_period: Duration::from_millis(1),
            max_retries: 0,
            retry_backoff: Duration::from_millis(1),
            public_url: None,
        })
    }

    /// What went out, in order.
    type Log = Arc<Mutex<Vec<String>>>;

    /// Starts `sends` campaign sends (`c0`, `c1`, …) on `limits`, each logged as it goes; answers
    /// once three went, the others waiting for the number.
    async fn campaign_under_way(
        limits: &Limits,
        sends: usize,
    ) -> (Log, Vec<tokio::task::JoinHandle<()>>) {
        let log: Log = Arc::default();
        let campaign = (0..sends)
            .map(|n| {
                let (limits, log) = (limits.clone(), log.clone());
                tokio::spawn(async move {
                    limits.until_ready(&format!("c{n}"), Lane::Campaign).await;
                    log.lock().expect("log").push(format!("c{n}"));
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.lock().expect("log").len() < 3 {
            assert!(Instant::now() < deadline, "the campaign did not start");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (log, campaign)
    }

    #[tokio::test]
    async fn a_direct_message_takes_the_next_room_ahead_of_every_campaign_send_waiting() {
        let limits = a_number_at(100);
        let (log, campaign) = campaign_under_way(&limits, 30).await;
        // A task among the others (the test's own task is woken first of all).
        let direct = tokio::spawn({
            let (limits, log) = (limits.clone(), log.clone());
            async move {
                let before = log.lock().expect("log").len();
                limits.until_ready(&"person".to_owned(), Lane::Direct).await;
                log.lock().expect("log").push("person".to_owned());
                before
            }
        });
        let before = direct.await.expect("direct send");
        for send in campaign {
            send.await.expect("campaign send");
        }
        let log = log.lock().expect("log");
        let at = log.iter().position(|sent| sent == "person");
        // Without the lanes it went last, behind every campaign send that waited before it.
        assert_eq!(at, Some(before), "{log:?}");
        assert_eq!(log.len(), 31);
    }

    #[tokio::test]
    async fn a_direct_message_that_stops_waiting_holds_up_no_campaign() {
        // One message a second: the room stays used up until the direct send was polled,
        // however long a loaded machine takes to get there (at 100 a second it came back
        // within the 10 ms and the direct send went at once).
        let limits = a_number_at(1);
        // The number's room is used up: the next message waits about a second.
        while limits.number.check().is_ok() {}
        let (person, someone) = ("person".to_owned(), "someone".to_owned());
        let mut direct = Box::pin(limits.until_ready(&person, Lane::Direct));
        // Polled once: it waits, counted ahead of campaigns.
        tokio::select! {
            biased;
            () = &mut direct => panic!("the number had no room"),
            () = std::future::ready(()) => {}
        }
        assert_eq!(limits.ahead.waiting.load(Ordering::Acquire), 1);
        drop(direct);
        let campaign = limits.until_ready(&someone, Lane::Campaign);
        tokio::time::timeout(Duration::from_secs(10), campaign)
            .await
            .expect("the campaign send went once the number had room");
    }

    #[tokio::test]
    async fn a_received_message_without_room_takes_the_next_rooms_before_waiting_sends() {
        let limits = a_number_at(100);
        let (log, campaign) = campaign_under_way(&limits, 20).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        // Three messages come while every room is taken: they are owed.
        for _ in 0..3 {
            limits.received();
        }
        let before = log.lock().expect("log").len();
        while limits.owed.load(Ordering::Relaxed) > 0 {
            assert!(
                Instant::now() < deadline,
                "the received messages were never paid"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Paid by the next three rooms (one send may have taken its room as they came).
        let sent = log.lock().expect("log").len() - before;
        assert!(
            sent <= 1,
            "{sent} sends went before the received messages' rooms"
        );
        for send in campaign {
            send.await.expect("campaign send");
        }
    }

    #[tokio::test]
    async fn a_received_message_takes_the_room_of_a_send() {
        let limits = a_number_at(100);
        // More received than the burst holds: the rest is owed by the next sends.
        for _ in 0..5 {
            limits.received();
        }
        assert_eq!(limits.owed.load(Ordering::Relaxed), 4);
        limits
            .until_ready(&"someone".to_owned(), Lane::Direct)
            .await;
        // The send took the four owed messages' room before its own: none owed, none left.
        assert_eq!(limits.owed.load(Ordering::Relaxed), 0);
        assert!(limits.number.check().is_err());
    }
}
