//! The Prometheus families (docs/http.md, Metrics) from this sidecar's last tick. The
//! gauges are rebuilt from each tick's answers (a domain, term or alarm
//! that went away leaves no stale series); the tick-duration histogram and
//! the purged-records counter live across ticks. The text is encoded once
//! per tick, so a scrape never waits on the broker.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::alarms::Alarm;
use crate::floor::{Answer, TermState};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DomainLabels {
    domain: String,
    stream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TermLabels {
    domain: String,
    stream: String,
    term: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    domain: String,
    stream: String,
    term: String,
    state: String,
}

/// `domain` and `stream` (as every per-domain family has them) and
/// `alarm`; a fleet-level alarm has `alarm` alone, no empty domain.
type AlarmLabels = Vec<(String, String)>;

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// What lives across ticks.
#[derive(Clone)]
pub struct Lasting {
    tick_duration: Histogram,
    purged: Counter,
}

impl Default for Lasting {
    fn default() -> Self {
        Lasting {
            // 10 ms to about 20 s: a tick is tens of milliseconds on an
            // idle log and seconds with a large fold or age proof.
            tick_duration: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.01, 2.0, 12),
            ),
            purged: Counter::default(),
        }
    }
}

impl Lasting {
    /// Records one tick.
    pub fn observe(&self, seconds: f64, purged: u64) {
        self.tick_duration.observe(seconds);
        self.purged.inc_by(purged);
    }
}

