//! Placing a hold with its handshake (docs/trim-floor.md, Pins that arrive during a
//! tick). A hold is written with create (an existing id is refused unless
//! replaced on the revision read), then proved against the log: records it
//! needs that are already gone make it `too_late` (and it is released);
//! while a duty lease is held a tick may be in flight that read the holds
//! before this one landed, so the hold waits for the first answer a later
//! tick publishes and checks again. Only then is it `held`.
//!
//! Why a later tick's answer settles it: ticks of one holder run one after
//! another, and each re-reads the holds after publishing and before
//! purging. An answer published after the hold was written comes from a
//! tick whose re-read follows the write, and any earlier tick has finished
//! its purge by then. A row rewritten within the same tick (to record what
//! bounded its purge) keeps its `at`, so only a new `at` counts.
//!
//! Every read it confirms against is proven current (`Proven`, answered by
//! the bucket's stream leader): the floors row before, the lease, and the
//! floors row after. A replica behind could show no lease, or an old row as
//! new; a read that fails leaves the hold `unconfirmed`, never `held`.

use std::time::{Duration, Instant};

use crate::broker::kv::{CasError, LeaderReadError};
use crate::broker::Broker;
use crate::config::Config;
use crate::exit::{Class, Exit};
use crate::floor::PublishedFloor;
use crate::rows::{HoldRow, Timestamp, DUTY_KEY};

/// The longest a hold may live: a pin nobody renews should not outlive a
/// month of retention decisions.
pub const TTL_MAX: Duration = Duration::from_secs(30 * 86400);

/// Input that names no hold that could be placed: the flag, and what it
/// allows (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadAsk(pub String);

/// What `hold` is asked, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub stream: String,
    pub id: String,
    pub seq: u64,
    pub ttl: Duration,
    pub owner: String,
    pub kind: crate::rows::HoldKind,
    pub reason: String,
    pub replace: bool,
}

/// What a surface read from its input, before it is checked.
#[derive(Debug, Clone)]
pub struct Asked<'a> {
    pub seq: u64,
    pub ttl: &'a str,
    pub owner: &'a str,
    pub kind: crate::rows::HoldKind,
    pub reason: Option<&'a str>,
    /// `None`: a fresh id is made (`hold-<ULID>`).
    pub id: Option<&'a str>,
    pub replace: bool,
}

/// CHECK (pure): the ask for `stream`, or the flag that is wrong and what
/// it allows. `now` makes a fresh id.
pub fn check(
    stream: &str,
    a: &Asked<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Ask, BadAsk> {
    let bad = |m: String| Err(BadAsk(m));
    if a.seq == 0 {
        return bad(
            "-seq 0: a hold names the first sequence its holder still needs; allowed: 1 or more"
                .into(),
        );
    }
    let ttl = match crate::config::duration::parse(a.ttl) {
        Ok(t) if t.is_zero() => return bad("-ttl 0s: a hold must live; allowed: 1s ..= 30d".into()),
        Ok(t) if t > TTL_MAX => {
            return bad(format!("-ttl {}: too long; allowed: 1s ..= 30d", a.ttl))
        }
        Ok(t) => t,
        Err(e) => return bad(format!("-ttl {e} (1s ..= 30d)")),
    };
    if a.owner.trim().is_empty() {
        return bad("-owner is empty; name who holds the pin".into());
    }
    let id = match a.id {
        Some(id) => {
            if let Err(e) = crate::rows::check_node_id(id) {
                return bad(format!("-id {e}"));
            }
            id.to_string()
        }
        None => format!("hold-{}", crate::rows::OpId::mint(now)),
    };
    Ok(Ask {
        stream: stream.to_string(),
        id,
        seq: a.seq,
        ttl,
        owner: a.owner.to_string(),
        kind: a.kind,
        reason: a.reason.unwrap_or_default().to_string(),
        replace: a.replace,
    })
}

/// JUDGE (pure): the row to place, given the log's last sequence and the
/// broker's clock, or why the ask names records the log never had. The
/// hold expires by the broker's clock, which decides whether it is live
/// (docs/decisions.md, "Pins, clocks, fences, reads").
pub fn judge(
    ask: &Ask,
    last_seq: u64,
    broker_now: chrono::DateTime<chrono::Utc>,
) -> Result<HoldRow, BadAsk> {
    if ask.seq > last_seq + 1 {
        return Err(BadAsk(format!(
            "-seq {} is past the log's end (last sequence {last_seq} on {}); allowed: 1 ..= {}",
            ask.seq,
            ask.stream,
            last_seq + 1
        )));
    }
    let expires =
        broker_now + chrono::Duration::from_std(ask.ttl).unwrap_or(chrono::Duration::zero());
    Ok(HoldRow {
        seq: ask.seq,
        owner: ask.owner.clone(),
        kind: ask.kind,
        reason: ask.reason.clone(),
        expires_at: Timestamp(expires),
    })
}

/// A hold to place.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    pub stream: &'a str,
    pub id: &'a str,
    pub row: &'a HoldRow,
    /// Update an existing hold of this id instead of refusing it.
    pub replace: bool,
}

