//! The command tree (clap derive) and one small function per command. Each
//! command returns an [`Exit`]; printing is done here, computing elsewhere.

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

mod archive;
pub mod args;
mod demo;
mod gesture;
mod init;
mod reanchor;
mod record;
pub(crate) mod run;
pub mod say;
mod snapshots;
mod status;
mod token;
mod validate;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::broker::{self, Broker};
use crate::config::{self, connection, resolve, Config, EMBEDDED_URL};
use crate::exit::Exit;

/// The retention coordinator for NATS JetStream.
///
/// Computes how far each configured stream may be trimmed without deleting a
/// record that a node, a hold, a backup, the snapshot quorum or the feed
/// still needs; publishes that floor; and only then purges.
#[derive(Debug, Parser)]
#[command(name = "crewlet", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file [default: $CREWLET_CONFIG, else ./crewlet.yaml,
    /// else /etc/crewlet/crewlet.yaml].
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Broker URL, or a comma-separated list of them, as the nats CLI's
    /// -s/--server. Flags come before $NATS_* variables, which come before
    /// a nats context, which comes before the configuration file.
    #[arg(
        long,
        short = 's',
        visible_alias = "server",
        global = true,
        value_name = "URL[,URL…]"
    )]
    pub nats_url: Option<String>,

    /// A creds file (JWT and seed) [env: NATS_CREDS].
    #[arg(long, global = true, value_name = "FILE", help_heading = "Connection")]
    pub creds: Option<PathBuf>,

    /// A file holding an nkey seed [env: NATS_NKEY].
    #[arg(long, global = true, value_name = "FILE", help_heading = "Connection")]
    pub nkey: Option<PathBuf>,

    /// User name [env: NATS_USER].
    #[arg(long, global = true, value_name = "USER", help_heading = "Connection")]
    pub user: Option<String>,

    /// Password, with --user [env: NATS_PASSWORD].
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        help_heading = "Connection"
    )]
    pub password: Option<String>,

    /// Token [env: NATS_TOKEN].
    #[arg(long, global = true, value_name = "TOKEN", help_heading = "Connection")]
    pub token: Option<String>,

    /// TLS client certificate.
    #[arg(long, global = true, value_name = "FILE", help_heading = "Connection")]
    pub tlscert: Option<PathBuf>,

    /// TLS client certificate's key.
    #[arg(long, global = true, value_name = "FILE", help_heading = "Connection")]
    pub tlskey: Option<PathBuf>,

    /// CA bundle that signs the server's certificate.
    #[arg(long, global = true, value_name = "FILE", help_heading = "Connection")]
    pub tlsca: Option<PathBuf>,

    /// A nats CLI context (~/.config/nats/context/NAME.json) [env:
    /// NATS_CONTEXT]; without either, the nats CLI's selected context when
    /// the configuration file has no nats: section.
    #[arg(long, global = true, value_name = "NAME", help_heading = "Connection")]
    pub context: Option<String>,

    /// Print the report as one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Log line format on stderr; with json every stderr line is one JSON
    /// object, alarms included.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// More log lines on stderr: -v info, -vv debug (one-shot commands log
    /// nothing below WARN by default; RUST_LOG overrides either).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the configuration file and, when the broker is reachable, each
    /// domain's stream settings. Prints every error and warning with its
    /// line; exits 0 (warnings only), 2 (an error) or 3 (valid file,
    /// broker unreachable).
    Validate,
    /// Retention commands: the sidecar, its status, and the operator's
    /// gestures.
    #[command(subcommand)]
    Retention(Retention),
    /// A guided tour on an embedded broker: three simulated nodes apply a
    /// log, the trim advances the floor, a stalled node pins it, and it
    /// moves again once the node catches up. Exercises the real sidecar.
    Demo(DemoArgs),
    /// Performance figures against same-run baselines (docs/performance.md):
    /// runs `crewlet-bench` from beside this binary with these arguments.
    /// The bench is its own binary, so that this one carries none of its
    /// code: `scripts/bench` builds both and runs it.
    Bench(BenchArgs),
    /// Print a shell completion script: `crewlet completions bash >
    /// /etc/bash_completion.d/crewlet`, `… zsh > "${fpath[1]}/_crewlet"`,
    /// `… fish > ~/.config/fish/completions/crewlet.fish`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) of crewlet, or with --dir write one page
    /// per command there: `crewlet man | man -l -`.
    Man(ManArgs),
    /// Print the annotated reference configuration (every field with its
    /// default) to start a crewlet.yaml from: `crewlet example-config >
    /// crewlet.yaml`.
    ExampleConfig,
    /// The HTTP surface's bearer tokens (http.tokens_file): add, list, revoke.
    #[command(subcommand)]
    Token(Token),
}

