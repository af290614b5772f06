//! The YAML configuration (docs/runbook.md § Configuration): its types, named
//! defaults, a pure parser and `validate()`, which returns every problem
//! with the line it stands on, not just the first.
//!
//! Parsing is done section by section (and domain by domain) so that a type
//! error in one place does not hide a range error in another: an operator
//! fixing a file at 3 a.m. should see all of it in one run.

pub mod connection;
pub mod duration;
mod locate;
pub mod resolve;
pub mod size;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rows;
pub use locate::SourceMap;

/// A duration written the humantime way (`30s`, `24h`, `7d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    pub const fn secs(s: u64) -> Self {
        Dur(Duration::from_secs(s))
    }
    pub const fn hours(h: u64) -> Self {
        Dur(Duration::from_secs(h * 3600))
    }
    pub const fn days(d: u64) -> Self {
        Dur(Duration::from_secs(d * 86400))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::human::duration(self.0))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 30s, 10m, 24h or 7d")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                duration::parse(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// How `backup_floor` is read (docs/architecture.md, Each term in detail).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackupPolicy {
    /// Verified, completed manifests written by the fleet's own nodes.
    #[default]
    Engine,
    /// An operator's acknowledgement (`crewlet retention ack`).
    Operator,
}

/// `node:` — who this sidecar is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Written as `by`/`holder` in the rows the sidecar writes on its own.
    pub id: String,
    /// Whether this sidecar may claim the trim duty. Several may; the lease
    /// picks one.
    #[serde(default = "default_true")]
    pub duty: bool,
}

/// `nats.tls:` — TLS material for the broker connection.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// CA bundle that signs the server's certificate.
    pub ca: Option<PathBuf>,
    /// Client certificate, for servers that verify clients.
    pub cert: Option<PathBuf>,
    /// The client certificate's key.
    pub key: Option<PathBuf>,
}

/// Where `nats://` goes when nothing else says.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";

/// The value of `nats.url` that starts a local broker instead of dialing one.
pub const EMBEDDED_URL: &str = "embedded";

/// `nats:` — how to reach the broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated, or `embedded`. Unset: `$NATS_URL`,
    /// else `nats://127.0.0.1:4222`.
    pub url: Option<String>,
    /// A `.creds` file (JWT + seed).
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed (`SU…`).
    pub nkey: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub tls: Option<TlsConfig>,
    /// How long a connection attempt may take before the broker counts as
    /// unreachable (exit 3).
    pub connect_timeout: Dur,
    /// With `url: embedded`: where the local broker keeps its store
    /// (created owner-only).
    pub embedded_dir: PathBuf,
    /// With `url: embedded`: its loopback port; 0 picks a free one.
    pub embedded_port: u16,
}

impl Default for NatsConfig {
    fn default() -> Self {
        NatsConfig {
            url: None,
            creds: None,
            nkey: None,
            user: None,
            password: None,
            token: None,
            tls: None,
            connect_timeout: Dur::secs(5),
            embedded_dir: PathBuf::from(".crewlet/embedded"),
            embedded_port: 0,
        }
    }
}

/// `buckets:` — the KV bucket names of the contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Buckets {
    pub presence: String,
    pub positions: String,
    pub holds: String,
    pub backups: String,
    pub snapshots: String,
    pub floors: String,
    pub duty: String,
    pub gates: String,
    /// One row per erasure (`crewlet retention erase`).
    pub erasures: String,
    /// How many replicas `init` (and `run`, for the sidecar's own buckets)
    /// creates each bucket with: 1, 3 or 5. A cluster wants 3.
    pub replicas: usize,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            presence: "crewlet_presence".into(),
            positions: "crewlet_positions".into(),
            holds: "crewlet_holds".into(),
            backups: "crewlet_backups".into(),
            snapshots: "crewlet_snapshots".into(),
            floors: "crewlet_floors".into(),
            duty: "crewlet_duty".into(),
            gates: "crewlet_gates".into(),
            erasures: "crewlet_erasures".into(),
            replicas: 1,
        }
    }
}