/// The exposition text for this tick's answers and alarms.
pub fn encode(answers: &[Answer], alarms: &[Alarm], lasting: &Lasting) -> String {
    let mut r = Registry::with_prefix("crewlet");
    let gauge = |r: &mut Registry, name: &str, help: &str| {
        let f = Family::<DomainLabels, Gauge>::default();
        r.register(name, help, f.clone());
        f
    };
    let bytes = gauge(&mut r, "bytes", "bytes the log holds");
    let max_bytes = gauge(&mut r, "max_bytes", "the log's max_bytes (-1: unset)");
    let reserve = gauge(
        &mut r,
        "reserve_bytes",
        "the gate reserve: the top sixteenth of max_bytes",
    );
    let headroom = Family::<DomainLabels, FloatGauge>::default();
    r.register(
        "headroom_fraction",
        "1 - bytes / soft ceiling, not below 0",
        headroom.clone(),
    );
    let first = gauge(&mut r, "first_seq", "the log's first sequence");
    let last = gauge(&mut r, "last_seq", "the log's last sequence");
    let floor = gauge(
        &mut r,
        "trim_floor",
        "the first sequence certainly still on the log (published)",
    );
    let trim_to = gauge(&mut r, "trim_to", "what this tick licenses deleting up to");
    let term_seq = Family::<TermLabels, Gauge>::default();
    r.register(
        "term_seq",
        "a term's value (terms in state value only)",
        term_seq.clone(),
    );
    let term_state = Family::<StateLabels, Gauge>::default();
    r.register(
        "term_state",
        "1 for each term's current state",
        term_state.clone(),
    );
    let held_records = Family::<TermLabels, Gauge>::default();
    r.register(
        "term_held_records",
        "records the trim would also delete without this term (terms that bind or block)",
        held_records.clone(),
    );
    let held_bytes = Family::<TermLabels, Gauge>::default();
    r.register(
        "term_held_bytes",
        "an estimate of those records' bytes, from the log's mean record size",
        held_bytes.clone(),
    );
    let blocked = gauge(&mut r, "blocked", "1 while blocked_by is not empty");
    let blocked_seconds = Family::<DomainLabels, FloatGauge>::default();
    r.register(
        "blocked_seconds",
        "seconds since held_since",
        blocked_seconds.clone(),
    );
    let alarm = Family::<AlarmLabels, Gauge>::default();
    r.register("alarm", "1 while the alarm is active", alarm.clone());
    let frontier = gauge(
        &mut r,
        "archive_frontier",
        "the archive's frontier (archived domains)",
    );
    r.register(
        "tick_duration_seconds",
        "how long each tick took",
        lasting.tick_duration.clone(),
    );
    r.register(
        "purged_records",
        "records this sidecar purged",
        lasting.purged.clone(),
    );

    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for a in answers {
        let l = DomainLabels {
            domain: a.domain.clone(),
            stream: a.stream.clone(),
        };
        if a.stream_error.is_none() {
            bytes.get_or_create(&l).set(i(a.bytes));
            max_bytes.get_or_create(&l).set(a.max_bytes);
            reserve.get_or_create(&l).set(i(a.reserve_bytes));
            headroom.get_or_create(&l).set(a.headroom_fraction);
            first.get_or_create(&l).set(i(a.first_seq));
            last.get_or_create(&l).set(i(a.last_seq));
        }
        if let Some(f) = a.floor {
            floor.get_or_create(&l).set(i(f));
        }
        trim_to.get_or_create(&l).set(i(a.trim_to));
        for t in &a.terms {
            let term = t.term.as_str().to_string();
            if let Some(h) = t.held {
                let labels = TermLabels {
                    domain: a.domain.clone(),
                    stream: a.stream.clone(),
                    term: term.clone(),
                };
                held_records.get_or_create(&labels).set(i(h.records));
                held_bytes.get_or_create(&labels).set(i(h.bytes));
            }
            let state = match &t.state {
                TermState::Value { seq, .. } => {
                    term_seq
                        .get_or_create(&TermLabels {
                            domain: a.domain.clone(),
                            stream: a.stream.clone(),
                            term: term.clone(),
                        })
                        .set(i(*seq));
                    "value"
                }
                TermState::Unbounded => "unbounded",
                TermState::NotApplicable => "n/a",
                TermState::Unreadable { .. } => "unreadable",
            };
            term_state
                .get_or_create(&StateLabels {
                    domain: a.domain.clone(),
                    stream: a.stream.clone(),
                    term,
                    state: state.into(),
                })
                .set(1);
        }
        blocked
            .get_or_create(&l)
            .set(i64::from(!a.blocked_by.is_empty()));
        let since = a.held_since.map_or(0.0, |h| {
            (a.at.0 - h.0).to_std().map_or(0.0, |d| d.as_secs_f64())
        });
        blocked_seconds.get_or_create(&l).set(since);
        if let Some(f) = a.archive.as_ref().and_then(|s| s.frontier) {
            frontier.get_or_create(&l).set(i(f));
        }
    }
    for a in alarms {
        let mut labels: AlarmLabels = Vec::new();
        if let Some(d) = &a.domain {
            labels.push(("domain".into(), d.clone()));
            if let Some(stream) = answers.iter().find(|x| &x.domain == d).map(|x| &x.stream) {
                labels.push(("stream".into(), stream.clone()));
            }
        }
        labels.push(("alarm".into(), a.alarm.to_string()));
        alarm.get_or_create(&labels).set(1);
    }
    let mut out = String::new();
    // Encoding into a String cannot fail but for a formatter error.
    if prometheus_client::encoding::text::encode(&mut out, &r).is_err() {
        out.clear();
    }
    out
}

/// `tick` (one tick's exposition) with the two families that change
/// between ticks, as of now: `crewlet_broker_connected` and
/// `crewlet_answer_age_seconds` (none before the first answer). They go
/// before the closing `# EOF`.
/// Whether the duty lease the last tick held is still surely ours: the
/// lease lives `ttl` from the renewal that tick made, and past that,
/// without a tick to renew it (an outage), it cannot be confirmed: 0.
pub fn duty_still_held(
    recorded: bool,
    answer_age_seconds: Option<f64>,
    ttl: std::time::Duration,
) -> bool {
    recorded && answer_age_seconds.is_some_and(|age| age < ttl.as_secs_f64())
}

