//! The clap command tree: every command, its flags and their help.

use super::*;

/// What `--version` prints: the release, the commit it was built from and
/// the format of the rows it writes (docs/upgrading.md).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CREWLET_COMMIT"),
    ", rows of format 2)"
);

/// The retention coordinator for NATS JetStream.
///
/// Computes how far each configured stream may be trimmed without deleting a
/// record that a node, a hold, a backup, the snapshot quorum or the feed
/// still needs; publishes that floor; and only then purges.
#[derive(Debug, Parser)]
#[command(name = "crewlet", version = VERSION, propagate_version = true)]
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
    /// domain's stream settings and archive store (a cloud store's bucket
    /// and the permissions these credentials have on it). Prints every
    /// error and warning with its line; exits 0 (warnings only), 2 (an
    /// error) or 3 (valid file, broker unreachable).
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
    /// For node implementers: a node's rows as the sidecar reads them.
    #[command(subcommand)]
    Node(NodeCmd),
    /// For node implementers: one row as the sidecar reads it.
    #[command(subcommand)]
    Row(RowCmd),
}

/// `crewlet node`.
#[derive(Debug, clap::Subcommand)]
pub enum NodeCmd {
    /// Judge every row the named nodes (default: every node that wrote
    /// one) have in the broker with the sidecar's own parser, and say
    /// what the fleet still needs from each before anything can be
    /// trimmed: a presence lease, a position after commit, a snapshot
    /// registered, a backup announced. Exits 0 when every row reads and
    /// nothing is needed, 1 otherwise.
    Check(NodeCheckArgs),
}

/// `crewlet node check` options.
#[derive(Debug, clap::Args)]
pub struct NodeCheckArgs {
    /// The nodes to check (default: every node that has written a row).
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
}

/// `crewlet row`.
#[derive(Debug, clap::Subcommand)]
pub enum RowCmd {
    /// Judge one row, from FILE or stdin, as the sidecar would read it (a
    /// node's own tests): exit 0 when it reads, 1 when it is refused (the
    /// field and the rule are named), 2 for bad usage.
    Check(RowCheckArgs),
}

/// `crewlet row check` options.
#[derive(Debug, clap::Args)]
pub struct RowCheckArgs {
    /// The row's kind, as its schema in docs/schemas/ is named.
    #[arg(long, value_name = "KIND", value_parser = ["presence", "position", "hold", "backup-manifest", "backup-ack", "snapshot"])]
    pub kind: String,
    /// The key it would be written under (default: made from the row; a
    /// hold needs STREAM.HOLD_ID).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// The row's JSON (default, or `-`: stdin).
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
}

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
    /// Passed to crewlet-bench as they are: `--samples N`, `--only
    /// tick,scaling,pure,status,memory,publisher,http,archive,cluster`.
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

/// `crewlet retention adopt` options.
#[derive(Debug, clap::Args)]
pub struct AdoptArgs {
    /// The stream (or domain name) that lost the sidecar's memory.
    #[arg(long, value_name = "STREAM")]
    pub stream: String,
    /// The live stream's `created`, exactly as printed. Without it the
    /// command prints what was lost, what it sees now and what the trim
    /// would be, and refuses.
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
    /// reported as a warning. Before it recreates a missing positions or
    /// holds bucket it prints, as `carried` lines, the pins the published
    /// floors rows carry over it and how each ends. Exits 0 once every
    /// bucket exists.
    Init,
    /// The sidecar: claims the trim duty, ticks every retention.tick
    /// (read, compute, publish, purge), evaluates alarms. Started before
    /// its broker, it waits for it. SIGTERM/SIGINT finish the running tick,
    /// release the duty and exit 0.
    Run(RunArgs),
    /// Adopt a recreated or restored stream: opens the next generation of
    /// its floor, keyed to the live stream's `created`.
    Reanchor(ReanchorArgs),
    /// Open a log's memory afresh after it was lost (NOT READY
    /// memory_lost: its floors bucket missing, recreated, or without its
    /// row): from what the buckets hold now. A node or hold only the lost
    /// memory knew is no longer protected; preview with status
    /// --if-adopted. Refused on a log whose memory is intact.
    Adopt(AdoptArgs),
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
    /// Preview: the trim as it would be once these nodes are evicted (and
    /// their fence window has passed). Nothing is written.
    #[arg(long, value_name = "NODE[,NODE…]", value_delimiter = ',')]
    pub if_evicted: Vec<String>,
    /// Preview: the trim as it would be without this hold (repeatable).
    /// Nothing is written.
    #[arg(long, value_name = "HOLD_ID")]
    pub if_released: Vec<String>,
    /// Preview: the trim as it would be once a copy of STREAM up to SEQ is
    /// acknowledged (backup_floor: operator; repeatable). Nothing is written.
    #[arg(long, value_name = "STREAM=SEQ", value_parser = crate::preview::parse_ack)]
    pub if_acked: Vec<(String, u64)>,
    /// Preview: the trim as it would be once these evicted nodes are
    /// readmitted. Nothing is written.
    #[arg(long, value_name = "NODE[,NODE…]", value_delimiter = ',')]
    pub if_readmitted: Vec<String>,
    /// Preview: the trim as it would be with these replicas (or named
    /// consumers) left out, as replicas.ignore or deleting their consumer
    /// would leave them. Nothing is written.
    #[arg(long, value_name = "NAME[,NAME…]", value_delimiter = ',')]
    pub if_ignored: Vec<String>,
    /// Preview: the trim as it would be once this log, which lost the
    /// sidecar's memory, is adopted afresh from what the buckets hold now
    /// (`crewlet retention adopt`; repeatable). Nothing is written.
    #[arg(long, value_name = "STREAM")]
    pub if_adopted: Vec<String>,
    /// With --if-evicted: preview past a live lease or a node never seen,
    /// as `evict -force` would go.
    #[arg(long, requires = "if_evicted")]
    pub force: bool,
}

impl StatusArgs {
    /// The gestures to preview (empty: plain status).
    pub fn preview(&self) -> crate::preview::Ask {
        crate::preview::Ask {
            evict: self.if_evicted.clone(),
            release: self.if_released.clone(),
            ack: self.if_acked.clone(),
            readmit: self.if_readmitted.clone(),
            ignore: self.if_ignored.clone(),
            adopt: self.if_adopted.clone(),
            force: self.force,
        }
    }
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

#[cfg(test)]
mod tests {
    /// `--version` names the format the rows are written in, and it is
    /// the one the rows carry.
    #[test]
    fn the_version_names_the_release_the_commit_and_the_rows_format() {
        let v = super::VERSION;
        assert!(v.starts_with(env!("CARGO_PKG_VERSION")), "{v}");
        assert!(v.contains("(commit "), "{v}");
        assert!(
            v.contains(&format!(
                "rows of format {})",
                crate::floor::members::FORMAT
            )),
            "{v}"
        );
    }
}