/// The reference configuration, built in so that it is at hand wherever
/// the binary is (the tests validate it against a fleet).
pub const REFERENCE_CONFIG: &str = include_str!("../../config/crewlet.reference.yaml");

/// `crewlet completions` options.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells `crewlet completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// `crewlet man` options.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write crewlet.1 and a page per command (crewlet-retention-status.1,
    /// …) into this directory instead of printing crewlet.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `crewlet demo` options.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// How many ticks to run.
    #[arg(long, default_value_t = 18)]
    pub ticks: u32,
    /// Keep the demo broker's store here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// `crewlet retention run` options.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Claim the duty, run one tick, release, and exit with the status exit
    /// code (0 no alarm, 1 an alarm, 2 configuration, 3 broker unreachable);
    /// with --json, print the tick's status JSON. Does not wait for the
    /// broker.
    #[arg(long)]
    pub once: bool,
    /// Stop after this many ticks (for the memory benchmark).
    #[arg(long, hide = true)]
    pub ticks: Option<u32>,
}

/// `crewlet bench` arguments: passed to `crewlet-bench` as they are
/// (`--samples N`, `--only tick,http`; `crewlet-bench --help` lists them).
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

/// `crewlet retention reanchor` options.
#[derive(Debug, clap::Args)]
pub struct ReanchorArgs {
    /// The stream (or domain name) to reanchor.
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The live stream's `created`, exactly as printed. Without it the
    /// command prints the live value and the case, and refuses.
    #[arg(long, value_name = "CREATED")]
    pub confirm: Option<String>,
    /// Who is doing this [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Retention {
    /// Create every KV bucket of the contract with its settings. Idempotent:
    /// an existing bucket is left as it is, and each setting that differs is
    /// reported as a warning. Exits 0 once every bucket exists.
    Init,
    /// The sidecar: claims the trim duty, ticks every retention.tick
    /// (read, compute, publish, purge), evaluates alarms. Started before
    /// its broker, it waits for it. SIGTERM/SIGINT finish the running tick,
    /// release the duty and exit 0.
    Run(RunArgs),
    /// Adopt a recreated or restored stream: opens the next generation of
    /// its floor, keyed to the live stream's `created`.
    Reanchor(ReanchorArgs),
    /// The retention answer for every domain, computed afresh, beside the
    /// published floor; alarms on stderr. Exit 0 no alarm, 1 an alarm, 2 bad
    /// configuration, 3 broker unreachable. For cron.
    Status(StatusArgs),
    /// Per node and stream: snapshot artefact position, age, generation,
    /// verified, and the reason a node cannot take a new one.
    Snapshots,
    /// Record an operator's acknowledgement that a copy of the log up to a
    /// position is safe (for backup_floor: operator).
    Ack(AckArgs),
    /// Place a live pin: the trim keeps every record from -seq on until the
    /// hold expires or is released. Prints the hold id.
    Hold(HoldArgs),
    /// Lift a hold.
    Release(ReleaseArgs),
    /// List every hold, live or expired: stream, id, seq, owner, kind,
    /// expiry (on the broker's clock), reason.
    Holds(HoldsArgs),
    /// Backup manifests, for backup jobs written in shell.
    #[command(subcommand)]
    Backup(Backup),
    /// Evict a node that is not coming back: one gate record on every log
    /// with a gate_subject; the trim stops counting it fence_window after the
    /// record lands. Exit 0 when every log applied or pending, 1 refused or
    /// unfinished (the exact finishing command is printed), 2 bad input.
    Evict(GestureArgs),
    /// Readmit an evicted node once it has caught up: refused below the
    /// floor on any log; otherwise a gate record on every log.
    Readmit(GestureArgs),
    /// Records from a sequence on, in order: those below the live log's
    /// first sequence from the archive, the rest from the log. Exit 1
    /// `trimmed` for a start below everything readable (--clamp starts at
    /// the first readable record instead), 2 bad input.
    Read(ReadArgs),
    /// Ask for a log to be trimmed up to a point: raises its requested
    /// watermark (which only moves forward). The next tick trims to it,
    /// younger than min_age if need be, but never past a node, a hold, a
    /// backup, a snapshot, the feed or the archive; it prints where that
    /// is now and what bounds it.
    Trim(TrimArgs),
    /// Where a log ends: the next sequence and the newest record's broker
    /// time in milliseconds (0 when every record has been trimmed away).
    Tail(TailArgs),
    /// Change a log's ceiling (max_bytes, nothing else). Refused, with the
    /// numbers and nothing written, under 1 GiB (below_minimum), when the
    /// new soft ceiling is at or below what the log holds (below_usage,
    /// naming the least target that would do), past what the account's
    /// JetStream storage limit has left (account_limit), or lower on a
    /// discard: old log (discard_old). Then updated and read back. Exit 0
    /// set, 1 refused or not applied, 2 bad input, 3 broker unreachable.
    SetCapacity(SetCapacityArgs),
    /// Forget one subject: every record on it removed from the live log (a
    /// purge filtered to it) and from the archive (each segment holding one
    /// rewritten without it and verified), with one row in the erasures
    /// bucket. Exit 0 finished, 1 refused or stopped part-way (the command
    /// that finishes it is printed), 2 bad input.
    Erase(EraseArgs),
    /// Read every segment of a domain's archive back and check it:
    /// checksums, counts, ranges, contiguity, and no gap before the live
    /// log. Exit 0 sound, 1 any problem. Writes nothing.
    VerifyArchive(VerifyArchiveArgs),
}

