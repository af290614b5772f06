//! Table-driven tests of parsing and validation through one helper.

use super::*;

const BASE: &str = "\
node:
  id: node-1
  duty: true
retention:
  backup_owner: platform-oncall
domains:
  - name: tracker
    stream: CREWLET_TRACKER_LOG
    gate_subject: crewlet.tracker.gate
    feed_consumer: crewlet-tracker-feed
";

/// Checks `text` and asserts the rendered problems are exactly `expected`
/// (each an exact line of `validate` output, file name `c.yaml`).
fn check_problems(text: &str, expected: &[&str]) {
    let checked = check(text);
    let got: Vec<String> = checked
        .problems
        .iter()
        .map(|p| p.render("c.yaml"))
        .collect();
    assert_eq!(got, expected, "for:\n{text}");
    assert_eq!(
        checked.config.is_some(),
        !expected.iter().any(|e| e.starts_with("error")),
        "config is returned exactly when there is no error"
    );
}

#[test]
fn the_base_config_is_clean_and_defaults_apply() {
    check_problems(BASE, &[]);
    let c = check(BASE).config.expect("valid");
    assert_eq!(c.retention.tick, Dur::secs(10));
    assert_eq!(c.retention.min_age, Dur::days(7));
    assert_eq!(c.retention.fence_window, Dur::secs(60));
    assert_eq!(c.retention.snapshot_quorum, 2);
    assert!(!c.trim.enabled, "dry run is the default");
    assert!(c.domains[0].gate_reserve, "gate reserve defaults on");
    assert_eq!(c.buckets.floors, "crewlet_floors");
    assert_eq!(c.retention.duty_ttl(), Duration::from_secs(30));
}

#[test]
fn the_spec_example_parses() {
    let text = "\
node:
  id: node-1                # node id rule
  duty: true                # may claim the trim duty
nats:
  url: nats://127.0.0.1:4222
buckets: {presence: crewlet_presence, positions: crewlet_positions, holds: crewlet_holds,
          backups: crewlet_backups, snapshots: crewlet_snapshots, floors: crewlet_floors,
          duty: crewlet_duty, gates: crewlet_gates}
retention:
  tick: 10s
  min_age: 7d               # 24h ..= 90d
  backup_floor: engine      # engine | operator
  backup_max_age: 24h
  backup_owner: platform-oncall
  snapshot_interval: 24h
  snapshots_kept: 1
  snapshot_quorum: 2
  fence_window: 60s
  presence_ttl: 30s         # the presence bucket's TTL, used by init
  held_alarm_after: 24h
  allow_unsafe_limits: false
trim:
  enabled: false
domains:
  - name: tracker
    stream: CREWLET_TRACKER_LOG
    gate_subject: crewlet.tracker.gate
    gate_reserve: true
    feed_consumer: crewlet-tracker-feed
";
    check_problems(text, &[]);
}

