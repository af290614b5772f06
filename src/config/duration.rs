//! Durations as the configuration and the gestures take them: a whole
//! number and a unit, repeated (`90s`, `1h30m`, `7d`, `2w`). Months and
//! years are refused: their length varies, and a retention window is not a
//! place to guess (`1M` read as a minute or a month deletes records either
//! a month early or keeps them a month too long). Pure.

use crate::rows::Invalid;
use std::time::Duration;

/// What the error messages list.
pub const ALLOWED: &str =
    "a whole number and a unit: ms, s, m, h, d or w (30s, 10m, 24h, 7d; combined: 1h30m)";

/// The unit's length, or why it is refused.
fn unit(u: &str) -> Result<Duration, Invalid> {
    const SEC: u64 = 1;
    let secs = |n: u64| Ok(Duration::from_secs(n));
    match u {
        "ms" | "msec" | "msecs" | "millis" => Ok(Duration::from_millis(1)),
        "s" | "sec" | "secs" | "second" | "seconds" => secs(SEC),
        "m" | "min" | "mins" | "minute" | "minutes" => secs(60),
        "h" | "hr" | "hrs" | "hour" | "hours" => secs(3600),
        "d" | "day" | "days" => secs(86_400),
        "w" | "week" | "weeks" => secs(7 * 86_400),
        "M" | "mo" | "month" | "months" | "y" | "yr" | "yrs" | "year" | "years" => Err(Invalid::from(format!(
            "months and years are refused ({u:?}: their length varies); write days or weeks, such as 30d or 52w"
        ))),
        "" => Err(Invalid::from(format!("a number needs a unit; allowed: {ALLOWED}"))),
        other => Err(Invalid::from(format!("unknown unit {other:?}; allowed: {ALLOWED}"))),
    }
}

/// Parses `text`; every error quotes it as written.
pub fn parse(text: &str) -> Result<Duration, Invalid> {
    let bad = |why: String| Invalid(format!("{text:?} is not a duration: {why}"));
    let s = text.trim();
    if s.is_empty() {
        return Err(bad(format!("it is empty; allowed: {ALLOWED}")));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(bad(if rest.len() == s.len() {
                format!("allowed: {ALLOWED}")
            } else {
                format!("expected a whole number at {rest:?}; allowed: {ALLOWED}")
            }));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("the number is too large".into()))?;
        rest = &rest[digits..];
        if rest.starts_with(['.', ',']) {
            return Err(bad(
                "fractions are not taken; write it in a smaller unit (90m, not 1.5h)".into(),
            ));
        }
        let letters = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let size = unit(&rest[..letters]).map_err(|e| bad(e.0))?;
        rest = rest[letters..].trim_start();
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| size.checked_mul(n))
            .ok_or_else(|| bad("it is too long".into()))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| bad("it is too long".into()))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_combinations() {
        let d = |s| parse(s).expect(s);
        assert_eq!(d("30s"), Duration::from_secs(30));
        assert_eq!(d("100ms"), Duration::from_millis(100));
        assert_eq!(d("10m"), Duration::from_secs(600));
        assert_eq!(d("24h"), Duration::from_secs(86_400));
        assert_eq!(d("7d"), Duration::from_secs(7 * 86_400));
        assert_eq!(d("2w"), Duration::from_secs(14 * 86_400));
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("1h 30m"), Duration::from_secs(5400));
        assert_eq!(d(" 7days "), Duration::from_secs(7 * 86_400));
    }

    #[test]
    fn months_years_and_nonsense_are_refused_quoting_the_input() {
        for (text, says) in [
            ("1M", "months and years are refused"),
            ("1y", "months and years are refused"),
            ("2months", "months and years are refused"),
            ("30", "a number needs a unit"),
            ("3x", "unknown unit \"x\""),
            ("", "it is empty"),
            ("h", "allowed: a whole number and a unit"),
            ("-1s", "allowed: a whole number and a unit"),
            ("1h and", "expected a whole number at \"and\""),
            ("1.5h", "fractions are not taken"),
            ("99999999999999999999s", "too large"),
        ] {
            let e = parse(text).expect_err(text).0;
            assert!(e.starts_with(&format!("{text:?} is not a duration")), "{e}");
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