/// `read` options.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The first sequence to read (1 or more) [default: the first readable].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// At most this many records (1 to 10000).
    #[arg(
        long,
        value_name = "M",
        default_value = "100",
        allow_hyphen_values = true
    )]
    pub limit: String,
    /// Start at the first readable record when --from is below it.
    #[arg(long)]
    pub clamp: bool,
}

/// `trim` options.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["entry", "at"])))]
pub struct TrimArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// Keep this sequence and later (1 or more; past the tail: everything
    /// retained now).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub entry: Option<String>,
    /// Trim everything stamped before this instant (RFC 3339, UTC).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Why, recorded with the request.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
    /// Who [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `set-capacity` options.
#[derive(Debug, clap::Args)]
pub struct SetCapacityArgs {
    /// The stream (or domain name).
    #[arg(value_name = "STREAM")]
    pub stream: String,
    /// The new max_bytes: a number of bytes or an IEC size (8GiB, 1100MiB).
    #[arg(value_name = "BYTES", allow_hyphen_values = true)]
    pub bytes: String,
    /// Repeat BYTES exactly as given.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    pub confirm: Option<String>,
}

/// `erase` options.
#[derive(Debug, clap::Args)]
pub struct EraseArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The one literal subject to erase (no wildcards).
    #[arg(long, value_name = "SUBJECT", allow_hyphen_values = true)]
    pub subject: String,
    /// Why (required: it is what survives of the erased records).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Repeat the subject.
    #[arg(long, value_name = "SUBJECT", allow_hyphen_values = true)]
    pub confirm: Option<String>,
    /// Finish an erasure that stopped part-way: the operation id it printed.
    #[arg(long, value_name = "ID")]
    pub op_id: Option<String>,
    /// Who [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `tail` options.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
}

/// `crewlet token` commands.
#[derive(Debug, Subcommand)]
pub enum Token {
    /// Make a new token with these scopes: prints it once (256 random
    /// bits), stores only its SHA-256 in the tokens file.
    Add(TokenAddArgs),
    /// Every token's name and scopes (never a token).
    List(TokenFileArgs),
    /// Remove a token: requests carrying it are refused from the next one on.
    Revoke(TokenRevokeArgs),
}

