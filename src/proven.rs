//! Reads proven current (docs/trim-floor.md, Proven current): on a
//! cluster any replica may serve a consumer or a direct get, and a replica
//! may be behind, so a read that confirms a pin to a person, or decides how
//! far a purge may go, is taken only in a form the broker module made after
//! checking it against the leader. Code outside `src/broker/` can hold and
//! read a [`Proven`], never make one: the type lives at the bottom so that
//! the pure decisions can require it, and `tidy::only_the_broker_vouches`
//! fails when anything but `src/broker/` names [`Proven::vouched`] in any
//! form, anywhere in a file (unit tests take `Proven::fixture`, which only
//! a test build has).

/// A value read from the broker and proven current against the stream's
/// leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven<T>(T);

impl<T> Proven<T> {
    /// Only the broker's readers vouch for a read.
    pub(crate) fn vouched(value: T) -> Proven<T> {
        Proven(value)
    }

    /// A unit test's fixture: compiled into tests only, so no production
    /// path can take it.
    #[cfg(test)]
    pub(crate) fn fixture(value: T) -> Proven<T> {
        Proven(value)
    }

    pub fn get(&self) -> &T {
        &self.0
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}
