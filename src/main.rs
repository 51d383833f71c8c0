//! The `parley` binary: parse the command line, load configuration, start logging, run.

use clap::Parser;
use parley::cli::Cli;

/// mimalloc rather than the system's malloc: fewer cycles per turn and no consolidation
/// pauses on the hot path (benches/README.md). The benches use the same one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Before the runtime's threads and their first pages.
    parley::huge_pages::turn_off();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = cli.settings()?;
    parley::telemetry::init(&settings.log.filter, settings.log.format)?;
    for warning in cli.warnings() {
        tracing::warn!("{warning}");
    }
    cli.run(settings).await
}