/// Which tokens file.
#[derive(Debug, clap::Args)]
pub struct TokenFileArgs {
    /// The tokens file [default: http.tokens_file of the configuration].
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// `token add` options.
#[derive(Debug, clap::Args)]
pub struct TokenAddArgs {
    /// The token's name (node id rule), unique in the file.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Comma-separated: read, trim, gate, ack, capacity, erase (trim is
    /// never implied by another).
    #[arg(long, value_name = "SCOPES")]
    pub scopes: String,
    #[command(flatten)]
    pub file: TokenFileArgs,
}

/// `token revoke` options.
#[derive(Debug, clap::Args)]
pub struct TokenRevokeArgs {
    /// The token's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    #[command(flatten)]
    pub file: TokenFileArgs,
}

/// `verify-archive` options.
#[derive(Debug, clap::Args)]
pub struct VerifyArchiveArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
}

/// `evict` / `readmit` options.
#[derive(Debug, clap::Args)]
pub struct GestureArgs {
    /// The node.
    #[arg(value_name = "NODE")]
    pub node: String,
    /// Repeat the node id.
    #[arg(long, value_name = "NODE")]
    pub confirm: Option<String>,
    /// Evict even a node holding a live presence lease, or when presence
    /// cannot be read (logged).
    #[arg(long)]
    pub force: bool,
    /// Finish an earlier gesture: the operation id it printed.
    #[arg(long, value_name = "ID")]
    pub op_id: Option<String>,
    /// Why, recorded in the gate record.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Who [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Backup {
    /// Announce a finished backup: writes its manifest (completed now unless
    /// -completed-at says otherwise). Only a -verified backup counts.
    Announce(AnnounceArgs),
}

/// `status` options.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: Option<String>,
}

/// `ack` options.
#[derive(Debug, clap::Args)]
pub struct AckArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The highest sequence the off-site copy holds (at most the log's last).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub position: String,
    /// Who acknowledges [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Allow a position below the acknowledgement in force (a copy that
    /// turned out not to be safe); refused (exit 1) without it.
    #[arg(long)]
    pub lower: bool,
}

/// Who placed a hold, for the `kind` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Backup,
    Join,
    Operator,
}

/// `hold` options.
#[derive(Debug, clap::Args)]
pub struct HoldArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The first sequence the holder still needs (1 or more).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub seq: String,
    /// How long the hold lives (1s ..= 30d), e.g. 2h.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub ttl: String,
    /// Who holds it: a person, a job, a joining node.
    #[arg(long, value_name = "OWNER")]
    pub owner: String,
    /// What kind of holder.
    #[arg(long, value_enum, value_name = "KIND")]
    pub kind: Option<KindArg>,
    /// Why, for whoever finds it later.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// A hold id of your own (node id rule) [default: hold-<ULID>].
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Update the hold of that -id if it exists (on the revision read),
    /// instead of refusing it as hold_exists.
    #[arg(long)]
    pub replace: bool,
    /// Do not wait for a published floor to confirm the hold (it is then
    /// placed, not yet confirmed).
    #[arg(long)]
    pub no_wait: bool,
    /// Who places it [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `holds` options.
#[derive(Debug, clap::Args)]
pub struct HoldsArgs {
    /// Only the holds on this stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: Option<String>,
}

/// `release` options.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The stream (or domain name).
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The id `hold` printed.
    #[arg(value_name = "HOLD_ID")]
    pub hold_id: String,
    /// Who releases it [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `backup announce` options.