/// How a placement was confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmed {
    /// A tick published an answer after the hold was written.
    Published,
    /// No sidecar holds the duty: no tick is in flight, and any later one
    /// reads the hold before it purges.
    NoLease,
}

/// Why a placed hold is not confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unconfirmed {
    /// `-no-wait`.
    NotWaited,
    /// No answer was published within two ticks.
    NoAnswer { waited: Duration },
    /// What it must be confirmed against could not be read from the
    /// leader.
    Unproven { why: String },
}

/// What placing a hold came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    Held {
        /// The floor published when it was confirmed (null before any).
        floor: Option<u64>,
        how: Confirmed,
    },
    /// On the bucket, not proved against a tick.
    Unconfirmed(Unconfirmed),
    /// Another hold has this id; nothing written.
    Exists { existing: String },
    /// Records the hold needs are gone; the hold was released.
    TooLate { first_seq: u64 },
    /// The broker failed; what was written (if anything) is in the text.
    Failed(String),
}

impl Placed {
    /// The outcome's kind (docs/runbook.md): an unfinished confirmation
    /// is pending and a refusal refused (both exit 1), a broker failure
    /// exit 3.
    pub fn class(&self) -> Class {
        match self {
            Placed::Held { .. } | Placed::Unconfirmed(Unconfirmed::NotWaited) => Class::Done,
            Placed::Unconfirmed(_) => Class::Pending,
            Placed::Exists { .. } | Placed::TooLate { .. } => Class::Refused,
            Placed::Failed(_) => Class::Unreachable,
        }
    }

    pub fn exit(&self) -> Exit {
        self.class().exit()
    }

    /// The stable outcome code.
    pub fn code(&self) -> &'static str {
        match self {
            Placed::Held { .. } => "held",
            Placed::Unconfirmed(_) => "unconfirmed",
            Placed::Exists { .. } => "hold_exists",
            Placed::TooLate { .. } => "too_late",
            Placed::Failed(_) => "failed",
        }
    }

    /// The outcome in words.
    pub fn words(&self, stream: &str, id: &str, row: &HoldRow) -> String {
        let (seq, until) = (row.seq, row.expires_at);
        match self {
            Placed::Held { floor, how } => {
                let floor = floor.map_or("none yet".to_string(), |f| f.to_string());
                let why = match how {
                    Confirmed::Published => "confirmed by an answer published after it",
                    Confirmed::NoLease => "no sidecar holds the trim duty, so any later tick reads it before it purges",
                };
                format!("held {stream} from {seq} until {until} as {id}; the published floor is {floor} ({why})")
            }
            Placed::Unconfirmed(Unconfirmed::NotWaited) => format!(
                "placed {id} on {stream} from {seq} until {until}, not yet confirmed (-no-wait): a tick in flight may still purge below {seq}"
            ),
            Placed::Unconfirmed(Unconfirmed::Unproven { why }) => format!(
                "placed {id} on {stream} from {seq} until {until}, but not confirmed: {why}; check that the broker answers (crewlet retention status), then run the same command with -replace to confirm it"
            ),
            Placed::Unconfirmed(Unconfirmed::NoAnswer { waited }) => format!(
                "placed {id} on {stream} from {seq} until {until}, but not confirmed: no answer was published within {} (two ticks); the duty holder may be stalled, see crewlet retention status",
                humantime::format_duration(*waited)
            ),
            Placed::Exists { existing } => format!(
                "refused: hold_exists: {id} on {stream} is already held ({existing}); pass -replace to update it, or choose another -id; nothing written"
            ),
            Placed::TooLate { first_seq } => format!(
                "refused: too_late: records below {first_seq} are gone from {stream}, and the hold needs {seq} on; it was released"
            ),
            Placed::Failed(e) => format!("error: {e}"),
        }
    }
}

