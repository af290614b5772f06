//! Architecture invariants that are checks on the source tree, not on a
//! running broker (docs/architecture.md names each): a claim without a
//! test is a defect.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Only `src/broker/` knows async-nats: the pure core and the commands
/// speak plain data to it.
#[test]
fn async_nats_is_used_only_in_src_broker() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let broker = root().join("src").join("broker");
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&broker))
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .contains("async_nats")
        })
        .map(|f| f.strip_prefix(root()).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "async_nats used outside src/broker/: {offenders:?}"
    );
}

/// Only `src/cloud/` knows the object_store crate (and the TLS provider
/// it is built on): the archive speaks segments and listings to it, as the
/// rest speaks plain data to `src/broker/` (whose `object_store` is
/// async-nats's JetStream Object Store, confined there by the test above).
#[test]
fn object_store_is_used_only_in_src_cloud() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let (cloud, broker) = (
        root().join("src").join("cloud"),
        root().join("src").join("broker"),
    );
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&cloud) && !f.starts_with(&broker))
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("read");
            text.contains("object_store::") || text.contains("rustls::")
        })
        .map(|f| f.strip_prefix(root()).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "object_store used outside src/cloud/: {offenders:?}"
    );
}

/// One door for every JetStream request (docs/trim-floor.md, Proven
/// current): the client's calls that ask the broker for an answer (a raw
/// API request, a stream, consumer, KV or Object Store lookup, the
/// account's info) appear in `src/broker/door.rs` only, where the proof
/// against the leader is. The bench's fixture, which builds and inspects
/// its own streams and decides nothing, is the one exception. A new read
/// elsewhere fails here until it goes through the door.
#[test]
fn every_jetstream_request_goes_through_the_door() {
    let mut files = Vec::new();
    sources(&root().join("src").join("broker"), &mut files);
    let asks = [
        ".request(",
        ".request::<",
        "get_stream(",
        "get_stream_no_info(",
        "consumer_info(",
        "query_account(",
        "get_key_value(",
        "get_object_store(",
        "stream_by_subject(",
        "stream_names(",
        ".streams(",
    ];
    let mut offenders = Vec::new();
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "door.rs" || name == "fixture.rs" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        // Unit tests (after the file's `#[cfg(test)]`) may build answers.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            // The door's own names (`self.consumer_info(...)`) are the door.
            let asked = asks.iter().find(|a| {
                line.match_indices(*a).any(|(i, _)| {
                    let before = &line[..i];
                    !(before.ends_with("self") || before.ends_with("self."))
                })
            });
            if let Some(a) = asked {
                offenders.push(format!("{}:{} {a}", f.display(), n + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "JetStream asked outside src/broker/door.rs: {offenders:#?}"
    );
}

/// Every alarm the code can raise has a runbook entry, and the list of
/// alarms is the one the code raises.
#[test]
fn every_alarm_has_a_runbook_entry() {
    // Every file of the alarms module but its unit tests.
    let mut files = Vec::new();
    sources(&root().join("src").join("alarms"), &mut files);
    let code: String = files
        .iter()
        .filter(|f| !f.ends_with("tests.rs"))
        .map(|f| std::fs::read_to_string(f).expect("alarms"))
        .collect();
    // Each alarm raised: `alarm: AlarmName::TrimHeld`, by its variant.
    let raised: std::collections::BTreeSet<&str> = code
        .match_indices("alarm: AlarmName::")
        .filter_map(|(i, m)| {
            let rest = &code[i + m.len()..];
            rest.split(|c: char| !c.is_ascii_alphanumeric()).next()
        })
        .collect();
    let variants: Vec<String> = crewlet::alarms::AlarmName::ALL
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    let listed: std::collections::BTreeSet<&str> = variants.iter().map(String::as_str).collect();
    assert_eq!(
        raised, listed,
        "an alarm the code never raises, or one not listed"
    );
    let listed = crewlet::alarms::names();
    let runbook = std::fs::read_to_string(root().join("docs/runbook.md")).expect("runbook");
    let missing: Vec<&&str> = listed
        .iter()
        .filter(|a| !runbook.contains(&format!("\n### {a}\n")))
        .collect();
    assert!(missing.is_empty(), "no runbook entry for {missing:?}");
}

/// The files under `src/` whose code (not a comment line) contains
/// `needle`, relative to the repository, in order.
fn files_with(needle: &str) -> Vec<String> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.contains(needle))
        })
        .map(|f| f.strip_prefix(root()).unwrap_or(f).display().to_string())
        .collect();
    found.sort();
    found
}

