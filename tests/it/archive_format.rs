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

/// The Object Store store on a real broker: a segment put is read back
/// whole, a re-put of the same bytes is idempotent, other bytes under the
/// same name are refused and the segment is left as it was, and listing
/// names the segments of one generation in sequence order.
#[tokio::test]
async fn the_object_store_keeps_segments_whole_and_never_replaces_one() {
    use crewlet::archive::Put;
    let server = crate::support::Server::start();
    let broker = crewlet::broker::connect(&server.url(), &Default::default(), "archive-test")
        .await
        .expect("connect");
    assert!(broker
        .ensure_object_store("crewlet_archive", 1)
        .await
        .expect("create"));
    assert!(!broker
        .ensure_object_store("crewlet_archive", 1)
        .await
        .expect("exists"));
    let range = |first, last| Range {
        stream: "S".into(),
        generation: 0,
        stream_created: "2026-12-01T10:00:00Z".into(),
        first_seq: first,
        last_seq: last,
    };
    let rec = |seq: u64| Record {
        seq,
        time_ns: seq as i64,
        subject: "S.r".into(),
        headers: Vec::new(),
        // Larger than one Object Store chunk (128 KiB) once encoded.
        data: vec![(seq % 251) as u8; 4096],
    };
    let a = encode(
        &range(1, 100),
        &(1..=100).map(rec).collect::<Vec<_>>(),
        Compression::None,
    )
    .expect("a");
    let b = encode(
        &range(101, 200),
        &(101..=200).map(rec).collect::<Vec<_>>(),
        Compression::Zstd,
    )
    .expect("b");
    let (na, nb) = (
        crewlet::archive::segment::name("S", 0, 1, 100),
        crewlet::archive::segment::name("S", 0, 101, 200),
    );
    assert_eq!(
        broker
            .put_segment("crewlet_archive", &nb, &b)
            .await
            .expect("put b"),
        Put::Written
    );
    assert_eq!(
        broker
            .put_segment("crewlet_archive", &na, &a)
            .await
            .expect("put a"),
        Put::Written
    );
    assert_eq!(
        broker
            .put_segment("crewlet_archive", &na, &a)
            .await
            .expect("again"),
        Put::AlreadyThere
    );
    let refused = broker.put_segment("crewlet_archive", &na, &b).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("never overwritten")));
    let back = broker
        .get_segment("crewlet_archive", &na)
        .await
        .expect("get")
        .expect("there");
    assert_eq!(back, a, "read back whole, unchanged by the refused put");
    assert_eq!(
        crewlet::archive::segment::decode(&back)
            .expect("decode")
            .records
            .len(),
        100
    );
    assert_eq!(
        broker
            .list_segments("crewlet_archive", "S", 0)
            .await
            .expect("list")
            .into_iter()
            .map(|l| l.name)
            .collect::<Vec<_>>(),
        [na, nb]
    );
    assert!(broker
        .list_segments("crewlet_archive", "S", 1)
        .await
        .expect("list")
        .is_empty());
    assert_eq!(
        broker
            .get_segment("crewlet_archive", "S/0/x.seg")
            .await
            .expect("get"),
        None
    );
}

fn later() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(30)
}

/// The fold's reader: a slice of the log in one ordered read, each record
/// with its sequence, broker timestamp, subject, headers (as a NATS header
/// block, the same on every read) and data; bounded by the slice's end and
/// a record count; what it returns encodes into a segment and back.
#[tokio::test]
async fn a_slice_is_read_whole_in_order_with_headers_and_times() {
    use crate::support::fleet::*;
    let f = Fleet::new(0).await;
    let client = async_nats::connect(f.server.url()).await.expect("connect");
    let js = async_nats::jetstream::new(client);
    for i in 1..=50u64 {
        let mut h = async_nats::HeaderMap::new();
        if i % 2 == 0 {
            h.insert("Nats-Msg-Id", format!("m{i}").as_str());
            h.insert("B-Second", "b");
            h.append("A-First", "1");
            h.append("A-First", "2");
        }
        js.publish_with_headers(
            format!("{STREAM}.r.{}", i % 3),
            h,
            format!("record {i}").into(),
        )
        .await
        .expect("publish")
        .await
        .expect("ack");
    }
    let broker = f.broker().await;
    let slice = broker
        .read_slice(STREAM, 11, 40, (100_000, usize::MAX), later())
        .await
        .expect("slice");
    assert_eq!(
        slice.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (11..=40).collect::<Vec<_>>()
    );
    let r12 = &slice[1];
    assert_eq!(r12.subject, format!("{STREAM}.r.0"));
    assert_eq!(r12.data, b"record 12");
    assert_eq!(
        String::from_utf8_lossy(&r12.headers),
        "NATS/1.0\r\nA-First: 1\r\nA-First: 2\r\nB-Second: b\r\nNats-Msg-Id: m12\r\n\r\n"
    );
    assert!(slice[0].headers.is_empty(), "no headers, no block");
    assert!(
        slice.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "broker timestamps"
    );
    let now = chrono::Utc::now().timestamp_nanos_opt().expect("ns");
    assert!(
        (now - r12.time_ns).abs() < 60_000_000_000,
        "a broker timestamp near now"
    );
    // Read again: byte for byte the same (a re-fold writes the same segment).
    assert_eq!(
        broker
            .read_slice(STREAM, 11, 40, (100_000, usize::MAX), later())
            .await
            .expect("again"),
        slice
    );
    // Bounded by the count, and by the log's end.
    assert_eq!(
        broker
            .read_slice(STREAM, 11, 40, (5, usize::MAX), later())
            .await
            .expect("five")
            .len(),
        5
    );
    let tail = broker
        .read_slice(STREAM, 45, 60, (100, usize::MAX), later())
        .await
        .expect("tail");
    assert_eq!(
        tail.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (45..=50).collect::<Vec<_>>()
    );
    let range = Range {
        stream: STREAM.into(),
        generation: 0,
        stream_created: f.created().await,
        first_seq: 11,
        last_seq: 40,
    };
    let seg = encode(&range, &slice, Compression::Zstd).expect("encode");
    assert_eq!(
        crewlet::archive::segment::decode(&seg)
            .expect("decode")
            .records,
        slice
    );
}

