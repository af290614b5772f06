//! `crewlet-bench`: the performance figures (docs/performance.md), each
//! against a baseline measured in the same run. Its own binary so that the
//! production `crewlet` carries none of its code; `scripts/bench` builds
//! both and runs it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = crewlet::bench::BenchArgs::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    crewlet::cli::block_on(crewlet::bench::run(&args)).into()
}
