//! Packaging (cluster.md): no Docker engine runs here, so what can be
//! checked without one is: the compose file parses and wires what it says
//! (healthchecks before init, init before the sidecars), every crewlet
//! command it and the unit files run parses against the real CLI, every
//! configuration it mounts passes `crewlet validate` offline, its
//! nats-server is the version the tests use, and the Dockerfile copies
//! what exists and ships what it builds.

use std::path::Path;

use crate::support::crewlet;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn parses(argv: &[String], what: &str) {
    let mut full = vec!["crewlet".to_string()];
    full.extend(argv.iter().cloned());
    if let Err(e) = crewlet::cli::try_parse(full) {
        panic!("{what}: crewlet {} does not parse:\n{e}", argv.join(" "));
    }
}

#[test]
fn the_compose_cluster_is_wired_as_it_says() {
    let text = std::fs::read_to_string(root().join("docker/compose.yaml")).expect("compose.yaml");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("compose.yaml parses");
    doc.apply_merge().expect("merge keys");
    let services = doc["services"].as_mapping().expect("services");
    let name = |k: &serde_yaml::Value| k.as_str().unwrap_or_default().to_string();
    let strings = |v: &serde_yaml::Value| -> Vec<String> {
        v.as_sequence()
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };

    // The servers: the tests' nats-server version, healthchecked, routed.
    let install =
        std::fs::read_to_string(root().join("scripts/install-nats-server")).expect("script");
    let version = install
        .lines()
        .find_map(|l| l.strip_prefix("VERSION=\"${NATS_SERVER_VERSION:-"))
        .and_then(|l| l.strip_suffix("}\""))
        .expect("the pinned version");
    let servers: Vec<String> = services
        .iter()
        .filter(|(_, s)| s["image"].as_str().is_some_and(|i| i.starts_with("nats:")))
        .map(|(k, _)| name(k))
        .collect();
    assert_eq!(servers, ["nats-1", "nats-2", "nats-3"]);
    for s in &servers {
        let svc = &services[s.as_str()];
        assert_eq!(
            svc["image"].as_str(),
            Some(format!("nats:{version}-alpine").as_str()),
            "{s}"
        );
        assert!(
            svc["healthcheck"]["test"].as_sequence().is_some(),
            "{s} has a healthcheck"
        );
        let cmd = strings(&svc["command"]);
        let routes = cmd
            .iter()
            .skip_while(|a| *a != "--routes")
            .nth(1)
            .expect("routes");
        for other in &servers {
            assert!(
                routes.contains(&format!("{other}:6222")),
                "{s} routes to {other}"
            );
        }
    }

    // init waits for healthy servers, the sidecars for init.
    let init = &services["init"];
    for s in &servers {
        assert_eq!(
            init["depends_on"][s.as_str()]["condition"],
            "service_healthy",
            "init waits for {s}"
        );
    }
    parses(&strings(&init["command"]), "init");
    let mut configs = Vec::new();
    for (k, svc) in services {
        let n = name(k);
        if svc["build"].is_null() {
            continue;
        }
        for v in strings(&svc["volumes"]) {
            if let Some(host) = v.split(':').next().filter(|h| h.starts_with("./")) {
                configs.push(root().join("docker").join(host.trim_start_matches("./")));
            }
        }
        if n.starts_with("sidecar-") {
            assert_eq!(
                svc["depends_on"]["init"]["condition"], "service_completed_successfully",
                "{n} waits for init"
            );
            parses(&strings(&svc["command"]), &n);
        }
        if let Some(entry) = strings(&svc["entrypoint"]).first() {
            // The simulated node: the example the Dockerfile builds, and
            // every flag compose passes is one it reads.
            assert_eq!(entry, "/usr/local/bin/simulated_node", "{n}");
            let source = std::fs::read_to_string(root().join("examples/simulated_node.rs"))
                .expect("example");
            for flag in strings(&svc["command"])
                .iter()
                .filter(|a| a.starts_with("--"))
            {
                assert!(
                    source.contains(&format!("\"{flag}\"")),
                    "{n}: {flag} is not read by the example"
                );
            }
        }
    }
    assert_eq!(
        configs.len(),
        4,
        "init and three sidecars mount a configuration"
    );

    // Each mounted file is valid (offline: the servers' names do not
    // resolve here, which is exit 3 after a clean file).
    for cfg in &configs {
        let run = crewlet(&["validate", "--config", cfg.to_str().expect("utf-8")]);
        assert_eq!(run.code, 3, "{}: {run:?}", cfg.display());
        assert!(
            run.stdout.contains(": valid ("),
            "{}: {run:?}",
            cfg.display()
        );
    }
}