pub fn with_live(
    tick: &str,
    connected: bool,
    answer_age_seconds: Option<f64>,
    duty_held: bool,
) -> String {
    let mut r = Registry::with_prefix("crewlet");
    let held = Gauge::<i64>::default();
    r.register(
        "duty_held",
        "1 while this sidecar holds the trim duty (0 once its lease can no longer be confirmed)",
        held.clone(),
    );
    held.set(i64::from(duty_held));
    let up = Gauge::<i64>::default();
    r.register(
        "broker_connected",
        "1 while the broker can be reached",
        up.clone(),
    );
    up.set(i64::from(connected));
    if let Some(age) = answer_age_seconds {
        let g = FloatGauge::default();
        r.register(
            "answer_age_seconds",
            "seconds since the answer the other values come from",
            g.clone(),
        );
        g.set(age);
    }
    let mut live = String::new();
    if prometheus_client::encoding::text::encode(&mut live, &r).is_err() {
        return tick.to_string();
    }
    let body = tick.strip_suffix("# EOF\n").unwrap_or(tick);
    // The live registry's own text ends with `# EOF` too.
    format!("{body}{live}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_families_of_http_md_with_the_answers_values() {
        let a = crate::floor::tests::World::new().answer();
        let lasting = Lasting::default();
        lasting.observe(0.05, 7);
        let alarm = Alarm {
            alarm: crate::alarms::AlarmName::DutyUnheld,
            domain: None,
            measurement: String::new(),
            remedy: String::new(),
        };
        let text = encode(std::slice::from_ref(&a), &[alarm], &lasting);
        let d = format!("domain=\"tracker\",stream=\"{}\"", a.stream);
        for line in [
            format!("crewlet_first_seq{{{d}}} 1"),
            format!("crewlet_last_seq{{{d}}} 1000"),
            format!("crewlet_trim_to{{{d}}} {}", a.trim_to),
            format!("crewlet_term_seq{{{d},term=\"applied\"}} 900"),
            format!("crewlet_term_state{{{d},term=\"min_hold\",state=\"unbounded\"}} 1"),
            format!("crewlet_term_state{{{d},term=\"archive_floor\",state=\"n/a\"}} 1"),
            format!(
                "crewlet_blocked{{{d}}} {}",
                i64::from(!a.blocked_by.is_empty())
            ),
            "crewlet_alarm{alarm=\"duty_unheld\"} 1".to_string(),
            "crewlet_purged_records_total 7".to_string(),
            "crewlet_tick_duration_seconds_count 1".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(
            !text.contains(
                "term_seq{domain=\"tracker\",stream=\"CREWLET_TRACKER_LOG\",term=\"min_hold\""
            ),
            "only terms in state value"
        );
        assert!(!text.contains("archive_frontier{"), "no archive here");
        let live = with_live(&text, false, Some(12.5), true);
        assert!(live.lines().any(|l| l == "crewlet_duty_held 1"), "{live}");
        assert_eq!(live.matches("# EOF").count(), 1, "{live}");
        assert!(live.ends_with("# EOF\n"), "{live}");
        assert!(
            live.lines().any(|l| l == "crewlet_broker_connected 0"),
            "{live}"
        );
        assert!(
            live.lines().any(|l| l == "crewlet_answer_age_seconds 12.5"),
            "{live}"
        );
        assert!(
            live.contains("crewlet_trim_to{"),
            "the tick's families stay"
        );
    }

    /// The lease lives three ticks from its last renewal: an answer older
    /// than that cannot say the duty is still held (it read 1 well into an
    /// outage).
    #[test]
    fn the_duty_reads_0_once_its_lease_cannot_be_confirmed() {
        let ttl = std::time::Duration::from_secs(15);
        assert!(duty_still_held(true, Some(3.0), ttl));
        assert!(
            !duty_still_held(true, Some(24.0), ttl),
            "24 s into an outage"
        );
        assert!(!duty_still_held(true, None, ttl));
        assert!(!duty_still_held(false, Some(1.0), ttl));
        let live = with_live(
            "# EOF\n",
            false,
            Some(24.0),
            duty_still_held(true, Some(24.0), ttl),
        );
        assert!(live.lines().any(|l| l == "crewlet_duty_held 0"), "{live}");
    }
}