#[test]
fn single_problems() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "min_age below its range",
            "retention:\n  min_age: 2h\n  backup_owner: x\n",
            &[
                "error: c.yaml:3: retention.snapshot_interval: snapshot_interval × (snapshots_kept + 1) = 24h × 2 = 2d must be less than min_age (2h); shorten snapshot_interval or raise min_age: min_age: 3d works with snapshot_interval 24h",
                "error: c.yaml:4: retention.min_age: \"2h\" is out of range; allowed: 24h ..= 90d (retention.allow_unsafe_limits: true lowers the minimum for tests and demos)",
            ],
        ),
        (
            "min_age above its range",
            "retention:\n  min_age: 91d\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.min_age: \"91d\" is out of range; allowed: 24h ..= 90d"],
        ),
        (
            "unsafe limits turn the range error into a warning",
            "retention:\n  min_age: 2h\n  snapshot_interval: 30m\n  allow_unsafe_limits: true\n  backup_owner: x\n",
            &[
                "warning: c.yaml:4: retention.min_age: \"2h\" is below the safe minimum 24h (allowed only because retention.allow_unsafe_limits is true)",
                "warning: c.yaml:5: retention.snapshot_interval: \"30m\" is below the safe minimum 1h (allowed only because retention.allow_unsafe_limits is true)",
            ],
        ),
        (
            "the cross-field rule holds even with unsafe limits",
            "retention:\n  min_age: 2h\n  allow_unsafe_limits: true\n  backup_owner: x\n",
            &[
                "error: c.yaml:3: retention.snapshot_interval: snapshot_interval × (snapshots_kept + 1) = 24h × 2 = 2d must be less than min_age (2h); shorten snapshot_interval or raise min_age: snapshot_interval: 59m works with min_age 2h, or min_age: 3d with snapshot_interval 24h",
                "warning: c.yaml:4: retention.min_age: \"2h\" is below the safe minimum 24h (allowed only because retention.allow_unsafe_limits is true)",
            ],
        ),
        (
            "backup owner unset",
            "retention:\n  tick: 5s\n",
            &["warning: c.yaml:3: retention.backup_owner: is unset; name the person, team or scheduler that runs the backups (the backup_age alarm names it)"],
        ),
        (
            "operator policy warns",
            "retention:\n  backup_floor: operator\n  backup_owner: x\n",
            &["warning: c.yaml:4: retention.backup_floor: is operator: the trim does not advance until someone runs `crewlet retention ack -stream S -position N`, and then only as far as acknowledged"],
        ),
        (
            "a wrong type names the field and the kind it must be",
            "retention:\n  snapshot_quorum: two\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.snapshot_quorum: string \"two\" is not a whole number, 0 or more"],
        ),
        (
            "a duration that is not one",
            "retention:\n  tick: soon\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.tick: \"soon\" is not a duration: allowed: a whole number and a unit: ms, s, m, h, d or w (30s, 10m, 24h, 7d; combined: 1h30m)"],
        ),
        (
            "a number where a duration belongs",
            "retention:\n  tick: 10\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.tick: integer `10` is not a duration such as 30s, 10m, 24h or 7d"],
        ),
        (
            "unknown field",
            "retention:\n  tikc: 10s\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.tikc: unknown field `tikc`; allowed: `tick`, `min_age`, `backup_floor`, `backup_max_age`, `backup_owner`, `snapshot_interval`, `snapshots_kept`, `snapshot_quorum`, `fence_window`, `presence_ttl`, `held_alarm_after`, `allow_unsafe_limits`, `max_clock_skew`, `full_read_every`, `alarm_grace`"],
        ),
        (
            "unknown section",
            "retention:\n  backup_owner: x\nretension: {}\n",
            &["error: c.yaml:5: retension: unknown section; allowed: node, nats, buckets, retention, trim, http, domains"],
        ),
        (
            "unknown backup policy",
            "retention:\n  backup_floor: tape\n  backup_owner: x\n",
            &["error: c.yaml:4: retention.backup_floor: unknown value `tape`; allowed: `engine` or `operator`"],
        ),
    ];
    for (what, extra, expected) in cases {
        let text = format!("node:\n  id: node-1\n{extra}domains:\n  - {{name: t, stream: T}}\n");
        let checked = check(&text);
        let got: Vec<String> = checked
            .problems
            .iter()
            .map(|p| p.render("c.yaml"))
            .collect();
        assert_eq!(&got, expected, "{what}:\n{text}");
    }
}

#[test]
fn three_mistakes_three_errors_in_one_run() {
    let text = "\
node:
  id: -node
retention:
  min_age: 100d
  backup_owner: oncall
domains:
  - name: tracker
    stream: CREWLET_TRACKER_LOG
  - name: tracker
    stream: CREWLET.PAGES
";
    check_problems(
        text,
        &[
            "error: c.yaml:2: node.id: node id \"-node\" starts with '-'; allowed: an ASCII letter or digit, then letters, digits, '.', '_' or '-', at most 64 characters",
            "error: c.yaml:4: retention.min_age: \"100d\" is out of range; allowed: 24h ..= 90d",
            "error: c.yaml:9: domains[1].name: \"tracker\" is also the name of domains[0]; domain names must be unique",
            "error: c.yaml:10: domains[1].stream: stream name \"CREWLET.PAGES\" contains '.'; allowed: 1 to 255 printable characters without whitespace, '.', '*', '>', '/' or '\\'",
        ],
    );
}

