//! PURE: changing a log's ceiling (`crewlet retention set-capacity`). The
//! judgement is made before anything is written, from one reading of the
//! stream and of the account: a ceiling that would refuse every append the
//! moment it applied, one under the floor every log is held to, and a raise
//! the account cannot grant are refused with the numbers; everything else
//! is the broker's to apply. Also the least target that clears the
//! `log_headroom` alarm, for the remedies that print the command.

use serde::Serialize;

use crate::human;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The least ceiling a log may have: 1 GiB (the gate reserve is sized
/// against it), 1 MiB with `allow_unsafe_limits` (tests and demos).
pub fn minimum(allow_unsafe_limits: bool) -> u64 {
    if allow_unsafe_limits {
        MIB
    } else {
        GIB
    }
}

/// The ceiling ordinary appends are held to: the target less its gate
/// reserve (a sixteenth) on a log with one, else the target.
pub fn soft_ceiling(target: u64, gate_reserve: bool) -> u64 {
    if gate_reserve {
        target - target / 16
    } else {
        target
    }
}

/// The smallest whole MiB whose soft ceiling is above `usage`.
pub fn least_above(usage: u64, gate_reserve: bool) -> u64 {
    least_mib(|soft| soft > usage, gate_reserve)
}

/// The smallest whole MiB, at least `minimum`, whose soft ceiling leaves
/// the tenth of headroom below which `log_headroom` fires
/// (`usage < 0.9 × soft`, in integers).
pub fn least_clearing_headroom(usage: u64, gate_reserve: bool, minimum: u64) -> u64 {
    let least = least_mib(
        |soft| u128::from(usage) * 10 < u128::from(soft) * 9,
        gate_reserve,
    );
    least.max(minimum.div_ceil(MIB) * MIB)
}

/// The smallest `k × MiB` for which `ok(soft_ceiling(k × MiB))`; `ok` must
/// be monotonic. A binary search: usages reach many TiB.
fn least_mib(ok: impl Fn(u64) -> bool, gate_reserve: bool) -> u64 {
    let max_k = u64::MAX / MIB;
    let holds = |k: u64| ok(soft_ceiling(k * MIB, gate_reserve));
    let (mut lo, mut hi) = (1u64, 1u64);
    while !holds(hi) {
        if hi == max_k {
            return max_k * MIB;
        }
        lo = hi + 1;
        hi = hi.saturating_mul(2).min(max_k);
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi * MIB
}

/// A size as the gestures print it for a person to type back: whole MiB
/// or GiB as such, anything else in bytes.
pub fn typed(bytes: u64) -> String {
    if bytes >= GIB && bytes % GIB == 0 {
        format!("{}GiB", bytes / GIB)
    } else if bytes >= MIB && bytes % MIB == 0 {
        format!("{}MiB", bytes / MIB)
    } else {
        bytes.to_string()
    }
}

/// The command that sets `stream`'s ceiling to `target`.
pub fn command(stream: &str, target: u64) -> String {
    let t = typed(target);
    format!("crewlet retention set-capacity {stream} {t} -confirm {t}")
}

/// What the account lets JetStream reserve, as `$JS.API.INFO` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Account {
    /// A storage limit: `max_storage` bytes in all, `reserved` taken by the
    /// ceilings of every stream (each `max_bytes × replicas`);
    /// `max_stream_bytes` the most one stream may have, when set.
    Limited {
        max_storage: u64,
        reserved: u64,
        max_stream_bytes: Option<u64>,
    },
    /// No account limit (the broker's own store limit still applies).
    Unlimited { max_stream_bytes: Option<u64> },
    /// It could not be read: the broker decides.
    Unreadable { error: String },
}

/// The one reading the judgement is made from.
#[derive(Debug, Clone)]
pub struct Facts {
    pub stream: String,
    /// Bytes the log holds now.
    pub usage: u64,
    /// Its ceiling now (-1 when unset).
    pub max_bytes: i64,
    pub replicas: u64,
    pub gate_reserve: bool,
    /// `discard: new`: on `discard: old` a lower ceiling deletes records.
    pub discard_new: bool,
    pub account: Account,
}

/// Why a target is refused (docs/runbook.md); nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("below_minimum: {target} is under the least ceiling a log may have, {minimum}")]
    BelowMinimum { target: String, minimum: String },
    #[error("below_usage: a ceiling of {target} holds ordinary appends to {soft}, at or below the {usage} the log holds now, so it would refuse every append the moment it applied; the least target that would do is {least} ({command})")]
    BelowUsage {
        target: String,
        soft: String,
        usage: String,
        least: String,
        command: String,
    },
    #[error("account_limit: {0}")]
    AccountLimit(String),
    #[error("discard_old: {stream} has discard: old, on which a lower ceiling makes the broker delete its oldest records at once, whatever the trim still needs; set discard: new first (nats stream edit {stream} --discard new)")]
    DiscardOld { stream: String },
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::BelowMinimum { .. } => "below_minimum",
            Refusal::BelowUsage { .. } => "below_usage",
            Refusal::AccountLimit(_) => "account_limit",
            Refusal::DiscardOld { .. } => "discard_old",
        }
    }
}

