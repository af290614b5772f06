//! The `crewlet` binary: parse, set up logging, run, map to an exit code.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::ExitCode;

use crewlet::cli::{self, LogFormat};

fn main() -> ExitCode {
    keep_large_buffers_apart();
    let cli = cli::parse_args();
    // A closed stdout (`crewlet … | head`) ends the command quietly, as it
    // does any Unix tool, instead of a panic on the next write. Not for the
    // demo, which must stop the broker it started.
    #[cfg(unix)]
    if !matches!(cli.command, cli::Command::Demo(_)) {
        // SAFETY: restoring the default disposition of one signal before
        // any thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // A one-shot command logs nothing below WARN unless asked (-v), not the
    // client library's connection lines either; the running sidecar logs
    // what it does. RUST_LOG overrides both.
    let long_running = matches!(
        &cli.command,
        cli::Command::Retention(cli::Retention::Run(args)) if !args.once
    );
    let default_level = match (long_running, cli.verbose) {
        (_, 2..) => "debug",
        (true, _) | (false, 1) => "info",
        (false, 0) => "warn",
    };
    init_tracing(cli.log_format, default_level);
    cli::block_on(cli::run(cli)).into()
}

/// Large buffers (a floors row at 10,000 nodes is about a megabyte, and
/// so are the reads it travels through) are each given their own mapping
/// and handed back to the system when freed. glibc's default raises that
/// threshold after the first such buffer is freed, and from then on they
/// come from the heap, which keeps the high-water mark of every tick
/// resident: the sidecar's peak RSS was a fifth higher for it
/// (docs/performance.md, Memory). An operator who
/// sets `MALLOC_MMAP_THRESHOLD_` keeps their own.
fn keep_large_buffers_apart() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: a malloc setting, made before any thread is started.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}

fn init_tracing(format: LogFormat, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let directives =
        crewlet::broker::log_directives(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{default_level},{}",
            crewlet::broker::CLIENT_LOG_FILTER
        ))
    });
    // Colour only for a person at a terminal (and never with NO_COLOR):
    // escape codes in a file or a pipe are noise.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        // Each event's fields at the top level, beside timestamp and
        // level: the shape every alarm line has, whichever command wrote
        // it (docs/runbook.md, Alarms).
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
