//! The `parley` binary: parse the command line, load configuration, start logging, run.

use clap::Parser;
use parley::allocator::{self, Allocator};
use parley::cli::Cli;

/// mimalloc, and a runtime whose idle workers give back what they freed (`allocator`).
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

fn main() -> anyhow::Result<()> {
    allocator::runtime()?.block_on(run())
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