impl Buckets {
    /// Every bucket with its field name, in contract order.
    pub fn all(&self) -> [(&'static str, &str); 9] {
        [
            ("presence", &self.presence),
            ("positions", &self.positions),
            ("holds", &self.holds),
            ("backups", &self.backups),
            ("snapshots", &self.snapshots),
            ("floors", &self.floors),
            ("duty", &self.duty),
            ("gates", &self.gates),
            ("erasures", &self.erasures),
        ]
    }
}

/// `retention:` — the policy every domain shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// How often the sidecar reads, computes, publishes and purges.
    pub tick: Dur,
    /// A floor on trimming: no record younger than this is purged.
    pub min_age: Dur,
    pub backup_floor: BackupPolicy,
    /// A backup older than this permits nothing.
    pub backup_max_age: Dur,
    /// Who runs the backups; named in the `backup_age` alarm's remedy.
    pub backup_owner: Option<String>,
    pub snapshot_interval: Dur,
    pub snapshots_kept: u32,
    /// The k in "the k-th highest verified snapshot".
    pub snapshot_quorum: u32,
    /// How long after its eviction record lands a node stops being counted.
    pub fence_window: Dur,
    /// The presence bucket's TTL (used by `init`).
    pub presence_ttl: Dur,
    /// How long `blocked_by` may stay non-empty before `trim_held` fires.
    pub held_alarm_after: Dur,
    /// Lowers the floors on windows and ceilings (tests, demos); never a
    /// rule between fields.
    pub allow_unsafe_limits: bool,
    /// How far the sidecar's clock may differ from the broker's before the
    /// `clock_skew` alarm fires (every time rule runs on the broker's).
    pub max_clock_skew: Dur,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            tick: Dur::secs(10),
            min_age: Dur::days(7),
            backup_floor: BackupPolicy::Engine,
            backup_max_age: Dur::hours(24),
            backup_owner: None,
            snapshot_interval: Dur::hours(24),
            snapshots_kept: 1,
            snapshot_quorum: 2,
            fence_window: Dur::secs(60),
            presence_ttl: Dur::secs(30),
            held_alarm_after: Dur::hours(24),
            allow_unsafe_limits: false,
            max_clock_skew: Dur::secs(2),
        }
    }
}

/// The least time a fence must grant a purge (docs/architecture.md,
/// Fencing): a stream-info re-read and the purge request fit in it on a
/// loaded broker.
pub const MIN_FENCE_GRANT: Duration = Duration::from_millis(500);

/// The longest a single read may take ([`Retention::read_timeout`]).
pub const MAX_READ_TIMEOUT: Duration = Duration::from_secs(10);

impl Retention {
    /// The duty lease's TTL: three ticks (docs/contract.md, duty).
    pub fn duty_ttl(&self) -> Duration {
        self.tick.0 * 3
    }

    /// How long one read may take before it is given up: a tick, at least
    /// 1 s and at most 10 s, so that a tick, a read tried twice included,
    /// stays inside the lease of three ticks.
    pub fn read_timeout(&self) -> Duration {
        self.tick.0.clamp(Duration::from_secs(1), MAX_READ_TIMEOUT)
    }

    /// How long a fence grants its purge after the renewal is sent: the
    /// lease TTL less the clock skew allowed (the broker's clock may run
    /// ahead and expire the lease early) and one read timeout (the purge's
    /// own way to the broker). Zero when nothing is left.
    pub fn fence_grant(&self) -> Duration {
        self.duty_ttl()
            .saturating_sub(self.max_clock_skew.0)
            .saturating_sub(self.read_timeout())
    }
}

/// `trim:` — whether the sidecar acts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Trim {
    /// `false` (the default) is dry run: publish what would go, purge nothing.
    pub enabled: bool,
}

/// `http:` — the HTTP surface of `crewlet retention run` (off unless
/// `listen` is set).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Http {
    /// `host:port` to serve on; unset: nothing binds.
    pub listen: Option<String>,
    /// The tokens file (`crewlet token add` writes it); every route but
    /// `/metrics`, `/healthz`, `/readyz` and the page needs a token from it.
    pub tokens_file: Option<PathBuf>,
}

impl Http {
    /// The address to bind, when one is set and parses.
    pub fn address(&self) -> Option<std::net::SocketAddr> {
        self.listen.as_deref().and_then(|l| l.parse().ok())
    }
}

/// One configured log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// The name operators use (`tracker`).
    pub name: String,
    /// The JetStream stream behind it.
    pub stream: String,
    /// Where gate records are published; unset: this log takes none.
    #[serde(default)]
    pub gate_subject: Option<String>,
    /// Keep the top sixteenth of `max_bytes` for gate records.
    #[serde(default = "default_true")]
    pub gate_reserve: bool,
    /// The durable consumer whose ack floor is `feed_ack_floor`; unset: `n/a`.
    #[serde(default)]
    pub feed_consumer: Option<String>,
    /// Fold before trim: records leave the log only once archived here;
    /// unset: no archive, `archive_floor` is `n/a`.
    #[serde(default)]
    pub archive: Option<ArchiveConfig>,
}

/// `domains[].archive` — where and how the log is folded before it is
/// trimmed (exactly one of `object_store` and `dir`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveConfig {
    /// A JetStream Object Store bucket (`init` creates it).
    #[serde(default)]
    pub object_store: Option<String>,
    /// Or a local directory (absolute).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// At most this many records per segment.
    #[serde(default = "default_segment_records")]
    pub segment_records: u64,
    /// And at most this many bytes before compression.
    #[serde(default = "default_segment_bytes")]
    pub segment_bytes: size::Size,
    /// At most this many segments folded per tick.
    #[serde(default = "default_fold_per_tick")]
    pub fold_per_tick: u64,
}

