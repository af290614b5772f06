//! The answer the tick publishes and purges by: computed from rows proven
//! current, and from nothing else (docs/trim-floor.md, Proven current).
//!
//! [`Licensed`] is the only form of an answer a purge target can be taken
//! from ([`super::licensed_target`]); it is made only by
//! [`Licensed::compute`], which takes the rows as the broker proved them current:
//! a `Proven` read. A preview computes plain [`Answer`]s from rows changed in memory,
//! and no purge can be taken from one.

use chrono::{DateTime, Utc};

use super::{compute, Answer, DomainRead, ParsedRows, Policy};
use crate::config::Domain;
use crate::proven::Proven;
use crate::rows::Timestamp;

/// An answer computed from rows proven current. Readable as an [`Answer`]
/// everywhere; made only here.
#[derive(Debug, Clone)]
pub struct Licensed(Answer);

impl Licensed {
    /// PURE: the answer of `domain` from proven `rows` and its `read`, at
    /// `now` (the broker's instant of that read).
    pub fn compute(
        domain: &Domain,
        policy: &Policy,
        rows: &Proven<ParsedRows>,
        read: &DomainRead,
        now: DateTime<Utc>,
    ) -> Licensed {
        Licensed(compute(domain, policy, rows.get(), read, now))
    }

    /// The same answer with every term unreadable for `outage` (no server
    /// answered): it licenses no purge ([`Answer::unreachable`]).
    pub fn unreachable(self, outage: &super::Outage) -> Licensed {
        Licensed(self.0.unreachable(outage))
    }

    /// The answer, no longer licensing anything.
    pub fn into_answer(self) -> Answer {
        self.0
    }

    /// Records when the row saying this answer was published (or stood):
    /// this tick stands behind it, so it is current at the tick's instant
    /// (its `_tick` follows).
    pub fn set_published_at(&mut self, at: Timestamp) {
        self.0.published_at = Some(at);
        self.0.current_at = Some(self.0.at.max(at));
    }

    /// Records what lowered the purge after the answer (the pins re-read,
    /// the age proof): it only ever explains a lower purge.
    pub fn set_purge_clamped_by(&mut self, by: super::PurgeClamp) {
        self.0.purge_clamped_by = Some(by);
    }
}

impl<'a> From<&'a Licensed> for super::FloorsRow<'a> {
    fn from(a: &'a Licensed) -> Self {
        super::FloorsRow::from(&a.0)
    }
}

impl std::ops::Deref for Licensed {
    type Target = Answer;

    fn deref(&self) -> &Answer {
        &self.0
    }
}
