//! Judges a domain's stream settings (docs/trim-floor.md, Broker-side retention that
//! bypasses the gate; docs/configuration.md, What `validate` checks on the broker). Pure: the facts are read by the
//! broker module and passed in, so every rule is a unit test.

use crate::config::{Domain, Problem};
use crate::rows::subject_matches;

/// One GiB: the least `max_bytes` a production log may have.
pub const MIN_MAX_BYTES: i64 = 1 << 30;

/// The stream settings the checks need, as read from stream info.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamFacts {
    pub subjects: Vec<String>,
    /// -1 when unset.
    pub max_bytes: i64,
    /// `true` for `discard: new`.
    pub discard_new: bool,
    /// Zero when unset; kept to the nanosecond, as the broker stores it
    /// (a `max_age` of 500 ms deletes records; it is not 0).
    pub max_age: std::time::Duration,
    /// -1 when unset.
    pub max_msgs: i64,
    /// -1 when unset.
    pub max_msgs_per_subject: i64,
    /// `discard_new_per_subject`: a full subject refuses instead of shedding.
    pub discard_new_per_subject: bool,
    /// `limits`, `interest` or `workqueue`.
    pub retention: RetentionKind,
    /// `allow_msg_ttl`: a publisher's `Nats-TTL` header deletes its record.
    pub allow_msg_ttl: bool,
    /// `subject_delete_marker_ttl` (markers expire records), to the
    /// nanosecond.
    pub subject_delete_marker_ttl: Option<std::time::Duration>,
    /// `allow_rollup_hdrs`: a publish with `Nats-Rollup: all` deletes every
    /// earlier record of the stream (`sub`: every earlier one of its subject).
    pub allow_rollup: bool,
    /// `deny_delete`: clients may not delete single records.
    pub deny_delete: bool,
    /// `num_replicas` (1 when unset).
    pub replicas: usize,
}

/// A stream's retention policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetentionKind {
    #[default]
    Limits,
    Interest,
    WorkQueue,
}

/// A stream limit that deletes records behind the trim's back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Bypass {
    /// The stream setting (`max_age`, `max_msgs`, …).
    pub limit: Limit,
    /// Its value as the broker reports it.
    pub value: String,
}

/// A stream setting that can delete records the floor protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Limit {
    #[serde(rename = "max_age")]
    MaxAge,
    #[serde(rename = "max_msgs")]
    MaxMsgs,
    #[serde(rename = "max_msgs_per_subject")]
    MaxMsgsPerSubject,
    #[serde(rename = "max_bytes with discard: old")]
    MaxBytesDiscardOld,
    #[serde(rename = "retention")]
    Retention,
    #[serde(rename = "allow_msg_ttl")]
    AllowMsgTtl,
    #[serde(rename = "subject_delete_marker_ttl")]
    SubjectDeleteMarkerTtl,
    #[serde(rename = "allow_rollup_hdrs")]
    AllowRollupHdrs,
}

impl Limit {
    /// The setting as the broker names it (the JSON form too).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxAge => "max_age",
            Limit::MaxMsgs => "max_msgs",
            Limit::MaxMsgsPerSubject => "max_msgs_per_subject",
            Limit::MaxBytesDiscardOld => "max_bytes with discard: old",
            Limit::Retention => "retention",
            Limit::AllowMsgTtl => "allow_msg_ttl",
            Limit::SubjectDeleteMarkerTtl => "subject_delete_marker_ttl",
            Limit::AllowRollupHdrs => "allow_rollup_hdrs",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every setting of the stream's own that can delete a record the floor
/// protects (docs/runbook.md, broker_retention_bypass).
/// `max_bytes` and `max_msgs` only do so with `discard: old`,
/// `max_msgs_per_subject` only without `discard_new_per_subject`.
pub fn bypasses(f: &StreamFacts) -> Vec<Bypass> {
    let mut out = Vec::new();
    let mut add = |limit: Limit, value: String| out.push(Bypass { limit, value });
    if !f.max_age.is_zero() {
        add(Limit::MaxAge, setting_duration(f.max_age));
    }
    if f.max_msgs > 0 && !f.discard_new {
        add(Limit::MaxMsgs, f.max_msgs.to_string());
    }
    if f.max_msgs_per_subject > 0 && !f.discard_new_per_subject {
        add(Limit::MaxMsgsPerSubject, f.max_msgs_per_subject.to_string());
    }
    if f.max_bytes > 0 && !f.discard_new {
        add(Limit::MaxBytesDiscardOld, f.max_bytes.to_string());
    }
    match f.retention {
        RetentionKind::Limits => {}
        RetentionKind::Interest => add(Limit::Retention, "interest".into()),
        RetentionKind::WorkQueue => add(Limit::Retention, "workqueue".into()),
    }
    if f.allow_msg_ttl {
        add(Limit::AllowMsgTtl, "true".into());
    }
    if let Some(ttl) = f.subject_delete_marker_ttl {
        add(Limit::SubjectDeleteMarkerTtl, setting_duration(ttl));
    }
    if f.allow_rollup {
        add(Limit::AllowRollupHdrs, "true".into());
    }
    out
}

/// A stream's duration setting as an operator compares it with
/// `nats stream info`: whole seconds as `Ns`, anything finer exactly
/// (`500ms`), never rounded down to a harmless-looking 0.
fn setting_duration(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        humantime::format_duration(d).to_string()
    }
}

