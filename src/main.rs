//! The `parley` binary: parse the command line, load configuration, start logging, run.

use clap::Parser;
use parley::cli::Cli;

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
