//! The exit codes (docs/runbook.md, Exit codes) in one place. Every command ends in an
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

/// How a gesture or route ended, as a kind: the one place both its exit
/// code (the CLI) and its HTTP status (the routes) come from, so that the
/// two surfaces never disagree about the same outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Done (exit 0, 200).
    Done,
    /// Done as far as it got, and it says how to finish (exit 1, 200).
    Pending,
    /// Bad input: the message names what is allowed (exit 2, 400).
    BadInput,
    /// Refused by judgement (exit 1, 409).
    Refused,
    /// The configuration leaves nothing for it to do (exit 2, 409).
    Unconfigured,
    /// A configured stream the broker does not have (exit 1, 404).
    Missing,
    /// The broker did not answer (exit 3, 503).
    Unreachable,
}

impl Class {
    pub fn exit(self) -> Exit {
        match self {
            Class::Done => Exit::Ok,
            Class::Pending | Class::Refused | Class::Missing => Exit::Attention,
            Class::BadInput | Class::Unconfigured => Exit::Usage,
            Class::Unreachable => Exit::Unreachable,
        }
    }

    /// The HTTP status of a route's answer.
    pub fn http_status(self) -> u16 {
        match self {
            Class::Done | Class::Pending => 200,
            Class::BadInput => 400,
            Class::Refused | Class::Unconfigured => 409,
            Class::Missing => 404,
            Class::Unreachable => 503,
        }
    }
}

/// What every gesture's outcome (done, refused, failed) says of itself:
/// its kind, from which the exit code and the HTTP status both come, and
/// its code (`--json`'s `error`, the HTTP answer's `error`).
pub trait Outcome {
    fn class(&self) -> Class;
    fn code(&self) -> &'static str;
    /// The process's exit code for it.
    fn exit(&self) -> Exit {
        self.class().exit()
    }
}

/// Why input was refused before anything was read (exit 2, HTTP 400):
/// each its code, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFault {
    /// A value that is not what the field allows.
    BadRequest,
    /// `-confirm` does not repeat what it confirms.
    ConfirmMismatch,
    /// The stream or domain is not configured.
    UnknownStream,
    /// Not one literal subject.
    SubjectInvalid,
    /// An erasure without its reason.
    ReasonMissing,
    /// An operation id that is not one.
    OpIdInvalid,
}

impl InputFault {
    pub fn code(self) -> &'static str {
        match self {
            InputFault::BadRequest => "bad_request",
            InputFault::ConfirmMismatch => "confirm_mismatch",
            InputFault::UnknownStream => "unknown_stream",
            InputFault::SubjectInvalid => "subject_invalid",
            InputFault::ReasonMissing => "reason_missing",
            InputFault::OpIdInvalid => "op_id_invalid",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One outcome kind, one exit code and one HTTP status (docs/http.md's
    /// status table and the README's exit codes).
    #[test]
    fn each_class_has_one_exit_code_and_one_status() {
        for (class, code, status) in [
            (Class::Done, 0, 200),
            (Class::Pending, 1, 200),
            (Class::BadInput, 2, 400),
            (Class::Refused, 1, 409),
            (Class::Unconfigured, 2, 409),
            (Class::Missing, 1, 404),
            (Class::Unreachable, 3, 503),
        ] {
            assert_eq!(
                (class.exit().code(), class.http_status()),
                (code, status),
                "{class:?}"
            );
        }
    }
}