/// What the judgement let through, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub soft_ceiling: u64,
    /// Bytes the raise adds to the account's reservations (0 for a
    /// lowering).
    pub reserves: u64,
    /// Said when the account's limit could not be read.
    pub note: Option<String>,
}

/// Judges `target` against `facts`, in the order docs/runbook.md gives.
pub fn judge(target: u64, facts: &Facts, minimum: u64) -> Result<Judged, Refusal> {
    let b = |n: u64| format!("{} ({n} bytes)", human::bytes(n));
    if target < minimum {
        return Err(Refusal::BelowMinimum {
            target: b(target),
            minimum: b(minimum),
        });
    }
    let soft = soft_ceiling(target, facts.gate_reserve);
    if soft <= facts.usage {
        let least = least_above(facts.usage, facts.gate_reserve).max(minimum);
        return Err(Refusal::BelowUsage {
            target: b(target),
            soft: b(soft),
            usage: b(facts.usage),
            least: b(least),
            command: command(&facts.stream, least),
        });
    }
    let now = u64::try_from(facts.max_bytes).unwrap_or(0);
    // On discard: old a lower ceiling is an implicit purge of the oldest
    // records, whatever the trim still needs; a raise deletes nothing.
    if !facts.discard_new && (facts.max_bytes <= 0 || target < now) {
        return Err(Refusal::DiscardOld {
            stream: facts.stream.clone(),
        });
    }
    // The broker reserves the difference, on every replica.
    let reserves = target
        .saturating_sub(now)
        .saturating_mul(facts.replicas.max(1));
    let per_stream = |max: &Option<u64>| -> Result<(), Refusal> {
        match max {
            Some(m) if target > *m => Err(Refusal::AccountLimit(format!(
                "the account lets one stream have at most {}, under the {} asked for",
                b(*m),
                b(target)
            ))),
            _ => Ok(()),
        }
    };
    let note = match &facts.account {
        Account::Limited {
            max_storage,
            reserved,
            max_stream_bytes,
        } => {
            per_stream(max_stream_bytes)?;
            let left = max_storage.saturating_sub(*reserved);
            if reserves > left {
                return Err(Refusal::AccountLimit(format!(
                    "the raise reserves {} ({} more than now, on {} replica(s)) and the account's JetStream storage limit of {} has {} left ({} reserved by every stream's ceiling); free a reservation or raise the account's limit",
                    b(reserves),
                    human::bytes(target.saturating_sub(now)),
                    facts.replicas.max(1),
                    b(*max_storage),
                    b(left),
                    b(*reserved)
                )));
            }
            None
        }
        Account::Unlimited { max_stream_bytes } => {
            per_stream(max_stream_bytes)?;
            None
        }
        Account::Unreadable { error } => Some(format!(
            "the account's JetStream limits cannot be read ({error}); the broker decides whether it can grant the raise"
        )),
    };
    // Taken below 1 GiB only because allow_unsafe_limits lowered the
    // minimum: say so, as validate does.
    let unsafe_note = (target < GIB).then(|| {
        format!(
            "{} is below the safe minimum of 1 GiB (allowed only because retention.allow_unsafe_limits is true)",
            b(target)
        )
    });
    let note = match (unsafe_note, note) {
        (Some(u), Some(n)) => Some(format!("{u}; {n}")),
        (u, n) => u.or(n),
    };
    Ok(Judged {
        soft_ceiling: soft,
        reserves,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(usage: u64, max_bytes: i64, account: Account) -> Facts {
        Facts {
            stream: "LOG".into(),
            usage,
            max_bytes,
            replicas: 1,
            gate_reserve: true,
            discard_new: true,
            account,
        }
    }

    const OPEN: Account = Account::Unlimited {
        max_stream_bytes: None,
    };

    #[test]
    fn the_least_target_is_the_smallest_whole_mib_above_the_usage() {
        // 15/16 of 16 MiB is 15 MiB: not above 15 MiB, 17 MiB is.
        assert_eq!(least_above(15 * MIB, true), 17 * MIB);
        assert_eq!(least_above(15 * MIB - 1, true), 16 * MIB);
        assert_eq!(least_above(15 * MIB, false), 16 * MIB);
        assert_eq!(least_above(0, false), MIB);
        for usage in [1, MIB, 3 * GIB + 7, 5 << 40] {
            for reserve in [true, false] {
                let least = least_above(usage, reserve);
                assert!(soft_ceiling(least, reserve) > usage);
                assert!(soft_ceiling(least - MIB, reserve) <= usage);
                assert_eq!(least % MIB, 0);
            }
        }
    }

    #[test]
    fn the_headroom_target_clears_the_alarm_and_no_smaller_one_does() {
        for usage in [MIB, 900 * MIB, 1000 * MIB, 7 * GIB + 3] {
            let t = least_clearing_headroom(usage, true, MIB);
            let headroom = |t: u64| 1.0 - usage as f64 / soft_ceiling(t, true) as f64;
            assert!(headroom(t) >= 0.10, "{usage} {t}");
            assert!(headroom(t - MIB) < 0.10 + 1e-9, "{usage} {t}");
        }
        assert_eq!(least_clearing_headroom(MIB, true, GIB), GIB);
    }

    #[test]
    fn sizes_are_printed_as_they_can_be_typed_back() {
        assert_eq!(typed(2 * GIB), "2GiB");
        assert_eq!(typed(1100 * MIB), "1100MiB");
        assert_eq!(typed(12345), "12345");
        for n in [2 * GIB, 1100 * MIB, 12345] {
            assert_eq!(crate::config::size::parse(&typed(n)), Ok(n));
        }
        assert_eq!(
            command("LOG", 1100 * MIB),
            "crewlet retention set-capacity LOG 1100MiB -confirm 1100MiB"
        );
    }

    #[test]
    fn each_refusal_in_order() {
        let f = facts(100 * MIB, GIB as i64, OPEN);
        assert_eq!(judge(GIB - 1, &f, GIB).unwrap_err().code(), "below_minimum");
        let f = facts(2 * GIB, 3 * GIB as i64, OPEN);
        // 2 GiB's soft ceiling is 1.875 GiB, under the usage.
        let r = judge(2 * GIB, &f, GIB).unwrap_err();
        assert_eq!(r.code(), "below_usage");
        let least = least_above(2 * GIB, true);
        assert!(r.to_string().contains(&command("LOG", least)), "{r}");
        // A lowering that keeps above the usage is fair.
        let ok = judge(least, &f, GIB).expect("fair");
        assert_eq!(ok.reserves, 0);
        // On discard: old, a lowering deletes; a raise does not.
        let mut old = f.clone();
        old.discard_new = false;
        assert_eq!(judge(least, &old, GIB).unwrap_err().code(), "discard_old");
        assert!(judge(4 * GIB, &old, GIB).is_ok());
    }

    #[test]
    fn a_raise_is_judged_against_what_the_account_has_left() {
        let account = Account::Limited {
            max_storage: 10 * GIB,
            reserved: 6 * GIB,
            max_stream_bytes: None,
        };
        let f = facts(MIB, 2 * GIB as i64, account);
        // 2 GiB → 6 GiB reserves 4 GiB: exactly what is left.
        assert_eq!(judge(6 * GIB, &f, GIB).expect("fits").reserves, 4 * GIB);
        let r = judge(6 * GIB + MIB, &f, GIB).unwrap_err();
        assert_eq!(r.code(), "account_limit");
        assert!(
            r.to_string().contains("4.0 GiB (4294967296 bytes) left"),
            "{r}"
        );
        // Replicas multiply the reservation.
        let mut r3 = f.clone();
        r3.replicas = 3;
        assert_eq!(
            judge(4 * GIB, &r3, GIB).unwrap_err().code(),
            "account_limit"
        );
        // A stream limit of its own.
        let capped = facts(
            MIB,
            2 * GIB as i64,
            Account::Unlimited {
                max_stream_bytes: Some(3 * GIB),
            },
        );
        assert_eq!(
            judge(4 * GIB, &capped, GIB).unwrap_err().code(),
            "account_limit"
        );
        // Unreadable: said, and the broker decides.
        let blind = facts(
            MIB,
            2 * GIB as i64,
            Account::Unreadable {
                error: "timed out".into(),
            },
        );
        let ok = judge(400 * GIB, &blind, GIB).expect("the broker decides");
        assert!(ok.note.is_some_and(|n| n.contains("timed out")));
    }

    /// An operator's trial: a ceiling under 1 GiB taken only because of
    /// `allow_unsafe_limits` says so.
    #[test]
    fn an_unsafe_ceiling_is_taken_with_a_warning() {
        let f = facts(
            MIB,
            2 * GIB as i64,
            Account::Unlimited {
                max_stream_bytes: None,
            },
        );
        let ok = judge(100 * MIB, &f, MIB).expect("allowed with unsafe limits");
        assert!(
            ok.note
                .as_deref()
                .is_some_and(|n| n.contains("below the safe minimum of 1 GiB")
                    && n.contains("allow_unsafe_limits")),
            "{:?}",
            ok.note
        );
        assert!(judge(2 * GIB, &f, MIB).expect("safe").note.is_none());
    }
}
