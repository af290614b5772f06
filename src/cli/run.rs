//! `crewlet retention run [--once]`: the sidecar.

use std::sync::Arc;

use tokio::sync::Notify;

use super::{Cli, RunArgs};
use crate::broker::kv::Ensured;
use crate::broker::Broker;
use crate::buckets::{contract_buckets, differences};
use crate::config::Config;
use crate::exit::Exit;
use crate::tick::Sidecar;

pub async fn run(cli: &Cli, args: &RunArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    // Warnings are worth a log line at start; errors already stopped us.
    let file = loaded.path.display().to_string();
    for p in &loaded.warnings {
        tracing::warn!(event = "config_warning", "{}", p.render(&file));
    }
    // The long-running sidecar waits for its broker (beside nats-server in
    // a pod they start in any order); a one-shot run does not.
    let (broker, embedded) = if args.once || super::target_url(&config).is_none() {
        exit_on_err!(super::connect_or_embed(&config).await)
    } else {
        match wait_for_broker(&config).await {
            Ok(Some(b)) => (b, None),
            Ok(None) => return Exit::Ok,
            Err(exit) => return exit,
        }
    };
    let server = (loaded.server.url.clone(), loaded.server.source.to_string());
    let exit = serve(
        cli,
        server,
        broker,
        config,
        args.once,
        args.ticks,
        embedded.is_some(),
    )
    .await;
    if let Some(server) = embedded {
        server.stop().await;
    }
    exit
}

/// Connects, retrying with backoff (1 s doubling to 30 s) while the broker
/// is not there, logging `waiting_for_broker` once per attempt with the
/// URL. Configuration errors end it at once (exit 2); SIGTERM/SIGINT end
/// it quietly (`Ok(None)`: exit 0).
async fn wait_for_broker(config: &Config) -> Result<Option<Broker>, Exit> {
    let Some(url) = super::target_url(config) else {
        return Err(Exit::Usage);
    };
    let name = format!("crewlet/{}", config.node.id);
    let mut wait = std::time::Duration::from_secs(1);
    let mut attempt: u32 = 0;
    let mut refused = false;
    // While refused, /metrics says so (nothing else is served yet).
    let mut waiting: Option<Waiting> = None;
    let stop = wait_for_signal();
    tokio::pin!(stop);
    loop {
        attempt = attempt.saturating_add(1);
        match crate::broker::connect(&url, &config.nats, &name).await {
            Ok(b) => {
                if let Some(w) = waiting.take() {
                    w.stop().await;
                }
                if refused {
                    tracing::info!(
                        event = "alarm_cleared",
                        alarm = "broker_refused",
                        domain = "*",
                        "alarm cleared"
                    );
                }
                return Ok(Some(b));
            }
            // The servers answer but refuse the credentials or the TLS
            // settings: often a moment's state (an account resolver not
            // synced yet, credentials mounted late), so the sidecar keeps
            // trying, and says so as the alarm it is. Exiting 2 would leave
            // it down for good under a unit that does not restart on 2.
            Err(e @ crate::broker::ConnectError::Refused { .. }) => {
                if !refused {
                    let a = crate::alarms::broker_refused(
                        &e.to_string(),
                        &crate::config::credentials_named(&config.nats),
                    );
                    tracing::warn!(event = "alarm_raised", alarm = a.alarm.as_str(), domain = "*", measurement = %a.measurement, remedy = %a.remedy, "{}", a.line());
                    refused = true;
                    waiting = Waiting::start(config, a);
                }
                tracing::warn!(event = "waiting_for_broker", attempt, url = %crate::config::redact_url(&url), retry_in_secs = wait.as_secs(), error = %e, "the broker refuses this sidecar's credentials; retrying");
            }
            Err(e) if e.is_configuration() => {
                crate::cli::say::error(format_args!("{e}"));
                return Err(Exit::Usage);
            }
            Err(e) => {
                tracing::warn!(event = "waiting_for_broker", attempt, url = %crate::config::redact_url(&url), retry_in_secs = wait.as_secs(), error = %e, "the broker is not reachable yet; retrying");
            }
        }
        tokio::select! {
            _ = &mut stop => {
                if let Some(w) = waiting.take() {
                    w.stop().await;
                }
                return Ok(None);
            }
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(std::time::Duration::from_secs(30));
    }
}

/// The HTTP surface of a sidecar still waiting for a broker that refuses
/// it: `/metrics` carries `broker_refused` (docs/runbook.md,
/// broker_refused) until the broker takes the credentials and the whole
/// surface takes the port.
struct Waiting {
    stop: Arc<Notify>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Waiting {
    /// Serves on `http.listen`, when set; a port that cannot be bound is
    /// logged, and the real surface reports it again once connected.
    fn start(config: &Config, alarm: crate::alarms::Alarm) -> Option<Waiting> {
        let addr = config.http.address()?;
        let listener = match std::net::TcpListener::bind(addr) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(event = "http_unavailable", address = %addr, error = %e, "cannot serve /metrics while waiting for the broker");
                return None;
            }
        };
        let stop = Arc::new(Notify::new());
        let done = tokio::spawn(crate::http::serve_waiting(listener, alarm, stop.clone()));
        Some(Waiting { stop, done })
    }

    /// Stops serving and waits until the port is free again.
    async fn stop(self) {
        self.stop.notify_one();
        // Its failure, if any, ends with it: the real surface binds next.
        let _ = self.done.await;
    }
}