#[test]
fn a_type_error_does_not_hide_problems_elsewhere() {
    let text = "\
node:
  id: node-1
trim:
  enabled: sometimes
retention:
  fence_window: 2h
  backup_owner: x
domains:
  - name: a
    stream: A
    gate_reserve: 3
  - name: b
    stream: B C
";
    check_problems(
        text,
        &[
            "error: c.yaml:4: trim.enabled: string \"sometimes\" is not true or false",
            "error: c.yaml:6: retention.fence_window: \"2h\" is out of range; allowed: 10s ..= 1h",
            "error: c.yaml:11: domains[0].gate_reserve: integer `3` is not true or false",
            "error: c.yaml:13: domains[1].stream: stream name \"B C\" contains ' '; allowed: 1 to 255 printable characters without whitespace, '.', '*', '>', '/' or '\\'",
        ],
    );
}

#[test]
fn syntax_errors_name_their_line() {
    let checked = check("node:\n  id: node-1\ndomains:\n  - name: [a\n    stream: A\n");
    assert_eq!(checked.problems.len(), 1);
    let p = &checked.problems[0];
    assert!(p.is_error());
    assert!(p.line.is_some_and(|l| (4..=6).contains(&l)), "{p:?}");
    assert!(
        p.render("c.yaml").starts_with("error: c.yaml:"),
        "{}",
        p.render("c.yaml")
    );
    assert!(
        check("").problems.iter().any(|p| p.field == "node"),
        "empty file: node is missing"
    );
    assert!(check("- a\n- b\n").problems[0]
        .message
        .contains("must be a mapping"));
}

#[test]
fn names_and_auth() {
    let text = "\
node:
  id: node-1
nats:
  url: http://localhost:4222
  token: s3cret
  user: alice
  tls: {cert: /c.pem}
buckets:
  holds: crewlet.holds
  gates: crewlet_floors
retention: {backup_owner: x}
domains:
  - name: a
    stream: A
    gate_subject: a.*.gate
    feed_consumer: feed.a
  - name: b
    stream: B
    gate_subject: a.*.gate
";
    let checked = check(text);
    let got: Vec<String> = checked
        .problems
        .iter()
        .map(|p| p.render("c.yaml"))
        .collect();
    let want = [
        "error: c.yaml:4: nats.url: scheme \"http\" is not supported",
        "error: c.yaml:5: nats.token: set together with nats.user",
        "error: c.yaml:6: nats.user: nats.password is required with nats.user",
        "error: c.yaml:7: nats.tls.cert: nats.tls.key is required",
        "error: c.yaml:9: buckets.holds: bucket name \"crewlet.holds\" contains '.'",
        "error: c.yaml:10: buckets.gates: \"crewlet_floors\" is also buckets.floors",
        "error: c.yaml:15: domains[0].gate_subject: \"a.*.gate\" contains a wildcard",
        "error: c.yaml:16: domains[0].feed_consumer: consumer name \"feed.a\" contains '.'",
        "error: c.yaml:19: domains[1].gate_subject: \"a.*.gate\" contains a wildcard",
        "error: c.yaml:19: domains[1].gate_subject: \"a.*.gate\" is also the gate subject of domains[0]",
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.starts_with(w), "got {g}\nwant prefix {w}");
    }
    assert!(
        !got.iter().any(|l| l.contains("s3cret")),
        "secrets are never printed"
    );
}

#[test]
fn redaction() {
    assert_eq!(
        redact_url("nats://alice:pw@host:4222"),
        "nats://***@host:4222"
    );
    assert_eq!(redact_url("nats://tok@host:4222"), "nats://***@host:4222");
    assert_eq!(redact_url("nats://host:4222"), "nats://host:4222");
}

#[test]
fn durations_print_as_written() {
    for (text, want) in [
        ("7d", "7d"),
        ("24h", "24h"),
        ("48h", "2d"),
        ("90m", "90m"),
        ("30s", "30s"),
        ("0s", "0s"),
        ("1h 30m", "90m"),
    ] {
        let d = Dur(humantime::parse_duration(text).expect("valid"));
        assert_eq!(d.to_string(), want, "{text}");
    }
}

