//! The exit codes of docs/runbook.md, in one place. Every command ends in an
//! [`Exit`]; `main` turns it into the process's exit code and nothing else
//! picks a number.

use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done; for `status`, no alarm is active.
    Ok,
    /// `status`: an alarm is active. A gesture: refused by its judgement, or
    /// not every log finished.
    Attention,
    /// Usage, configuration or input error: nothing was read or written.
    Usage,
    /// The broker could not be reached, or nothing could be read.
    Unreachable,
    /// Stopped by SIGINT or SIGTERM before it finished (the demo), after
    /// cleaning up: 130, as a shell reports a command ended by Ctrl-C.
    Interrupted,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Attention => 1,
            Exit::Usage => 2,
            Exit::Unreachable => 3,
            Exit::Interrupted => 130,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}