#[derive(Debug, clap::Args)]
pub struct AnnounceArgs {
    /// The node whose database was backed up.
    #[arg(long, value_name = "NODE")]
    pub node: String,
    /// The backup's id (node id rule), e.g. 2026-11-30T00-00Z.
    #[arg(long, value_name = "ID")]
    pub id: String,
    /// STREAM=SEQ: the highest sequence the backup holds for a log; repeat per log.
    #[arg(long, value_name = "STREAM=SEQ", action = clap::ArgAction::Append, allow_hyphen_values = true)]
    pub position: Vec<String>,
    /// The backup was opened and checked; an unverified one never counts.
    #[arg(long)]
    pub verified: bool,
    /// When it was taken (RFC 3339, UTC) [default: now].
    #[arg(long, value_name = "TIME")]
    pub taken_at: Option<String>,
    /// When it finished (RFC 3339, UTC) [default: now].
    #[arg(long, value_name = "TIME")]
    pub completed_at: Option<String>,
    /// Who owns the backups [default: retention.backup_owner].
    #[arg(long, value_name = "OWNER")]
    pub owner: Option<String>,
    /// Who announces it [default: the OS account's login name, else $USER, else unknown].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// Prints an alarm on stderr in the chosen format: one line each, once.
pub fn print_alarm(cli: &Cli, a: &crate::alarms::Alarm) {
    match cli.log_format {
        LogFormat::Text => eprintln!("{}", a.line()),
        LogFormat::Json => eprintln!("{}", a.json_line()),
    }
}

/// Parses argv (accepting single-dash long flags) into [`Cli`].
pub fn parse_args() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command();
    let longs = args::long_names(&cmd);
    let argv = args::normalize(std::env::args_os(), &longs);
    let matches = cmd.get_matches_from(argv);
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

/// Parses a command line as the binary would (single-dash long flags
/// included), without exiting: what a test uses to check that every
/// command the product prints parses.
pub fn try_parse<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command();
    let longs = args::long_names(&cmd);
    let argv = args::normalize(argv.into_iter().map(Into::into), &longs);
    let matches = cmd.try_get_matches_from(argv)?;
    Cli::from_arg_matches(&matches)
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

/// Exit 1, naming the command that creates it, when the domain's stream
/// does not exist on a broker that answers (exit 3 is for a broker that
/// does not: cron pages on the code).
pub(crate) async fn require_stream(
    broker: &crate::broker::Broker,
    config: &Config,
    domain: &crate::config::Domain,
) -> Result<(), Exit> {
    match broker.stream_config(&domain.stream).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            crate::cli::say::error_coded(
                "stream_missing",
                format_args!(
                    "stream {} does not exist (domain {}); create it: {}",
                    domain.stream,
                    domain.name,
                    crate::stream_check::create_command(domain, config.buckets.replicas)
                ),
            );
            Err(Exit::Attention)
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Err(Exit::Unreachable)
        }
    }
}

/// Exit 1 naming `init` when bucket `name` does not exist on a broker that
/// answers.
pub(crate) async fn require_bucket(broker: &crate::broker::Broker, name: &str) -> Result<(), Exit> {
    match broker.bucket_settings(name).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            crate::cli::say::error_coded(
                "bucket_missing",
                format_args!("bucket {name} does not exist; create it: crewlet retention init"),
            );
            Err(Exit::Attention)
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Err(Exit::Unreachable)
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

/// `crewlet completions SHELL`: generated from the clap definitions.
fn completions(shell: CompletionShell) -> Exit {
    use clap::CommandFactory;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "crewlet", &mut std::io::stdout());
    Exit::Ok
}

/// `crewlet man [--dir DIR]`: generated from the clap definitions.
fn man(dir: Option<&Path>) -> Exit {
    use clap::CommandFactory;
    // No page for clap's implicit `help` subcommands: nothing would write
    // them, yet the pages above would name them.
    let cmd = without_help(Cli::command());
    let written = match dir {
        Some(d) => std::fs::create_dir_all(d).and_then(|_| clap_mangen::generate_to(cmd, d)),
        None => man_page(cmd, &mut std::io::stdout()),
    };
    match written {
        Ok(()) => Exit::Ok,
        Err(e) => {
            match dir {
                Some(d) => crate::cli::say::error(format_args!(
                    "cannot write the manual pages into {}: {e}",
                    d.display()
                )),
                None => crate::cli::say::error(format_args!("cannot write the manual page: {e}")),
            }
            Exit::Usage
        }
    }
}

