//! What ships for Prometheus and Grafana (docs/runbook.md, Alerting rules
//! and the dashboard): one alerting rule per alarm, each with a severity
//! and its runbook entry; a promtool unit test of each; promtool's own
//! check and tests passing; and a dashboard that queries only families
//! the sidecar exports. Checks on files, no broker.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const RULES: &str = "config/prometheus/crewlet-rules.yaml";
const TESTS: &str = "config/prometheus/crewlet-rules.test.yaml";
const DASHBOARD: &str = "config/grafana/crewlet-retention.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &str) -> serde_yaml::Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `trim_held` → `TrimHeld`.
fn camel(alarm: &str) -> String {
    alarm
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// One alerting rule of the rules file.
struct Rule {
    alert: String,
    /// The one `alarm="…"` its expression names.
    alarm: String,
    severity: String,
    /// Its `alarm` label.
    labelled: String,
    runbook_url: String,
}

fn rules() -> Vec<Rule> {
    let doc = yaml(RULES);
    let groups = doc["groups"]
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default();
    assert_eq!(groups.len(), 1, "{RULES}: one group");
    assert_eq!(
        groups[0]["name"].as_str(),
        Some("crewlet-retention"),
        "{RULES}"
    );
    let named = regex::Regex::new(r#"alarm="([a-z_]+)""#).expect("regex");
    let text = |v: &serde_yaml::Value| v.as_str().unwrap_or_default().to_string();
    groups[0]["rules"]
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let alert = text(&r["alert"]);
            let expr = text(&r["expr"]);
            let alarms: BTreeSet<&str> = named
                .captures_iter(&expr)
                .filter_map(|c| c.get(1).map(|m| m.as_str()))
                .collect();
            assert_eq!(
                alarms.len(),
                1,
                "{RULES}: {alert:?} names {alarms:?} in its expr, where one alarm is wanted: {expr}"
            );
            Rule {
                alarm: alarms
                    .iter()
                    .next()
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
                severity: text(&r["labels"]["severity"]),
                labelled: text(&r["labels"]["alarm"]),
                runbook_url: text(&r["annotations"]["runbook_url"]),
                alert,
            }
        })
        .collect()
}

/// Every alarm the sidecar raises has exactly one rule, named after it,
/// paging or ticketing, with a link to the alarm's runbook entry.
#[test]
fn every_alarm_has_one_rule_with_its_runbook_link_and_a_severity() {
    let rules = rules();
    let runbook = std::fs::read_to_string(root().join("docs/runbook.md")).expect("runbook");
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rules {
        *count.entry(r.alarm.as_str()).or_default() += 1;
    }
    let names: BTreeSet<&str> = crewlet::alarms::names().into_iter().collect();
    let ruled: BTreeSet<&str> = count.keys().copied().collect();
    assert_eq!(
        ruled, names,
        "{RULES}: the alarms with a rule (left) are not the alarms the sidecar raises (right)"
    );
    let twice: Vec<&str> = count
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(a, _)| *a)
        .collect();
    assert!(
        twice.is_empty(),
        "{RULES}: alarms with more than one rule: {twice:?}"
    );
    for r in &rules {
        let a = &r.alarm;
        assert_eq!(
            r.alert,
            format!("Crewlet{}", camel(a)),
            "{RULES}: the rule of {a}"
        );
        assert!(
            matches!(r.severity.as_str(), "page" | "ticket"),
            "{RULES}: {}: severity {:?}, where page or ticket is wanted",
            r.alert,
            r.severity
        );
        assert_eq!(&r.labelled, a, "{RULES}: {}: its alarm label", r.alert);
        assert!(
            r.runbook_url.ends_with(&format!("docs/runbook.md#{a}")),
            "{RULES}: {}: runbook_url {:?} does not end in docs/runbook.md#{a}",
            r.alert,
            r.runbook_url
        );
        assert!(
            runbook.contains(&format!("\n### {a}\n")),
            "docs/runbook.md has no entry `### {a}` for {}'s link",
            r.alert
        );
    }
}

