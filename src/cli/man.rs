//! `crewlet completions` and `crewlet man`: generated from the clap tree.

use super::*;

/// `crewlet completions SHELL`: generated from the clap definitions.
pub(super) fn completions(shell: CompletionShell) -> Exit {
    use clap::CommandFactory;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "crewlet", &mut std::io::stdout());
    Exit::Ok
}

/// `crewlet man [--dir DIR]`: generated from the clap definitions.
pub(super) fn man(dir: Option<&Path>) -> Exit {
    use clap::CommandFactory;
    // No page for clap's implicit `help` subcommands: nothing would write
    // them, yet the pages above would name them.
    let cmd = without_help(Cli::command());
    let written = match dir {
        Some(d) => std::fs::create_dir_all(d).and_then(|_| clap_mangen::generate_to(cmd, d)),
        None => man_page(cmd, &mut std::io::stdout()),
    };
    match written {
        Ok(()) => Exit::Ok,
        Err(e) => {
            match dir {
                Some(d) => crate::cli::say::error(format_args!(
                    "cannot write the manual pages into {}: {e}",
                    d.display()
                )),
                None => crate::cli::say::error(format_args!("cannot write the manual page: {e}")),
            }
            Exit::Usage
        }
    }
}

/// `cmd` and every subcommand of it without the implicit `help` one.
pub(super) fn without_help(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.disable_help_subcommand(true);
    for name in names {
        cmd = cmd.mut_subcommand(name, without_help);
    }
    cmd
}

/// Text for a roff paragraph: backslashes and hyphens escaped, and no
/// line that starts like a request.
pub(super) fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one page `crewlet man` prints: clap's sections, then every
/// `crewlet retention` command (the gestures an operator runs) and the
/// exit status, which clap's page alone does not carry.
pub(super) fn man_page(cmd: clap::Command, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    if let Some(retention) = cmd.find_subcommand("retention") {
        writeln!(w, ".SH \"RETENTION COMMANDS\"")?;
        for sub in retention.get_subcommands().filter(|s| !s.is_hide_set()) {
            let about = sub
                .get_long_about()
                .or(sub.get_about())
                .map(|a| a.to_string())
                .unwrap_or_default();
            writeln!(w, ".TP")?;
            writeln!(w, "\\fBcrewlet retention {}\\fR", roff_text(sub.get_name()))?;
            writeln!(w, "{}", roff_text(&about))?;
        }
    }
    writeln!(w, ".SH \"EXIT STATUS\"")?;
    for (code, what) in [
        ("0", "done; for status and run \\-\\-once, no alarm is active"),
        ("1", "an alarm is active, or a gesture was refused by its judgement or did not finish on every log (the output names the command that finishes it)"),
        ("2", "bad input or configuration: nothing was read or written"),
        ("3", "the broker is unreachable, or nothing about any log could be read"),
        ("130", "stopped by SIGINT or SIGTERM after cleaning up (the demo)"),
    ] {
        writeln!(w, ".TP")?;
        writeln!(w, "\\fB{code}\\fR")?;
        writeln!(w, "{what}")?;
    }
    man.render_version_section(w)?;
    Ok(())
}