fn describe(entry: &[u8]) -> String {
    match serde_json::from_slice::<HoldRow>(entry) {
        Ok(h) => format!("seq {}, owner {}, expires {}", h.seq, h.owner, h.expires_at),
        Err(_) => "a row that does not parse".into(),
    }
}

/// What a published floors row says to a hold: when it was written, the
/// floor, and `min_hold` (its value; `None` when it is not one).
type Seen = Option<(Timestamp, Option<u64>, Option<u64>)>;

/// The `at` and floor of the stream's published row as its leader has it
/// (`None` when there is none yet; a row that does not parse is an error:
/// a hold cannot be confirmed against it).
async fn published(broker: &Broker, config: &Config, stream: &str) -> Result<Seen, String> {
    let entry = match broker.kv_entry_proven(&config.buckets.floors, stream).await {
        Ok(e) => e.into_inner(),
        Err(LeaderReadError::BucketMissing { .. }) => None,
        Err(e) => return Err(e.to_string()),
    };
    match entry {
        None => Ok(None),
        Some(e) => PublishedFloor::parse(stream, &e.value)
            .map(|p| {
                let min_hold = p.terms.as_deref().and_then(|ts| {
                    ts.iter()
                        .find(|t| t.term == crate::floor::TermName::MinHold && t.state == "value")
                        .and_then(|t| t.seq)
                });
                Some((p.at, p.floor, min_hold))
            })
            .map_err(|e| format!("the floors row cannot be read ({e})")),
    }
}

