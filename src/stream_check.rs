//! Judges a domain's stream settings (floor.md, Broker-side retention that
//! bypasses the gate; cli.md, `validate`). Pure: the facts are read by the
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
    /// Zero when unset.
    pub max_age_secs: u64,
    /// -1 when unset.
    pub max_msgs: i64,
    /// -1 when unset.
    pub max_msgs_per_subject: i64,
}

/// A stream limit that deletes records behind the trim's back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Bypass {
    /// The stream setting (`max_age`, `max_msgs`, …).
    pub limit: &'static str,
    /// Its value as the broker reports it.
    pub value: String,
}

/// Every limit of the stream's own that can delete a record the floor
/// protects. `max_bytes` only does so with `discard: old`.
pub fn bypasses(f: &StreamFacts) -> Vec<Bypass> {
    let mut out = Vec::new();
    if f.max_age_secs > 0 {
        out.push(Bypass {
            limit: "max_age",
            value: format!("{}s", f.max_age_secs),
        });
    }
    if f.max_msgs > 0 && !f.discard_new {
        out.push(Bypass {
            limit: "max_msgs",
            value: f.max_msgs.to_string(),
        });
    }
    if f.max_msgs_per_subject > 0 {
        out.push(Bypass {
            limit: "max_msgs_per_subject",
            value: f.max_msgs_per_subject.to_string(),
        });
    }
    if f.max_bytes > 0 && !f.discard_new {
        out.push(Bypass {
            limit: "max_bytes with discard: old",
            value: f.max_bytes.to_string(),
        });
    }
    out
}

/// The remedy sentence for a bypass.
pub fn bypass_remedy(stream: &str) -> String {
    format!("set discard: new and unset max_age, max_msgs and max_msgs_per_subject on {stream} (nats stream edit {stream} --discard new --max-age 0 --max-msgs=-1 --max-msgs-per-subject=-1)")
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
                    bypass_remedy(stream)
                ),
            )
            .with_code("broker_retention_bypass"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> StreamFacts {
        StreamFacts {
            subjects: vec!["crewlet.tracker.>".into()],
            max_bytes: 8 << 30,
            discard_new: true,
            max_age_secs: 0,
            max_msgs: -1,
            max_msgs_per_subject: -1,
        }
    }

    fn domain() -> Domain {
        Domain {
            name: "tracker".into(),
            stream: "T".into(),
            gate_subject: Some("crewlet.tracker.gate".into()),
            gate_reserve: true,
            feed_consumer: None,
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
            ("max_age", StreamFacts { max_age_secs: 3600, ..good() }, false, &["broker_retention_bypass", "max_age = 3600s"]),
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