#[test]
fn an_archive_is_one_store_within_the_bounds_of_archive_md() {
    let with = |archive: &str| {
        check(&format!(
            "node: {{id: n1}}\nretention: {{backup_owner: x}}\ndomains:\n  - name: t\n    stream: T\n    archive: {archive}\n"
        ))
    };
    let ok = with("{object_store: crewlet_archive}");
    let a = ok.config.expect("valid").domains[0]
        .archive
        .clone()
        .expect("archive");
    assert_eq!(
        (a.segment_records, a.segment_bytes.0, a.fold_per_tick),
        (10_000, 8 << 20, 16)
    );
    assert!(with("{dir: /var/lib/crewlet/archive, segment_bytes: 64KiB, segment_records: 1000000, fold_per_tick: 1024}").config.is_some());
    for (archive, field, says) in [
        ("{object_store: a, dir: /x}", "domains[0].archive", "both"),
        (
            "{segment_records: 5}",
            "domains[0].archive",
            "names no store",
        ),
        ("{dir: relative/path}", "domains[0].archive.dir", "absolute"),
        (
            "{object_store: 'no spaces'}",
            "domains[0].archive.object_store",
            "bucket name",
        ),
        (
            "{dir: /x, segment_records: 0}",
            "domains[0].archive.segment_records",
            "1 to 1000000",
        ),
        (
            "{dir: /x, segment_bytes: 1KiB}",
            "domains[0].archive.segment_bytes",
            "64KiB to 256MiB",
        ),
        (
            "{dir: /x, segment_bytes: 8MB}",
            "domains[0].archive.segment_bytes",
            "MiB",
        ),
        (
            "{dir: /x, fold_per_tick: 2000}",
            "domains[0].archive.fold_per_tick",
            "1 to 1024",
        ),
        (
            "{dir: /x, folds: 2}",
            "domains[0].archive.folds",
            "unknown field",
        ),
    ] {
        let c = with(archive);
        assert!(c.config.is_none(), "{archive}");
        assert!(
            c.problems
                .iter()
                .any(|p| p.field == field && p.message.contains(says)),
            "{archive}: {:?}",
            c.problems
        );
    }
}

/// An operator's trial: validate stopped at the first mistake inside an
/// `archive:` block: a field that failed to parse took the whole block
/// out, so what else was wrong in it (a relative `dir`, two stores) was
/// never said. Only the failing field is taken out now.
#[test]
fn every_mistake_inside_an_archive_block_is_said() {
    let with = |archive: &str| {
        check(&format!(
            "node: {{id: n1}}\nretention: {{backup_owner: x}}\ndomains:\n  - name: t\n    stream: T\n    archive: {archive}\n"
        ))
    };
    for (archive, want) in [
        (
            "{dir: relative/path, folds: 2}",
            &[
                ("domains[0].archive.folds", "unknown field"),
                ("domains[0].archive.dir", "absolute"),
            ][..],
        ),
        (
            "{object_store: a, dir: /x, segment_bytes: 8MB}",
            &[
                ("domains[0].archive.segment_bytes", "MiB"),
                ("domains[0].archive", "both"),
            ][..],
        ),
        (
            "{dir: rel, segment_records: lots, fold_per_tick: many}",
            &[
                ("domains[0].archive.segment_records", ""),
                ("domains[0].archive.fold_per_tick", ""),
                ("domains[0].archive.dir", "absolute"),
            ][..],
        ),
    ] {
        let c = with(archive);
        for (field, says) in want {
            assert!(
                c.problems
                    .iter()
                    .any(|p| p.field == *field && p.message.contains(says)),
                "{archive}: {field} {says:?} in {:#?}",
                c.problems
            );
        }
    }
}