/// Every place a purge can be sent, by file: the tick's fenced purge
/// (`Broker::purge_to`, which takes a fence permit), an erasure's filtered
/// purge, and the bench's fixture on its own publisher stream. A new one
/// fails here until docs/trim-floor.md, Where a purge can be sent, and what
/// stands before it, names it and its guard.
#[test]
fn only_the_tick_sends_a_purge() {
    let with = files_with;
    assert_eq!(
        with(".purge()"),
        ["src/broker/fixture.rs", "src/broker/write.rs"],
        "async-nats's purge is sent from the fenced purge (and the bench's fixture) only"
    );
    assert_eq!(
        with("STREAM.PURGE"),
        ["src/broker/erase.rs"],
        "a raw purge request only for an erasure's filtered purge"
    );
    assert_eq!(
        with(".purge_to("),
        [
            "src/bench/archive.rs",
            "src/bench/mod.rs",
            "src/tick/publish.rs"
        ],
        "the fenced purge is sent by the tick (and timed by the bench, with a real lease's permit)"
    );
    assert_eq!(
        with("FencePermit {"),
        ["src/broker/lease.rs"],
        "a fence permit is made only by a renewal the broker took"
    );
}

/// A `Proven` value is made only by the broker's readers, after the check
/// against the leader (docs/trim-floor.md, On a cluster: what each read that
/// decides a purge guarantees): nothing else in
/// `src/` names `vouched` at all (unit tests take `Proven::fixture`, which
/// exists only in a test build). Its constructor is `pub(crate)` so that
/// the pure decisions below the broker can require the type; this keeps
/// the rest.
#[test]
fn only_the_broker_vouches() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let broker = root().join("src").join("broker");
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&broker) && !f.ends_with("proven.rs"))
        // The whole file, and any form of the name (`Proven::vouched(`,
        // `Proven::<T>::vouched(`, a `use` of it): a `#[cfg(test)]` early in
        // a file once hid everything after it from this check.
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("read");
            text.contains("vouched")
        })
        .map(|f| f.strip_prefix(root()).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "Proven::vouched outside src/broker/: {offenders:?}"
    );
}

/// A purge target is taken only from an answer computed from rows proven
/// current (`floor::Licensed`, docs/trim-floor.md, Proven current):
/// `floor::licensed_target` takes nothing else, the type's one field is
/// private to `src/floor/licensed.rs`, and only the tick computes one (its
/// answers, and the fold's recomputed ones). A preview's answer, computed
/// from rows changed in memory, is a plain `Answer`.
#[test]
fn only_proven_rows_license_a_purge() {
    let with = files_with;
    assert_eq!(
        with("Licensed("),
        ["src/floor/licensed.rs"],
        "a Licensed answer is made in one place"
    );
    assert_eq!(
        with("Licensed::compute("),
        ["src/tick/fold.rs", "src/tick/read.rs"],
        "only the tick computes the answers it purges by"
    );
    let licensed = std::fs::read_to_string(root().join("src/floor/mod.rs")).expect("read");
    assert!(
        licensed.contains("pub fn licensed_target(answer: &Licensed)"),
        "the purge's target is taken from a Licensed answer only"
    );
}

/// Comments and messages in `src/` cite documents a user of the
/// repository has: `README.md` or a file under `docs/` that exists, never
/// the product's specification outside it.
#[test]
fn src_cites_only_documents_in_the_repository() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let cite = regex::Regex::new(r"[A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.md\b").expect("regex");
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        for m in cite.find_iter(&text) {
            checked += 1;
            // `include_str!` names a document from the file's own place.
            let doc = m.as_str().trim_start_matches("../");
            let ok = doc == "README.md" || (doc.starts_with("docs/") && root().join(doc).is_file());
            if !ok {
                bad.push(format!(
                    "{}: {doc}",
                    f.strip_prefix(root()).unwrap_or(f).display()
                ));
            }
        }
    }
    assert!(checked > 50, "the sources cite documents: {checked}");
    assert!(
        bad.is_empty(),
        "citations of documents the repository lacks: {bad:?}"
    );
}

/// A citation of a section (`docs/X.md, Section` or `docs/X.md § Section`,
/// in a comment or a message, wrapped over lines or not) names a heading
/// that file has: a reader who follows it finds it.
#[test]
fn src_cites_only_sections_the_documents_have() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let wrap = regex::Regex::new(r"\n\s*(//[/!]?)?\s*").expect("regex");
    let cite = regex::Regex::new(r"docs/([a-z-]+\.md)(?:, | § )").expect("regex");
    let headings = |doc: &str| -> Vec<String> {
        std::fs::read_to_string(root().join("docs").join(doc))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim().replace('`', ""))
            .collect()
    };
    let (mut bad, mut checked) = (Vec::new(), 0);
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        let text = wrap.replace_all(&text, " ");
        for m in cite.captures_iter(&text) {
            let (Some(all), Some(doc)) = (m.get(0), m.get(1)) else {
                continue;
            };
            let after: String = text[all.end()..]
                .chars()
                .take(120)
                .collect::<String>()
                .replace('`', "");
            let after = after.trim_start_matches('"');
            checked += 1;
            if !headings(doc.as_str())
                .iter()
                .any(|h| after.starts_with(h.as_str()))
            {
                bad.push(format!(
                    "{}: docs/{}, {}",
                    f.strip_prefix(root()).unwrap_or(f).display(),
                    doc.as_str(),
                    after.chars().take(50).collect::<String>()
                ));
            }
        }
    }
    assert!(checked > 50, "the sources cite sections: {checked}");
    assert!(bad.is_empty(), "sections the documents lack: {bad:#?}");
}