/// The duty holder's last `_tick`, as the floors bucket's leader has it;
/// `None` when there is none (or it does not parse: it then proves
/// nothing).
async fn ticked(broker: &Broker, config: &Config) -> Result<Option<crate::rows::TickRow>, String> {
    match broker
        .kv_entry_proven(&config.buckets.floors, crate::rows::TICK_KEY)
        .await
    {
        Ok(e) => Ok(e
            .into_inner()
            .and_then(|e| crate::rows::TickRow::parse(crate::rows::TICK_KEY, &e.value).ok())),
        Err(LeaderReadError::BucketMissing { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a duty lease is held, as the duty bucket's leader has it: no
/// bucket and no key are no lease (no tick is in flight).
async fn lease_held(broker: &Broker, config: &Config) -> Result<bool, String> {
    match broker.kv_entry_proven(&config.buckets.duty, DUTY_KEY).await {
        Ok(e) => Ok(e.get().is_some()),
        Err(LeaderReadError::BucketMissing { .. }) => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// A hold on the bucket, proved against the log, waiting for a tick.
#[derive(Debug, Clone)]
pub struct Written {
    revision: u64,
    /// The published row's `at` and floor, read from the leader after
    /// the write; `Err` when it could not be.
    before: Result<Seen, String>,
    /// Whether a duty lease is held (a tick may be in flight); `Err` when
    /// the lease could not be read from the leader.
    lease: Result<bool, String>,
}

/// Places `p`, proves it against the log and, when `wait`, against a tick.
pub async fn place(broker: &Broker, config: &Config, p: &Placement<'_>, wait: bool) -> Placed {
    match write(broker, config, p).await {
        Err(placed) => placed,
        Ok(_) if !wait => Placed::Unconfirmed(Unconfirmed::NotWaited),
        Ok(w) => {
            let tick = holder_tick(broker, config).await;
            confirm(broker, config, p, &w, None, tick).await
        }
    }
}

/// The duty holder's tick, as the duty bucket's lease says (its `max_age`
/// is three of the holder's ticks): what a confirmation waits for, and a
/// join hold's lifetime, come from the sidecar that trims, never from the
/// configuration of whoever runs the gesture. This configuration's tick
/// when the bucket cannot be read or keeps leases for ever.
pub async fn holder_tick(broker: &Broker, config: &Config) -> Duration {
    match broker.lease_max_age(&config.buckets.duty).await {
        Ok(Some(max_age)) if !max_age.is_zero() => max_age / 3,
        _ => config.retention.tick.0,
    }
}

/// Writes the hold and checks the log still holds what it needs. `Err` is
/// the final outcome (refused, too late, failed).
pub async fn write(broker: &Broker, config: &Config, p: &Placement<'_>) -> Result<Written, Placed> {
    let key = format!("{}.{}", p.stream, p.id);
    let bucket = &config.buckets.holds;
    let body = serde_json::to_vec(p.row).map_err(|e| Placed::Failed(e.to_string()))?;
    let written = if p.replace {
        match broker.kv_entry(bucket, &key).await {
            Ok(Some(e)) => broker.kv_update(bucket, &key, body, e.revision).await,
            Ok(None) => broker.kv_create(bucket, &key, body).await,
            Err(e) => return Err(Placed::Failed(format!("{e}; nothing written"))),
        }
    } else {
        broker.kv_create(bucket, &key, body).await
    };
    let revision = match written {
        Ok(r) => r,
        Err(CasError::Exists { .. }) | Err(CasError::Conflict { .. }) => {
            let existing = match broker.kv_entry(bucket, &key).await {
                Ok(Some(e)) => describe(&e.value),
                _ => "it changed while this command ran".into(),
            };
            return Err(Placed::Exists { existing });
        }
        Err(e) => {
            return Err(Placed::Failed(format!(
                "{e}; the hold may or may not be placed, run the same command with -replace"
            )))
        }
    };
    // After the write: what was published so far, and whether a tick may
    // be in flight, both from the leaders.
    let before = published(broker, config, p.stream).await;
    let lease = lease_held(broker, config).await;
    if let Some(gone) = too_late(broker, bucket, &key, revision, p).await {
        return Err(gone);
    }
    Ok(Written {
        revision,
        before,
        lease,
    })
}

/// Waits (at most two of the holder's ticks, `tick` as [`holder_tick`]
/// read it) for an answer a later tick publishes, and checks the log
/// again. With `in_force` (a readmission's join hold, pinning from
/// `P + 1`), only an answer whose `min_hold` is at or below `P` confirms
/// it: a tick that read its pins before the hold and published after it
/// does not.
pub async fn confirm(
    broker: &Broker,
    config: &Config,
    p: &Placement<'_>,
    w: &Written,
    in_force: Option<u64>,
    tick: Duration,
) -> Placed {
    let before = match (&w.before, &w.lease) {
        (Err(why), _) | (_, Err(why)) => {
            return Placed::Unconfirmed(Unconfirmed::Unproven { why: why.clone() })
        }
        (Ok(before), Ok(false)) => {
            return Placed::Held {
                floor: before.and_then(|b| b.1),
                how: Confirmed::NoLease,
            }
        }
        (Ok(before), Ok(true)) => *before,
    };
    let key = format!("{}.{}", p.stream, p.id);
    let budget = tick * 2 + Duration::from_secs(2);
    let poll = (tick / 10).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let started = Instant::now();
    // The holder's ticks since the write, by their `_tick`: an unchanged
    // answer is not written again, and the second `_tick` seen after the
    // write closes a tick that read the buckets after it (the first may
    // close one that read before it). docs/contract.md, `crewlet_floors` —
    // the published answer.
    // A first read that fails proves nothing about which `_tick` came
    // after the write: then only a rewritten row confirms.
    let first_tick = ticked(broker, config).await.map(|t| t.map(|t| t.at));
    let mut ticks_since: Vec<Timestamp> = Vec::new();
    while started.elapsed() < budget {
        tokio::time::sleep(poll).await;
        // A read that fails proves nothing: poll again.
        let Ok(now) = published(broker, config, p.stream).await else {
            continue;
        };
        if let (Ok(first), Ok(Some(t))) = (&first_tick, ticked(broker, config).await) {
            // A tick that could not publish this log stands behind nothing.
            let stood = !t.unpublished.iter().any(|s| s == p.stream);
            if stood && Some(t.at) != *first && !ticks_since.contains(&t.at) {
                ticks_since.push(t.at);
            }
        }
        let later = match (&before, &now) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(b), Some(n)) => n.0 != b.0,
        };
        // Two ticks closed since the write stand behind the row as it is
        // (a join hold's own answer must show it in force: below).
        let later = later || (in_force.is_none() && now.is_some() && ticks_since.len() >= 2);
        let shown = match (in_force, &now) {
            (None, _) => true,
            (Some(p_max), Some(n)) => n.2.is_some_and(|m| m <= p_max),
            (Some(_), None) => false,
        };
        let later = later && shown;
        if later {
            if let Some(gone) = too_late(broker, &config.buckets.holds, &key, w.revision, p).await {
                return gone;
            }
            return Placed::Held {
                floor: now.and_then(|n| n.1),
                how: Confirmed::Published,
            };
        }
    }
    Placed::Unconfirmed(Unconfirmed::NoAnswer { waited: budget })
}

/// Lifts a hold this process placed (on the revision it wrote), trying
/// three times: a join hold left behind by a readmission that stopped is
/// extended by the duty holder for as long as its readmission is not
/// absorbed, which is for ever when it never lands. `Err` names why it is
/// still there; a hold replaced meanwhile (another revision) or already
/// gone is not this process's to lift, and counts as lifted.
pub async fn release(
    broker: &Broker,
    config: &Config,
    p: &Placement<'_>,
    w: &Written,
) -> Result<(), String> {
    let key = format!("{}.{}", p.stream, p.id);
    let mut last = String::new();
    for attempt in 0..3u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        }
        // A test's stand-in for a broker that does not take the delete
        // (`join_hold_release_fails:N`: the first N attempts).
        if crate::failpoint::is_set("join_hold_release_fails")
            && attempt < crate::failpoint::count("join_hold_release_fails")
        {
            last = "the delete was not taken (CREWLET_FAILPOINT)".into();
            continue;
        }
        match broker
            .kv_delete_at(&config.buckets.holds, &key, w.revision)
            .await
        {
            Ok(()) | Err(CasError::Conflict { .. }) | Err(CasError::Exists { .. }) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
    }
    tracing::warn!(event = "join_hold_left", hold = %key, error = %last, "a hold this gesture placed could not be released");
    Err(last)
}

/// `Some(TooLate)` (the hold released) when the log no longer holds the
/// first record the hold needs.
async fn too_late(
    broker: &Broker,
    bucket: &str,
    key: &str,
    revision: u64,
    p: &Placement<'_>,
) -> Option<Placed> {
    let state = match broker.stream_state(p.stream).await {
        Ok(s) => s,
        Err(e) => {
            return Some(Placed::Failed(format!(
                "{e}; the hold is placed, not confirmed"
            )))
        }
    };
    if p.row.seq >= state.first_seq {
        return None;
    }
    // Released on our revision: a hold replaced meanwhile stays.
    let _ = broker.kv_delete_at(bucket, key, revision).await;
    Some(Placed::TooLate {
        first_seq: state.first_seq,
    })
}

/// What releasing a hold came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    Released,
    /// A hold the sidecar's memory carries (its row lost with a recreated
    /// holds bucket): ended by an expired row under its id, which the next
    /// tick takes as its owner's write.
    ReleasedCarried,
    /// No live hold of that id on the log; nothing written.
    NoSuchHold,
    /// The hold was replaced between its read and its delete (someone
    /// else's, under the same id): it is not lifted by mistake.
    ChangedMeanwhile,
    /// The broker failed; the sentence says at which step.
    Failed(crate::broker::Fault),
}

impl Released {
    pub fn class(&self) -> Class {
        match self {
            Released::Released | Released::ReleasedCarried => Class::Done,
            Released::NoSuchHold | Released::ChangedMeanwhile => Class::Refused,
            Released::Failed(_) => Class::Unreachable,
        }
    }

    /// The refusal's code (`--json`'s `error`); `None` when released.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Released::Released | Released::ReleasedCarried => None,
            Released::NoSuchHold => Some("no_such_hold"),
            Released::ChangedMeanwhile => Some("changed_meanwhile"),
            Released::Failed(_) => Some("unreachable"),
        }
    }

    pub fn words(&self, stream: &str, id: &str) -> String {
        match self {
            Released::Released => format!("released {id} on {stream}"),
            Released::ReleasedCarried => format!(
                "released {id} on {stream}: it was carried by the sidecar's memory (its row was lost with the holds bucket); an expired row under its id ends it at the next tick"
            ),
            Released::NoSuchHold => format!("there is no hold {id} on {stream}; nothing written"),
            Released::ChangedMeanwhile => format!(
                "the hold {id} on {stream} changed while it was being released; read it again (crewlet retention status) and retry"
            ),
            Released::Failed(f) => f.to_string(),
        }
    }
}