/// A cloud archive: one URL and the overrides that apply to its cloud;
/// each mistake names its field and what is allowed, and a good block
/// names the store the tick folds into.
#[test]
fn a_cloud_archive_is_a_url_and_the_overrides_its_cloud_takes() {
    let with = |archive: &str| {
        check(&format!(
            "node: {{id: n1}}\nretention: {{backup_owner: x}}\ndomains:\n  - name: t\n    stream: T\n    archive: {archive}\n"
        ))
    };
    let good = with("{url: \"s3://acme-archive/crewlet/\", endpoint: \"http://127.0.0.1:9000\", allow_http: true, region: eu-west-1, credentials_file: /etc/crewlet/aws, profile: crewlet, instance_metadata: false}");
    assert!(good.problems.is_empty(), "{:?}", good.problems);
    let a = good.config.expect("config").domains[0]
        .archive
        .clone()
        .expect("archive");
    let crate::archive::state::Store::Cloud(r) = a.store() else {
        panic!("a cloud store: {:?}", a.store())
    };
    assert_eq!(r.id(), "s3://acme-archive/crewlet");
    assert_eq!(
        (r.endpoint.as_deref(), r.allow_http, r.instance_metadata),
        (Some("http://127.0.0.1:9000"), true, false)
    );
    assert_eq!(ArchiveConfig::of(&a.store()).store(), a.store());
    for (archive, field, says) in [
        (
            "{url: \"ftp://a/b\"}",
            "domains[0].archive.url",
            "s3://BUCKET/PREFIX",
        ),
        (
            "{url: \"s3://a/b\", dir: /x}",
            "domains[0].archive",
            "both dir and url",
        ),
        (
            "{url: \"s3://a\", endpoint: \"http://minio:9000\"}",
            "domains[0].archive.endpoint",
            "allow_http: true",
        ),
        (
            "{url: \"s3://a\", endpoint: \"https://AKIA:hunter2@minio:9000\"}",
            "domains[0].archive.endpoint",
            "never written in the configuration",
        ),
        (
            "{url: \"s3://a\", endpoint: \"minio:9000\"}",
            "domains[0].archive.endpoint",
            "http:// or https://",
        ),
        (
            "{url: \"s3://a\", allow_http: true}",
            "domains[0].archive.allow_http",
            "set endpoint",
        ),
        (
            "{url: \"s3://a\", credentials_file: creds}",
            "domains[0].archive.credentials_file",
            "absolute",
        ),
        (
            "{url: \"gs://a\", region: us}",
            "domains[0].archive.region",
            "only to s3://",
        ),
        (
            "{url: \"az://a\", credentials_file: /c}",
            "domains[0].archive.credentials_file",
            "only to s3:// and gs://",
        ),
        (
            "{url: \"s3://a\", account: acme}",
            "domains[0].archive.account",
            "only to az://",
        ),
        (
            "{dir: /x, endpoint: \"https://s3\"}",
            "domains[0].archive.endpoint",
            "goes with url",
        ),
        (
            "{url: \"s3://a\", secret_access_key: x}",
            "domains[0].archive.secret_access_key",
            "unknown field",
        ),
    ] {
        let c = with(archive);
        assert!(c.config.is_none(), "{archive}");
        assert!(
            c.problems
                .iter()
                .any(|p| p.field == field && p.message.contains(says)),
            "{archive}: {field} {says:?} in {:#?}",
            c.problems
        );
    }
}

/// The fence grants the purge the lease less the clock skew allowed and
/// one read timeout; a configuration that leaves it no time is refused,
/// naming the numbers and both ways out.
#[test]
fn a_fence_that_leaves_no_time_to_purge_is_refused() {
    let c = check(BASE).config.expect("valid");
    assert_eq!(c.retention.read_timeout(), Duration::from_secs(10));
    assert_eq!(c.retention.fence_grant(), Duration::from_secs(18));
    let fast = BASE.replace(
        "retention:\n",
        "retention:\n  tick: 1s\n  allow_unsafe_limits: true\n  min_age: 3s\n  snapshot_interval: 1s\n",
    );
    let checked = check(&fast);
    let errors: Vec<String> = checked
        .problems
        .iter()
        .map(|p| p.render("c.yaml"))
        .filter(|p| p.starts_with("error"))
        .collect();
    assert_eq!(
        errors,
        ["error: c.yaml:4: retention.max_clock_skew: 2s leaves the duty holder 0s to purge after each fence: the lease lasts 3 ticks (3s), less max_clock_skew, less one read timeout (1s), and at least 500ms is needed; lower max_clock_skew or lengthen retention.tick"],
    );
    let ok = fast.replace("  tick: 1s\n", "  tick: 1s\n  max_clock_skew: 500ms\n");
    let c = check(&ok).config.expect("valid with a smaller skew");
    assert_eq!(c.retention.fence_grant(), Duration::from_millis(1500));
}