/// The bounds docs/archive-format.md fixes.
pub const SEGMENT_RECORDS: (u64, u64) = (1, 1_000_000);
pub const SEGMENT_BYTES: (u64, u64) = (64 << 10, 256 << 20);
pub const FOLD_PER_TICK: (u64, u64) = (1, 1024);

fn default_segment_records() -> u64 {
    10_000
}
fn default_segment_bytes() -> size::Size {
    size::Size(8 << 20)
}
fn default_fold_per_tick() -> u64 {
    16
}

impl ArchiveConfig {
    /// The store segments go to (the object store when, against
    /// validation, both are set).
    pub fn store(&self) -> crate::archive::state::Store {
        match (&self.object_store, &self.dir) {
            (Some(b), _) => crate::archive::state::Store::ObjectStore(b.clone()),
            (None, Some(d)) => crate::archive::state::Store::Dir(d.clone()),
            (None, None) => crate::archive::state::Store::ObjectStore(String::new()),
        }
    }

    pub fn limits(&self) -> crate::archive::cut::Limits {
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        crate::archive::cut::Limits {
            segment_records: n(self.segment_records),
            segment_bytes: n(self.segment_bytes.0),
            fold_per_tick: n(self.fold_per_tick),
        }
    }

    fn validate(&self, at: &dyn Fn(&str) -> String, out: &mut Vec<Problem>) {
        match (&self.object_store, &self.dir) {
            (Some(_), Some(_)) => out.push(Problem::error(
                at("archive"),
                "names both object_store and dir; an archive is one store: keep one of the two",
            )),
            (None, None) => out.push(Problem::error(
                at("archive"),
                "names no store; set object_store (a JetStream Object Store bucket) or dir (a local directory)",
            )),
            _ => {}
        }
        if let Some(b) = &self.object_store {
            if let Err(e) = rows::check_bucket_name(b) {
                out.push(Problem::error(
                    at("archive.object_store"),
                    format!("bucket name {e}"),
                ));
            }
        }
        if let Some(d) = &self.dir {
            if !d.is_absolute() {
                out.push(Problem::error(
                    at("archive.dir"),
                    format!("{:?} is relative; write an absolute path, so that the archive does not move with the directory the sidecar starts in", d.display().to_string()),
                ));
            }
        }
        let range = |field: &str, v: u64, (lo, hi): (u64, u64), show: &dyn Fn(u64) -> String| {
            (!(lo..=hi).contains(&v)).then(|| {
                Problem::error(
                    at(&format!("archive.{field}")),
                    format!(
                        "{} is out of range; allowed: {} to {}",
                        show(v),
                        show(lo),
                        show(hi)
                    ),
                )
            })
        };
        let plain = |v: u64| v.to_string();
        out.extend(range(
            "segment_records",
            self.segment_records,
            SEGMENT_RECORDS,
            &plain,
        ));
        out.extend(range(
            "segment_bytes",
            self.segment_bytes.0,
            SEGMENT_BYTES,
            &size::show,
        ));
        out.extend(range(
            "fold_per_tick",
            self.fold_per_tick,
            FOLD_PER_TICK,
            &plain,
        ));
    }
}

fn default_true() -> bool {
    true
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub node: NodeConfig,
    pub nats: NatsConfig,
    pub buckets: Buckets,
    pub retention: Retention,
    pub trim: Trim,
    pub http: Http,
    pub domains: Vec<Domain>,
}

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One thing wrong with a configuration (or with the broker it names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    /// The field path, e.g. `domains[1].name`.
    pub field: String,
    /// 1-based line in the file, when the field (or its section) is there.
    pub line: Option<usize>,
    /// What is wrong and what is allowed.
    pub message: String,
    /// A stable name for problems that are also alarms
    /// (`broker_retention_bypass`).
    pub code: Option<&'static str>,
}

impl Problem {
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            field: field.into(),
            line: None,
            message: message.into(),
            code: None,
        }
    }

    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(field, message)
        }
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `error: <file>:<line>: <field>: <message>`.
    pub fn render(&self, file: &str) -> String {
        let word = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let at = match self.line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        };
        let code = self.code.map(|c| format!("{c}: ")).unwrap_or_default();
        format!("{word}: {at}: {}: {code}{}", self.field, self.message)
    }
}

/// The outcome of reading a configuration text: the config when nothing is
/// an error, every problem found, and the source map for later problems
/// (the broker checks) to find their lines.
#[derive(Debug, Clone)]
pub struct Checked {
    pub config: Option<Config>,
    pub problems: Vec<Problem>,
    pub source: SourceMap,
    /// The file has a `nats:` section (the `nats` CLI's selected context is
    /// used only for a file without one).
    pub has_nats_section: bool,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}

const SECTIONS: [&str; 7] = [
    "node",
    "nats",
    "buckets",
    "retention",
    "trim",
    "http",
    "domains",
];

