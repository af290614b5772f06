//! Byte sizes as the configuration and the gestures take them: a whole
//! number of bytes (`65536`), or a whole number and an IEC unit (`64KiB`,
//! `8MiB`, `1GiB`). Decimal units (`MB`) are refused rather than guessed:
//! `8MB` read as 8 MiB is 5% more than was meant, and a size is a limit
//! someone chose. Pure.

use crate::rows::Invalid;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What the error messages list.
pub const ALLOWED: &str =
    "a whole number of bytes, or a whole number and an IEC unit: B, KiB, MiB, GiB or TiB (64KiB, 8MiB, 1GiB)";

const UNITS: [(&str, u64); 5] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("B", 1),
];

/// Parses `text`; every error quotes it as written.
pub fn parse(text: &str) -> Result<u64, Invalid> {
    let bad = |why: String| Invalid(format!("{text:?} is not a size: {why}"));
    let s = text.trim();
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return Err(bad(format!("allowed: {ALLOWED}")));
    }
    let (number, unit) = s.split_at(digits);
    let unit = unit.trim_start();
    if unit.starts_with(['.', ',']) {
        return Err(bad(
            "fractions are not taken; write it in a smaller unit (1536MiB, not 1.5GiB)".into(),
        ));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| bad("the number is too large".into()))?;
    let size = match UNITS.iter().find(|(u, _)| *u == unit) {
        Some((_, size)) => *size,
        None if unit.is_empty() => 1,
        None => {
            let lower = unit.to_ascii_lowercase();
            let why = if matches!(
                lower.as_str(),
                "k" | "kb" | "m" | "mb" | "g" | "gb" | "t" | "tb"
            ) {
                format!("decimal and bare units are refused ({unit:?} could mean 1000 or 1024); write KiB, MiB, GiB or TiB")
            } else {
                format!("unknown unit {unit:?}; allowed: {ALLOWED}")
            };
            return Err(bad(why));
        }
    };
    n.checked_mul(size)
        .ok_or_else(|| bad("it is larger than 16 EiB".into()))
}

/// `bytes` in the largest IEC unit that divides it exactly (`8MiB`).
pub fn show(bytes: u64) -> String {
    for (unit, size) in UNITS {
        if bytes != 0 && size > 1 && bytes % size == 0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes}")
}

/// A size in the configuration: a number of bytes or a string with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show(self.0))
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as 65536, 64KiB or 8MiB")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v).map(Size).map_err(|_| {
                    E::custom(format!(
                        "{v} is not a size: it is negative; allowed: {ALLOWED}"
                    ))
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bytes_or_iec_units_and_nothing_is_guessed() {
        assert_eq!(parse("65536"), Ok(65536));
        assert_eq!(parse("64KiB"), Ok(65536));
        assert_eq!(parse("8MiB"), Ok(8 << 20));
        assert_eq!(parse("1 GiB"), Ok(1 << 30));
        assert_eq!(parse("2TiB"), Ok(2 << 40));
        assert_eq!(parse("10B"), Ok(10));
        for refused in ["8MB", "8M", "1gb", "1.5GiB", "MiB", "", "-1", "8 mebibytes"] {
            let e = parse(refused).expect_err(refused).0;
            assert!(e.starts_with(&format!("{refused:?} is not a size")), "{e}");
        }
        assert!(parse("8MB").unwrap_err().0.contains("MiB"));
        assert!(parse("99999999999TiB").unwrap_err().0.contains("larger"));
        assert_eq!(show(8 << 20), "8MiB");
        assert_eq!(show(65536), "64KiB");
        assert_eq!(show(1000), "1000");
        assert_eq!(show(0), "0");
    }
}
