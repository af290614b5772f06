//! `crewlet demo`: the first-run experience. On an embedded broker three
//! simulated nodes apply a log while the real sidecar (the same `Sidecar`
//! tick `run` uses) trims it: the floor advances, a stalled node pins it
//! (and status says so in one sentence), and it moves again once the node
//! catches up. The demo checks that story happened and exits 1 if not.

use chrono::Utc;

use super::{Cli, DemoArgs};
use crate::broker::Broker;
use crate::config::{self, Config};
use crate::exit::Exit;
use crate::node::Node;
use crate::report;
use crate::rows::{Artefact, BackupManifest, SkipReason, Timestamp};
use crate::tick::{Sidecar, TickReport};

/// The demo's configuration is the shipped example, so the two never drift.
const DEMO_CONFIG: &str = include_str!("../../config/demo.yaml");
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RECORDS_PER_TICK: u64 = 25;
const STALLED: &str = "node-3";
/// The stalled node stops at this tick and returns `RESUME_BEFORE_END`
/// ticks before the end: long enough for min_age to pass its position.
const STALL_AT: u32 = 4;
const RESUME_BEFORE_END: u32 = 5;
const MIN_TICKS: u32 = 14;

pub async fn run(cli: &Cli, args: &DemoArgs) -> Exit {
    if let Some(flag) = unused_flag(cli) {
        crate::cli::say::error(format_args!("crewlet demo starts its own nats-server and uses its built-in configuration (config/demo.yaml), so {flag} has no effect here; run it without, or use the other commands against your broker"));
        return Exit::Usage;
    }
    let Some(mut config) = config::check(DEMO_CONFIG).config else {
        crate::cli::say::error(format_args!(
            "the built-in demo configuration is invalid (config/demo.yaml)"
        ));
        return Exit::Usage;
    };
    // Before any banner: without a nats-server there is no demo.
    if crate::embedded::find_binary().is_none() {
        crate::cli::say::error(format_args!("{}", crate::embedded::EmbeddedError::NoBinary));
        return Exit::Unreachable;
    }
    let (dir, temporary) = match &args.data_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("crewlet-demo-{}", std::process::id())),
            true,
        ),
    };
    config.nats.embedded_dir = dir.clone();
    let ticks = args.ticks.max(MIN_TICKS);
    let mut out = Out::new(cli.json);
    out.line(&format!(
        "crewlet demo: an embedded nats-server in {}, one domain ({}), three nodes, trim enabled.",
        dir.display(),
        config.domains[0].stream
    ));
    let server = match crate::embedded::EmbeddedServer::start(&dir, 0).await {
        Ok(s) => s,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            remove(temporary, &dir);
            return Exit::Unreachable;
        }
    };
    let exit = match crate::broker::connect(&server.url, &config.nats, "crewlet-demo").await {
        Ok(broker) => {
            // Ctrl-C or SIGTERM ends the tour where it is; the broker is
            // stopped and the temporary store removed all the same.
            tokio::select! {
                exit = tour(broker, config, ticks, &mut out) => exit,
                () = interrupted() => {
                    eprintln!("interrupted: stopping the demo's nats-server{}", if temporary { " and removing its store" } else { "" });
                    Exit::Interrupted
                }
            }
        }
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            Exit::Unreachable
        }
    };
    server.stop().await;
    remove(temporary, &dir);
    exit
}

