//! The archive (fold before trim): records leave the live log only after
//! they are durably archived in segments. This module holds the segment
//! format, how a slice is cut, the directory store and one fold into
//! either store; the fold's place in the tick (the seventh term, the
//! floors row's archive state) comes next, and until it does an `archive:`
//! in the configuration is refused, so that nothing is ever purged on the
//! promise of an archive the tick does not keep.

pub mod cut;
pub mod dir;
pub mod fold;
pub mod segment;

/// What putting a segment into a store did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Written,
    /// It was there with exactly these bytes (a re-fold after a crash).
    AlreadyThere,
}

#[cfg(test)]
mod tests {
    /// Until the fold exists, a configured archive is an error, never a
    /// promise the trim would not keep.
    #[test]
    fn an_archive_section_is_refused_until_the_fold_exists() {
        let checked = crate::config::check(
            "node: {id: n1}\nretention: {backup_owner: x}\ndomains: [{name: t, stream: T, archive: {dir: /var/lib/crewlet/archive}}]\n",
        );
        assert!(checked.config.is_none());
        assert!(
            checked
                .problems
                .iter()
                .any(|p| p.field.starts_with("domains[0]") && p.message.contains("archive")),
            "{:?}",
            checked.problems
        );
    }
}
