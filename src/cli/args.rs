//! Accepting the single-dash long flags of the reference notes
//! (`-confirm`, `-stream`, `-op-id`): a command copied from a runbook works
//! as written. clap only knows `--confirm`, so argv is rewritten first,
//! using the long names clap itself declares (never a hand-kept list).

use std::collections::HashSet;
use std::ffi::OsString;

/// Every long flag name anywhere in the command tree.
pub fn long_names(cmd: &clap::Command) -> HashSet<String> {
    let mut out = HashSet::new();
    collect(cmd, &mut out);
    out
}

fn collect(cmd: &clap::Command, out: &mut HashSet<String>) {
    for arg in cmd.get_arguments() {
        if let Some(long) = arg.get_long() {
            out.insert(long.to_string());
        }
        if let Some(aliases) = arg.get_all_aliases() {
            out.extend(aliases.into_iter().map(str::to_string));
        }
    }
    for sub in cmd.get_subcommands() {
        collect(sub, out);
    }
}

/// Rewrites `-name` and `-name=value` to `--name…` when `name` is a known
/// long flag. Everything after a bare `--` is left alone, as are short
/// flags and negative numbers.
pub fn normalize(
    args: impl IntoIterator<Item = OsString>,
    longs: &HashSet<String>,
) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    for arg in args {
        if passthrough {
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            passthrough = true;
            out.push(arg);
            continue;
        }
        if let Some(rest) = text.strip_prefix('-') {
            if !rest.starts_with('-') && rest.len() > 1 {
                let name = rest.split('=').next().unwrap_or(rest);
                if longs.contains(name) {
                    out.push(OsString::from(format!("-{text}")));
                    continue;
                }
            }
        }
        out.push(arg);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Vec<String> {
        let longs: HashSet<String> = ["confirm", "stream", "op-id", "position", "json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        normalize(args.iter().map(OsString::from), &longs)
            .into_iter()
            .map(|s| s.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn single_dash_long_flags_become_double() {
        assert_eq!(
            run(&[
                "crewlet",
                "retention",
                "ack",
                "-stream",
                "S",
                "-position=5",
                "--json"
            ]),
            [
                "crewlet",
                "retention",
                "ack",
                "--stream",
                "S",
                "--position=5",
                "--json"
            ]
        );
        assert_eq!(run(&["x", "-op-id", "01J"]), ["x", "--op-id", "01J"]);
    }

    #[test]
    fn others_are_left_alone() {
        assert_eq!(
            run(&["x", "-h", "-5", "-unknown", "--", "-stream"]),
            ["x", "-h", "-5", "-unknown", "--", "-stream"]
        );
    }
}