/// Parses and validates `text`. Pure: no files, no environment, no clock.
pub fn check(text: &str) -> Checked {
    let source = match SourceMap::build(text) {
        Ok(map) => map,
        Err(e) => {
            let mut p = Problem::error("(syntax)", format!("not valid YAML: {}", e.message));
            p.line = Some(e.line);
            return Checked {
                config: None,
                problems: vec![p],
                source: SourceMap::default(),
                has_nats_section: false,
            };
        }
    };
    let mut problems = Vec::new();
    // Parsed once; the sections, the quoting of durations and the caller's
    // question about `nats:` all read this value.
    let root: Option<serde_yaml::Value> = match serde_yaml::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            let mut p = Problem::error("(syntax)", format!("not valid YAML: {e}"));
            p.line = e.location().map(|l| l.line());
            problems.push(p);
            None
        }
    };
    let has_nats_section = root.as_ref().is_some_and(|r| r.get("nats").is_some());
    let config = root
        .clone()
        .and_then(|root| parse_sections(root, &mut problems));
    if let (Some(config), Some(root)) = (&config, &root) {
        let mut found = config.validate();
        quote_durations(root, config, &mut found);
        problems.extend(found);
    }
    // A section that failed to parse is replaced by its defaults so that the
    // rest can be validated; drop what validation said about the stand-ins.
    let parse = |p: &Problem| p.code == Some(PARSE) || p.code == Some(PARSE_FIELD);
    let failed: Vec<String> = problems
        .iter()
        .filter(|p| p.code == Some(PARSE))
        .map(|p| p.field.clone())
        .collect();
    // A field taken out stands in with its default: what validation says
    // of it, or of a rule between it and another field, is about the
    // stand-in.
    let taken_out: Vec<String> = problems
        .iter()
        .filter(|p| p.code == Some(REMOVED))
        .map(|p| p.field.clone())
        .collect();
    problems.retain(|p| p.code != Some(REMOVED));
    problems.retain(|p| {
        parse(p)
            || !(failed.iter().any(|f| within(&p.field, f))
                || taken_out
                    .iter()
                    .any(|f| p.field.starts_with(f.as_str()) || mentions(&p.message, f)))
    });
    for p in &mut problems {
        if parse(p) {
            p.code = None;
        }
        p.line = source.line_of(&p.field);
    }
    // In file order, so the report reads top to bottom like the file.
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    let ok = !problems.iter().any(Problem::is_error);
    Checked {
        config: if ok { config } else { None },
        problems,
        source,
        has_nats_section,
    }
}

/// Whether a message speaks of the field `retention.min_age` (by its key).
fn mentions(message: &str, field: &str) -> bool {
    let key = field.rsplit('.').next().unwrap_or(field);
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == key)
}

/// A range error quotes the duration as the file wrote it (`"2400h"`), not
/// as it reads back (`100d`).
fn quote_durations(root: &serde_yaml::Value, config: &Config, problems: &mut [Problem]) {
    for p in problems {
        let Some(key) = p.field.strip_prefix("retention.") else {
            continue;
        };
        let Some(b) = DUR_BOUNDS.iter().find(|b| b.field == key) else {
            continue;
        };
        let Some(written) = root
            .get("retention")
            .and_then(|r| r.get(key))
            .and_then(serde_yaml::Value::as_str)
        else {
            continue;
        };
        let shown = (b.get)(&config.retention).to_string();
        if let Some(rest) = p.message.strip_prefix(&shown) {
            p.message = format!("{written:?}{rest}");
        }
    }
}

/// Is `field` the same as `section` or inside it?
fn within(field: &str, section: &str) -> bool {
    let section = section_of(section);
    field == section
        || field.starts_with(&format!("{section}."))
        || field.starts_with(&format!("{section}["))
}

/// The section (or domain) a parse error path belongs to: `domains[2].x`
/// belongs to `domains[2]`, `retention.tick` to `retention`.
fn section_of(field: &str) -> &str {
    if let Some(rest) = field.strip_prefix("domains[") {
        if let Some(end) = rest.find(']') {
            return &field[..8 + end + 1];
        }
    }
    field.split(['.', '[']).next().unwrap_or(field)
}

/// Marks a problem as a parse failure while `check` is running: the whole
/// section (or domain) stands in with its defaults.
const PARSE: &str = "__parse";
/// As [`PARSE`], for one field taken out of a section that then parsed.
const PARSE_FIELD: &str = "__parse_field";
/// Not a problem: the path of what was taken out for a [`PARSE_FIELD`]
/// (the field itself, or the block that held a required one), so that
/// what validation says of its stand-in is dropped. `check` removes it.
const REMOVED: &str = "__removed";

