//! The configuration's types: every section and field, with its named
//! default (docs/configuration.md).

use super::*;

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

/// How `backup_floor` is read (docs/trim-floor.md, Each term in detail).
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
    /// Every this many ticks each bucket is read whole, whatever its
    /// incremental view proves (1: every tick).
    pub full_read_every: u32,
    /// How long an alarm's condition must hold before `run` raises it
    /// (log line, metric); unset: three ticks ([`Retention::alarm_grace`]).
    pub alarm_grace: Option<Dur>,
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
            full_read_every: DEFAULT_FULL_READ_EVERY,
            alarm_grace: None,
        }
    }
}

/// The default of `retention.full_read_every`: at the default 10 s tick a
/// full read every 5 minutes, at a 1 s tick every 30 s. A full read of
/// 100 000 rows costs about as much as 100 ticks that each find 1 % changed,
/// so once in 30 adds a few percent to an idle sidecar's cost, and bounds
/// how long a view could be wrong in a way no proof catches (none is known;
/// this is the belt to the proofs' braces).
pub const DEFAULT_FULL_READ_EVERY: u32 = 30;

/// The least time a fence must grant a purge (docs/trim-floor.md,
/// Fencing): a stream-info re-read and the purge request fit in it on a
/// loaded broker.
pub const MIN_FENCE_GRANT: Duration = Duration::from_millis(500);

/// The longest a single read may take ([`Retention::read_timeout`]).
pub const MAX_READ_TIMEOUT: Duration = Duration::from_secs(10);

impl Retention {
    /// How long an alarm's condition must hold before `run` raises it:
    /// `alarm_grace`, or three ticks, so that a leader election or a
    /// server restart that ends within it is logged, not paged.
    pub fn alarm_grace(&self) -> Dur {
        self.alarm_grace.unwrap_or(Dur(self.tick.0 * 3))
    }

    /// The duty lease's TTL: three ticks (docs/contract.md, `crewlet_duty` — who trims).
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
        fence_window(self.duty_ttl(), self.duty_ttl(), self.fence_margin())
    }

    /// What comes off a lease's TTL before its fence grants a purge: the
    /// clock skew allowed and one read timeout.
    pub fn fence_margin(&self) -> Duration {
        self.max_clock_skew.0 + self.read_timeout()
    }
}

/// PURE: how long a fence grants its purge after the renewal is sent, for
/// a lease that this configuration gives `configured` and the duty bucket
/// itself keeps for `bucket_max_age` (zero: for ever). The broker expires
/// the lease by the bucket's `max_age`, not by anyone's configuration, so
/// a bucket created or edited by a sidecar with a shorter tick shortens
/// every fence: the shorter of the two less `margin`
/// ([`Retention::fence_margin`]), zero when nothing is left.
pub fn fence_window(configured: Duration, bucket_max_age: Duration, margin: Duration) -> Duration {
    let lease = if bucket_max_age.is_zero() {
        configured
    } else {
        configured.min(bucket_max_age)
    };
    lease.saturating_sub(margin)
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
    /// Consumers that pin as a replica does, and replicas left out
    /// (docs/trim-floor.md, Replicas); durable mirrors and sources pin
    /// without it.
    #[serde(default)]
    pub replicas: Replicas,
}

/// `domains[].replicas`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replicas {
    /// Durable consumers on the log that pin as a replica does (a
    /// downstream system's own consumer, like a replication slot).
    #[serde(default)]
    pub consumers: Vec<String>,
    /// Replicas deliberately left out: they pin nothing (said on every
    /// run).
    #[serde(default)]
    pub ignore: Vec<String>,
}

/// `domains[].archive` — where and how the log is folded before it is
/// trimmed (exactly one of `object_store`, `dir` and `url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveConfig {
    /// A JetStream Object Store bucket (`init` creates it).
    #[serde(default)]
    pub object_store: Option<String>,
    /// Or a local directory (absolute).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Or cloud object storage: `s3://BUCKET/PREFIX`, `gs://…`, `az://…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// With `url`: another endpoint than the cloud's own (an
    /// S3-compatible store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// With `url` (S3): the region (unset: `AWS_REGION`, the AWS config
    /// file, else us-east-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// With `endpoint`: plain HTTP (a local test store only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_http: Option<bool>,
    /// With `url`: the credentials file, in the cloud's own format (a
    /// path; never a secret in this file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
    /// With `url` (S3): the profile of the credentials file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// With `url`: whether the instance's metadata service may be asked
    /// for credentials when nothing else gives them (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_metadata: Option<bool>,
    /// With `url` (Azure): the storage account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
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