/// Ensures the buckets the sidecar may create: its own (floors, duty,
/// gates), and on its own embedded broker every bucket and missing stream.
pub async fn prepare(broker: &Broker, config: &Config, embedded: bool) -> Result<(), String> {
    for spec in contract_buckets(config)
        .into_iter()
        .filter(|s| s.sidecar_owned || embedded)
    {
        match broker.ensure_bucket(&spec).await {
            Ok(Ensured::Created) => {
                tracing::info!(event = "bucket_created", bucket = %spec.name, role = spec.role, "created bucket")
            }
            Ok(Ensured::Existed(have)) => {
                for d in differences(&spec, &have) {
                    tracing::warn!(event = "bucket_differs", bucket = %spec.name, "{d}");
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    if embedded {
        for d in &config.domains {
            if broker
                .ensure_log_stream(d, 1)
                .await
                .map_err(|e| e.to_string())?
            {
                tracing::info!(event = "stream_created", stream = %d.stream, "created the domain's stream on the embedded broker");
            }
        }
    }
    Ok(())
}

async fn serve(
    cli: &Cli,
    server: (String, String),
    broker: Broker,
    config: Config,
    once: bool,
    ticks: Option<u32>,
    embedded: bool,
) -> Exit {
    tracing::info!(
        event = "started",
        node = %config.node.id,
        duty = config.node.duty,
        tick = %config.retention.tick,
        trim_enabled = config.trim.enabled,
        domains = config.domains.len(),
        url = %broker.url,
        "crewlet retention run"
    );
    if let Err(e) = prepare(&broker, &config, embedded).await {
        crate::cli::say::error(format_args!("{e}"));
        return Exit::Unreachable;
    }
    // The replicas left out on purpose, said once as the loop starts (and
    // by every status and run --once).
    for d in &config.domains {
        if !d.replicas.ignore.is_empty() {
            tracing::warn!(event = "replicas_ignored", domain = %d.name, replicas = %d.replicas.ignore.join(","), "domain {}: replicas left out by replicas.ignore (they pin nothing): {}", d.name, crate::human::list(&d.replicas.ignore));
        }
    }
    let mut sidecar = Sidecar::new(config, broker);
    if once {
        // The alarms are printed below, each once; the tick's own
        // alarm_raised log lines would say them twice.
        sidecar.log_alarms = false;
        let report = sidecar.tick().await;
        let status = report.status(&sidecar, Some(server));
        sidecar.duty.release(&sidecar.broker).await;
        // No consumer left behind: the views' watchers go with the process.
        sidecar.broker.close_views().await;
        if cli.json {
            println!("{}", crate::report::status_json_text(&status));
        } else if let crate::tick::duty::DutyStatus::Other {
            holder, claimed_at, ..
        } = &report.duty
        {
            // The normal state of a cron run beside a running fleet.
            println!(
                "{holder} holds the trim duty (claimed at {claimed_at}); this run computed the answer and published and purged nothing"
            );
        }
        if !cli.json {
            // What it leaves out, said on every run as status says it.
            for d in &report.domains {
                if let Some(line) = crate::report::ignored_line(&d.answer) {
                    println!("{}: {}", d.answer.domain, line.trim());
                }
            }
        }
        for a in &report.alarms {
            super::print_alarm(cli, a);
        }
        return if report.broker_failed() {
            Exit::Unreachable
        } else if report.alarms.is_empty() {
            Exit::Ok
        } else {
            Exit::Attention
        };
    }
    let shutdown = Arc::new(Notify::new());
    let signal = shutdown.clone();
    let http_stop = Arc::new(Notify::new());
    let http = match start_http(&mut sidecar, server, http_stop.clone()).await {
        Ok(h) => h,
        Err(exit) => return exit,
    };
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!(
            event = "stopping",
            "signal received: finishing the tick, then releasing the duty"
        );
        signal.notify_one();
    });
    sidecar.run(shutdown, ticks).await;
    // The HTTP surface stops with the loop.
    http_stop.notify_one();
    if let Some(h) = http {
        // Its failure, if any, was logged when it happened.
        let _ = h.await;
    }
    tracing::info!(event = "stopped", "crewlet retention run stopped");
    Exit::Ok
}

/// Binds `http.listen` (when set) and serves the HTTP surface beside the
/// loop, each tick's answer recorded for it. A port that cannot be bound
/// ends the run (exit 2): a sidecar whose metrics nobody can scrape should
/// not look healthy.
async fn start_http(
    sidecar: &mut Sidecar,
    server: (String, String),
    stop: Arc<Notify>,
) -> Result<Option<tokio::sync::oneshot::Receiver<std::io::Result<()>>>, Exit> {
    let Some(addr) = sidecar.config.http.address() else {
        return Ok(None);
    };
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        crate::cli::say::error(format_args!("http.listen {addr}: {e}"));
        Exit::Usage
    })?;
    tracing::info!(event = "http_listening", address = %addr, "serving HTTP");
    let shared = Arc::new(crate::http::Shared::new(
        sidecar.config.clone(),
        sidecar.broker.clone(),
    ));
    let recorder = shared.clone();
    sidecar.observer = Some(Arc::new(
        move |s: &Sidecar, report: &crate::tick::TickReport, took: std::time::Duration| {
            recorder
                .lasting
                .observe(took.as_secs_f64(), report.purged());
            // The last answer read while the broker answered stays the
            // one kept (and served as stale, with its age).
            if let Some(o) = &report.outage {
                recorder.met_outage(o.clone(), report.raised.clone());
                return;
            }
            recorder.record(crate::http::Recorded::of(s, report, Some(server.clone())));
        },
    ));
    let stopped = crate::http::serve_apart(listener, shared, stop).map_err(|e| {
        crate::cli::say::error(format_args!("http.listen {addr}: {e}"));
        Exit::Usage
    })?;
    Ok(Some(stopped))
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
