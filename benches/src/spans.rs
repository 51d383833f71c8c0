//! Where a bench's time goes: span wall times and SQL statements, from a tracing layer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a bench's time goes: every span's wall time (creation to close, waits included),
/// summed by span name. Installed by [`SpanTimes::install`] when `PARLEY_BENCH_SPANS` is set,
/// with Parley's stage spans at debug level (`PARLEY_BENCH_SPANS` is the filter when it is not
/// `1`); left out otherwise, so that plain runs pay nothing for it.
///
/// With `sqlx::query=debug` in the filter it also counts the SQL statements run, by their
/// summary (`INSERT INTO "messages" …`): the statements per operation.
#[derive(Clone, Debug, Default)]
pub struct SpanTimes {
    totals: Arc<Mutex<BTreeMap<&'static str, SpanTotal>>>,
    statements: Arc<Mutex<BTreeMap<String, u64>>>,
    /// The spans closed since [`SpanTimes::take_operation`] last took them.
    operation: Arc<Mutex<Operation>>,
    /// Since when, and the spans of [`LONG`] or more closed since then: when each began, its
    /// name and its wall time. A stall shows as many beginning together.
    long: Arc<Mutex<LongSpans>>,
}

/// The spans of [`LONG`] or more since a reset: when each began, its name, its wall time.
#[derive(Clone, Debug, Default)]
struct LongSpans {
    since: Option<Instant>,
    spans: Vec<(Instant, &'static str, Duration)>,
}

/// The wall time from which [`SpanTimes::print`] lists a span on its own.
const LONG: Duration = Duration::from_millis(10);

/// What closed during one operation: each span name's summed wall time and the statements run.
#[derive(Clone, Debug, Default)]
pub struct Operation {
    spans: BTreeMap<&'static str, Duration>,
    statements: u64,
    /// Each span closed, with when it opened and closed: the operation's timeline.
    timeline: Vec<(&'static str, Instant, Instant)>,
}

/// The most spans an operation's timeline keeps.
const TIMELINE_SPANS: usize = 10_000;

/// Where in their operations spans open and close on average, from each operation's start:
/// what an operation waits on between its spans (a task's wake-up, a mailbox) shows as a gap.
#[derive(Debug, Default)]
pub struct Timeline {
    /// By span name: how many, and the summed offsets of their opening and closing.
    spans: BTreeMap<&'static str, (u32, Duration, Duration)>,
}

impl Timeline {
    /// Adds `operation`'s spans, as offsets from `started`; a span that opened before it is
    /// left out.
    pub fn add(&mut self, started: Instant, operation: &Operation) {
        for (name, opened, closed) in &operation.timeline {
            let Some(open) = opened.checked_duration_since(started) else {
                continue;
            };
            let entry = self.spans.entry(name).or_default();
            entry.0 += 1;
            entry.1 += open;
            entry.2 += closed.saturating_duration_since(started);
        }
    }

