//! PURE: the broker's clock as this sidecar sees it (docs/decisions.md, "Pins, clocks, fences, reads").
//! Every time rule (hold expiry, `min_age`, the fence window, backup age,
//! lease age) is decided on the broker's clock: each stream-info answer
//! carries the broker's time (`ts`), and the difference to the sidecar's
//! own clock at the moment the answer arrived is the offset applied to
//! every later instant of the tick. A difference past
//! `retention.max_clock_skew` is the `clock_skew` alarm.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// One reading: the broker's time in an answer, and ours when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub broker: DateTime<Utc>,
    pub local: DateTime<Utc>,
}

impl Reading {
    /// How far the broker's clock is ahead of ours (negative: behind).
    pub fn offset(&self) -> chrono::Duration {
        self.broker.signed_duration_since(self.local)
    }
}

/// `local` on the broker's clock, given the offset last read (none read:
/// our own clock, the only one there is).
pub fn broker_now(offset: Option<chrono::Duration>, local: DateTime<Utc>) -> DateTime<Utc> {
    offset.map_or(local, |o| local + o)
}

/// The offset to use from this tick's readings: the one furthest from
/// zero (the readings of one tick agree to within a round trip; the
/// largest is the one to report).
pub fn offset_of(readings: &[Reading]) -> Option<chrono::Duration> {
    readings
        .iter()
        .map(Reading::offset)
        .max_by_key(|o| o.num_nanoseconds().map_or(i64::MAX, i64::abs))
}

/// The skew to alarm on: `Some(offset)` when it is past `max`.
pub fn skew_past(offset: Option<chrono::Duration>, max: Duration) -> Option<chrono::Duration> {
    let o = offset?;
    let abs = o.abs().to_std().unwrap_or(Duration::MAX);
    (abs > max).then_some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn offsets_and_skew() {
        let behind = Reading {
            broker: at("2026-12-01T10:00:00Z"),
            local: at("2026-12-01T10:00:05Z"),
        };
        let close = Reading {
            broker: at("2026-12-01T10:00:00.1Z"),
            local: at("2026-12-01T10:00:00Z"),
        };
        assert_eq!(behind.offset(), chrono::Duration::seconds(-5));
        assert_eq!(
            offset_of(&[close, behind]),
            Some(chrono::Duration::seconds(-5))
        );
        assert_eq!(offset_of(&[]), None);
        let two = Duration::from_secs(2);
        assert_eq!(skew_past(Some(behind.offset()), two), Some(behind.offset()));
        assert_eq!(skew_past(Some(close.offset()), two), None);
        assert_eq!(skew_past(None, two), None);
        assert_eq!(
            broker_now(Some(behind.offset()), at("2026-12-01T11:00:00Z")),
            at("2026-12-01T10:59:55Z")
        );
    }
}
