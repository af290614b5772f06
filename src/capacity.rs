//! PURE: a log's ceiling, as the `set-capacity` gesture (its judgement is
//! in `gesture/capacity.rs`), the alarms and the broker's account read
//! share it: the least ceiling a log may have, the soft ceiling under the
//! gate reserve, the least target that clears the `log_headroom` alarm
//! (for the remedies that print the command), and what the account lets
//! JetStream reserve.

use serde::Serialize;

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
