//! PURE: a sequence, generation or position as JSON writes it. JSON has
//! one kind of number, so `10` and `10.0` are the same number: Python's
//! `json.dumps(10.0)` and a JavaScript client that computed a position
//! with floating point both write the second, and every mainstream JSON
//! Schema validator takes it as an `integer`. The parser takes it too, as
//! the whole number it is; a fraction, a negative number or one past what
//! a double holds exactly (2^53) is refused, naming the rule.

use serde::de::{Deserializer, Error, Visitor};

/// The largest whole number a double holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

struct Whole;

impl Visitor<'_> for Whole {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a whole number, 0 or more")
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| {
            E::custom(format!(
                "{v} is negative; allowed: a whole number, 0 or more"
            ))
        })
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<u64, E> {
        if v.fract() != 0.0 || !(0.0..=EXACT).contains(&v) {
            return Err(E::custom(format!(
                "{v} is not a whole number from 0 to 2^53; allowed: a whole number, 0 or more (10 and 10.0 are the same)"
            )));
        }
        // A whole number within 0..=2^53: the cast is exact.
        Ok(v as u64)
    }
}

/// `#[serde(deserialize_with = "whole::number")]`.
pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Whole)
}

/// A map of names to whole numbers (a backup manifest's `positions`).
pub fn map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<String, u64>, D::Error> {
    #[derive(serde::Deserialize)]
    struct N(#[serde(deserialize_with = "number")] u64);
    let m: std::collections::BTreeMap<String, N> = serde::Deserialize::deserialize(d)?;
    Ok(m.into_iter().map(|(k, N(v))| (k, v)).collect())
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug)]
    struct Row {
        #[serde(deserialize_with = "super::number")]
        seq: u64,
    }

    fn seq(json: &str) -> Result<u64, String> {
        serde_json::from_str::<Row>(json)
            .map(|r| r.seq)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_whole_number_written_either_way_is_taken_and_nothing_else() {
        assert_eq!(seq(r#"{"seq": 10}"#), Ok(10));
        assert_eq!(seq(r#"{"seq": 10.0}"#), Ok(10));
        assert_eq!(seq(r#"{"seq": 1e3}"#), Ok(1000));
        assert_eq!(seq(r#"{"seq": 0}"#), Ok(0));
        assert_eq!(seq(r#"{"seq": 18446744073709551615}"#), Ok(u64::MAX));
        for bad in ["1.5", "-1", "-1.0", "1e300", "\"10\"", "null", "true"] {
            assert!(seq(&format!(r#"{{"seq": {bad}}}"#)).is_err(), "{bad}");
        }
        assert!(seq(r#"{"seq": 1.5}"#)
            .unwrap_err()
            .contains("not a whole number"));
    }
}
