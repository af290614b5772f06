//! The JSON Schemas of the rows nodes and tools write (docs/schemas/): each
//! compiles, its sample is valid, and the schema and the parser the sidecar
//! reads rows with agree on every case below, valid and invalid. A schema
//! that let through a row the sidecar refuses would tell an integrator a
//! broken row is fine (and one bad row makes its term unreadable for the
//! whole fleet). The same cases are judged by the validators node
//! implementers use most, Python's `jsonschema` and JavaScript's `ajv`
//! (scripts/install-validators), as well as the Rust one: a pattern that
//! means one thing in ECMA-262 and another in Python's `re` (a `$` that
//! matches before a trailing newline) is caught here.

use std::path::PathBuf;

use serde_json::{json, Value};

use crewlet::rows::{AckRow, BackupManifest, HoldRow, PositionRow, PresenceRow, SnapshotRow};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/schemas")
}

fn read(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each row's schema, the key its sample is read under, and the parser.
struct Row {
    name: &'static str,
    key: &'static str,
    parse: fn(&str, &[u8]) -> Result<(), String>,
}

const ROWS: [Row; 6] = [
    Row {
        name: "presence",
        key: "node-1",
        parse: |k, b| {
            PresenceRow::parse(k, b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    },
    Row {
        name: "position",
        key: "CREWLET_TRACKER_LOG.node-3",
        parse: |k, b| {
            PositionRow::parse(k, b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    },
    Row {
        name: "hold",
        key: "CREWLET_TRACKER_LOG.nightly",
        parse: |k, b| HoldRow::parse(k, b).map(drop).map_err(|e| e.to_string()),
    },
    Row {
        name: "backup-manifest",
        key: "node-1.2026-11-30T00-00Z",
        parse: |k, b| {
            BackupManifest::parse(k, b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    },
    Row {
        name: "backup-ack",
        key: "_ack.CREWLET_TRACKER_LOG",
        parse: |k, b| AckRow::parse(k, b).map(drop).map_err(|e| e.to_string()),
    },
    Row {
        name: "snapshot",
        key: "node-2",
        parse: |k, b| {
            SnapshotRow::parse(k, b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    },
];

fn row(name: &str) -> &'static Row {
    ROWS.iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

/// The sample with `change` applied: `(path, Some(value))` sets a field
/// (a path of object keys), `(path, None)` removes it.
fn changed(sample: &Value, path: &[&str], to: Option<Value>) -> Value {
    let mut v = sample.clone();
    let (last, parents) = path.split_last().expect("a path");
    let mut at = &mut v;
    for p in parents {
        at = at
            .get_mut(*p)
            .unwrap_or_else(|| panic!("no {p} in {sample}"));
    }
    let obj = at.as_object_mut().expect("an object");
    match to {
        Some(x) => {
            obj.insert(last.to_string(), x);
        }
        None => {
            obj.remove(*last);
        }
    }
    v
}

/// Whether the schema and the parser each take `value`.
fn judged(r: &Row, value: &Value) -> (bool, Result<(), String>) {
    let schema = read(dir().join(format!("{}.schema.json", r.name)));
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("{}.schema.json does not compile: {e}", r.name));
    (
        validator.is_valid(value),
        (r.parse)(r.key, value.to_string().as_bytes()),
    )
}

/// What an external validator (`python3 validate.py`, `node
/// validate.cjs`) says of each `(row, value)`, in order.
fn external(which: &str, cases: &[(&Row, Value)]) -> Vec<bool> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let input: Vec<Value> = cases
        .iter()
        .map(|(r, v)| {
            json!({"schema": dir().join(format!("{}.schema.json", r.name)), "instance": v})
        })
        .collect();
    let support = root.join("tests/it/support");
    let mut cmd = match which {
        "python" => {
            let mut c = std::process::Command::new("python3");
            c.arg(support.join("validate.py"))
                .env("PYTHONPATH", root.join(".tools/pyjsonschema"));
            c
        }
        _ => {
            let mut c = std::process::Command::new("node");
            c.arg(support.join("validate.cjs"))
                .env("AJV_DIR", root.join(".tools/ajv"));
            c
        }
    };
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{which}: {e} (scripts/install-validators installs it)"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(input).to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("validator");
    assert!(
        out.status.success(),
        "{which} validator failed (scripts/install-validators installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON array of booleans")
}

/// Every case judged the same by the Rust, Python and JavaScript
/// validators and by the sidecar's parser: `want` is what all must say.
fn all_agree(cases: Vec<(&'static str, Vec<&'static str>, Option<Value>)>, want: bool) {
    let judged: Vec<(&Row, Value)> = cases
        .iter()
        .map(|(name, path, to)| {
            let sample = read(dir().join(format!("samples/{name}.json")));
            (row(name), changed(&sample, path, to.clone()))
        })
        .collect();
    let python = external("python", &judged);
    let js = external("js", &judged);
    for (i, ((name, path, to), (r, value))) in cases.iter().zip(&judged).enumerate() {
        let (schema, parser) = self::judged(r, value);
        let said = |v: bool| if v { "takes" } else { "refuses" };
        assert_eq!(
            schema,
            want,
            "{name} {path:?} = {to:?}: the Rust validator {} it",
            said(schema)
        );
        assert_eq!(
            python[i],
            want,
            "{name} {path:?} = {to:?}: Python's jsonschema {} it",
            said(python[i])
        );
        assert_eq!(
            js[i],
            want,
            "{name} {path:?} = {to:?}: ajv {} it",
            said(js[i])
        );
        assert_eq!(
            parser.is_ok(),
            want,
            "{name} {path:?} = {to:?}: the parser {} it ({parser:?})",
            said(parser.is_ok())
        );
    }
}

#[test]
fn every_schema_compiles_and_its_sample_is_a_row_the_sidecar_reads() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("docs/schemas")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter_map(|n| n.strip_suffix(".schema.json").map(String::from))
        .collect();
    names.sort();
    let mut want: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
    want.sort();
    assert_eq!(names, want, "every schema is checked here");
    for r in &ROWS {
        let sample = read(dir().join(format!("samples/{}.json", r.name)));
        let (schema, parser) = judged(r, &sample);
        assert!(
            schema,
            "{}: its sample is not valid under its schema",
            r.name
        );
        assert_eq!(parser, Ok(()), "{}: the sidecar refuses the sample", r.name);
    }
}

#[test]
fn the_schemas_and_the_parser_refuse_the_same_rows() {
    let cases: Vec<(&str, Vec<&str>, Option<Value>)> = vec![
        ("presence", vec!["started_at"], None),
        ("presence", vec!["started_at"], Some(json!(1764464381))),
        (
            "presence",
            vec!["started_at"],
            Some(json!("2026-11-30T02:59:41+02:00")),
        ),
        ("presence", vec!["started_at"], Some(json!("yesterday"))),
        // A trailing newline: Python's `$` matches before it, so the
        // patterns say so explicitly (`$(?!\n)`).
        ("presence", vec!["node"], Some(json!("p2\n"))),
        (
            "presence",
            vec!["started_at"],
            Some(json!("2026-11-30T00:59:41Z\n")),
        ),
        ("position", vec!["node"], Some(json!("node-3\n"))),
        (
            "position",
            vec!["updated_at"],
            Some(json!("2026-11-30T00:59:41Z\n")),
        ),
        (
            "position",
            vec!["stream"],
            Some(json!("CREWLET_TRACKER_LOG\n")),
        ),
        ("presence", vec!["node"], None),
        ("presence", vec!["roles"], Some(json!("data"))),
        ("position", vec!["node"], None),
        ("position", vec!["stream"], None),
        ("position", vec!["seq"], None),
        ("position", vec!["generation"], None),
        ("position", vec!["stream_created"], None),
        ("position", vec!["updated_at"], None),
        ("position", vec!["status"], None),
        ("position", vec!["seq"], Some(json!(-1))),
        ("position", vec!["seq"], Some(json!("918100123"))),
        ("position", vec!["seq"], Some(json!(1.5))),
        ("position", vec!["generation"], Some(json!(-1))),
        ("position", vec!["status"], Some(json!("fine"))),
        ("position", vec!["status"], Some(Value::Null)),
        (
            "position",
            vec!["stream_created"],
            Some(json!(1762077600418i64)),
        ),
        ("hold", vec!["seq"], None),
        ("hold", vec!["owner"], None),
        ("hold", vec!["owner"], Some(json!("  "))),
        ("hold", vec!["kind"], Some(json!("weekly"))),
        ("hold", vec!["expires_at"], None),
        ("hold", vec!["expires_at"], Some(Value::Null)),
        ("backup-manifest", vec!["positions"], None),
        ("backup-manifest", vec!["taken_at"], None),
        (
            "backup-manifest",
            vec!["positions", "CREWLET_TRACKER_LOG"],
            Some(json!(-1)),
        ),
        ("backup-manifest", vec!["verified"], Some(json!("yes"))),
        ("backup-ack", vec!["position"], None),
        ("backup-ack", vec!["at"], Some(json!("yesterday"))),
        ("backup-ack", vec!["by"], None),
        ("snapshot", vec!["skip_reason"], None),
        ("snapshot", vec!["skip_reason"], Some(Value::Null)),
        ("snapshot", vec!["skip_reason"], Some(json!("tired"))),
        ("snapshot", vec!["updated_at"], None),
        (
            "snapshot",
            vec!["artefacts", "CREWLET_TRACKER_LOG", "verified"],
            Some(json!("yes")),
        ),
        (
            "snapshot",
            vec!["artefacts", "CREWLET_TRACKER_LOG", "generation"],
            None,
        ),
    ];
    all_agree(cases, false);
}

#[test]
fn the_schemas_and_the_parser_take_the_same_variants() {
    let cases: Vec<(&str, Vec<&str>, Option<Value>)> = vec![
        ("presence", vec!["roles"], None),
        ("presence", vec!["version"], None),
        (
            "presence",
            vec!["started_at"],
            Some(json!("2026-11-30T00:59:41+00:00")),
        ),
        (
            "presence",
            vec!["started_at"],
            Some(json!("2026-11-30T00:59:41.123456789123Z")),
        ),
        ("presence", vec!["zone"], Some(json!("eu-west"))),
        ("position", vec!["status"], Some(json!("log_diverged"))),
        // JSON has one kind of number: 10.0 is 10, for every validator and
        // for the parser.
        ("position", vec!["seq"], Some(json!(918100123.0))),
        ("position", vec!["generation"], Some(json!(0.0))),
        ("hold", vec!["seq"], Some(json!(1200.0))),
        (
            "backup-manifest",
            vec!["positions", "CREWLET_TRACKER_LOG"],
            Some(json!(1200.0)),
        ),
        (
            "position",
            vec!["stream_created"],
            Some(json!("2026-11-02T10:00:00Z")),
        ),
        ("hold", vec!["kind"], None),
        ("hold", vec!["reason"], None),
        ("hold", vec!["kind"], Some(json!("join"))),
        ("backup-manifest", vec!["completed_at"], Some(Value::Null)),
        ("backup-manifest", vec!["completed_at"], None),
        ("backup-manifest", vec!["verified"], None),
        ("backup-manifest", vec!["owner"], None),
        ("snapshot", vec!["artefacts"], None),
        ("snapshot", vec!["skip_reason"], Some(json!("lagging"))),
    ];
    all_agree(cases, true);
}
