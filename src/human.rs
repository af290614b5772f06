//! Numbers for people: ages and sizes the way an operator reads them.
//! Pure.

use std::time::Duration;

/// A broker time as a wall clock (UTC): "02:14" within a day of now,
/// "2026-11-30 02:14" further off (before or after: a pause until next
/// year is not "00:00").
pub fn clock(at: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    if now.signed_duration_since(at).abs() < chrono::Duration::days(1) {
        at.format("%H:%M").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    }
}

/// "3 days", "5 hours", "40 minutes", "12 seconds": the largest unit that
/// is at least one, rounded down, so an age is never overstated.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = if s >= 2 * 86400 {
        (s / 86400, "day")
    } else if s >= 2 * 3600 {
        (s / 3600, "hour")
    } else if s >= 2 * 60 {
        (s / 60, "minute")
    } else {
        (s, "second")
    };
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// "1.2 GiB", "512 B".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

/// "1 204 311": digits grouped by thin spaces, as the spec's samples print
/// record counts.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Bytes as lower-case hex, two digits each: how a digest is written
/// (a segment's and a token's SHA-256, a configuration digest).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn ages() {
        for (secs, want) in [
            (3 * 86400 + 5, "3 days"),
            (86400, "24 hours"),
            (7200, "2 hours"),
            (5400, "90 minutes"),
            (61, "61 seconds"),
            (1, "1 second"),
        ] {
            assert_eq!(age(Duration::from_secs(secs)), want);
        }
    }

    #[test]
    fn sizes_and_counts() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1288490188), "1.2 GiB");
        assert_eq!(count(1204311), "1 204 311");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1 000");
    }

    #[test]
    fn names_read_as_one_list() {
        assert_eq!(list::<&str>(&[]), "");
        assert_eq!(list(&["a"]), "a");
        assert_eq!(list(&["a", "b"]), "a and b");
        assert_eq!(list(&["a", "b", "c"]), "a, b and c");
    }
}

/// Names as one list in words: `a`, `a and b`, `a, b and c`.
pub fn list<S: AsRef<str>>(names: &[S]) -> String {
    match names {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [rest @ .., last] => {
            let rest: Vec<&str> = rest.iter().map(|s| s.as_ref()).collect();
            format!("{} and {}", rest.join(", "), last.as_ref())
        }
    }
}

/// `s` as one word for a POSIX shell: as it is when it has only
/// characters no shell treats specially, else in single quotes (a single
/// quote inside written `'\''`). For the commands the product prints for
/// a person to paste.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '.' | '_' | '-' | '/' | ':' | '=' | '@' | '%' | '+' | ',')
        });
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod shell_tests {
    use super::shell_word;

    #[test]
    fn words_survive_a_shell() {
        assert_eq!(shell_word("user.42"), "user.42");
        assert_eq!(shell_word("GDPR request 7"), "'GDPR request 7'");
        assert_eq!(shell_word(""), "''");
        // What sh makes of each printed word is the word itself.
        for w in [
            "a b",
            "it's",
            "$HOME `x` !",
            "a*b",
            "semi;colon",
            "(p)",
            "\"q\"",
            "back\\slash",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_word(w)))
                .output()
                .expect("sh");
            assert_eq!(String::from_utf8_lossy(&out.stdout), w, "{}", shell_word(w));
        }
    }
}

/// A duration as an operator writes it in the configuration: the largest
/// unit that divides it exactly, in the short form (`7d`, `24h`, `90s`),
/// anything finer exactly (`1.5s` as humantime prints it). humantime alone
/// prints 7d as "7days".
pub fn duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        return humantime::format_duration(d).to_string();
    }
    // A single day reads better as 24h, the way the docs write it.
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60)] {
        if secs != 0 && secs % size == 0 && !(unit == "d" && secs < 2 * 86400) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

/// serde's messages are close to right; make the common ones read as advice.
pub fn serde_message(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(rest) = raw.strip_prefix("unknown field ") {
        // "unknown field `x`, expected one of `a`, `b`"
        let (field, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
        let expected = expected.trim_start_matches(" one of").trim();
        return format!("unknown field {field}; allowed: {expected}");
    }
    if let Some(rest) = raw.strip_prefix("missing field ") {
        return format!("required field {rest} is missing");
    }
    kinds(raw)
}

/// serde names Rust types (`expected u32`); an operator reads kinds.
fn kinds(raw: &str) -> String {
    let Some((head, expected)) = raw.rsplit_once(", expected ") else {
        return raw.to_string();
    };
    if let Some(value) = head.strip_prefix("unknown variant ") {
        let allowed = expected.trim_start_matches("one of ");
        return format!("unknown value {value}; allowed: {allowed}");
    }
    if !(head.starts_with("invalid type: ") || head.starts_with("invalid value: ")) {
        return raw.to_string();
    }
    let kind = match expected.trim() {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "a list".to_string(),
        "a map" => "a mapping (field: value)".to_string(),
        e if e.starts_with("struct ") => "a mapping (field: value)".to_string(),
        e if e.starts_with("unit variant ") || e.starts_with("variant ") => e.to_string(),
        e => e.to_string(),
    };
    // "invalid type: string \"x\"" reads as "got the string \"x\"".
    let got = head
        .strip_prefix("invalid type: ")
        .or_else(|| head.strip_prefix("invalid value: "))
        .unwrap_or(head);
    format!(
        "{got} is not {kind}",
        kind = kind.trim_start_matches("expected ")
    )
}

/// Who reads a refusal: a person at the command line, who gives options
/// as flags (`-confirm`, `-force`), or an HTTP client, who gives them as
/// body fields (`"confirm"`, `"force": true`). One judgement, worded for
/// each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Surface {
    #[default]
    Cli,
    /// `status --if-…`, whose flags are long ones (`--force`).
    Preview,
    Http,
}

impl Surface {
    /// How a valued option is named: `-confirm`, `--confirm` (status's
    /// previews take long flags), or `"confirm"`.
    pub fn option(self, name: &str) -> String {
        match self {
            Surface::Cli => format!("-{name}"),
            Surface::Preview => format!("--{name}"),
            Surface::Http => format!("\"{}\"", name.replace('-', "_")),
        }
    }

    /// How a switch is turned on: `pass -force`, `pass --force`, or
    /// `send "force": true`.
    pub fn switch(self, name: &str) -> String {
        match self {
            Surface::Cli => format!("pass -{name}"),
            Surface::Preview => format!("pass --{name}"),
            Surface::Http => format!("send \"{}\": true", name.replace('-', "_")),
        }
    }
}
