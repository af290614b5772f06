//! Numbers for people: ages and sizes the way an operator reads them.
//! Pure.

use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

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
