//! Why the broker did not give what was asked, as a type.
//!
//! Each variant carries the whole sentence the operator reads (its
//! `Display` is that sentence, unchanged from what the sidecar has always
//! printed); code decides by the variant, never by the words.

/// A broker call that gave nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// What was asked about (a stream, a bucket, a consumer, an object
    /// store) does not exist: the broker answered, and said so.
    #[error("{0}")]
    Missing(String),
    /// No answer within the read timeout: the write or read may or may not
    /// have happened.
    #[error("{0}")]
    Unanswered(String),
    /// The broker answered with an error of its own (`err_code` as the
    /// JetStream API gives it).
    #[error("{sentence}")]
    Refused { err_code: u64, sentence: String },
    /// Anything else: the connection failed, the answer did not parse, a
    /// read back did not match what was written.
    #[error("{0}")]
    Failed(String),
}

impl Fault {
    /// A failure said in `sentence`.
    pub fn failed(sentence: impl Into<String>) -> Fault {
        Fault::Failed(sentence.into())
    }

    /// The broker's error answer `error`, said as `sentence`.
    pub fn refused(error: &async_nats::jetstream::Error, sentence: String) -> Fault {
        Fault::Refused {
            err_code: error.error_code().0,
            sentence,
        }
    }

    /// The same fault, its sentence led by `what` ("reading the floors
    /// row: …").
    pub fn within(self, what: impl std::fmt::Display) -> Fault {
        let lead = |s: String| format!("{what}: {s}");
        match self {
            Fault::Missing(s) => Fault::Missing(lead(s)),
            Fault::Unanswered(s) => Fault::Unanswered(lead(s)),
            Fault::Refused { err_code, sentence } => Fault::Refused {
                err_code,
                sentence: lead(sentence),
            },
            Fault::Failed(s) => Fault::Failed(lead(s)),
        }
    }
}

/// A fault is said as its sentence where a caller only reports it (a
/// term's `unreadable` reason, a log line): the variant has been looked at
/// by then, or no decision hangs on it.
impl From<Fault> for crate::rows::Unreadable {
    fn from(f: Fault) -> Self {
        crate::rows::Unreadable(f.to_string())
    }
}

impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_keeps_its_kind_when_led_and_says_its_sentence() {
        let f = Fault::Missing("stream T does not exist".into()).within("reading T");
        assert_eq!(
            f,
            Fault::Missing("reading T: stream T does not exist".into())
        );
        assert_eq!(f.to_string(), "reading T: stream T does not exist");
        let f = Fault::Unanswered("stream T: no answer within 5s".into());
        assert_eq!(String::from(f), "stream T: no answer within 5s");
    }
}
