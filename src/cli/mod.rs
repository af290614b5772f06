//! The commands: the clap tree (`tree.rs`), what every command loads first
//! (`load.rs`: configuration, connection, broker), dispatch (here), and one
//! small file per command or family. Each command returns an [`Exit`];
//! printing is done in `cli/`, computing elsewhere; every failure is said
//! through `say.rs`.

/// `expr?` for a command whose outcome is an exit code on both sides: the
/// value, or return the exit code the error already is.
macro_rules! exit_on_err {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(exit) => return exit,
        }
    };
}

mod adopt;
mod archive;
pub mod args;
mod check;
mod demo;
mod gesture;
mod init;
mod load;
mod man;
mod ops;
mod reanchor;
mod record;
pub(crate) mod run;
pub mod say;
mod snapshots;
mod status;
mod token;
mod tree;
mod validate;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::broker::{self, Broker};
use crate::config::{self, connection, resolve, Config, EMBEDDED_URL};
use crate::exit::Exit;

pub use load::*;
use man::{completions, man};
use ops::{erase, set_capacity};
pub use tree::*;

/// The reference configuration, built in so that it is at hand wherever
/// the binary is (the tests validate it against a fleet).
pub const REFERENCE_CONFIG: &str = include_str!("../../config/crewlet.reference.yaml");

/// Prints an alarm on stderr in the chosen format: one line each, once.
pub fn print_alarm(cli: &Cli, a: &crate::alarms::Alarm) {
    match cli.log_format {
        LogFormat::Text => eprintln!("{}", a.line()),
        LogFormat::Json => eprintln!("{}", a.json_line(chrono::Utc::now())),
    }
}

/// `crewlet bench ARGS`: runs `crewlet-bench ARGS` from beside this
/// binary, with its exit code.
fn bench_alias(args: &BenchArgs) -> Exit {
    let bench = std::env::current_exe()
        .map(|me| me.with_file_name(format!("crewlet-bench{}", std::env::consts::EXE_SUFFIX)));
    let Ok(bench) = bench.map_err(|e| say::error(format_args!("{e}"))) else {
        return Exit::Usage;
    };
    if !bench.exists() {
        say::error(format_args!(
            "{} is not built; scripts/bench builds it and runs it (cargo build --release --features bench --bins)",
            bench.display()
        ));
        return Exit::Usage;
    }
    match std::process::Command::new(&bench).args(&args.args).status() {
        Ok(s) => match s.code() {
            Some(0) => Exit::Ok,
            Some(1) => Exit::Attention,
            Some(2) => Exit::Usage,
            _ => Exit::Unreachable,
        },
        Err(e) => {
            say::error(format_args!("cannot run {}: {e}", bench.display()));
            Exit::Unreachable
        }
    }
}

/// Runs `command` to its exit code on a multi-threaded runtime (exit 3
/// if none can be started).
pub fn block_on(command: impl std::future::Future<Output = Exit>) -> Exit {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            Exit::Unreachable
        }
    }
}

/// Runs the parsed command to its exit code, its failures said in the
/// output format asked for.
pub async fn run(cli: Cli) -> Exit {
    say::set_mode(if cli.json {
        say::Mode::Json
    } else if matches!(cli.log_format, LogFormat::Json) {
        say::Mode::LogJson
    } else {
        say::Mode::Text
    });
    let exit = dispatch(&cli).await;
    say::finish(exit);
    exit
}

async fn dispatch(cli: &Cli) -> Exit {
    match &cli.command {
        Command::Validate => validate::run(cli).await,
        Command::Retention(Retention::Init) => init::run(cli).await,
        Command::Retention(Retention::Run(args)) => run::run(cli, args).await,
        Command::Retention(Retention::Reanchor(args)) => reanchor::run(cli, args).await,
        Command::Retention(Retention::Adopt(args)) => adopt::run(cli, args).await,
        Command::Retention(Retention::Status(args)) => status::run(cli, args).await,
        Command::Retention(Retention::Snapshots) => snapshots::run(cli).await,
        Command::Retention(Retention::Ack(args)) => {
            record::ack(cli, args).await.unwrap_or_else(|e| e)
        }
        Command::Retention(Retention::Hold(args)) => {
            record::hold(cli, args).await.unwrap_or_else(|e| e)
        }
        Command::Retention(Retention::Release(args)) => {
            record::release(cli, args).await.unwrap_or_else(|e| e)
        }
        Command::Retention(Retention::Holds(args)) => {
            record::holds(cli, args).await.unwrap_or_else(|e| e)
        }
        Command::Retention(Retention::Backup(Backup::Announce(args))) => {
            record::announce(cli, args).await.unwrap_or_else(|e| e)
        }
        Command::Retention(Retention::Evict(args)) => {
            gesture::run(cli, crate::rows::GateSign::Evict, args).await
        }
        Command::Retention(Retention::Readmit(args)) => {
            gesture::run(cli, crate::rows::GateSign::Readmit, args).await
        }
        Command::Retention(Retention::Read(args)) => archive::read(cli, args).await,
        Command::Retention(Retention::Tail(args)) => archive::tail(cli, args).await,
        Command::Retention(Retention::Trim(args)) => archive::trim(cli, args).await,
        Command::Retention(Retention::SetCapacity(args)) => set_capacity(cli, args).await,
        Command::Retention(Retention::Erase(args)) => erase(cli, args).await,
        Command::Token(t) => token::run(cli, t),
        Command::Node(NodeCmd::Check(args)) => check::node(cli, args).await,
        Command::Row(RowCmd::Check(args)) => check::row(cli, args),
        Command::Retention(Retention::VerifyArchive(args)) => {
            archive::verify_archive(cli, args).await
        }
        Command::Demo(args) => demo::run(cli, args).await,
        Command::Bench(args) => bench_alias(args),
        Command::Completions(args) => completions(args.shell),
        Command::Man(args) => man(args.dir.as_deref()),
        Command::ExampleConfig => {
            print!("{REFERENCE_CONFIG}");
            Exit::Ok
        }
    }
}