pub(super) fn default_segment_records() -> u64 {
    10_000
}
pub(super) fn default_segment_bytes() -> size::Size {
    size::Size(8 << 20)
}
pub(super) fn default_fold_per_tick() -> u64 {
    16
}

impl ArchiveConfig {
    /// The configuration that names `store`, with the default limits: the
    /// inverse of [`ArchiveConfig::store`].
    pub fn of(store: &crate::archive::state::Store) -> ArchiveConfig {
        use crate::archive::state::Store;
        let mut a = ArchiveConfig {
            object_store: None,
            dir: None,
            url: None,
            endpoint: None,
            region: None,
            allow_http: None,
            credentials_file: None,
            profile: None,
            instance_metadata: None,
            account: None,
            segment_records: default_segment_records(),
            segment_bytes: default_segment_bytes(),
            fold_per_tick: default_fold_per_tick(),
        };
        match store {
            Store::ObjectStore(b) => a.object_store = Some(b.clone()),
            Store::Dir(d) => a.dir = Some(d.clone()),
            Store::Cloud(r) => {
                a.url = Some(r.id());
                a.endpoint = r.endpoint.clone();
                a.region = r.region.clone();
                a.allow_http = r.allow_http.then_some(true);
                a.credentials_file = r.credentials_file.clone();
                a.profile = r.profile.clone();
                a.instance_metadata = (!r.instance_metadata).then_some(false);
                a.account = r.account.clone();
            }
        }
        a
    }

    /// The store segments go to (the object store when, against
    /// validation, both are set).
    pub fn store(&self) -> crate::archive::state::Store {
        use crate::archive::state::Store;
        match (&self.object_store, &self.dir, self.remote()) {
            (Some(b), _, _) => Store::ObjectStore(b.clone()),
            (None, Some(d), _) => Store::Dir(d.clone()),
            (None, None, Some(r)) => Store::Cloud(r),
            (None, None, None) => Store::ObjectStore(String::new()),
        }
    }

    /// The cloud store `url` names, with its overrides (`None` without a
    /// `url`, or one that does not parse, which validation refuses).
    pub fn remote(&self) -> Option<crate::archive::remote::Remote> {
        let (cloud, bucket, prefix) =
            crate::archive::remote::parse_url(self.url.as_deref()?).ok()?;
        Some(crate::archive::remote::Remote {
            cloud,
            bucket,
            prefix,
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            allow_http: self.allow_http.unwrap_or(false),
            credentials_file: self.credentials_file.clone(),
            profile: self.profile.clone(),
            instance_metadata: self.instance_metadata.unwrap_or(true),
            account: self.account.clone(),
        })
    }

    pub fn limits(&self) -> crate::archive::cut::Limits {
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        crate::archive::cut::Limits {
            segment_records: n(self.segment_records),
            segment_bytes: n(self.segment_bytes.0),
            fold_per_tick: n(self.fold_per_tick),
        }
    }

    pub(super) fn validate(&self, at: &dyn Fn(&str) -> String, out: &mut Vec<Problem>) {
        let named: Vec<&str> = [
            ("object_store", self.object_store.is_some()),
            ("dir", self.dir.is_some()),
            ("url", self.url.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        match named.len() {
            0 => out.push(Problem::error(
                at("archive"),
                "names no store; set object_store (a JetStream Object Store bucket), dir (a local directory) or url (cloud object storage: s3://, gs://, az://)",
            )),
            1 => {}
            _ => out.push(Problem::error(
                at("archive"),
                format!(
                    "names {}; an archive is one store: keep one of them",
                    match named.as_slice() {
                        [a, b] => format!("both {a} and {b}"),
                        _ => "object_store, dir and url".to_string(),
                    }
                ),
            )),
        }
        super::cloud::validate(self, at, out);
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

pub(super) fn default_true() -> bool {
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
