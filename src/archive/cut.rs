//! PURE: how a slice of records is cut into segments (docs/archive-format.md, The
//! fold): oldest first, each closed at `segment_records` records or
//! `segment_bytes` bytes (uncompressed record sizes), whichever comes
//! first, at most `fold_per_tick` segments; a last, partial segment only
//! where the slice ends (`slice_end`), so that a segment, once written,
//! never has to grow.

use super::segment::{self, RecordRef, SegmentError};

/// The limits of one tick's fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub segment_records: usize,
    pub segment_bytes: usize,
    pub fold_per_tick: usize,
}

/// One segment to write: the range it covers and its records, already laid
/// out as the segment's uncompressed body ([`segment::append`]), so that a
/// record is copied once, from the message it arrived in to the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub first_seq: u64,
    pub last_seq: u64,
    /// How many records `body` holds.
    pub records: u64,
    pub body: Vec<u8>,
}

/// Cuts a slice into segments record by record, as it is read, so that
/// a segment can be written while the rest of the slice is still being
/// read. Ranges are contiguous from `frontier + 1`: a sequence the log
/// does not hold is covered by the segment around it.
pub struct Cutter {
    /// The slice's first sequence.
    start: u64,
    /// The open segment's first sequence.
    first: u64,
    slice_end: u64,
    /// The last sequence taken: the next must be past it.
    taken: u64,
    records: u64,
    body: Vec<u8>,
    cut: usize,
    limits: Limits,
}

impl Cutter {
    pub fn new(frontier: u64, slice_end: u64, limits: Limits) -> Cutter {
        Cutter {
            start: frontier + 1,
            first: frontier + 1,
            slice_end,
            taken: frontier,
            records: 0,
            body: Vec::new(),
            cut: 0,
            limits,
        }
    }

    /// Adds the next record; returns the segments it closed and whether
    /// the tick's `fold_per_tick` is reached (push no more). A record
    /// outside the slice is ignored; one at or before the last one taken
    /// is refused (an earlier record arriving late would mean one the
    /// segment before went without), and so is a field over 4 GiB.
    pub fn push(&mut self, r: RecordRef<'_>) -> Result<(Vec<Cut>, bool), SegmentError> {
        let mut out = Vec::new();
        if r.seq < self.start || r.seq > self.slice_end || self.done() {
            return Ok((out, self.done()));
        }
        if r.seq <= self.taken {
            return Err(SegmentError::Records(format!(
                "record {} arrived after record {}",
                r.seq, self.taken
            )));
        }
        let s = r.size();
        // Close the open segment before this record if it would pass the
        // byte limit (a single record over it still gets a segment).
        if self.records > 0 && self.body.len() + s > self.limits.segment_bytes {
            out.push(self.close(r.seq - 1));
            if self.done() {
                return Ok((out, true));
            }
        }
        if self.body.is_empty() {
            // One allocation per segment, sized from its first record,
            // not a doubling as records arrive.
            let guess = s.saturating_mul(self.limits.segment_records);
            self.body
                .reserve(guess.min(self.limits.segment_bytes).max(s));
        }
        segment::append(&mut self.body, &r)?;
        self.records += 1;
        self.taken = r.seq;
        if self.records as usize == self.limits.segment_records {
            out.push(self.close(r.seq));
        }
        Ok((out, self.done()))
    }

    /// The rest, and any sequences the log does not hold up to the slice's
    /// end, close the slice, but only when the read covered all of it.
    pub fn finish(mut self, whole: bool) -> Option<Cut> {
        (whole && !self.done() && self.first <= self.slice_end).then(|| {
            let end = self.slice_end;
            self.close(end)
        })
    }

    fn done(&self) -> bool {
        self.cut >= self.limits.fold_per_tick
    }