#[test]
fn the_dockerfile_copies_what_exists_and_ships_what_it_builds() {
    let text = std::fs::read_to_string(root().join("docker/Dockerfile")).expect("Dockerfile");
    let mut built = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"COPY") if !line.contains("--from=") => {
                for src in &words[1..words.len() - 1] {
                    assert!(root().join(src).exists(), "COPY {src}: no such path");
                }
            }
            Some(&"COPY") => {
                let src = words[2];
                built.push(src.to_string());
            }
            Some(&"RUN") if line.contains("cargo build") => {
                assert!(
                    line.contains("--bin crewlet") && line.contains("--example simulated_node"),
                    "{line}"
                );
            }
            _ => {}
        }
    }
    assert_eq!(
        built,
        [
            "/src/target/release/crewlet",
            "/src/target/release/examples/simulated_node"
        ]
    );
    let toolchain = text
        .lines()
        .find_map(|l| l.strip_prefix("FROM rust:"))
        .and_then(|l| l.split('-').next())
        .expect("a rust build image");
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .expect("rustc");
    let rustc = String::from_utf8_lossy(&rustc.stdout).to_string();
    assert!(
        rustc.starts_with(&format!("rustc {toolchain}.")),
        "the image builds with the tested toolchain: {toolchain} vs {rustc}"
    );
}

