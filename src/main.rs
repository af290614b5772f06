//! The `crewlet` binary: parse, set up logging, run, map to an exit code.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::ExitCode;

use crewlet::cli::{self, LogFormat};

fn main() -> ExitCode {
    let cli = cli::parse_args();
    // The demo narrates on stdout; its log lines would drown that out.
    let default_level = if matches!(cli.command, cli::Command::Demo(_) | cli::Command::Bench(_)) {
        "warn"
    } else {
        "info"
    };
    init_tracing(cli.log_format, default_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(crewlet::exit::Exit::Unreachable.code());
        }
    };
    runtime.block_on(cli::run(cli)).into()
}

fn init_tracing(format: LogFormat, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