/// The promtool unit tests fire every rule once at least, with the
/// alarm's labels and link, and hold at least one case where nothing may
/// fire.
#[test]
fn every_alarm_has_a_promtool_test_case() {
    let alarm_of: BTreeMap<String, String> =
        rules().into_iter().map(|r| (r.alert, r.alarm)).collect();
    let doc = yaml(TESTS);
    let files: Vec<&str> = doc["rule_files"]
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(files, ["crewlet-rules.yaml"], "{TESTS}: the rules it tests");
    let mut fired: BTreeSet<String> = BTreeSet::new();
    let mut quiet = 0;
    for case in doc["tests"]
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let checks = case["alert_rule_test"]
            .as_sequence()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for check in checks {
            let name = check["alertname"].as_str().unwrap_or_default();
            let alarm = alarm_of
                .get(name)
                .unwrap_or_else(|| panic!("{TESTS}: a test of {name:?}, which no rule defines"));
            let expected = check["exp_alerts"]
                .as_sequence()
                .map(Vec::as_slice)
                .unwrap_or_default();
            if expected.is_empty() {
                quiet += 1;
            }
            for alert in expected {
                assert_eq!(
                    alert["exp_labels"]["alarm"].as_str(),
                    Some(alarm.as_str()),
                    "{TESTS}: an alert of {name} without alarm: {alarm}"
                );
                let url = alert["exp_annotations"]["runbook_url"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    url.ends_with(&format!("#{alarm}")),
                    "{TESTS}: an alert of {name} links {url:?}"
                );
                fired.insert(alarm.clone());
            }
        }
    }
    let missing: Vec<&str> = crewlet::alarms::names()
        .into_iter()
        .filter(|a| !fired.contains(*a))
        .collect();
    assert!(
        missing.is_empty(),
        "{TESTS}: no case where the alert of {missing:?} fires"
    );
    assert!(quiet > 0, "{TESTS}: no case where nothing may fire");
}

/// promtool (Debian's, unpacked by scripts/install-promtool) accepts the
/// rules and passes their unit tests.
#[test]
fn promtool_checks_and_tests_the_rules() {
    let promtool = root().join(".tools/prometheus/usr/bin/promtool");
    assert!(
        promtool.is_file(),
        "{} is missing: run scripts/install-promtool (scripts/install-test-deps runs it)",
        promtool.display()
    );
    for args in [["check", "rules", RULES], ["test", "rules", TESTS]] {
        let out = std::process::Command::new(&promtool)
            .args(args)
            .current_dir(root())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", promtool.display()));
        assert!(
            out.status.success(),
            "promtool {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every metric name the sidecar's `/metrics` can carry, from its own
/// encoder (the families are registered under the prefix `crewlet`, so
/// their full names are not in the source): each family by its `# TYPE`
/// line, a counter as `_total`, a histogram as its `_bucket`, `_count`
/// and `_sum`.
async fn exported() -> BTreeSet<String> {
    use crewlet::http::metrics;
    // A real tick's answers and alarms: a family with no series is not
    // printed at all.
    let f = crate::support::fleet::Fleet::new(10).await;
    let r = f.sidecar().await.tick().await;
    let answers: Vec<_> = r
        .domains
        .iter()
        .map(|d| d.answer.clone().into_answer())
        .collect();
    let tick = metrics::encode(&answers, &r.alarms, &metrics::Lasting::default());
    let text = metrics::with_live(&tick, true, Some(1.0), true);
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_count", "_sum"],
                _ => &[""],
            };
            for s in suffixes {
                names.insert(format!("{name}{s}"));
            }
        } else if let Some(name) = line
            .split(['{', ' '])
            .next()
            .filter(|n| n.starts_with("crewlet_"))
        {
            names.insert(name.to_string());
        }
    }
    assert!(
        names.contains("crewlet_trim_to") && names.contains("crewlet_broker_connected"),
        "the exposition lacks families it has always had:\n{text}"
    );
    names
}

/// The query strings of a dashboard: each panel target's `expr`, and the
/// template variables' `query` and `definition`.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", serde_json::Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                queries(v, out);
            }
        }
        _ => {}
    }
}

/// The dashboard queries only families the sidecar exports (a renamed or
/// removed family fails here, not as an empty panel), and shows the ones
/// an on-call engineer reads first.
#[tokio::test]
async fn the_dashboard_queries_only_metrics_the_sidecar_exports() {
    let text = std::fs::read_to_string(root().join(DASHBOARD)).expect("dashboard");
    let dashboard: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"));
    let mut found = Vec::new();
    queries(&dashboard, &mut found);
    let exported = exported().await;
    let metric = regex::Regex::new(r"\bcrewlet_[a-z_]+").expect("regex");
    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    for q in &found {
        for m in metric.find_iter(q) {
            used.insert(m.as_str().to_string());
            if !exported.contains(m.as_str()) {
                unknown.push(format!("{} in {q}", m.as_str()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "{DASHBOARD} queries what the sidecar does not export: {unknown:#?}\nit exports {exported:?}"
    );
    for shown in [
        "crewlet_alarm",
        "crewlet_first_seq",
        "crewlet_last_seq",
        "crewlet_trim_to",
        "crewlet_blocked",
        "crewlet_term_seq",
        "crewlet_answer_age_seconds",
        "crewlet_duty_held",
        "crewlet_broker_connected",
        "crewlet_purged_records_total",
        "crewlet_tick_duration_seconds_bucket",
    ] {
        assert!(used.contains(shown), "{DASHBOARD} does not query {shown}");
    }
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 39),
        "{DASHBOARD}: schemaVersion"
    );
}