/// An operator's trial: the image has a healthcheck on `/readyz` when HTTP
/// is enabled (cluster.md's packaging): it asks the URL the operator sets
/// and passes when none is set, with the tool it needs in the image.
#[test]
fn the_dockerfile_checks_readyz_when_http_is_on() {
    let text = std::fs::read_to_string(root().join("docker/Dockerfile")).expect("Dockerfile");
    let check = text
        .lines()
        .skip_while(|l| !l.starts_with("HEALTHCHECK"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(check.contains("CMD"), "a HEALTHCHECK: {check}");
    assert!(
        check.contains("curl -fsS") && check.contains("$CREWLET_READYZ_URL"),
        "{check}"
    );
    assert!(
        check.contains("[ -z "),
        "passes without an HTTP surface: {check}"
    );
    assert!(
        text.contains("ENV CREWLET_READYZ_URL"),
        "the variable is declared"
    );
    assert!(text.contains("/readyz"), "names the route");
    assert!(
        text.lines()
            .any(|l| l.contains("apt-get install") && l.contains(" curl")),
        "the image has curl"
    );
}

/// The units and manifests in docs/ run commands that exist.
#[test]
fn the_unit_files_and_manifests_run_real_commands() {
    let mut checked = 0;
    for doc in ["docs/systemd.md", "docs/kubernetes.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("doc");
        for line in text.lines() {
            let line = line.trim().trim_matches('`');
            if let Some(cmd) = line
                .split("/usr/local/bin/crewlet ")
                .nth(1)
                .filter(|_| line.starts_with("ExecStart="))
            {
                parses(
                    &cmd.split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                    doc,
                );
                checked += 1;
            }
            if let Some(args) = line.strip_prefix("args: ") {
                let argv: Vec<String> = serde_yaml::from_str(args).expect("args list");
                parses(&argv, doc);
                checked += 1;
            }
        }
    }
    assert!(checked >= 4, "{checked}");
}

/// The README's quick start and CI agree: every command of its first `sh`
/// block is run by `.ci/run` exactly as printed, so a fresh clone cannot
/// break one of them unseen (the demo once failed at once, `cargo run`
/// unable to choose between two binaries, while CI passed).
#[test]
fn ci_runs_the_readmes_two_commands_as_printed() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let block: Vec<&str> = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in the README")
        .lines()
        .filter_map(|l| l.split('#').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(block, ["scripts/demo", "scripts/test"], "the quick start");
    let run: Vec<&str> = ci.lines().map(str::trim).collect();
    for cmd in &block {
        assert!(
            run.iter()
                .any(|l| l.split_whitespace().next() == Some(*cmd)),
            ".ci/run does not run `{cmd}` as the README prints it"
        );
    }
    // The demo's script names the binary: `cargo run` alone cannot choose
    // between the sidecar and the bench.
    let demo = std::fs::read_to_string(root().join("scripts/demo")).expect("scripts/demo");
    assert!(demo.contains("--bin crewlet"), "{demo}");
}

/// The test command runs the integration core again on the oldest
/// supported nats-server, the one `scripts/install-test-deps` installs,
/// so CI proves the supported range and not only its newest end.
#[test]
fn the_test_command_runs_the_core_on_the_oldest_supported_server() {
    let test = std::fs::read_to_string(root().join("scripts/test")).expect("scripts/test");
    let deps = std::fs::read_to_string(root().join("scripts/install-test-deps"))
        .expect("scripts/install-test-deps");
    assert!(
        deps.contains("NATS_SERVER_VERSION=2.10.") && deps.contains(".tools/nats-oldest"),
        "{deps}"
    );
    let oldest_run = test
        .split("NATS_SERVER_BIN=\"$top/.tools/nats-oldest/bin/nats-server\"")
        .nth(1)
        .unwrap_or_else(|| panic!("scripts/test runs nothing on the oldest server: {test}"));
    for core in [
        "trim::",
        "safety::",
        "gates::",
        "views::",
        "pins::",
        "carried::",
        "memory::",
        "status::",
    ] {
        assert!(
            oldest_run.contains(core),
            "{core} is not run on the oldest: {test}"
        );
    }
}

/// docs/contract.md says what a node written in another language must do,
/// each rule an integrator had to guess (a JavaScript node written from
/// the document alone): open the buckets, never create them; never delete
/// the positions row; `stream_created` to the nanosecond; where the
/// generation comes from; the presence TTL; gate records; which fields are
/// required; report after the commit; instants; the snapshot row's
/// compare-and-set; how the backup term chooses; one bad row blocks all;
/// and the schemas, which exist.
#[test]
fn the_node_contract_states_each_rule_an_integrator_needs() {
    let doc = std::fs::read_to_string(root().join("docs/contract.md")).expect("docs/contract.md");
    let section = doc
        .split("### Writing a node in another language")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    for rule in [
        "Open the buckets, never create them",
        "Renew the lease every third of the presence TTL",
        "`max_age`",
        "Report a position only after your own commit",
        "Never delete your own positions row",
        "to the nanosecond",
        "millisecond date type",
        "**`generation`** is the one `_contract` names",
        "After a reanchor",
        "Gate records on the log",
        "still reports their sequence",
        "Required fields.",
        "`null` is refused",
        "`completed_at: null`",
        "numbers are refused",
        "`+00:00`",
        "One bad row makes its term unreadable for the whole fleet",
        "newest manifest by `completed_at`",
        "Old manifests may\n  be deleted",
        "compare-and-set",
        "docs/schemas/",
    ] {
        assert!(
            section.contains(rule),
            "docs/contract.md does not say: {rule}"
        );
    }
    for schema in [
        "presence",
        "position",
        "hold",
        "backup-manifest",
        "backup-ack",
        "snapshot",
    ] {
        assert!(
            root()
                .join(format!("docs/schemas/{schema}.schema.json"))
                .is_file(),
            "{schema}"
        );
    }
}

/// docs/kubernetes.md tells the truth about the probes: liveness on
/// `/healthz` (a probe on `status`'s exit code would restart the sidecar
/// in every broker outage), no claim that there is no HTTP endpoint, and
/// the alarm lines' real event name.
#[test]
fn the_kubernetes_guide_probes_what_exists() {
    let doc = std::fs::read_to_string(root().join("docs/kubernetes.md")).expect("doc");
    assert!(
        doc.contains("httpGet: {path: /healthz"),
        "liveness on /healthz"
    );
    assert!(!doc.contains("no HTTP endpoint"), "the HTTP surface exists");
    assert!(
        !doc.contains("test $? -ne 3"),
        "no probe on status's exit code"
    );
    assert!(doc.contains("\"event\": \"alarm_raised\""));
    assert!(!doc.contains("\"event\": \"alarm\"`"));
    let routes = std::fs::read_to_string(root().join("src/http/mod.rs")).expect("routes");
    assert!(routes.contains("\"/healthz\""), "the route the probe names");
}