    fn close(&mut self, last: u64) -> Cut {
        let c = Cut {
            first_seq: self.first,
            last_seq: last,
            records: std::mem::take(&mut self.records),
            body: std::mem::take(&mut self.body),
        };
        self.first = last + 1;
        self.cut += 1;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::segment::Record;

    /// Cuts `records` (the slice `(frontier, slice_end]` as read, in order)
    /// into segments. Ranges are contiguous from `frontier + 1`: a sequence
    /// the log does not hold is covered by the segment around it. A segment
    /// that is not full is cut only when `whole` (the read covered the slice to
    /// its end, so no record of it is missing); otherwise it waits for a later
    /// tick.
    pub fn cut(
        records: &[Record],
        frontier: u64,
        slice_end: u64,
        whole: bool,
        limits: Limits,
    ) -> Result<Vec<Cut>, SegmentError> {
        let mut cutter = Cutter::new(frontier, slice_end, limits);
        let mut out = Vec::new();
        for r in records {
            let (cuts, done) = cutter.push(r.as_ref())?;
            out.extend(cuts);
            if done {
                return Ok(out);
            }
        }
        out.extend(cutter.finish(whole));
        Ok(out)
    }

    fn rec(seq: u64, len: usize) -> Record {
        Record {
            seq,
            time_ns: seq as i64,
            subject: "S.r".into(),
            headers: Vec::new(),
            data: vec![0; len],
        }
    }

    fn ranges(cuts: &[Cut]) -> Vec<(u64, u64, usize)> {
        cuts.iter()
            .map(|c| (c.first_seq, c.last_seq, c.records as usize))
            .collect()
    }

    const L: Limits = Limits {
        segment_records: 10,
        segment_bytes: 1 << 20,
        fold_per_tick: 16,
    };

    #[test]
    fn by_records_with_a_partial_tail_only_at_the_slice_end() {
        let recs: Vec<Record> = (1..=25).map(|s| rec(s, 10)).collect();
        assert_eq!(
            ranges(&cut(&recs, 0, 25, true, L).expect("cut")),
            [(1, 10, 10), (11, 20, 10), (21, 25, 5)]
        );
        // The read stopped short of the slice's end: the tail waits.
        assert_eq!(
            ranges(&cut(&recs, 0, 40, false, L).expect("cut")),
            [(1, 10, 10), (11, 20, 10)]
        );
        // The read covered 1..=28 and 26..=28 are not in the log: the last
        // segment covers them.
        assert_eq!(
            ranges(&cut(&recs, 0, 28, true, L).expect("cut"))[2],
            (21, 28, 5)
        );
    }

    #[test]
    fn by_bytes_and_at_most_fold_per_tick() {
        let recs: Vec<Record> = (101..=130).map(|s| rec(s, 100)).collect();
        let bytes = Limits {
            segment_bytes: 3 * rec(1, 100).as_ref().size(),
            ..L
        };
        assert_eq!(
            ranges(&cut(&recs, 100, 130, true, bytes).expect("cut"))[..2],
            [(101, 103, 3), (104, 106, 3)]
        );
        let two = Limits {
            fold_per_tick: 2,
            ..bytes
        };
        assert_eq!(
            ranges(&cut(&recs, 100, 130, true, two).expect("cut")),
            [(101, 103, 3), (104, 106, 3)]
        );
        // A record larger than the limit still gets a segment of its own.
        let big = vec![rec(1, 10), rec(2, 10_000), rec(3, 10)];
        let small = Limits {
            segment_bytes: 100,
            ..L
        };
        assert_eq!(
            ranges(&cut(&big, 0, 3, true, small).expect("cut")),
            [(1, 1, 1), (2, 2, 1), (3, 3, 1)]
        );
    }

    #[test]
    fn gaps_are_covered_and_ranges_are_contiguous() {
        // 4 and 8 were never held (or erased): the ranges still meet.
        let recs: Vec<Record> = [1u64, 2, 3, 5, 6, 7, 9, 10]
            .iter()
            .map(|&s| rec(s, 10))
            .collect();
        let three = Limits {
            segment_records: 3,
            ..L
        };
        let cuts = cut(&recs, 0, 10, true, three).expect("cut");
        assert_eq!(ranges(&cuts), [(1, 3, 3), (4, 7, 3), (8, 10, 2)]);
        assert!(cuts.windows(2).all(|w| w[1].first_seq == w[0].last_seq + 1));
        assert_eq!(cuts[0].first_seq, 1);
    }

    #[test]
    fn records_outside_the_slice_are_ignored() {
        let recs: Vec<Record> = (1..=30).map(|s| rec(s, 10)).collect();
        assert_eq!(
            ranges(&cut(&recs, 10, 20, true, L).expect("cut")),
            [(11, 20, 10)]
        );
        assert!(
            cut(&[], 5, 10, false, L).expect("cut").is_empty(),
            "nothing read, nothing cut"
        );
        // Nothing in the log between 6 and 10, and the read says so.
        assert_eq!(
            ranges(&cut(&[], 5, 10, true, L).expect("cut")),
            [(6, 10, 0)]
        );
    }

    #[test]
    fn a_cut_is_the_body_encode_lays_out() {
        let recs: Vec<Record> = (1..=7)
            .map(|s| Record {
                headers: if s % 2 == 0 {
                    b"NATS/1.0\r\nA: b\r\n\r\n".to_vec()
                } else {
                    Vec::new()
                },
                ..rec(s, s as usize * 3)
            })
            .collect();
        let cuts = cut(&recs, 0, 7, true, L).expect("cut");
        let range = segment::Range {
            stream: "S".into(),
            generation: 0,
            stream_created: "2026-12-03T00:00:00Z".into(),
            first_seq: 1,
            last_seq: 7,
        };
        let z = segment::Compression::Zstd;
        assert_eq!(
            segment::encode_body(&range, cuts[0].records, &cuts[0].body, z),
            segment::encode(&range, &recs, z)
        );
        let back = segment::decode(&segment::encode(&range, &recs, z).expect("encode"));
        assert_eq!(back.expect("decode").records, recs);
    }

    #[test]
    fn a_record_that_arrives_late_is_refused_not_folded() {
        // 3 after 5: the segment would go without 3 and no error say so.
        let recs: Vec<Record> = [1u64, 2, 5, 3].iter().map(|&s| rec(s, 10)).collect();
        let e = cut(&recs, 0, 10, true, L).expect_err("out of order");
        assert!(
            e.to_string().contains("record 3 arrived after record 5"),
            "{e}"
        );
        // So is one whose segment is already closed: 2 after 4, with
        // 1..=3 cut.
        let three = Limits {
            segment_records: 3,
            ..L
        };
        let closed: Vec<Record> = [1u64, 2, 3, 4, 2].iter().map(|&s| rec(s, 10)).collect();
        let e = cut(&closed, 0, 10, true, three).expect_err("late for a closed segment");
        assert!(
            e.to_string().contains("record 2 arrived after record 4"),
            "{e}"
        );
        // The same record twice is refused as well.
        let twice: Vec<Record> = [1u64, 2, 2].iter().map(|&s| rec(s, 10)).collect();
        assert!(cut(&twice, 0, 10, true, L).is_err());
    }
}
