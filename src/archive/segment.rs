//! PURE: the archive's segment format, version 1 (docs/archive-format.md
//! describes it byte by byte, for programs that read an archive without
//! crewlet). A segment holds a contiguous range of a log's sequences, every
//! record in it exactly as the broker stored it, compressed, with a SHA-256
//! of the compressed body in its header.
//!
//! ```text
//! "CRWLSEG" (7 bytes) | version (1 byte) | header length (u32 BE) | header (JSON) | body
//! ```

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::human::hex;

/// The first seven bytes of every segment.
pub const MAGIC: &[u8; 7] = b"CRWLSEG";
/// The format this code writes and reads.
pub const VERSION: u8 = 1;
/// A header larger than this is not one (a stream name is at most 255
/// bytes; the rest is numbers).
const MAX_HEADER: usize = 64 * 1024;
/// zstd level 1, the fastest standard level: the fold runs inside a tick,
/// on the same cores as the broker it reads from, and its throughput is
/// held to 0.8× a raw read (`crewlet bench --only archive`). The level is
/// not part of the format: any zstd decoder reads any level.
const LEVEL: i32 = 1;

/// One record as the broker stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// The broker's timestamp, nanoseconds since the Unix epoch.
    pub time_ns: i64,
    pub subject: String,
    /// The NATS header block (`NATS/1.0\r\n…\r\n\r\n`, names sorted), empty
    /// when the record has none.
    pub headers: Vec<u8>,
    pub data: Vec<u8>,
}

/// A record borrowed from wherever it was read: the fold appends it to a
/// segment's body straight from the broker's message, with no copy of its
/// own in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub seq: u64,
    pub time_ns: i64,
    pub subject: &'a str,
    pub headers: &'a [u8],
    pub data: &'a [u8],
}

impl Record {
    pub fn as_ref(&self) -> RecordRef<'_> {
        RecordRef {
            seq: self.seq,
            time_ns: self.time_ns,
            subject: &self.subject,
            headers: &self.headers,
            data: &self.data,
        }
    }
}

impl RecordRef<'_> {
    /// What the record adds to a body: the size the cutter's limits count.
    pub fn size(&self) -> usize {
        8 + 8 + 12 + self.subject.len() + self.headers.len() + self.data.len()
    }

    pub fn to_owned(&self) -> Record {
        Record {
            seq: self.seq,
            time_ns: self.time_ns,
            subject: self.subject.to_string(),
            headers: self.headers.to_vec(),
            data: self.data.to_vec(),
        }
    }
}

/// Appends `r` to an uncompressed body (docs/archive-format.md, The body):
/// sequence and timestamp, then subject, headers and data, each behind its
/// length. Refused, with nothing appended, when a field is over 4 GiB.
pub fn append(body: &mut Vec<u8>, r: &RecordRef<'_>) -> Result<(), SegmentError> {
    for (what, len) in [
        ("subject", r.subject.len()),
        ("headers", r.headers.len()),
        ("data", r.data.len()),
    ] {
        if u32::try_from(len).is_err() {
            return Err(SegmentError::Records(format!(
                "record {}: its {what} is over 4 GiB",
                r.seq
            )));
        }
    }
    body.reserve(r.size());
    body.extend_from_slice(&r.seq.to_be_bytes());
    body.extend_from_slice(&r.time_ns.to_be_bytes());
    for field in [r.subject.as_bytes(), r.headers, r.data] {
        body.extend_from_slice(&(field.len() as u32).to_be_bytes());
        body.extend_from_slice(field);
    }
    Ok(())
}

/// How the body is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Zstd,
    None,
}

/// The segment's header (JSON, after the magic, version and length).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub stream: String,
    pub generation: u64,
    /// The log's `created` (RFC 3339, nanoseconds): which incarnation.
    pub stream_created: String,
    /// The range the segment covers, inclusive; a sequence in it that the
    /// log never held (or erased) is simply absent from the body.
    pub first_seq: u64,
    pub last_seq: u64,
    pub records: u64,
    pub compression: Compression,
    pub uncompressed_bytes: u64,
    pub compressed_bytes: u64,
    /// SHA-256 of the body as stored (compressed), lower-case hex.
    pub sha256: String,
}