/// Releases (lifts) hold `id` on `stream`: read, then deleted on the
/// revision read.
pub async fn lift(broker: &Broker, config: &Config, stream: &str, id: &str) -> Released {
    let key = format!("{stream}.{id}");
    let bucket = &config.buckets.holds;
    let entry = match broker.kv_entry(bucket, &key).await {
        Ok(Some(e)) => e,
        Ok(None) => return lift_carried(broker, config, stream, id).await,
        Err(e) => return Released::Failed(e.within(format_args!("reading hold {key}"))),
    };
    match broker.kv_delete_at(bucket, &key, entry.revision).await {
        Ok(()) => Released::Released,
        Err(CasError::Conflict { .. }) | Err(CasError::Exists { .. }) => Released::ChangedMeanwhile,
        Err(e) => Released::Failed(crate::broker::Fault::failed(format!(
            "releasing {key}: {e}"
        ))),
    }
}

/// A hold absent from the bucket that the log's memory still carries
/// (docs/trim-floor.md, A lost bucket lifts no pin) is ended the way its
/// owner would end it: a row under its id, already expired, created only
/// if the key is still empty. The next tick takes the row for its owner's
/// write, and the memory forgets the hold.
async fn lift_carried(broker: &Broker, config: &Config, stream: &str, id: &str) -> Released {
    let floors = match broker.read_bucket(&config.buckets.floors).await {
        Ok(entries) => crate::floor::parsed::Floors::of(&entries),
        Err(_) => return Released::NoSuchHold,
    };
    let Some(Ok(memory)) = floors.remembered(stream) else {
        return Released::NoSuchHold;
    };
    let now = chrono::Utc::now();
    let Some(held) = memory.membership.holds.get(id).filter(|h| h.kept_at(now)) else {
        return Released::NoSuchHold;
    };
    let row = serde_json::json!({
        "seq": memory.min_hold.map_or(1, |m| m.saturating_add(1)),
        "owner": "crewlet retention release",
        "kind": "operator",
        "expires_at": Timestamp(held.expires_at.0.min(now) - chrono::Duration::seconds(1)),
        "reason": "released while carried by the sidecar's memory",
    });
    let key = format!("{stream}.{id}");
    match broker
        .kv_create(
            &config.buckets.holds,
            &key,
            serde_json::to_vec(&row).unwrap_or_default(),
        )
        .await
    {
        Ok(_) => Released::ReleasedCarried,
        Err(CasError::Conflict { .. }) | Err(CasError::Exists { .. }) => Released::ChangedMeanwhile,
        Err(e) => Released::Failed(crate::broker::Fault::failed(format!(
            "releasing the carried hold {key}: {e}"
        ))),
    }
}