/// `cmd` and every subcommand of it without the implicit `help` one.
fn without_help(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.disable_help_subcommand(true);
    for name in names {
        cmd = cmd.mut_subcommand(name, without_help);
    }
    cmd
}

/// Text for a roff paragraph: backslashes and hyphens escaped, and no
/// line that starts like a request.
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one page `crewlet man` prints: clap's sections, then every
/// `crewlet retention` command (the gestures an operator runs) and the
/// exit status, which clap's page alone does not carry.
fn man_page(cmd: clap::Command, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    if let Some(retention) = cmd.find_subcommand("retention") {
        writeln!(w, ".SH \"RETENTION COMMANDS\"")?;
        for sub in retention.get_subcommands().filter(|s| !s.is_hide_set()) {
            let about = sub
                .get_long_about()
                .or(sub.get_about())
                .map(|a| a.to_string())
                .unwrap_or_default();
            writeln!(w, ".TP")?;
            writeln!(w, "\\fBcrewlet retention {}\\fR", roff_text(sub.get_name()))?;
            writeln!(w, "{}", roff_text(&about))?;
        }
    }
    writeln!(w, ".SH \"EXIT STATUS\"")?;
    for (code, what) in [
        ("0", "done; for status and run \\-\\-once, no alarm is active"),
        ("1", "an alarm is active, or a gesture was refused by its judgement or did not finish on every log (the output names the command that finishes it)"),
        ("2", "bad input or configuration: nothing was read or written"),
        ("3", "the broker is unreachable, or nothing about any log could be read"),
        ("130", "stopped by SIGINT or SIGTERM after cleaning up (the demo)"),
    ] {
        writeln!(w, ".TP")?;
        writeln!(w, "\\fB{code}\\fR")?;
        writeln!(w, "{what}")?;
    }
    man.render_version_section(w)?;
    Ok(())
}

/// A configuration that has been found, read and validated.
pub struct Loaded {
    pub path: PathBuf,
    pub config: Config,
    /// The file's warnings (a loaded file has no errors).
    pub warnings: Vec<config::Problem>,
    /// The server dialled and where it came from.
    pub server: Server,
}

/// Finds and reads the configuration text. Errors are printed; the caller
/// exits 2.
pub fn read_config_text(cli: &Cli) -> Result<(PathBuf, String), Exit> {
    let env = std::env::var("CREWLET_CONFIG").ok();
    let path = match resolve::config_path(cli.config.as_deref(), env.as_deref(), Path::is_file) {
        Ok(p) => p,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Err(Exit::Usage);
        }
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(e) => {
            crate::cli::say::error(format_args!("{}: cannot read: {e}", path.display()));
            Err(Exit::Usage)
        }
    }
}

/// Loads the configuration for a command that acts on it: any error is
/// printed, every one, and nothing is read from or written to the broker.
/// The connection settings in `config.nats` are the effective ones (flags,
/// environment, context, file).
pub fn load_config(cli: &Cli) -> Result<Loaded, Exit> {
    let (path, text) = read_config_text(cli)?;
    let checked = config::check(&text);
    let file = path.display().to_string();
    match checked.config {
        Some(mut config) => {
            let server = apply_connection(cli, checked.has_nats_section, &mut config)?;
            Ok(Loaded {
                path,
                config,
                warnings: checked.problems,
                server,
            })
        }
        None => {
            for p in checked.problems.iter().filter(|p| p.is_error()) {
                eprintln!("{}", p.render(&file));
            }
            eprintln!("run `crewlet validate` for the full report");
            Err(Exit::Usage)
        }
    }
}

/// The server dialled and where it came from, for `validate` and `status`.
#[derive(Debug, Clone)]
pub struct Server {
    /// Redacted.
    pub url: String,
    pub source: connection::Source,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (from {})", self.url, self.source)
    }
}

/// The connection flags as the layering takes them.
pub fn connection_flags(cli: &Cli) -> connection::Flags {
    connection::Flags {
        server: cli.nats_url.clone(),
        creds: cli.creds.clone(),
        nkey: cli.nkey.clone(),
        user: cli.user.clone(),
        password: cli.password.clone(),
        token: cli.token.clone(),
        tlscert: cli.tlscert.clone(),
        tlskey: cli.tlskey.clone(),
        tlsca: cli.tlsca.clone(),
        context: cli.context.clone(),
    }
}