/// What the caller knows of the segment before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub stream: String,
    pub generation: u64,
    pub stream_created: String,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// Why bytes are not a segment, or records cannot make one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    #[error("not a segment: the first bytes are not CRWLSEG")]
    Magic,
    #[error("segment format version {0} is not one this crewlet reads (it reads 1)")]
    Version(u8),
    #[error("the segment is cut short: {0}")]
    Truncated(String),
    #[error("the segment's header is not valid: {0}")]
    Header(String),
    #[error("the body's SHA-256 is {actual}, the header says {expected}")]
    Checksum { expected: String, actual: String },
    #[error("the body does not decompress: {0}")]
    Compression(String),
    #[error("the body does not match its header: {0}")]
    Body(String),
    #[error("records cannot make this segment: {0}")]
    Records(String),
}

/// The object or file name of a segment: `<stream>/<generation>/<first>-<last>.seg`,
/// both sequences zero-padded to 20 digits so that names sort in sequence
/// order.
pub fn name(stream: &str, generation: u64, first_seq: u64, last_seq: u64) -> String {
    format!("{stream}/{generation}/{first_seq:020}-{last_seq:020}.seg")
}

/// The range a segment name stands for, or `None` when it is not one.
pub fn parse_name(name: &str) -> Option<(String, u64, u64, u64)> {
    let mut parts = name.split('/');
    let (stream, generation, file) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (first, last) = file.strip_suffix(".seg")?.split_once('-')?;
    if first.len() != 20 || last.len() != 20 {
        return None;
    }
    let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
    let generation: u64 = generation.parse().ok()?;
    (first <= last).then(|| (stream.to_string(), generation, first, last))
}

/// Writes `records` (in sequence order, inside `range`) as one segment.
pub fn encode(
    range: &Range,
    records: &[Record],
    compression: Compression,
) -> Result<Vec<u8>, SegmentError> {
    check_range(range)?;
    let mut previous = range.first_seq - 1;
    let mut plain = Vec::with_capacity(records.iter().map(|r| r.as_ref().size()).sum());
    for r in records {
        if r.seq <= previous || r.seq > range.last_seq {
            return Err(SegmentError::Records(format!(
                "record {} is out of order or outside {}..={}",
                r.seq, range.first_seq, range.last_seq
            )));
        }
        previous = r.seq;
        append(&mut plain, &r.as_ref())?;
    }
    encode_body(range, records.len() as u64, &plain, compression)
}

/// Writes a body already laid out by [`append`] (`records` of them, in
/// sequence order, inside `range`: the caller's to keep) as one segment.
pub fn encode_body(
    range: &Range,
    records: u64,
    plain: &[u8],
    compression: Compression,
) -> Result<Vec<u8>, SegmentError> {
    check_range(range)?;
    let compressed;
    let body = match compression {
        Compression::Zstd => {
            compressed = zstd::bulk::compress(plain, LEVEL)
                .map_err(|e| SegmentError::Records(format!("zstd: {e}")))?;
            &compressed[..]
        }
        Compression::None => plain,
    };
    let header = Header {
        stream: range.stream.clone(),
        generation: range.generation,
        stream_created: range.stream_created.clone(),
        first_seq: range.first_seq,
        last_seq: range.last_seq,
        records,
        compression,
        uncompressed_bytes: plain.len() as u64,
        compressed_bytes: body.len() as u64,
        sha256: hex(&Sha256::digest(body)),
    };
    let header = serde_json::to_vec(&header).map_err(|e| SegmentError::Records(e.to_string()))?;
    let mut out = Vec::with_capacity(12 + header.len() + body.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    Ok(out)
}

fn check_range(range: &Range) -> Result<(), SegmentError> {
    if range.first_seq == 0 || range.first_seq > range.last_seq {
        return Err(SegmentError::Records(format!(
            "the range {}..={} is empty or starts at 0",
            range.first_seq, range.last_seq
        )));
    }
    Ok(())
}

/// Reads the header only (no checksum, no body): for listings.
pub fn header(bytes: &[u8]) -> Result<Header, SegmentError> {
    split(bytes).map(|(h, _)| h)
}

fn split(bytes: &[u8]) -> Result<(Header, &[u8]), SegmentError> {
    if bytes.len() < 8 || &bytes[..7] != MAGIC {
        return Err(SegmentError::Magic);
    }
    if bytes[7] != VERSION {
        return Err(SegmentError::Version(bytes[7]));
    }
    let len = bytes
        .get(8..12)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| SegmentError::Truncated("no header length".into()))?;
    if len > MAX_HEADER {
        return Err(SegmentError::Header(format!("{len} bytes long")));
    }
    let raw = bytes
        .get(12..12 + len)
        .ok_or_else(|| SegmentError::Truncated(format!("the header is {len} bytes")))?;
    let header: Header =
        serde_json::from_slice(raw).map_err(|e| SegmentError::Header(e.to_string()))?;
    let body = &bytes[12 + len..];
    if body.len() as u64 != header.compressed_bytes {
        return Err(SegmentError::Truncated(format!(
            "the body is {} bytes, the header says {}",
            body.len(),
            header.compressed_bytes
        )));
    }
    Ok((header, body))
}

