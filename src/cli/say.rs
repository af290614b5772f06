//! How a command says that it failed or was refused, in the output format
//! asked for: a line on stderr (`error: …`, `refused: …`); under `--json`
//! one object on stdout, `{"error": CODE, "message": …, "exit": N}`, as
//! a gesture's own JSON refusal is; under `--log-format json` one JSON line
//! on stderr. Every such line a command prints goes through here, so that
//! no format forgets one (docs/status-json.md, Errors and refusals).
//!
//! The code is the refusal's own where it has one (`policy_engine`,
//! `would_lower`, `no_such_hold`, …), else the exit code's class:
//! `usage` (2), `unreachable` (3), `failed` (1).

use std::sync::Mutex;

use crate::exit::Exit;

/// Where a failure goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Text,
    /// `--json`: one object on stdout when the command ends.
    Json,
    /// `--log-format json`: one JSON line on stderr when the command ends.
    LogJson,
}

struct Said {
    code: Option<&'static str>,
    message: String,
}

static MODE: Mutex<Mode> = Mutex::new(Mode::Text);
static SAID: Mutex<Vec<Said>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Chooses the format, once, before the command runs.
pub fn set_mode(mode: Mode) {
    *lock(&MODE) = mode;
}

fn mode() -> Mode {
    *lock(&MODE)
}

fn say(prefix: &str, code: Option<&'static str>, message: String) {
    match mode() {
        Mode::Text => eprintln!("{prefix}: {message}"),
        Mode::Json | Mode::LogJson => lock(&SAID).push(Said { code, message }),
    }
}

/// An error: bad input, configuration, or the broker (the exit code tells
/// which).
pub fn error(message: impl std::fmt::Display) {
    say("error", None, message.to_string());
}

/// An error with a code of its own (`stream_missing`, `bucket_missing`).
pub fn error_coded(code: &'static str, message: impl std::fmt::Display) {
    say("error", Some(code), message.to_string());
}

/// A refusal by judgement; `code` is the refusal's.
pub fn refused(code: &'static str, message: impl std::fmt::Display) {
    say("refused", Some(code), message.to_string());
}

/// The code of an exit, for a failure that has none of its own.
fn class(exit: Exit) -> &'static str {
    match exit {
        Exit::Usage => "usage",
        Exit::Unreachable => "unreachable",
        Exit::Interrupted => "interrupted",
        Exit::Attention | Exit::Ok => "failed",
    }
}

/// The object a failure is in JSON: the first thing said, and any more.
pub fn object(code: &str, message: &str, more: &[String], exit: Exit) -> serde_json::Value {
    let mut v = serde_json::json!({"error": code, "message": message, "exit": exit.code()});
    if !more.is_empty() {
        v["more"] = serde_json::json!(more);
    }
    v
}

/// Called once as the command ends: under a JSON format, what was said as
/// one object.
pub fn finish(exit: Exit) {
    let said = std::mem::take(&mut *lock(&SAID));
    let Some(first) = said.first() else {
        return;
    };
    let more: Vec<String> = said.iter().skip(1).map(|s| s.message.clone()).collect();
    let code = first.code.unwrap_or_else(|| class(exit));
    let v = object(code, &first.message, &more, exit);
    match mode() {
        Mode::Text => {}
        Mode::Json => println!("{v}"),
        Mode::LogJson => {
            let mut line = v;
            line["level"] = "ERROR".into();
            line["timestamp"] = chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into();
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_the_refusals_or_the_exits_class() {
        assert_eq!(class(Exit::Usage), "usage");
        assert_eq!(class(Exit::Unreachable), "unreachable");
        let v = object("no_such_hold", "there is no hold h1", &[], Exit::Attention);
        assert_eq!(
            v,
            serde_json::json!({"error": "no_such_hold", "message": "there is no hold h1", "exit": 1})
        );
        let v = object("usage", "a", &["b".into()], Exit::Usage);
        assert_eq!(v["more"], serde_json::json!(["b"]));
    }
}