fn parse_sections(root: serde_yaml::Value, problems: &mut Vec<Problem>) -> Option<Config> {
    let map = match root {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => serde_yaml::Mapping::new(),
        _ => {
            problems.push(Problem::error(
                "(top level)",
                format!(
                    "the file must be a mapping with the sections {}",
                    SECTIONS.join(", ")
                ),
            ));
            return None;
        }
    };
    for key in map.keys() {
        let name = key.as_str().unwrap_or("");
        if !SECTIONS.contains(&name) {
            problems.push(Problem::error(
                yaml_key_text(key),
                format!("unknown section; allowed: {}", SECTIONS.join(", ")),
            ));
        }
    }
    let get = |name: &str| map.get(name).cloned();

    let node: Option<NodeConfig> = match get("node") {
        None => {
            problems.push(Problem::error(
                "node",
                "missing; every sidecar needs node.id (a node id: letter or digit, then letters, digits, '.', '_' or '-')",
            ));
            None
        }
        Some(v) => section(v, "node", problems),
    };
    let nats = get("nats").map_or(Some(NatsConfig::default()), |v| {
        section(v, "nats", problems)
    });
    let buckets = get("buckets").map_or(Some(Buckets::default()), |v| {
        section(v, "buckets", problems)
    });
    let retention = get("retention").map_or(Some(Retention::default()), |v| {
        section(v, "retention", problems)
    });
    let trim = get("trim").map_or(Some(Trim::default()), |v| section(v, "trim", problems));
    let http = get("http").map_or(Some(Http::default()), |v| section(v, "http", problems));

    let mut domains = Vec::new();
    match get("domains") {
        None | Some(serde_yaml::Value::Null) => {}
        Some(serde_yaml::Value::Sequence(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                let path = format!("domains[{i}]");
                let domain = section::<Domain>(item, &path, problems).unwrap_or_else(|| Domain {
                    name: String::new(),
                    stream: String::new(),
                    gate_subject: None,
                    gate_reserve: true,
                    feed_consumer: None,
                    archive: None,
                });
                domains.push(domain);
            }
        }
        Some(_) => problems.push(
            Problem::error(
                "domains",
                "must be a list of domains (- name: …, stream: …)",
            )
            .with_code(PARSE),
        ),
    }

    // Stand-ins keep validation going over the sections that did parse.
    Some(Config {
        node: node.unwrap_or(NodeConfig {
            id: "placeholder".into(),
            duty: true,
        }),
        nats: nats.unwrap_or_default(),
        buckets: buckets.unwrap_or_default(),
        retention: retention.unwrap_or_default(),
        trim: trim.unwrap_or_default(),
        http: http.unwrap_or_default(),
        domains,
    })
}

fn yaml_key_text(key: &serde_yaml::Value) -> String {
    match key {
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into()),
    }
}

/// Deserializes one section, turning each failure into a problem at the
/// exact field serde stopped on. A field that fails is reported and taken
/// out (its default stands in), and the section is read again, so a type
/// error in one field does not hide one in the next (docs/runbook.md, Configuration
/// errors). A section that cannot stand without the field (a required one)
/// is given up: `None`.
fn section<T: DeserializeOwned>(
    value: serde_yaml::Value,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    // An empty section (`trim:` with nothing under it) means its defaults.
    let mut value = match value {
        serde_yaml::Value::Null => serde_yaml::Value::Mapping(serde_yaml::Mapping::new()),
        v => v,
    };
    // The paths (below the section) taken out so far.
    let mut taken_out: Vec<Vec<String>> = Vec::new();
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => return Some(v),
            Err(e) => e,
        };
        let inner = e.path().to_string();
        let raw = e.inner().to_string();
        let at_root = inner == "." || inner.is_empty() || inner == "?";
        let mut keys: Vec<String> = if at_root {
            Vec::new()
        } else {
            map_keys(&inner)
        };
        // Taking a required field out only makes it missing, which was
        // already said: take out what holds it instead (a nested block
        // stands in with its defaults), or give the section up.
        let missing = taken_out.iter().find(|t| {
            t.last()
                .is_some_and(|k| raw.starts_with(&format!("missing field `{k}`")))
                && t[..t.len() - 1] == keys[..]
        });
        if let Some(t) = missing {
            if t.len() < 2 {
                return None;
            }
            let parent = t[..t.len() - 1].to_vec();
            remove_at(&mut value, &parent);
            taken_out.push(parent);
            continue;
        }
        let field = if at_root {
            path.to_string()
        } else {
            format!("{path}.{inner}")
        };
        // The deepest key of the path that names a mapping entry: only the
        // field that failed stands in with its default, so that the rest of
        // its block is still checked (a relative archive dir beside an
        // unknown field in the same block).
        while !keys.is_empty() && !has_at(&value, &keys) {
            keys.pop();
        }
        let removable = !keys.is_empty();
        let code = if removable { PARSE_FIELD } else { PARSE };
        problems.push(Problem::error(field, crate::human::serde_message(&raw)).with_code(code));
        if !removable || taken_out.len() > 64 {
            return None;
        }
        remove_at(&mut value, &keys);
        problems.push(Problem::error(format!("{path}.{}", keys.join(".")), "").with_code(REMOVED));
        taken_out.push(keys);
    }
}

/// The mapping keys of a serde path (`archive.segment_bytes`), up to the
/// first sequence index (`subjects[0]` stops at `subjects`).
fn map_keys(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((key, _)) => {
                if !key.is_empty() {
                    out.push(key.to_string());
                }
                break;
            }
            None => out.push(part.to_string()),
        }
    }
    out
}