    /// Prints each span's mean opening and closing offset, in order of opening, with
    /// `marks` (named offsets measured outside the spans, each a mean already) among them.
    pub fn print(&self, marks: &[(&str, Duration)]) {
        let mut rows: Vec<(Duration, Option<Duration>, String)> = self
            .spans
            .iter()
            .map(|(name, (count, open, close))| {
                let count = (*count).max(1);
                (
                    *open / count,
                    Some(*close / count),
                    format!("{name} ({count})"),
                )
            })
            .collect();
        rows.extend(
            marks
                .iter()
                .map(|(name, at)| (*at, None, (*name).to_owned())),
        );
        rows.sort_by_key(|row| row.0);
        println!("{:<40} {:>12} {:>12}", "timeline (mean)", "opens", "closes");
        for (open, close, name) in rows {
            let close = close.map_or(String::new(), ms);
            println!("{name:<40} {:>12} {close:>12}", ms(open));
        }
    }
}

impl Operation {
    /// Its spans in order of opening, as offsets from `started` in ms (`name open–close`), on
    /// one line: where one slow operation lost its time, which a mean hides.
    pub fn timeline_line(&self, started: Instant) -> String {
        let mut spans: Vec<_> = self
            .timeline
            .iter()
            .filter_map(|(name, opened, closed)| {
                let open = opened.checked_duration_since(started)?;
                Some((open, closed.saturating_duration_since(started), *name))
            })
            .collect();
        spans.sort_by_key(|span| span.0);
        let at = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
        spans
            .iter()
            .map(|(open, close, name)| format!("{name} {}–{}", at(*open), at(*close)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn ms(at: Duration) -> String {
    format!("{:.3} ms", at.as_secs_f64() * 1000.0)
}

/// One operation of a run, for [`print_slowest`]: its time, the baseline's beside it (the
/// machine's weather at that moment) and what its spans were.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Its place in the run.
    pub index: usize,
    /// Its wall time.
    pub took: Duration,
    /// The baseline operation run just before it.
    pub baseline: Duration,
    /// Its spans.
    pub operation: Operation,
}

/// Prints the `count` slowest of `samples`: each one's time, its baseline's, its statements and
/// its spans, longest first. What a run's tail is made of.
pub fn print_slowest(samples: &[Sample], count: usize) {
    let mut slowest: Vec<&Sample> = samples.iter().collect();
    slowest.sort_by_key(|sample| std::cmp::Reverse(sample.took));
    println!("the {count} slowest, with their spans (wall time, longest first):");
    for sample in slowest.into_iter().take(count) {
        println!(
            "  #{:<6} {:>9.3} ms (baseline beside it {:.3} ms), {} statements",
            sample.index,
            sample.took.as_secs_f64() * 1000.0,
            sample.baseline.as_secs_f64() * 1000.0,
            sample.operation.statements
        );
        let mut spans: Vec<_> = sample.operation.spans.iter().collect();
        spans.sort_by_key(|(_, took)| std::cmp::Reverse(**took));
        let line: Vec<String> = spans
            .iter()
            .take(10)
            .map(|(name, took)| format!("{name} {:.3}", took.as_secs_f64() * 1000.0))
            .collect();
        println!("          {}", line.join(", "));
    }
}

/// One span name's closed spans: how many, their summed wall time, and the longest, which
/// tells a stage that stalls now and then from one that is slow on average.
#[derive(Clone, Copy, Debug, Default)]
struct SpanTotal {
    count: u64,
    total: Duration,
    longest: Duration,
}

/// When a span was created, kept in its extensions.
struct Opened(Instant);

impl SpanTimes {
    /// Installs the global subscriber when `PARLEY_BENCH_SPANS` is set; `None` otherwise.
    pub fn install() -> Option<Self> {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = std::env::var("PARLEY_BENCH_SPANS").ok()?;
        let filter = if filter == "1" {
            "parley=debug,parley_actors=debug,parley_persistence=debug,tower_http=off".to_owned()
        } else {
            filter
        };
        let times = Self::default();
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(filter))
            .with(times.clone())
            .try_init()
            .ok()?;
        Some(times)
    }

    /// Forgets what was recorded so far (the warm-up).
    pub fn reset(&self) {
        self.lock().clear();
        lock(&self.statements).clear();
        self.take_operation();
        *lock(&self.long) = LongSpans {
            since: Some(Instant::now()),
            spans: Vec::new(),
        };
    }

    /// Answers the spans closed and statements run since the last call, and forgets them: what
    /// one operation run alone was made of (the bench takes it before and after each one).
    pub fn take_operation(&self) -> Operation {
        std::mem::take(&mut *lock(&self.operation))
    }

    /// Prints each span's count and mean wall time per `per` operations and its longest
    /// single span, in order of total wall time, largest first.
    pub fn print(&self, per: usize) {
        let totals = self.lock().clone();
        let mut rows: Vec<_> = totals.into_iter().collect();
        rows.sort_by_key(|(_, span)| std::cmp::Reverse(span.total));
        println!(
            "{:<36} {:>10} {:>14} {:>14}",
            "span (wall time)", "per op", "mean per op", "longest"
        );
        for (name, span) in rows {
            let per = per.max(1) as f64;
            println!(
                "{name:<36} {:>10.2} {:>11.3} ms {:>11.3} ms",
                span.count as f64 / per,
                span.total.as_secs_f64() * 1000.0 / per,
                span.longest.as_secs_f64() * 1000.0
            );
        }
        let statements = lock(&self.statements).clone();
        if statements.is_empty() {
            return;
        }
        let mut rows: Vec<_> = statements.into_iter().collect();
        rows.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
        let total: u64 = rows.iter().map(|(_, count)| count).sum();
        println!("{:<72} {:>10}", "SQL statement (within span)", "per op");
        for (summary, count) in rows {
            println!("{summary:<72} {:>10.2}", count as f64 / per.max(1) as f64);
        }
        println!(
            "{:<72} {:>10.2}",
            "all statements",
            total as f64 / per.max(1) as f64
        );
    }

    /// Prints the spans of [`LONG`] or more since the last reset, by when they began (the
    /// first 400): what a stall held up, and what began it.
    pub fn print_long(&self) {
        let LongSpans {
            since: Some(since),
            spans: mut long,
        } = lock(&self.long).clone()
        else {
            return;
        };
        long.retain(|(opened, _, _)| *opened >= since);
        long.sort_by_key(|(opened, _, _)| *opened);
        println!(
            "spans of {} ms or more, by when they began:",
            LONG.as_millis()
        );
        for (opened, name, took) in long.into_iter().take(400) {
            println!(
                "  {:>8.3} s  {name:<28} {:>8.2} ms",
                opened.duration_since(since).as_secs_f64(),
                took.as_secs_f64() * 1000.0
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, SpanTotal>> {
        lock(&self.totals)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes the `summary` field of sqlx's statement log events.
#[derive(Default)]
struct Summary(Option<String>);

impl tracing::field::Visit for Summary {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "summary" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanTimes
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        _attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Opened(Instant::now()));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut summary = Summary::default();
        event.record(&mut summary);
        if let Some(summary) = summary.0 {
            let within = ctx.event_span(event).map_or("-", |span| span.name());
            let key = format!("{within:<16} {summary}");
            *lock(&self.statements).entry(key).or_default() += 1;
            lock(&self.operation).statements += 1;
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(elapsed) = span.extensions().get::<Opened>().map(|o| o.0.elapsed()) else {
            return;
        };
        {
            let mut operation = lock(&self.operation);
            *operation.spans.entry(span.name()).or_default() += elapsed;
            let closed = Instant::now();
            // Bounded, for a bench that never takes its operations.
            if operation.timeline.len() < TIMELINE_SPANS {
                operation
                    .timeline
                    .push((span.name(), closed - elapsed, closed));
            }
        }
        if elapsed >= LONG {
            let opened = Instant::now() - elapsed;
            lock(&self.long).spans.push((opened, span.name(), elapsed));
        }
        let mut totals = self.lock();
        let entry = totals.entry(span.name()).or_default();
        entry.count += 1;
        entry.total += elapsed;
        entry.longest = entry.longest.max(elapsed);
    }
}
