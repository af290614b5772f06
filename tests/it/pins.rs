//! What each pin holds (docs/status-json.md, What a pin holds) against a
//! real nats-server: `held_records`, `held_bytes` and `pinned_since` in the
//! tick's answer, the floors row, `status`, `status --json` and `/metrics`,
//! as a pin moves and across a restart of the sidecar.

use serde_json::Value;

use crate::support::fleet::*;
use crate::support::Operator;
use crewlet::floor::{Held, TermName};
use crewlet::trim::TickReport;

fn held(r: &TickReport, t: TermName) -> Option<Held> {
    r.domains[0]
        .answer
        .terms
        .iter()
        .find(|x| x.term == t)
        .and_then(|x| x.held)
}

fn row_term(row: &Value, t: &str) -> Value {
    row["terms"]
        .as_array()
        .and_then(|ts| ts.iter().find(|x| x["term"] == t))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A fleet where node-3 (absent, still counted) pins applied at `at`: two
/// nodes and the backup are at 100 of 100 records.
async fn pinned(at: u64) -> Fleet {
    let mut f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", at).await;
    f.snapshot("node-3", at).await;
    // A configuration status accepts as it is (min_age above the snapshot
    // cadence), with every record past it.
    f.config.retention.min_age = crewlet::config::Dur::secs(3);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    f
}

#[tokio::test]
async fn a_pin_says_what_it_holds_and_since_when_as_it_moves_and_across_a_restart() {
    let f = pinned(40).await;
    // The log as the tick will read it (it purges after).
    let info = f.log_info().await;
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    assert_eq!(a.trim_to, 40);
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(h.records, 60, "41..=100 would go without node-3");
    // The estimate is the log's own mean record size times the records.
    let per = info.state.bytes as f64 / info.state.messages as f64;
    assert_eq!(h.bytes, (60.0 * per).round() as u64);
    assert_eq!(h.since, a.at, "pinned from the first tick that saw it");
    let first = h.since;
    let row = f.floors_row().await.expect("published");
    let t = row_term(&row, "applied");
    assert_eq!(t["held_records"], 60, "{t}");
    assert_eq!(t["held_bytes"], h.bytes, "{t}");
    assert_eq!(t["pinned_since"], first.to_rfc3339(), "{t}");
    assert_eq!(row_term(&row, "min_hold")["held_records"], Value::Null);

    // node-3 advances to 60: it has held the trim at or below 60 since the
    // first tick, so pinned_since stays; it holds 40 records now.
    f.position("node-3", 60).await;
    f.snapshot("node-3", 60).await;
    let r = s.tick().await;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!((h.records, h.since), (40, first));

    // A restarted sidecar reads pinned_since back from the floors row.
    s.duty.release(&s.broker).await;
    drop(s);
    let mut s = f.sidecar().await;
    let r = s.tick().await;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(h.since, first, "kept across the restart");

    // Status says it in the sentence, --json and /metrics carry it.
    let yaml = serde_yaml::to_string(&f.config).expect("yaml");
    let op = Operator::with_yaml(&yaml);
    let run = op.status();
    let sentence = run.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        sentence.contains(&format!("since {} (", first.0.format("%H:%M")))
            && sentence.contains("holding back 40 records, about "),
        "{run:?}"
    );
    let json = op.run(&["retention", "status", "--json"]);
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    let t = row_term(&v["domains"][0], "applied");
    assert_eq!(t["held_records"], 40, "{t}");
    assert_eq!(t["pinned_since"], first.to_rfc3339(), "{t}");
    let metrics = crewlet::http::metrics::encode(
        &[r.domains[0].answer.clone()],
        &[],
        true,
        &Default::default(),
    );
    let d = format!("domain=\"tracker\",stream=\"{STREAM}\"");
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("crewlet_term_held_records{{{d},term=\"applied\"}} 40")),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|l| l
            == format!(
                "crewlet_term_held_bytes{{{d},term=\"applied\"}} {}",
                h.bytes
            )),
        "{metrics}"
    );

    // node-3 is restored to an earlier copy, at 50: it has held the trim
    // at or below 50 only since now.
    f.position("node-3", 50).await;
    f.snapshot("node-3", 50).await;
    let r = s.tick().await;
    let a = &r.domains[0].answer;
    let h = held(&r, TermName::Applied).expect("applied binds");
    assert_eq!(a.trim_to, 50);
    assert_eq!(h.since, a.at, "moved lower: pinned afresh");
    assert!(h.since > first);
    s.duty.release(&s.broker).await;
}