/// The layers of docs/architecture.md (Layers), bottom first: a module
/// imports only from its own layer or below. A module listed nowhere fails
/// here until it is placed. Longest prefix wins (`archive::state` is a
/// type, `archive::fold` does IO).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "types and pure rules",
        &[
            "rows",
            "human",
            "exit",
            "proven",
            "failpoint",
            "seeded",
            "clock",
            "config",
            "buckets",
            "stream_check",
            "capacity",
            "archive::state",
            "archive::cut",
            "archive::segment",
            "archive::remote",
        ],
    ),
    (
        "pure judgements",
        &["floor", "gate", "alarms", "report", "conformance"],
    ),
    (
        "the broker and the stores",
        &["broker", "archive::dir", "cloud", "within"],
    ),
    (
        "the tick and the gestures",
        &["tick", "gesture", "preview", "node", "embedded", "archive"],
    ),
    (
        "the surfaces",
        &["cli", "http", "bench", "bin", "main", "lib", "fuzz_tests"],
    ),
];

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    let mut best: Option<(usize, usize, &'static str)> = None;
    for (rank, (name, modules)) in LAYERS.iter().enumerate() {
        for m in modules.iter() {
            let hit = module == *m || module.starts_with(&format!("{m}::"));
            if hit && best.is_none_or(|(len, _, _)| m.len() > len) {
                best = Some((m.len(), rank, name));
            }
        }
    }
    best.map(|(_, rank, name)| (rank, name))
}

/// The module a file under `src/` is (`src/tick/mod.rs` is `tick`).
fn module_of(f: &Path) -> String {
    let rel = f
        .strip_prefix(root().join("src"))
        .expect("under src")
        .with_extension("");
    let module = rel.display().to_string().replace('/', "::");
    module
        .strip_suffix("::mod")
        .map_or(module.clone(), str::to_string)
}

/// Modules import one way: nothing imports from a layer above its own
/// Unit tests (after a file's `#[cfg(test)]`) are exempt.
#[test]
fn layers_import_one_way() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let reference = regex::Regex::new(r"crate::([a-z_]+(?:::[a-z_]+)*)").expect("regex");
    let mut upward = Vec::new();
    let mut unplaced = Vec::new();
    for f in &files {
        let module = module_of(f);
        let Some((from, from_name)) = layer_of(&module) else {
            unplaced.push(module);
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            // One path per import, so that this check sees every one.
            if line.contains("crate::{") {
                upward.push(format!("{module}: a grouped import (crate::{{…}}): {line}"));
            }
            for c in reference.captures_iter(line) {
                let target = &c[1];
                match layer_of(target) {
                    Some((to, to_name)) if to > from => upward.push(format!(
                        "{module} ({from_name}) imports crate::{target} ({to_name})"
                    )),
                    Some(_) => {}
                    None => unplaced.push(target.to_string()),
                }
            }
        }
    }
    unplaced.sort();
    unplaced.dedup();
    upward.sort();
    upward.dedup();
    assert!(
        unplaced.is_empty(),
        "modules in no layer (place them in LAYERS and docs/architecture.md): {unplaced:?}"
    );
    assert!(
        upward.is_empty(),
        "imports from a layer above:\n{}",
        upward.join("\n")
    );
}

/// The pure layers carry their failures typed: a read that failed is a
/// `rows::Unreadable`, a value a check refused a `rows::Invalid` (or the
/// module's own error enum), never a bare `String` a judge could take for a
/// name or a value. Unit tests (after a file's `#[cfg(test)]`) are exempt.
#[test]
fn the_pure_layers_return_no_bare_string_errors() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let bare = regex::Regex::new(r"Result<[^;{]*,\s*String>").expect("regex");
    let mut found = Vec::new();
    for f in &files {
        let module = module_of(f);
        if module.ends_with("tests") || layer_of(&module).is_none_or(|(rank, _)| rank > 1) {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if !line.trim_start().starts_with("//") && bare.is_match(line) {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a bare String error in a pure layer (use rows::Unreadable or rows::Invalid):\n{}",
        found.join("\n")
    );
}

/// The repository speaks of itself, not of its history: a reader of the
/// docs, the code or the tests cannot look up an issue number, so none is
/// named (say what was decided, measured or found instead).
#[test]
fn the_repository_names_no_issue_numbers() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("tests"), &mut files);
    for e in std::fs::read_dir(root().join("docs")).expect("docs") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    files.push(root().join("README.md"));
    // (Built from pieces, so that this test does not name one itself.)
    let pattern = format!(r"(?i)\b{}s? [0-9]+\b", "issue");
    let named = regex::Regex::new(&pattern).expect("regex");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        for (i, line) in text.lines().enumerate() {
            if named.is_match(line) {
                let shown = f.strip_prefix(root()).unwrap_or(f).display().to_string();
                found.push(format!("{shown}:{}: {line}", i + 1));
            }
        }
    }
    assert!(found.is_empty(), "issue numbers named: {found:#?}");
}