/// Whether `keys` names an entry of nested mappings in `value`.
fn has_at(value: &serde_yaml::Value, keys: &[String]) -> bool {
    let mut v = value;
    for k in keys {
        match v.as_mapping().and_then(|m| m.get(k.as_str())) {
            Some(next) => v = next,
            None => return false,
        }
    }
    true
}

/// Removes the entry `keys` names in nested mappings of `value`.
fn remove_at(value: &mut serde_yaml::Value, keys: &[String]) {
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut v = value;
    for k in parents {
        match v.as_mapping_mut().and_then(|m| m.get_mut(k.as_str())) {
            Some(next) => v = next,
            None => return,
        }
    }
    if let Some(m) = v.as_mapping_mut() {
        m.remove(last.as_str());
    }
}

/// A bound on a duration field: the normal minimum, the minimum under
/// `allow_unsafe_limits`, and the maximum.
struct DurBound {
    field: &'static str,
    get: fn(&Retention) -> Dur,
    min: Dur,
    unsafe_min: Dur,
    max: Dur,
}

const DUR_BOUNDS: &[DurBound] = &[
    DurBound {
        field: "tick",
        get: |r| r.tick,
        min: Dur::secs(1),
        unsafe_min: Dur(Duration::from_millis(100)),
        max: Dur::secs(600),
    },
    DurBound {
        field: "min_age",
        get: |r| r.min_age,
        min: Dur::hours(24),
        unsafe_min: Dur::secs(0),
        max: Dur::days(90),
    },
    DurBound {
        field: "backup_max_age",
        get: |r| r.backup_max_age,
        min: Dur::hours(1),
        unsafe_min: Dur::secs(1),
        max: Dur::days(30),
    },
    DurBound {
        field: "snapshot_interval",
        get: |r| r.snapshot_interval,
        min: Dur::hours(1),
        // Low enough that a test fleet runs with min_age: 1s under the
        // cross-field rule (snapshot_interval × (snapshots_kept + 1) < min_age).
        unsafe_min: Dur(Duration::from_millis(100)),
        max: Dur::days(30),
    },
    DurBound {
        field: "fence_window",
        get: |r| r.fence_window,
        min: Dur::secs(10),
        unsafe_min: Dur::secs(0),
        max: Dur::hours(1),
    },
    DurBound {
        field: "presence_ttl",
        get: |r| r.presence_ttl,
        min: Dur::secs(5),
        unsafe_min: Dur::secs(1),
        max: Dur::secs(600),
    },
    DurBound {
        field: "max_clock_skew",
        get: |r| r.max_clock_skew,
        min: Dur(Duration::from_millis(100)),
        unsafe_min: Dur(Duration::from_millis(100)),
        max: Dur::secs(60),
    },
    DurBound {
        field: "held_alarm_after",
        get: |r| r.held_alarm_after,
        min: Dur::secs(600),
        unsafe_min: Dur::secs(0),
        max: Dur::days(90),
    },
];

impl Config {
    /// Every problem with the configuration, errors and warnings, without
    /// touching the broker. Lines are filled in by [`check`].
    pub fn validate(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if let Err(e) = rows::check_node_id(&self.node.id) {
            out.push(Problem::error("node.id", format!("node id {e}")));
        }
        self.validate_nats(&mut out);
        self.validate_buckets(&mut out);
        self.validate_retention(&mut out);
        self.validate_domains(&mut out);
        self.validate_http(&mut out);
        out
    }

    fn validate_http(&self, out: &mut Vec<Problem>) {
        if let Some(l) = &self.http.listen {
            if l.parse::<std::net::SocketAddr>().is_err() {
                out.push(Problem::error(
                    "http.listen",
                    format!("{l:?} is not an address to listen on; allowed: IP:PORT, such as 127.0.0.1:9464 or [::1]:9464 (0.0.0.0:9464 for every interface)"),
                ));
            }
            if self.http.tokens_file.is_none() {
                out.push(Problem::warning(
                    "http.tokens_file",
                    "is not set: only /metrics, /healthz, /readyz and the page answer; every route that needs a token answers 401 (crewlet token add writes the file)",
                ));
            }
        }
        if let Some(f) = &self.http.tokens_file {
            if !f.is_absolute() {
                out.push(Problem::error(
                    "http.tokens_file",
                    format!(
                        "{:?} is relative; write an absolute path",
                        f.display().to_string()
                    ),
                ));
            }
        }
    }