/// A fold into either store: segments written in order and read back, the
/// frontier at the last one; folding again writes nothing new; a segment
/// with other bytes under its name, an unwritable directory or a missing
/// bucket stops the fold with the frontier where it was durable.
#[tokio::test]
async fn a_fold_writes_verified_segments_and_stops_where_it_fails() {
    use crate::support::fleet::*;
    use crewlet::archive::cut::Limits;
    use crewlet::archive::fold::{fold, Store, Target};
    let f = Fleet::new(95).await;
    let broker = f.broker().await;
    broker
        .ensure_object_store("crewlet_archive", 1)
        .await
        .expect("bucket");
    let scratch = tempfile::tempdir().expect("dir");
    let target = Target {
        stream: STREAM.into(),
        generation: 0,
        stream_created: f.created().await,
    };
    let limits = Limits {
        segment_records: 20,
        segment_bytes: 1 << 20,
        fold_per_tick: 3,
    };
    let s3 = crate::support::s3::S3::start("crewlet-archive");
    for store in [
        Store::ObjectStore("crewlet_archive".into()),
        Store::Dir(scratch.path().join("archive")),
        s3.store("crewlet-archive", "fold"),
    ] {
        // At most three segments a tick: 1..=60, then 61..=90 with a
        // partial tail only because the slice ends at 90.
        let first = fold(&broker, &store, &target, (0, 90), limits, later())
            .await
            .expect("fold");
        assert_eq!((first.frontier, first.written.len()), (60, 3), "{store:?}");
        let second = fold(&broker, &store, &target, (60, 90), limits, later())
            .await
            .expect("fold");
        assert_eq!(
            (second.frontier, second.written.len()),
            (90, 2),
            "{store:?}"
        );
        let names = store.list(&broker, STREAM, 0).await.expect("list");
        let ranges: Vec<(u64, u64)> = names.iter().map(|l| (l.first_seq, l.last_seq)).collect();
        assert_eq!(
            ranges,
            [(1, 20), (21, 40), (41, 60), (61, 80), (81, 90)],
            "{store:?}"
        );
        // A crash before the publish: the next tick folds the same range
        // again and writes the same segments.
        let again = fold(&broker, &store, &target, (0, 90), limits, later())
            .await
            .expect("re-fold");
        assert_eq!((again.frontier, again.already_there), (60, 3), "{store:?}");
    }
    // Other bytes under a segment's name: the fold stops before it.
    let dir = scratch.path().join("archive");
    let name = crewlet::archive::segment::name(STREAM, 0, 61, 80);
    std::fs::write(dir.join(&name), b"not this segment").expect("tamper");
    let err = fold(
        &broker,
        &Store::Dir(dir.clone()),
        &target,
        (60, 95),
        limits,
        later(),
    )
    .await
    .expect_err("a conflict");
    assert_eq!(err.frontier, 60, "{err}");
    assert!(err.reason.contains("never overwritten"), "{err}");
    // A directory that cannot be written, and a bucket that does not exist.
    let file = scratch.path().join("a-file");
    std::fs::write(&file, b"x").expect("file");
    let err = fold(
        &broker,
        &Store::Dir(file),
        &target,
        (0, 95),
        limits,
        later(),
    )
    .await
    .expect_err("unwritable");
    assert_eq!(err.frontier, 0, "{err}");
    let err = fold(
        &broker,
        &Store::ObjectStore("no_such_bucket".into()),
        &target,
        (0, 95),
        limits,
        later(),
    )
    .await
    .expect_err("no bucket");
    assert_eq!(err.frontier, 0, "{err}");
}
