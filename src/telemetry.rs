//! Tracing set-up: one subscriber for the process, `pretty` for terminals or `json` for log
//! collectors, filtered by `PARLEY_LOG` (or `RUST_LOG` syntax in the `log` setting).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::config::LogFormat;

/// Installs the global subscriber. Logs go to stderr so that commands printing JSON on stdout
/// (`parley admin bootstrap --json`) stay machine-readable.
///
/// # Errors
/// Fails when the filter does not parse or a subscriber is already installed.
pub fn init(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    let mut filter = EnvFilter::try_new(filter)?;
    // PostgreSQL's notices ("relation … already exists, skipping" from the migrations' `IF NOT
    // EXISTS`) say nothing an operator acts on; a filter that names them still shows them.
    if !filter.to_string().contains("sqlx::postgres::notice") {
        filter = filter.add_directive("sqlx::postgres::notice=warn".parse()?);
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::NONE);
    match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))?;
    log_panics();
    Ok(())
}

/// Panics go to the log as structured lines (inside the span of the request or actor that
/// panicked), not as a raw backtrace on stderr.
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(panic = message, %location, "panicked");
    }));
}