/// The remedy sentence for the bypasses found on `stream`: what to unset,
/// and what only recreating the stream changes.
pub fn bypass_remedy(stream: &str, found: &[Bypass]) -> String {
    let mut fixes = Vec::new();
    let limits = found.iter().any(|b| {
        matches!(
            b.limit,
            Limit::MaxAge | Limit::MaxMsgs | Limit::MaxMsgsPerSubject | Limit::MaxBytesDiscardOld
        )
    });
    if limits {
        fixes.push(format!("set discard: new and unset max_age, max_msgs and max_msgs_per_subject on {stream} (nats stream edit {stream} --discard new --max-age 0 --max-msgs=-1 --max-msgs-per-subject=-1)"));
    }
    if found.iter().any(|b| b.limit == Limit::AllowRollupHdrs) {
        fixes.push(format!(
            "turn rollups off on {stream} (nats stream edit {stream} --no-allow-rollup)"
        ));
    }
    let recreate: Vec<&str> = found
        .iter()
        .filter_map(|b| match b.limit {
            Limit::Retention => Some("retention: limits"),
            Limit::AllowMsgTtl => Some("allow_msg_ttl off"),
            Limit::SubjectDeleteMarkerTtl => Some("no subject_delete_marker_ttl"),
            _ => None,
        })
        .collect();
    if !recreate.is_empty() {
        fixes.push(format!(
            "these cannot be turned off on a live stream: move the log to a new stream with {} (then reanchor the domain on it)",
            recreate.join(", ")
        ));
    }
    fixes.join("; ")
}

/// The `nats` command that creates `domain`'s log as the checks want it:
/// its records' subjects and the gate subject, `discard: new`, a 1 GiB
/// ceiling, deletes denied, limits retention and nothing that ages records
/// out, `replicas` copies.
pub fn create_command(domain: &Domain, replicas: usize) -> String {
    let stream = &domain.stream;
    let mut subjects = vec![format!("{stream}.>")];
    subjects.extend(domain.gate_subject.clone());
    let subjects: Vec<String> = subjects
        .iter()
        .map(|s| format!("--subjects {}", crate::human::shell_word(s)))
        .collect();
    format!(
        "nats stream add {stream} {} --storage file --retention limits --discard new --max-bytes {MIN_MAX_BYTES} --deny-delete --replicas {replicas} --defaults",
        subjects.join(" ")
    )
}

/// The warning for a stream that lets clients delete single records
/// (`deny_delete: false`): not a bypass of the purge, but a way round the
/// floor for anyone with the permission.
pub fn delete_warning(stream: &str, f: &StreamFacts) -> Option<String> {
    (!f.deny_delete).then(|| format!(
        "stream {stream} has deny_delete: false: any client allowed $JS.API.STREAM.MSG.DELETE.{stream} can delete single records behind the floor; deny that subject in the account's permissions, or move the log to a stream with deny_delete: true"
    ))
}