    fn validate_nats(&self, out: &mut Vec<Problem>) {
        let n = &self.nats;
        if let Some(url) = &n.url {
            if url.trim() != EMBEDDED_URL {
                for part in url.split(',') {
                    if let Err(e) = check_url(part.trim()) {
                        out.push(Problem::error("nats.url", e));
                    }
                }
            }
        }
        let methods: Vec<&str> = [
            ("creds", n.creds.is_some()),
            ("nkey", n.nkey.is_some()),
            ("user", n.user.is_some()),
            ("token", n.token.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
        if methods.len() > 1 {
            out.push(Problem::error(
                format!("nats.{}", methods[1]),
                format!(
                    "set together with nats.{}; choose one of creds, nkey, user/password or token",
                    methods[0]
                ),
            ));
        }
        match (&n.user, &n.password) {
            (Some(_), None) => out.push(Problem::error(
                "nats.user",
                "nats.password is required with nats.user",
            )),
            (None, Some(_)) => out.push(Problem::error(
                "nats.password",
                "nats.user is required with nats.password",
            )),
            _ => {}
        }
        if let Some(tls) = &n.tls {
            match (&tls.cert, &tls.key) {
                (Some(_), None) => out.push(Problem::error(
                    "nats.tls.cert",
                    "nats.tls.key is required with a client certificate",
                )),
                (None, Some(_)) => out.push(Problem::error(
                    "nats.tls.key",
                    "nats.tls.cert is required with a client key",
                )),
                _ => {}
            }
        }
        let t = n.connect_timeout.0;
        if t < Duration::from_millis(100) || t > Duration::from_secs(300) {
            out.push(Problem::error(
                "nats.connect_timeout",
                format!(
                    "{} is out of range; allowed: 100ms ..= 5m",
                    n.connect_timeout
                ),
            ));
        }
    }

    fn validate_buckets(&self, out: &mut Vec<Problem>) {
        let all = self.buckets.all();
        for (i, (field, name)) in all.iter().enumerate() {
            if let Err(e) = rows::check_bucket_name(name) {
                out.push(Problem::error(
                    format!("buckets.{field}"),
                    format!("bucket name {e}"),
                ));
            }
            if let Some((other, _)) = all[..i].iter().find(|(_, n)| n == name) {
                out.push(Problem::error(
                    format!("buckets.{field}"),
                    format!("{name:?} is also buckets.{other}; every bucket needs its own name"),
                ));
            }
        }
        if !matches!(self.buckets.replicas, 1 | 3 | 5) {
            out.push(Problem::error(
                "buckets.replicas",
                format!(
                    "{} replicas; allowed: 1, 3 or 5 (an odd count keeps a quorum; 3 on a cluster)",
                    self.buckets.replicas
                ),
            ));
        }
    }

    fn validate_retention(&self, out: &mut Vec<Problem>) {
        let r = &self.retention;
        for b in DUR_BOUNDS {
            let v = (b.get)(r);
            let field = format!("retention.{}", b.field);
            if v > b.max {
                out.push(Problem::error(
                    field,
                    format!("{v} is out of range; allowed: {} ..= {}", b.min, b.max),
                ));
            } else if v < b.min {
                if r.allow_unsafe_limits && v >= b.unsafe_min {
                    out.push(Problem::warning(
                        field,
                        format!(
                            "{v} is below the safe minimum {} (allowed only because retention.allow_unsafe_limits is true)",
                            b.min
                        ),
                    ));
                } else if r.allow_unsafe_limits {
                    out.push(Problem::error(
                        field,
                        format!(
                            "{v} is out of range even with allow_unsafe_limits; allowed: {} ..= {}",
                            b.unsafe_min, b.max
                        ),
                    ));
                } else {
                    out.push(Problem::error(
                        field,
                        format!(
                            "{v} is out of range; allowed: {} ..= {} (retention.allow_unsafe_limits: true lowers the minimum for tests and demos)",
                            b.min, b.max
                        ),
                    ));
                }
            }
        }
        if r.snapshots_kept == 0 || r.snapshots_kept > 100 {
            out.push(Problem::error(
                "retention.snapshots_kept",
                format!("{} is out of range; allowed: 1 ..= 100", r.snapshots_kept),
            ));
        }
        if r.snapshot_quorum == 0 || r.snapshot_quorum > 64 {
            out.push(Problem::error(
                "retention.snapshot_quorum",
                format!("{} is out of range; allowed: 1 ..= 64", r.snapshot_quorum),
            ));
        }
        // The cross-field rule: otherwise every snapshot ages out of the
        // replay window before its successor exists.
        let span = r
            .snapshot_interval
            .0
            .saturating_mul(r.snapshots_kept.saturating_add(1));
        if span >= r.min_age.0 {
            out.push(Problem::error(
                "retention.snapshot_interval",
                format!(
                    "snapshot_interval × (snapshots_kept + 1) = {} × {} = {} must be less than min_age ({}); shorten snapshot_interval or raise min_age",
                    r.snapshot_interval,
                    u64::from(r.snapshots_kept) + 1,
                    Dur(span),
                    r.min_age
                ),
            ));
        }
        // The fence must leave the purge time to be sent: otherwise every
        // purge would be given up as fence_expired and the log never trimmed.
        if r.fence_grant() < MIN_FENCE_GRANT {
            out.push(Problem::error(
                "retention.max_clock_skew",
                format!(
                    "{} leaves the duty holder {} to purge after each fence: the lease lasts 3 ticks ({}), less max_clock_skew, less one read timeout ({}), and at least {} is needed; lower max_clock_skew or lengthen retention.tick",
                    r.max_clock_skew,
                    Dur(r.fence_grant()),
                    Dur(r.duty_ttl()),
                    Dur(r.read_timeout()),
                    Dur(MIN_FENCE_GRANT),
                ),
            ));
        }
        match &r.backup_owner {
            Some(owner) if owner.trim().is_empty() => out.push(Problem::warning(
                "retention.backup_owner",
                "is empty; name the person, team or scheduler that runs the backups (the backup_age alarm names it)",
            )),
            None => out.push(Problem::warning(
                "retention.backup_owner",
                "is unset; name the person, team or scheduler that runs the backups (the backup_age alarm names it)",
            )),
            _ => {}
        }
        if r.backup_floor == BackupPolicy::Operator {
            out.push(Problem::warning(
                "retention.backup_floor",
                "is operator: the trim does not advance until someone runs `crewlet retention ack -stream S -position N`, and then only as far as acknowledged",
            ));
        }
    }

    fn validate_domains(&self, out: &mut Vec<Problem>) {
        if self.domains.is_empty() {
            out.push(Problem::error("domains", "no domain is configured; add at least one (- name: tracker, stream: CREWLET_TRACKER_LOG)"));
        }
        for (i, d) in self.domains.iter().enumerate() {
            let at = |f: &str| format!("domains[{i}].{f}");
            if let Err(e) = rows::check_node_id(&d.name) {
                out.push(Problem::error(at("name"), format!("domain name {e}")));
            }
            if let Err(e) = rows::check_stream_name(&d.stream) {
                out.push(Problem::error(at("stream"), format!("stream name {e}")));
            }
            if let Some(s) = &d.gate_subject {
                if let Err(e) = rows::check_literal_subject(s) {
                    out.push(Problem::error(at("gate_subject"), e));
                }
            }
            if let Some(c) = &d.feed_consumer {
                if let Err(e) = rows::check_stream_name(c) {
                    out.push(Problem::error(
                        at("feed_consumer"),
                        format!("consumer name {e}"),
                    ));
                }
            }
            if let Some(a) = &d.archive {
                a.validate(&at, out);
            }
            let earlier = &self.domains[..i];
            if !d.name.is_empty() {
                if let Some(j) = earlier.iter().position(|o| o.name == d.name) {
                    out.push(Problem::error(
                        at("name"),
                        format!(
                            "{:?} is also the name of domains[{j}]; domain names must be unique",
                            d.name
                        ),
                    ));
                }
            }
            if !d.stream.is_empty() {
                if let Some(j) = earlier.iter().position(|o| o.stream == d.stream) {
                    out.push(Problem::error(at("stream"), format!("{:?} is also the stream of domains[{j}]; two domains on one stream would trim it twice", d.stream)));
                }
            }
            // `-stream X` takes a domain name or a stream: X must name one
            // log, or a gesture could pin the wrong one.
            if !d.name.is_empty() {
                if let Some(j) = self
                    .domains
                    .iter()
                    .enumerate()
                    .position(|(k, o)| k != i && o.stream == d.name)
                {
                    out.push(Problem::error(at("name"), format!("{:?} is the stream of domains[{j}]; a domain name may not be another domain's stream (-stream would name two logs)", d.name)));
                }
            }
            if let Some(s) = &d.gate_subject {
                if let Some(j) = earlier
                    .iter()
                    .position(|o| o.gate_subject.as_deref() == Some(s))
                {
                    out.push(Problem::error(at("gate_subject"), format!("{s:?} is also the gate subject of domains[{j}]; a subject belongs to one stream")));
                }
            }
        }
    }

    /// The domain with this name or stream.
    /// The configured domains as error messages list them:
    /// `tracker (CREWLET_TRACKER_LOG), pages (CREWLET_PAGES_LOG)`.
    pub fn configured(&self) -> String {
        self.domains
            .iter()
            .map(|d| format!("{} ({})", d.name, d.stream))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn domain(&self, name_or_stream: &str) -> Option<&Domain> {
        self.domains
            .iter()
            .find(|d| d.stream == name_or_stream || d.name == name_or_stream)
    }
}

/// Checks one server URL of a list: `nats`, `tls`, `ws` or `wss`.
pub fn check_url(url: &str) -> Result<(), String> {
    let allowed = "nats://host:port, tls://host:port, ws(s)://host:port, or `embedded`";
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{:?} is not a URL; allowed: {allowed}", redact_url(url)))?;
    if !matches!(scheme, "nats" | "tls" | "ws" | "wss") {
        return Err(format!(
            "scheme {scheme:?} is not supported; allowed: {allowed}"
        ));
    }
    let host = rest.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(format!(
            "{:?} names no host; allowed: {allowed}",
            redact_url(url)
        ));
    }
    Ok(())
}

/// A URL fit to print: any `user:password@` or `token@` is replaced.
pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests;