#[test]
fn a_fence_lasts_no_longer_than_the_duty_buckets_own_lease() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // The bucket as this configuration made it.
    assert_eq!(fence_window(s(3), s(3), ms(1500)), ms(1500));
    // A bucket that never expires its lease: the configured TTL.
    assert_eq!(fence_window(s(3), Duration::ZERO, ms(1500)), ms(1500));
    // Made by a sidecar with a shorter tick: the broker expires the lease
    // sooner, and so the fence ends sooner.
    assert_eq!(fence_window(s(30), s(3), ms(1500)), ms(1500));
    assert_eq!(fence_window(s(6), s(1), ms(2500)), Duration::ZERO);
    // A longer one is not believed beyond this configuration's own TTL.
    assert_eq!(fence_window(s(3), s(60), ms(1500)), ms(1500));
}

/// `replicas:` names consumers (the consumer name rule), and no consumer
/// is both named to pin and left out.
#[test]
fn replicas_name_consumers_and_none_is_in_both_lists() {
    let text = "node: {id: n1}\nretention: {backup_owner: x}\ndomains:\n  - name: a\n    stream: A\n    replicas: {consumers: [cdc, \"dr.east\"], ignore: [cdc]}\n";
    let got: Vec<String> = check(text)
        .problems
        .iter()
        .map(|p| p.render("c.yaml"))
        .collect();
    assert!(
        got.iter().any(|l| l
            .contains("domains[0].replicas.consumers[1]: consumer name \"dr.east\" contains '.'")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|l| l.contains("domains[0].replicas.ignore: \"cdc\" is both named to pin (replicas.consumers) and left out")),
        "{got:#?}"
    );
    let good = "node: {id: n1}\nretention: {backup_owner: x}\ndomains:\n  - name: a\n    stream: A\n    replicas: {consumers: [cdc], ignore: [old-dr]}\n";
    let checked = check(good);
    assert!(
        checked.problems.iter().all(|p| !p.is_error()),
        "{:?}",
        checked.problems
    );
    let c = checked.config.expect("config");
    assert_eq!(c.domains[0].replicas.consumers, ["cdc"]);
    assert_eq!(c.domains[0].replicas.ignore, ["old-dr"]);
    // Unknown keys in the block are named.
    let bad = "node: {id: n1}\nretention: {backup_owner: x}\ndomains:\n  - name: a\n    stream: A\n    replicas: {slots: [x]}\n";
    let got: Vec<String> = check(bad)
        .problems
        .iter()
        .map(|p| p.render("c.yaml"))
        .collect();
    assert!(got.iter().any(|l| l.contains("slots")), "{got:#?}");
}

/// A key that is the empty string (`"": 1`, found by the property test
/// `fuzz_config_text`) is refused with a problem that says where it is,
/// never one whose field is empty.
#[test]
fn an_empty_key_is_named_where_it_is() {
    for text in [
        "\"\":",
        "\"\": 1",
        "retention:\n  \"\": 5s\n",
        "domains:\n  - \"\": x\n",
    ] {
        let c = check(text);
        assert!(c.config.is_none(), "{text:?}");
        assert!(
            c.problems.iter().any(|p| p.is_error()),
            "{text:?}: {:?}",
            c.problems
        );
        for p in &c.problems {
            assert!(!p.field.is_empty(), "{text:?}: {p:?}");
            assert!(!p.message.is_empty(), "{text:?}: {p:?}");
        }
    }
}

/// `min_age: 24h`, the documented minimum, with the other defaults breaks
/// the cross-field rule (24h × 2 = 2d): the error names a value of each
/// field that works, and each does.
#[test]
fn the_documented_minimum_min_age_says_what_works_with_it() {
    let base = "node: {id: node-1}\nnats: {url: \"nats://127.0.0.1:4222\"}\ndomains: [{name: t, stream: T}]\n";
    let c = check(&format!(
        "{base}retention: {{min_age: 24h, backup_owner: x}}\n"
    ));
    let p = c
        .problems
        .iter()
        .find(|p| p.field == "retention.snapshot_interval")
        .expect("the cross-field rule");
    assert!(
        p.message.contains("snapshot_interval: 11h") && p.message.contains("min_age: 3d"),
        "{p:?}"
    );
    for fix in ["min_age: 24h, snapshot_interval: 11h", "min_age: 3d"] {
        let c = check(&format!("{base}retention: {{{fix}, backup_owner: x}}\n"));
        assert!(!c.has_errors(), "{fix}: {:?}", c.problems);
    }
}