/// Replaces `config.nats`'s connection settings with the effective ones
/// (docs/runbook.md's precedence). A context that cannot be read is a
/// configuration error (exit 2).
pub fn apply_connection(
    cli: &Cli,
    file_has_nats: bool,
    config: &mut Config,
) -> Result<Server, Exit> {
    let var = |k: &str| std::env::var(k).ok();
    let flags = connection_flags(cli);
    let dir = connection::nats_dir(var("XDG_CONFIG_HOME").as_deref(), var("HOME").as_deref());
    let selected = dir.as_deref().and_then(connection::selected_context);
    let chosen = connection::choose_context(
        flags.context.as_deref(),
        var("NATS_CONTEXT").as_deref(),
        selected.as_deref(),
        file_has_nats,
    );
    let context = match (&chosen, &dir) {
        (Some(c), Some(d)) => match connection::load_context(d, c) {
            Ok(ctx) => Some((c, ctx)),
            Err(e) => {
                crate::cli::say::error(format_args!("{e}"));
                return Err(Exit::Usage);
            }
        },
        (Some(c), None) => {
            crate::cli::say::error(format_args!(
                "nats context {} (from {}): neither $XDG_CONFIG_HOME nor $HOME is set, so there is no context directory",
                c.name, c.by
            ));
            return Err(Exit::Usage);
        }
        (None, _) => None,
    };
    let home = var("HOME");
    let effective = connection::effective(
        &config.nats,
        &flags,
        &var,
        context.as_ref().map(|(c, ctx)| (*c, ctx)),
        home.as_deref(),
    );
    config.nats = effective.nats;
    Ok(Server {
        url: config::redact_url(&effective.url),
        source: effective.url_source,
    })
}

/// The configured streams, for "not configured" errors.
/// The configured domain `-stream` names (its stream or its name), or the
/// error that lists those configured.
pub fn domain_named(config: &Config, stream: &str) -> Result<config::Domain, String> {
    config.domain(stream).cloned().ok_or_else(|| {
        format!(
            "-stream {stream:?} is not configured; configured: {}",
            configured(config)
        )
    })
}

pub fn configured(config: &Config) -> String {
    config.configured()
}

/// Columns two spaces apart, the last unpadded.
pub fn columns(rows: &[Vec<String>]) -> String {
    crate::report::table(rows, "")
}

/// Who a gesture is by: `-by`, else the OS account's login name, else
/// `$USER` or `$LOGNAME`, else `unknown`. The account comes first: cron and
/// systemd units often run without `$USER`, and the record should still
/// name someone.
/// `crewlet retention set-capacity`: judged before anything is written
/// (`crewlet::resize`).
async fn set_capacity(cli: &Cli, args: &SetCapacityArgs) -> Exit {
    use crate::resize::{self, Ask, BadInput, Outcome};
    let loaded = exit_on_err!(load_config(cli));
    let config = loaded.config;
    let ask = Ask {
        stream: args.stream.clone(),
        bytes: args.bytes.clone(),
        confirm: args.confirm.clone().unwrap_or_default(),
        surface: crate::human::Surface::Cli,
    };
    let outcome = if args.confirm.is_none() {
        Outcome::BadInput(BadInput {
            code: "confirm_mismatch",
            message: format!(
                "confirm_mismatch: -confirm is required: repeat the target ({}) exactly as given; nothing written",
                args.bytes
            ),
        })
    } else {
        match resize::check(&config, &ask) {
            Err(b) => Outcome::BadInput(b),
            Ok((domain, target)) => {
                let broker = exit_on_err!(connect(&config).await);
                resize::apply(&config, &broker, &domain, target).await
            }
        }
    };
    if cli.json {
        println!("{}", resize::json(&outcome));
    } else {
        let (out, err) = resize::text(&outcome);
        print!("{out}");
        eprint!("{err}");
    }
    outcome.exit()
}

