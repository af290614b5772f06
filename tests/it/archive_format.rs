//! A second, independent decoder of the segment format, written from
//! docs/archive-format.md alone (none of crewlet's decoding code): what
//! crewlet writes, another program reads.

use sha2::{Digest, Sha256};

use crewlet::archive::segment::{encode, Compression, Range, Record};

/// One record as the document describes it.
#[derive(Debug, PartialEq)]
struct Doc {
    seq: u64,
    time_ns: i64,
    subject: String,
    headers: Vec<u8>,
    data: Vec<u8>,
}

fn be32(b: &[u8]) -> usize {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
}

/// Reads a segment following the document, step by step.
fn read(raw: &[u8]) -> (serde_json::Value, Vec<Doc>) {
    assert_eq!(&raw[..7], b"CRWLSEG", "magic");
    assert_eq!(raw[7], 1, "version");
    let h = be32(&raw[8..12]);
    let header: serde_json::Value = serde_json::from_slice(&raw[12..12 + h]).expect("JSON header");
    let body = &raw[12 + h..];
    assert_eq!(
        body.len() as u64,
        header["compressed_bytes"].as_u64().expect("size")
    );
    let sum: String = Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sum, header["sha256"].as_str().expect("sha256"));
    let plain = match header["compression"].as_str() {
        Some("none") => body.to_vec(),
        Some("zstd") => zstd::stream::decode_all(body).expect("a zstd frame"),
        other => panic!("compression {other:?}"),
    };
    assert_eq!(
        plain.len() as u64,
        header["uncompressed_bytes"].as_u64().expect("size")
    );
    let mut at = 0;
    let mut out = Vec::new();
    while at < plain.len() {
        let seq = u64::from_be_bytes(plain[at..at + 8].try_into().expect("8"));
        let time_ns = i64::from_be_bytes(plain[at + 8..at + 16].try_into().expect("8"));
        at += 16;
        let mut fields = Vec::new();
        for _ in 0..3 {
            let n = be32(&plain[at..at + 4]);
            at += 4;
            fields.push(plain[at..at + n].to_vec());
            at += n;
        }
        let data = fields.pop().expect("data");
        let headers = fields.pop().expect("headers");
        let subject = String::from_utf8(fields.pop().expect("subject")).expect("utf-8");
        out.push(Doc {
            seq,
            time_ns,
            subject,
            headers,
            data,
        });
    }
    (header, out)
}

#[test]
fn an_independent_decoder_reads_what_crewlet_writes() {
    let range = Range {
        stream: "CREWLET_TRACKER_LOG".into(),
        generation: 2,
        stream_created: "2026-12-01T10:00:00.123456789Z".into(),
        first_seq: 1,
        last_seq: 500,
    };
    let records: Vec<Record> = (1..=500u64)
        .filter(|s| s % 7 != 0) // gaps: erased or never held
        .map(|seq| Record {
            seq,
            time_ns: 1_764_583_200_000_000_000 + seq as i64 * 1000,
            subject: format!("CREWLET_TRACKER_LOG.r.{}", seq % 5),
            headers: if seq % 3 == 0 {
                format!("NATS/1.0\r\nNats-Msg-Id: {seq}\r\n\r\n").into_bytes()
            } else {
                Vec::new()
            },
            data: format!("record {seq} ").repeat(15).into_bytes(),
        })
        .collect();
    for c in [Compression::Zstd, Compression::None] {
        let raw = encode(&range, &records, c).expect("encode");
        let (header, docs) = read(&raw);
        assert_eq!(header["stream"], "CREWLET_TRACKER_LOG");
        assert_eq!(header["generation"], 2);
        assert_eq!(header["stream_created"], "2026-12-01T10:00:00.123456789Z");
        assert_eq!(
            (header["first_seq"].as_u64(), header["last_seq"].as_u64()),
            (Some(1), Some(500))
        );
        assert_eq!(header["records"].as_u64(), Some(records.len() as u64));
        let expected: Vec<Doc> = records
            .iter()
            .map(|r| Doc {
                seq: r.seq,
                time_ns: r.time_ns,
                subject: r.subject.clone(),
                headers: r.headers.clone(),
                data: r.data.clone(),
            })
            .collect();
        assert_eq!(docs, expected, "{c:?}");
        if c == Compression::Zstd {
            let plain = header["uncompressed_bytes"].as_u64().expect("size");
            assert!(
                header["compressed_bytes"].as_u64().expect("size") < plain / 4,
                "compressed: {header}"
            );
        }
    }
}
