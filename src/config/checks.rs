//! The rules between fields and their bounds: `Config::validate`.

use super::*;

/// A bound on a duration field: the normal minimum, the minimum under
/// `allow_unsafe_limits`, and the maximum.
pub(super) struct DurBound {
    pub(super) field: &'static str,
    pub(super) get: fn(&Retention) -> Dur,
    pub(super) min: Dur,
    pub(super) unsafe_min: Dur,
    pub(super) max: Dur,
}

pub(super) const DUR_BOUNDS: &[DurBound] = &[
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
        field: "alarm_grace",
        get: |r| r.alarm_grace(),
        min: Dur::secs(0),
        unsafe_min: Dur::secs(0),
        max: Dur::hours(1),
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
        // The counts, each 1 ..= its maximum.
        for (field, n, max, note) in [
            ("retention.snapshots_kept", r.snapshots_kept, 100, ""),
            (
                "retention.full_read_every",
                r.full_read_every,
                10_000,
                " (1 reads every bucket whole every tick)",
            ),
            ("retention.snapshot_quorum", r.snapshot_quorum, 64, ""),
        ] {
            if n == 0 || n > max {
                out.push(Problem::error(
                    field,
                    format!("{n} is out of range; allowed: 1 ..= {max}{note}"),
                ));
            }
        }
        // The cross-field rule: otherwise every snapshot ages out of the
        // replay window before its successor exists.
        let span = r
            .snapshot_interval
            .0
            .saturating_mul(r.snapshots_kept.saturating_add(1));
        if span >= r.min_age.0 {
            let kept = u64::from(r.snapshots_kept) + 1;
            // A value of each that works with the other as it stands.
            // (Only one within snapshot_interval's own range.)
            let least = if r.allow_unsafe_limits {
                std::time::Duration::from_millis(100)
            } else {
                std::time::Duration::from_secs(3_600)
            };
            let interval = round_below(r.min_age.0 / u32::try_from(kept).unwrap_or(u32::MAX))
                .filter(|i| *i >= least);
            let min_age = round_above(span);
            let works = match interval {
                Some(i) => format!(
                    "snapshot_interval: {} works with min_age {}, or min_age: {} with snapshot_interval {}",
                    Dur(i),
                    r.min_age,
                    Dur(min_age),
                    r.snapshot_interval
                ),
                None => format!("min_age: {} works with snapshot_interval {}", Dur(min_age), r.snapshot_interval),
            };
            out.push(Problem::error(
                "retention.snapshot_interval",
                format!(
                    "snapshot_interval × (snapshots_kept + 1) = {} × {} = {} must be less than min_age ({}); shorten snapshot_interval or raise min_age: {works}",
                    r.snapshot_interval,
                    kept,
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
            for (field, names) in [
                ("replicas.consumers", &d.replicas.consumers),
                ("replicas.ignore", &d.replicas.ignore),
            ] {
                for (k, c) in names.iter().enumerate() {
                    if let Err(e) = rows::check_stream_name(c) {
                        out.push(Problem::error(
                            at(&format!("{field}[{k}]")),
                            format!("consumer name {e}"),
                        ));
                    }
                }
            }
            if let Some(both) = d
                .replicas
                .consumers
                .iter()
                .find(|c| d.replicas.ignore.contains(c))
            {
                out.push(Problem::error(
                    at("replicas.ignore"),
                    format!("{both:?} is both named to pin (replicas.consumers) and left out; keep it in one list"),
                ));
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

/// The largest whole number of the largest unit (day, hour, minute,
/// second) strictly below `limit`; `None` below a second.
fn round_below(limit: std::time::Duration) -> Option<std::time::Duration> {
    for unit in [86_400u64, 3_600, 60, 1] {
        let whole = limit.as_secs() / unit;
        let d = std::time::Duration::from_secs(whole * unit);
        if whole >= 1 && d < limit {
            return Some(d);
        }
        if whole >= 1 {
            let less = std::time::Duration::from_secs((whole - 1) * unit);
            if !less.is_zero() {
                return Some(less);
            }
        }
    }
    None
}

/// The smallest whole number of days (or hours, below a day) strictly
/// above `span`.
fn round_above(span: std::time::Duration) -> std::time::Duration {
    let unit = if span.as_secs() >= 86_400 {
        86_400
    } else {
        3_600
    };
    std::time::Duration::from_secs((span.as_secs() / unit + 1) * unit)
}