/// `crewlet retention erase` (`crewlet::erase`).
async fn erase(cli: &Cli, args: &EraseArgs) -> Exit {
    use crate::erase::{self, Ask, Outcome};
    let loaded = exit_on_err!(load_config(cli));
    let config = loaded.config;
    let ask = Ask {
        stream: args.stream.clone(),
        subject: args.subject.clone(),
        reason: args.reason.clone(),
        confirm: args.confirm.clone(),
        op_id: args.op_id.clone(),
        by: by_name(args.by.as_deref()),
        surface: crate::human::Surface::Cli,
    };
    let outcome = match erase::check(&config, &ask) {
        Err(b) => Outcome::BadInput(b),
        Ok((domain, op)) => {
            let broker = exit_on_err!(connect(&config).await);
            // Said once it is judged, before anything is removed: a run
            // killed part-way is finished by this command.
            let said = |op: &crate::rows::OpId| {
                eprintln!(
                    "erasing {} from {} as op {op}; if this stops part-way, finish it with: {}",
                    ask.subject,
                    domain.stream,
                    erase::finish_command(&ask, &domain.stream, op.as_str())
                )
            };
            erase::apply(&config, &broker, &domain, &ask, op, said).await
        }
    };
    if cli.json {
        println!("{}", erase::json(&ask, &outcome));
    } else {
        let (out, err) = erase::text(&ask, &outcome, &config.buckets.erasures);
        print!("{out}");
        eprint!("{err}");
    }
    outcome.exit()
}

pub fn by_name(flag: Option<&str>) -> String {
    let named = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    named(flag.map(str::to_string))
        .or_else(|| named(account_name()))
        .or_else(|| named(std::env::var("USER").ok()))
        .or_else(|| named(std::env::var("LOGNAME").ok()))
        .unwrap_or_else(|| "unknown".into())
}

/// The login name of the process's real user, from the password database.
fn account_name() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for an out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the size given;
    // getpwuid_r writes the entry's strings into `buf` and points `pw` at
    // them, and sets `found` to null when there is no entry.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated, while `buf` lives.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    name.to_str().ok().map(str::to_string)
}

/// The broker URL to dial (the effective `nats.url`, see
/// [`apply_connection`]), or `None` when it is the embedded broker.
pub fn target_url(config: &Config) -> Option<String> {
    let url = config
        .nats
        .url
        .clone()
        .unwrap_or_else(|| config::DEFAULT_URL.to_string());
    (url.trim() != EMBEDDED_URL).then_some(url)
}

/// Connects, starting the embedded broker first when `nats.url` is
/// `embedded` (and `--nats-url` does not override it).
pub async fn connect_or_embed(
    config: &Config,
) -> Result<(Broker, Option<crate::embedded::EmbeddedServer>), Exit> {
    if target_url(config).is_some() {
        return connect(config).await.map(|b| (b, None));
    }
    let server = match crate::embedded::EmbeddedServer::start(
        &config.nats.embedded_dir,
        config.nats.embedded_port,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Err(Exit::Unreachable);
        }
    };
    match broker::connect(
        &server.url,
        &config.nats,
        &format!("crewlet/{}", config.node.id),
    )
    .await
    {
        Ok(b) => Ok((b, Some(server))),
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            server.stop().await;
            Err(if e.is_configuration() {
                Exit::Usage
            } else {
                Exit::Unreachable
            })
        }
    }
}

/// Connects as configured. An unreachable broker is printed (URL redacted)
/// and ends the command with exit 3.
pub async fn connect(config: &Config) -> Result<Broker, Exit> {
    let Some(url) = target_url(config) else {
        crate::cli::say::error(format_args!("nats.url is `embedded`, which only `crewlet retention run` and `crewlet demo` start; pass --nats-url to reach a running broker"));
        return Err(Exit::Usage);
    };
    match broker::connect(&url, &config.nats, &format!("crewlet/{}", config.node.id)).await {
        Ok(b) => Ok(b),
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            // A refused credential, an unreadable creds/nkey/TLS file or a
            // bad URL is configuration (2), not the network (3).
            Err(if e.is_configuration() {
                Exit::Usage
            } else {
                Exit::Unreachable
            })
        }
    }
}
