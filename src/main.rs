//! The `parley` binary: parse the command line, load configuration, start logging, run.

use clap::Parser;
use parley::cli::Cli;

/// mimalloc rather than the system's malloc: fewer cycles per turn and no consolidation
/// pauses on the hot path (benches/README.md). The benches use the same one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = cli.settings()?;
    parley::telemetry::init(&settings.log.filter, settings.log.format)?;
    for warning in cli.warnings() {
        tracing::warn!("{warning}");
    }
    cli.run(settings).await
}