/// Reads the header and verifies the body's checksum and size, without
/// decompressing it: for a segment just written, whose read-back bytes
/// are also compared with what was encoded.
pub fn verify_checksum(bytes: &[u8]) -> Result<Header, SegmentError> {
    let (header, body) = split(bytes)?;
    let actual = hex(&Sha256::digest(body));
    if actual != header.sha256 {
        return Err(SegmentError::Checksum {
            expected: header.sha256,
            actual,
        });
    }
    Ok(header)
}

/// A segment, verified: checksum, sizes, count and order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub header: Header,
    pub records: Vec<Record>,
}

/// Reads and verifies a whole segment.
pub fn decode(bytes: &[u8]) -> Result<Segment, SegmentError> {
    let (header, body) = split(bytes)?;
    let actual = hex(&Sha256::digest(body));
    if actual != header.sha256 {
        return Err(SegmentError::Checksum {
            expected: header.sha256.clone(),
            actual,
        });
    }
    let plain = match header.compression {
        Compression::Zstd => {
            let cap = usize::try_from(header.uncompressed_bytes)
                .map_err(|_| SegmentError::Body("too large to read here".into()))?;
            zstd::bulk::decompress(body, cap)
                .map_err(|e| SegmentError::Compression(e.to_string()))?
        }
        Compression::None => body.to_vec(),
    };
    if plain.len() as u64 != header.uncompressed_bytes {
        return Err(SegmentError::Body(format!(
            "{} bytes uncompressed, the header says {}",
            plain.len(),
            header.uncompressed_bytes
        )));
    }
    let records = records_of(&plain, &header)?;
    Ok(Segment { header, records })
}

fn records_of(plain: &[u8], header: &Header) -> Result<Vec<Record>, SegmentError> {
    let mut r = Reader { plain, at: 0 };
    let mut out = Vec::new();
    let mut previous = header.first_seq.saturating_sub(1);
    while r.at < plain.len() {
        let seq = r.u64("sequence")?;
        let time_ns = r.u64("timestamp")? as i64;
        let subject = String::from_utf8(r.field("subject")?)
            .map_err(|_| SegmentError::Body(format!("record {seq}: the subject is not UTF-8")))?;
        let headers = r.field("headers")?;
        let data = r.field("data")?;
        if seq <= previous || seq > header.last_seq {
            return Err(SegmentError::Body(format!(
                "record {seq} is out of order or outside {}..={}",
                header.first_seq, header.last_seq
            )));
        }
        previous = seq;
        out.push(Record {
            seq,
            time_ns,
            subject,
            headers,
            data,
        });
    }
    if out.len() as u64 != header.records {
        return Err(SegmentError::Body(format!(
            "{} records, the header says {}",
            out.len(),
            header.records
        )));
    }
    Ok(out)
}

