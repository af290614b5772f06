//! Proving the archive (docs/archive-format.md, Proving the archive): every segment of
//! the current generation read back and checked (header, checksum, count,
//! range, incarnation), the segments contiguous, and no gap between the
//! archive's end and the live log. Reads only; writes nothing.

use serde::Serialize;

use super::fold::{self, Store, Target};
use super::state::Listed;
use crate::broker::Broker;

/// One segment as read back: its listing and what checking it found.
#[derive(Debug, Clone)]
pub struct Checked {
    pub listed: Listed,
    /// The records it holds, or why it does not verify.
    pub records: Result<Vec<u64>, String>,
}

/// What `verify-archive` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub stream: String,
    pub store: String,
    pub generation: u64,
    pub segments: usize,
    pub records: u64,
    pub bytes: u64,
    /// The range the segments cover (null with none).
    pub first_archived: Option<u64>,
    pub last_archived: Option<u64>,
    /// The live log as read.
    pub first_seq: u64,
    pub last_seq: u64,
    /// The frontier the floors row published (null without one).
    pub published_frontier: Option<u64>,
    pub problems: Vec<String>,
}

impl Report {
    pub fn sound(&self) -> bool {
        self.problems.is_empty()
    }
}

/// PURE: the problems of an archive, from each segment as checked, the
/// live log's `first_seq` and the published frontier (only one that had
/// segments behind it).
pub fn judge(checked: &[Checked], first_seq: u64, published_frontier: Option<u64>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut prev: Option<&Listed> = None;
    for c in checked {
        let s = &c.listed;
        match &c.records {
            Err(e) => problems.push(format!("{}: {e}", s.name)),
            Ok(seqs) => {
                if let Some(bad) = seqs
                    .iter()
                    .find(|q| !(s.first_seq..=s.last_seq).contains(q))
                {
                    problems.push(format!(
                        "{}: holds record {bad}, outside the range its name gives",
                        s.name
                    ));
                }
                if seqs.windows(2).any(|w| w[0] >= w[1]) {
                    problems.push(format!("{}: its records are not in sequence order", s.name));
                }
            }
        }
        if let Some(p) = prev {
            let expected = p.last_seq + 1;
            if s.first_seq > expected {
                problems.push(format!(
                    "gap: {} ends at {} and {} starts at {}: records {expected}..{} are in no segment",
                    p.name,
                    p.last_seq,
                    s.name,
                    s.first_seq,
                    s.first_seq - 1
                ));
            } else if s.first_seq < expected {
                problems.push(format!(
                    "overlap: {} starts at {}, inside {} (which ends at {})",
                    s.name, s.first_seq, p.name, p.last_seq
                ));
            }
        }
        prev = Some(s);
    }
    if let Some(last) = checked.last().map(|c| &c.listed) {
        if last.last_seq.saturating_add(1) < first_seq {
            problems.push(format!(
                "gap before the live log: the archive ends at {} and the log starts at {first_seq}: records {}..{} are in neither",
                last.last_seq,
                last.last_seq + 1,
                first_seq - 1
            ));
        }
    }
    // The caller passes a frontier only when segments stood behind it.
    if let Some(p) = published_frontier {
        if !checked.iter().any(|c| c.listed.last_seq == p) {
            problems.push(format!(
                "no segment ends at the published frontier {p}: segments the floors row counted on are missing"
            ));
        }
    }
    problems
}

/// Reads and checks every segment of `target` in `store`.
pub async fn verify(
    broker: &Broker,
    store: &Store,
    target: &Target,
    first_seq: u64,
    last_seq: u64,
    published_frontier: Option<u64>,
) -> Result<Report, String> {
    let listing = store
        .list(broker, &target.stream, target.generation)
        .await
        .map_err(|e| e.message)?;
    let mut checked = Vec::new();
    for l in listing {
        let records = fold::verify(broker, store, target, &l.name)
            .await
            .map(|seg| seg.records.iter().map(|r| r.seq).collect());
        checked.push(Checked { listed: l, records });
    }
    let problems = judge(&checked, first_seq, published_frontier);
    Ok(Report {
        stream: target.stream.clone(),
        store: store.id(),
        generation: target.generation,
        segments: checked.len(),
        records: checked
            .iter()
            .map(|c| c.records.as_ref().map_or(0, |r| r.len() as u64))
            .sum(),
        bytes: checked.iter().map(|c| c.listed.bytes).sum(),
        first_archived: checked.first().map(|c| c.listed.first_seq),
        last_archived: checked.last().map(|c| c.listed.last_seq),
        first_seq,
        last_seq,
        published_frontier,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(first: u64, last: u64, records: Result<Vec<u64>, String>) -> Checked {
        Checked {
            listed: Listed {
                name: crate::archive::segment::name("S", 0, first, last),
                first_seq: first,
                last_seq: last,
                bytes: 10,
            },
            records,
        }
    }

    #[test]
    fn a_sound_archive_has_no_problem() {
        let segs = [
            c(1, 10, Ok((1..=10).collect())),
            c(11, 20, Ok(vec![11, 15, 20])),
        ];
        assert!(judge(&segs, 21, Some(20)).is_empty());
        assert!(
            judge(&segs, 15, Some(20)).is_empty(),
            "overlapping the live log is fine"
        );
        assert!(judge(&[], 1, None).is_empty());
    }

    #[test]
    fn each_problem_is_named() {
        let p = judge(&[c(1, 10, Ok(vec![1, 11]))], 11, None);
        assert!(p[0].contains("outside the range"), "{p:?}");
        let p = judge(&[c(1, 10, Err("checksum".into()))], 11, None);
        assert!(p[0].contains("checksum"), "{p:?}");
        let p = judge(&[c(1, 10, Ok(vec![])), c(15, 20, Ok(vec![]))], 21, None);
        assert!(p[0].starts_with("gap:") && p[0].contains("11..14"), "{p:?}");
        let p = judge(&[c(1, 10, Ok(vec![])), c(5, 20, Ok(vec![]))], 21, None);
        assert!(p[0].starts_with("overlap:"), "{p:?}");
        let p = judge(&[c(1, 10, Ok(vec![]))], 30, None);
        assert!(p[0].contains("11..29"), "{p:?}");
        let p = judge(&[c(1, 10, Ok(vec![]))], 11, Some(20));
        assert!(p[0].contains("published frontier 20"), "{p:?}");
        let p = judge(&[c(1, 10, Ok(vec![3, 2]))], 11, None);
        assert!(p[0].contains("sequence order"), "{p:?}");
    }
}