#[cfg(test)]
mod ask_tests {
    use super::*;
    use crate::rows::HoldKind;

    fn now() -> chrono::DateTime<chrono::Utc> {
        Timestamp::parse("2026-11-30T12:00:00Z")
            .map(|i| i.0)
            .expect("instant")
    }

    fn asked(
        seq: u64,
        ttl: &'static str,
        owner: &'static str,
        id: Option<&'static str>,
    ) -> Asked<'static> {
        Asked {
            seq,
            ttl,
            owner,
            kind: HoldKind::Operator,
            reason: None,
            id,
            replace: false,
        }
    }

    /// Each bad flag is named with what it allows; a good ask becomes a
    /// row that expires on the broker's clock, never past the log's end.
    #[test]
    fn check_and_judge_name_the_flag_and_bound_the_hold() {
        for (a, says) in [
            (asked(0, "1h", "alice", None), "-seq 0"),
            (asked(5, "0s", "alice", None), "-ttl 0s"),
            (asked(5, "31d", "alice", None), "-ttl 31d: too long"),
            (asked(5, "soon", "alice", None), "-ttl"),
            (asked(5, "1h", "  ", None), "-owner is empty"),
            (asked(5, "1h", "alice", Some("-x")), "-id"),
        ] {
            let e = check("S", &a, now()).expect_err(says);
            assert!(e.0.starts_with(says), "{says}: {e}");
        }
        let ask = check("S", &asked(11, "1h", "alice", Some("nightly")), now()).expect("ask");
        assert_eq!(ask.id, "nightly");
        let fresh = check("S", &asked(11, "1h", "alice", None), now()).expect("ask");
        assert!(fresh.id.starts_with("hold-"), "{}", fresh.id);
        // One past the last sequence: nothing new may go, which is allowed.
        let row = judge(&ask, 10, now()).expect("row");
        assert_eq!(
            row.expires_at,
            Timestamp::parse("2026-11-30T13:00:00Z").expect("instant")
        );
        let e = judge(&ask, 9, now()).expect_err("past the end");
        assert!(
            e.0.contains("past the log's end (last sequence 9 on S); allowed: 1 ..= 10"),
            "{e}"
        );
    }
}