/// A cursor over an uncompressed body.
struct Reader<'a> {
    plain: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], SegmentError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or_else(|| SegmentError::Body(format!("a record's {what} is too long")))?;
        let slice = self
            .plain
            .get(self.at..end)
            .ok_or_else(|| SegmentError::Body(format!("a record is cut short in its {what}")))?;
        self.at = end;
        Ok(slice)
    }

    fn u64(&mut self, what: &str) -> Result<u64, SegmentError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    fn field(&mut self, what: &str) -> Result<Vec<u8>, SegmentError> {
        let b = self.take(4, what)?;
        let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        self.take(len, what).map(<[u8]>::to_vec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range() -> Range {
        Range {
            stream: "CREWLET_TRACKER_LOG".into(),
            generation: 0,
            stream_created: "2026-12-01T10:00:00.123456789Z".into(),
            first_seq: 101,
            last_seq: 110,
        }
    }

    fn records() -> Vec<Record> {
        [101u64, 102, 105, 110]
            .iter()
            .map(|&seq| Record {
                seq,
                time_ns: 1_764_583_200_000_000_000 + seq as i64,
                subject: format!("CREWLET_TRACKER_LOG.r{seq}"),
                headers: if seq % 2 == 0 {
                    b"NATS/1.0\r\nNats-Msg-Id: m\r\n\r\n".to_vec()
                } else {
                    Vec::new()
                },
                data: vec![seq as u8; 200],
            })
            .collect()
    }

    #[test]
    fn round_trips_both_compressions_with_gaps() {
        for c in [Compression::Zstd, Compression::None] {
            let bytes = encode(&range(), &records(), c).expect("encode");
            let seg = decode(&bytes).expect("decode");
            assert_eq!(seg.records, records());
            assert_eq!(seg.header.records, 4);
            assert_eq!((seg.header.first_seq, seg.header.last_seq), (101, 110));
            assert_eq!(seg.header.compression, c);
            assert_eq!(header(&bytes).expect("header"), seg.header);
        }
        // Encoding is deterministic: a re-fold writes the same bytes.
        assert_eq!(
            encode(&range(), &records(), Compression::Zstd).expect("a"),
            encode(&range(), &records(), Compression::Zstd).expect("b")
        );
    }

    #[test]
    fn damage_is_named() {
        let bytes = encode(&range(), &records(), Compression::Zstd).expect("encode");
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        assert!(matches!(
            decode(&flipped),
            Err(SegmentError::Checksum { .. })
        ));
        assert!(matches!(
            decode(&bytes[..bytes.len() - 3]),
            Err(SegmentError::Truncated(_))
        ));
        assert!(matches!(decode(b"PARQUET1"), Err(SegmentError::Magic)));
        let mut v2 = bytes.clone();
        v2[7] = 2;
        assert_eq!(decode(&v2), Err(SegmentError::Version(2)));
        assert!(matches!(
            decode(&bytes[..10]),
            Err(SegmentError::Truncated(_))
        ));
    }

    #[test]
    fn records_outside_the_range_or_out_of_order_are_refused() {
        let mut r = records();
        r.swap(0, 1);
        assert!(matches!(
            encode(&range(), &r, Compression::None),
            Err(SegmentError::Records(_))
        ));
        let mut r = records();
        r[3].seq = 111;
        assert!(matches!(
            encode(&range(), &r, Compression::None),
            Err(SegmentError::Records(_))
        ));
        let mut empty = range();
        empty.first_seq = 0;
        assert!(encode(&empty, &[], Compression::None).is_err());
    }

    #[test]
    fn names_sort_in_sequence_order_and_parse_back() {
        let a = name("S", 0, 1, 10_000);
        let b = name("S", 0, 10_001, 20_000);
        assert!(a < b);
        assert_eq!(a, "S/0/00000000000000000001-00000000000000010000.seg");
        assert_eq!(parse_name(&b), Some(("S".into(), 0, 10_001, 20_000)));
        for bad in [
            "S/0/1-2.seg",
            "S/x/00000000000000000001-00000000000000000002.seg",
            "S/0/00000000000000000003-00000000000000000002.seg",
            "S/0/a/b.seg",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