/// On a cluster of `servers`, a stream or bucket with fewer replicas than
/// the servers (up to 3) loses the trim's inputs with one server: a
/// warning naming the fix. `None` off a cluster (`servers` is `None`).
pub fn replica_warning(
    field: &str,
    what: &str,
    stream: &str,
    replicas: usize,
    servers: Option<usize>,
) -> Option<Problem> {
    let want = servers?.min(3);
    (replicas < want).then(|| {
        Problem::warning(
            field,
            format!(
                "{what} has {replicas} replica(s) on a cluster of {} servers: one server lost loses it; raise it to {want} (nats stream edit {stream} --replicas {want})",
                servers.unwrap_or(want)
            ),
        )
    })
}

/// What `validate` says about one domain's stream. `index` places the
/// problems under `domains[index]`.
pub fn check_domain_stream(
    index: usize,
    domain: &Domain,
    facts: &StreamFacts,
    allow_unsafe_limits: bool,
) -> Vec<Problem> {
    let at = |f: &str| format!("domains[{index}].{f}");
    let mut out = Vec::new();
    let stream = &domain.stream;
    if let Some(gate) = &domain.gate_subject {
        if !facts.subjects.iter().any(|f| subject_matches(f, gate)) {
            out.push(Problem::error(
                at("gate_subject"),
                format!(
                    "{gate:?} is not matched by any subject of stream {stream} ({}); gate records would not land on the log",
                    facts.subjects.join(", ")
                ),
            ));
        }
    }
    if facts.max_bytes <= 0 {
        out.push(Problem::error(
            at("stream"),
            format!("stream {stream} has no max_bytes; a log needs a ceiling (at least 1 GiB) for the headroom and the gate reserve to mean anything"),
        ));
    } else if facts.max_bytes < MIN_MAX_BYTES {
        let msg = format!(
            "stream {stream} has max_bytes {}; allowed: at least {MIN_MAX_BYTES} (1 GiB)",
            facts.max_bytes
        );
        if allow_unsafe_limits {
            out.push(Problem::warning(
                at("stream"),
                format!("{msg} (allowed only because retention.allow_unsafe_limits is true)"),
            ));
        } else {
            out.push(Problem::error(at("stream"), msg));
        }
    }
    if !facts.discard_new {
        out.push(Problem::error(
            at("stream"),
            format!("stream {stream} has discard: old; it must be discard: new so that a full log refuses instead of shedding"),
        ));
    }
    let found = bypasses(facts);
    if !found.is_empty() {
        let list: Vec<String> = found
            .iter()
            .map(|b| format!("{} = {}", b.limit, b.value))
            .collect();
        out.push(
            Problem::error(
                at("stream"),
                format!(
                    "stream {stream}'s own limits can delete records the floor protects ({}); {}",
                    list.join(", "),
                    bypass_remedy(stream, &found)
                ),
            )
            .with_code("broker_retention_bypass"),
        );
    }
    if let Some(w) = delete_warning(stream, facts) {
        out.push(Problem::warning(at("stream"), w));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_replicas_on_a_cluster_warn() {
        assert!(
            replica_warning("f", "stream T", "T", 1, None).is_none(),
            "no cluster"
        );
        assert!(replica_warning("f", "stream T", "T", 3, Some(3)).is_none());
        assert!(
            replica_warning("f", "stream T", "T", 3, Some(5)).is_none(),
            "3 is enough"
        );
        let w = replica_warning("f", "stream T", "T", 1, Some(3)).expect("a warning");
        assert!(
            w.message.contains("nats stream edit T --replicas 3"),
            "{}",
            w.message
        );
        assert!(replica_warning("f", "stream T", "T", 1, Some(2)).is_some());
    }

    fn good() -> StreamFacts {
        StreamFacts {
            subjects: vec!["crewlet.tracker.>".into()],
            max_bytes: 8 << 30,
            discard_new: true,
            max_age: std::time::Duration::ZERO,
            max_msgs: -1,
            max_msgs_per_subject: -1,
            deny_delete: true,
            ..Default::default()
        }
    }

    fn domain() -> Domain {
        Domain {
            name: "tracker".into(),
            stream: "T".into(),
            gate_subject: Some("crewlet.tracker.gate".into()),
            gate_reserve: true,
            feed_consumer: None,
            archive: None,
            replicas: Default::default(),
        }
    }

    fn check(f: StreamFacts, unsafe_ok: bool) -> Vec<String> {
        check_domain_stream(0, &domain(), &f, unsafe_ok)
            .iter()
            .map(|p| p.render("c"))
            .collect()
    }

    #[test]
    fn a_well_set_stream_passes() {
        assert!(check(good(), false).is_empty());
    }

    #[test]
    fn each_rule() {
        let cases: Vec<(&str, StreamFacts, bool, &[&str])> = vec![
            ("discard old", StreamFacts { discard_new: false, ..good() }, false,
             &["discard: old", "broker_retention_bypass: stream T's own limits can delete records the floor protects (max_bytes with discard: old = 8589934592)"]),
            ("max_age", StreamFacts { max_age: std::time::Duration::from_secs(3600), ..good() }, false, &["broker_retention_bypass", "max_age = 3600s"]),
            ("sub-second max_age", StreamFacts { max_age: std::time::Duration::from_millis(500), ..good() }, false, &["broker_retention_bypass", "max_age = 500ms"]),
            ("rollups", StreamFacts { allow_rollup: true, ..good() }, false, &["(allow_rollup_hdrs = true)", "nats stream edit T --no-allow-rollup"]),
            ("max_msgs_per_subject", StreamFacts { max_msgs_per_subject: 5, ..good() }, false, &["max_msgs_per_subject = 5"]),
            ("no max_bytes", StreamFacts { max_bytes: -1, ..good() }, false, &["has no max_bytes"]),
            ("small max_bytes", StreamFacts { max_bytes: 1 << 20, ..good() }, false, &["error: c: domains[0].stream: stream T has max_bytes 1048576"]),
            ("small max_bytes, unsafe", StreamFacts { max_bytes: 1 << 20, ..good() }, true, &["warning: c: domains[0].stream: stream T has max_bytes 1048576"]),
            ("gate subject elsewhere", StreamFacts { subjects: vec!["other.>".into()], ..good() }, false, &["domains[0].gate_subject: \"crewlet.tracker.gate\" is not matched"]),
        ];
        for (what, facts, unsafe_ok, wants) in cases {
            let got = check(facts, unsafe_ok).join("\n");
            for want in wants {
                assert!(got.contains(want), "{what}: want {want:?} in\n{got}");
            }
        }
    }

    #[test]
    fn settings_that_delete_records_are_bypasses() {
        let cases: Vec<(&str, StreamFacts, &str)> = vec![
            (
                "workqueue",
                StreamFacts {
                    retention: RetentionKind::WorkQueue,
                    ..good()
                },
                "retention = workqueue",
            ),
            (
                "interest",
                StreamFacts {
                    retention: RetentionKind::Interest,
                    ..good()
                },
                "retention = interest",
            ),
            (
                "msg ttl",
                StreamFacts {
                    allow_msg_ttl: true,
                    ..good()
                },
                "allow_msg_ttl = true",
            ),
            (
                "markers",
                StreamFacts {
                    subject_delete_marker_ttl: Some(std::time::Duration::from_secs(60)),
                    ..good()
                },
                "subject_delete_marker_ttl = 60s",
            ),
        ];
        for (what, facts, want) in cases {
            let got = check(facts, false).join("\n");
            assert!(
                got.contains(want) && got.contains("broker_retention_bypass"),
                "{what}: {got}"
            );
            assert!(
                got.contains("cannot be turned off on a live stream"),
                "{what}: {got}"
            );
        }
        // Per subject with discard_new_per_subject refuses instead.
        let refused = StreamFacts {
            max_msgs_per_subject: 5,
            discard_new_per_subject: true,
            ..good()
        };
        assert!(bypasses(&refused).is_empty());
        // deny_delete: false is a warning naming the permission.
        let got = check(
            StreamFacts {
                deny_delete: false,
                ..good()
            },
            false,
        )
        .join("\n");
        assert!(
            got.starts_with("warning:") && got.contains("$JS.API.STREAM.MSG.DELETE.T"),
            "{got}"
        );
    }

    #[test]
    fn max_msgs_with_discard_new_refuses_rather_than_deletes() {
        assert!(bypasses(&StreamFacts {
            max_msgs: 10,
            ..good()
        })
        .is_empty());
        assert_eq!(
            bypasses(&StreamFacts {
                max_msgs: 10,
                discard_new: false,
                ..good()
            })
            .len(),
            2
        );
    }
}
