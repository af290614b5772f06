//! The one time type of the contract: an RFC 3339 instant in UTC, as
//! every row carries it.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Invalid;

/// An RFC 3339 instant in UTC, as every row carries it (a broker's or a
/// node's clock reading, never a monotonic one: named apart from
/// `std::time::Instant`, which it is not). Parsing refuses an offset other
/// than zero so that no row's meaning depends on a timezone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let parsed = DateTime::parse_from_rfc3339(text)
            .map_err(|e| format!("{text:?} is not an RFC 3339 timestamp ({e})"))?;
        if parsed.offset().local_minus_utc() != 0 {
            return Err(Invalid::from(format!(
                "{text:?} is not in UTC; timestamps are RFC 3339 with 'Z'"
            )));
        }
        Ok(Timestamp(parsed.with_timezone(&Utc)))
    }

    /// Nanosecond RFC 3339 with trailing zeros trimmed (Go's RFC3339Nano),
    /// the way the broker prints `created`, so that an instant an operator
    /// copies from our output matches the broker's exactly.
    pub fn to_rfc3339(&self) -> String {
        self.with_text(str::to_string)
    }

    /// `f` of the instant's text ([`Timestamp::to_rfc3339`]), written on
    /// the stack where it can be: a row's serialization writes every
    /// pin's instants, and a `String` each was an allocation each.
    pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self.written() {
            Some(w) => f(w.as_str()),
            None => f(&by_chrono(&self.0)),
        }
    }

    /// The text [`Timestamp::to_rfc3339`] gives, on the stack; `None` for
    /// the instants chrono writes.
    fn written(&self) -> Option<Written> {
        use chrono::{Datelike, Timelike};
        let t = &self.0;
        // Written digit by digit: a status of 10,000 nodes prints tens of
        // thousands of these per tick, and chrono's `format` parses its
        // pattern on every call. Years outside 0..=9999 (chrono prints
        // them with a sign) and leap seconds take chrono's own way; a unit
        // test holds the two ways to the same text.
        let nanos = t.nanosecond();
        if !(0..=9999).contains(&t.year()) || nanos >= 1_000_000_000 {
            return None;
        }
        let mut w = Written::default();
        w.digits(t.year() as u32, 4);
        for (sep, v) in [
            (b'-', t.month()),
            (b'-', t.day()),
            (b'T', t.hour()),
            (b':', t.minute()),
            (b':', t.second()),
        ] {
            w.push(sep);
            w.digits(v, 2);
        }
        if nanos != 0 {
            // The fraction without its trailing zeros (Go's RFC3339Nano).
            let (mut fraction, mut digits) = (nanos, 9);
            while fraction % 10 == 0 {
                fraction /= 10;
                digits -= 1;
            }
            w.push(b'.');
            w.digits(fraction, digits);
        }
        w.push(b'Z');
        Some(w)
    }
}

/// An instant's text, at most `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (30 bytes).
#[derive(Default)]
struct Written {
    bytes: [u8; 30],
    len: usize,
}

impl Written {
    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    fn digits(&mut self, v: u32, width: u32) {
        for k in (0..width).rev() {
            self.push(b'0' + (v / 10u32.pow(k) % 10) as u8);
        }
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever pushed.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// [`Timestamp::to_rfc3339`] by chrono's `format`: the way for the
/// instants it does not write itself, and what the tests hold it to.
pub(super) fn by_chrono(t: &DateTime<Utc>) -> String {
    use chrono::Timelike;
    let base = t.format("%Y-%m-%dT%H:%M:%S");
    match t.nanosecond() {
        0 => format!("{base}Z"),
        n => format!("{base}.{}Z", format!("{n:09}").trim_end_matches('0')),
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_text(|t| f.write_str(t))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with_text(|t| s.serialize_str(t))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Parsed from the text where it lies: a tick parses two of these
        // per positions row, and a String each was an allocation each.
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // As a String's: the operator's words for a wrong type
                // (crate::human) are keyed on it.
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Text)
    }
}