/// A flag the demo would otherwise silently ignore.
fn unused_flag(cli: &Cli) -> Option<&'static str> {
    [
        (cli.config.is_some(), "--config"),
        (cli.nats_url.is_some(), "--server"),
        (cli.creds.is_some(), "--creds"),
        (cli.nkey.is_some(), "--nkey"),
        (cli.user.is_some(), "--user"),
        (cli.password.is_some(), "--password"),
        (cli.token.is_some(), "--token"),
        (cli.tlscert.is_some(), "--tlscert"),
        (cli.tlskey.is_some(), "--tlskey"),
        (cli.tlsca.is_some(), "--tlsca"),
        (cli.context.is_some(), "--context"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

fn remove(temporary: bool, dir: &std::path::Path) {
    if temporary {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// SIGINT or SIGTERM.
async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Where the tour's lines go: stdout as text, or (with --json) nothing
/// until the one JSON object at the end. A closed stdout (`| head`) is
/// noticed, and the tour ends quietly rather than panicking.
struct Out {
    json: bool,
    closed: bool,
}

impl Out {
    fn new(json: bool) -> Out {
        Out {
            json,
            closed: false,
        }
    }

    fn line(&mut self, text: &str) {
        if !self.json {
            self.write(text);
        }
    }

    fn write(&mut self, text: &str) {
        use std::io::Write;
        if self.closed {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "{text}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            self.closed = true;
        }
    }
}

/// The simulated fleet: what each node has applied, and whether it runs.
/// The nodes write their rows through `crewlet::node`, as a real service
/// in Rust would.
struct Fleet {
    broker: Broker,
    config: Config,
    nodes: Vec<Node>,
    applied: [u64; 3],
    running: [bool; 3],
}

impl Fleet {
    fn new(broker: &Broker, config: &Config) -> Result<Fleet, String> {
        let nodes = NODES
            .iter()
            .map(|id| Node::with_broker(broker.clone(), config.buckets.clone(), id))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Fleet {
            broker: broker.clone(),
            config: config.clone(),
            nodes,
            applied: [0; 3],
            running: [true; 3],
        })
    }

    /// One step of the world: new records, then every running node applies
    /// them and reports, snapshots and backs up.
    async fn step(&mut self) -> Result<u64, String> {
        let d = &self.config.domains[0];
        let subject = format!("{}.records", d.stream);
        self.broker
            .publish_many(&subject, RECORDS_PER_TICK as usize)
            .await?;
        let state = self.broker.stream_state(&d.stream).await?;
        let now = Timestamp(Utc::now());
        let e = |e: crate::node::NodeError| e.to_string();
        for (i, node) in self.nodes.iter().enumerate() {
            if !self.running[i] {
                continue;
            }
            self.applied[i] = state.last_seq;
            node.lease(&["data"], "demo").await.map_err(e)?;
            node.report(&d.stream, self.applied[i], 0, state.created)
                .await
                .map_err(e)?;
            let artefact = Artefact {
                position: self.applied[i],
                generation: 0,
                taken_at: now,
                verified: true,
            };
            node.register_snapshots([(d.stream.clone(), artefact)].into(), SkipReason::None)
                .await
                .map_err(e)?;
        }
        // node-1 runs the nightly backup, compressed into every tick here.
        let backup = BackupManifest {
            id: "nightly".into(),
            node: NODES[0].into(),
            taken_at: now,
            completed_at: Some(now),
            verified: true,
            owner: "demo".into(),
            positions: [(d.stream.clone(), self.applied[0])].into(),
        };
        self.nodes[0].announce_backup(&backup).await.map_err(e)?;
        Ok(state.last_seq)
    }

    /// The node stops: its lease lapses (given up at once rather than
    /// waiting out the TTL) and its position stays where it was.
    async fn stop(&mut self, node: usize) -> Result<(), String> {
        self.running[node] = false;
        self.nodes[node].leave().await.map_err(|e| e.to_string())
    }
}

fn progress(tick: u32, r: &TickReport) -> String {
    let Some(d) = r.domains.first() else {
        return format!("tick {tick:>2}: no domain");
    };
    let a = &d.answer;
    let purged = match &d.purged {
        Some(Ok(n)) => n.to_string(),
        Some(Err(e)) => format!("failed ({e})"),
        None => "0".into(),
    };
    let blocked = a.blocked_names(",");
    let binding = a
        .terms
        .iter()
        .find(|t| t.binding)
        .map(|t| t.term.as_str())
        .unwrap_or("-");
    format!(
        "tick {tick:>2}  last {:>5}  first {:>5}  floor {:>5}  trim_to {:>5}  purged {:>4}  binding {:<14} blocked_by {blocked}",
        a.last_seq,
        a.first_seq,
        a.floor.map(|f| f.to_string()).unwrap_or_else(|| "-".into()),
        a.trim_to,
        purged,
        binding
    )
}

async fn tour(broker: Broker, config: Config, ticks: u32, out: &mut Out) -> Exit {
    if let Err(e) = super::run::prepare(&broker, &config, true).await {
        crate::cli::say::error(format_args!("{e}"));
        return Exit::Unreachable;
    }
    let tick = config.retention.tick.0;
    let mut fleet = match Fleet::new(&broker, &config) {
        Ok(f) => f,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Usage;
        }
    };
    let mut sidecar = Sidecar::new(config, broker);
    let stall_at = STALL_AT;
    let resume_at = ticks - RESUME_BEFORE_END;
    let mut floors = Vec::new();
    let mut said_pinned = false;
    let mut rows = Vec::new();
    out.line(&format!("min_age is {}: the newest records are always kept; the floor follows the oldest thing anything still needs.\n", sidecar.config.retention.min_age));
    for t in 1..=ticks {
        let mut event = None;
        if t == stall_at {
            if let Err(e) = fleet.stop(2).await {
                crate::cli::say::error(format_args!("{e}"));
                return Exit::Unreachable;
            }
            event = Some(format!(
                "{STALLED} stops: its presence lease lapses and its position stays at {}.",
                fleet.applied[2]
            ));
        }
        if t == resume_at {
            fleet.running[2] = true;
            event = Some(format!("{STALLED} comes back and catches up."));
        }
        if let Some(e) = &event {
            out.line(&format!("         {e}"));
        }
        if let Err(e) = fleet.step().await {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
        let report = sidecar.tick().await;
        out.line(&progress(t, &report));
        let mut status = None;
        if let Some(d) = report.domains.first() {
            floors.push(d.answer.floor.unwrap_or(0));
            if !said_pinned && t < resume_at {
                if let Some(sentence) = report::not_trimming(&d.answer, Utc::now()) {
                    out.line(&format!("         status: {sentence}"));
                    said_pinned = true;
                    status = Some(sentence);
                }
            }
        }
        rows.push(tick_json(t, &report, event, status));
        if out.closed {
            // Nobody reads the rest: stop quietly, cleaning up as usual.
            sidecar.duty.release(&sidecar.broker).await;
            return Exit::Ok;
        }
        tokio::time::sleep(tick).await;
    }
    sidecar.duty.release(&sidecar.broker).await;

    // The story must have happened: advancing, pinned, advancing again.
    let before = floors.get(stall_at as usize - 1).copied().unwrap_or(0);
    let pinned = floors.get(resume_at as usize - 2).copied().unwrap_or(0);
    let after = floors.last().copied().unwrap_or(0);
    let pinned_at = fleet_pin(&floors, stall_at, resume_at);
    let ok = before > 0 && pinned_at && after > pinned && said_pinned;
    let summary = if ok {
        format!("The floor advanced while every node kept up, held at {pinned} while {STALLED} was away, and moved on to {after} once it caught up.")
    } else {
        format!(
            "The demo did not go as expected (floors by tick: {floors:?}); see the lines above."
        )
    };
    if out.json {
        let v = serde_json::json!({
            "ok": ok,
            "stream": sidecar.config.domains[0].stream,
            "ticks": rows,
            "floor_before_stall": before,
            "floor_while_pinned": pinned,
            "floor_at_end": after,
            "summary": summary,
            "next": ok.then_some(NEXT),
        });
        out.write(&v.to_string());
    } else {
        out.line("");
        out.line(&summary);
        if ok {
            out.line(&format!("Next: {NEXT}."));
        }
    }
    if ok {
        Exit::Ok
    } else {
        Exit::Attention
    }
}

/// What to do after the demo; every command in it works from any directory.
const NEXT: &str = "crewlet example-config > crewlet.yaml, edit its nats and domains for your fleet, then crewlet validate --config crewlet.yaml (crewlet man for every command)";

/// One tick of the tour as JSON (`crewlet demo --json`).
fn tick_json(
    tick: u32,
    r: &TickReport,
    event: Option<String>,
    status: Option<String>,
) -> serde_json::Value {
    let d = r.domains.first();
    let a = d.map(|d| &d.answer);
    serde_json::json!({
        "tick": tick,
        "event": event,
        "last_seq": a.map(|a| a.last_seq),
        "first_seq": a.map(|a| a.first_seq),
        "floor": a.and_then(|a| a.floor),
        "trim_to": a.map(|a| a.trim_to),
        "purged": d.and_then(|d| d.purged.as_ref()).and_then(|p| p.as_ref().ok().copied()),
        "binding": a.and_then(|a| a.terms.iter().find(|t| t.binding)).map(|t| t.term.as_str()),
        "blocked_by": a.map(|a| a.blocked_by.iter().map(|t| t.as_str()).collect::<Vec<_>>()),
        "status": status,
    })
}

/// Did the floor stop moving at some point while the node was away?
fn fleet_pin(floors: &[u64], stall_at: u32, resume_at: u32) -> bool {
    let window =
        &floors[(stall_at as usize).min(floors.len())..(resume_at as usize - 1).min(floors.len())];
    window.windows(2).any(|w| w[0] == w[1] && w[0] > 0)
}
