//! The HTTP surface measured as scrapers and dashboards use it.

use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::config::Config;
use crate::tick::Sidecar;

use super::measure::*;
use super::world::*;

/// One GET over a fresh loopback connection: how long until the whole
/// answer was read. (A measuring tool, not a client: it sends one fixed
/// request and reads to the close, blocking, so that the load it makes
/// is the requests and not a runtime of its own.)
pub(super) fn timed_get(port: u16, path: &str, token: &str) -> Result<f64, String> {
    use std::io::{Read, Write};
    let t = Instant::now();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    // As Prometheus and browsers ask: compressed.
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
    c.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(1 << 18);
    c.read_to_end(&mut out).map_err(|e| e.to_string())?;
    if !out.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "{path}: {}",
            String::from_utf8_lossy(&out[..out.len().min(80)])
        ));
    }
    Ok(ms(t.elapsed()))
}

/// The HTTP surface's figures (docs/http.md): `/metrics` and `/v1/retention`
/// under a bounded load of concurrent requests on loopback (p99), and the
/// tick with that load against the tick without it, interleaved.
pub(super) async fn http_lines(
    broker: &Broker,
    config: &Config,
    samples: usize,
) -> Result<Vec<Line>, String> {
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let dir = std::env::temp_dir().join(format!("crewlet-bench-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let token = crate::http::tokens::mint()?;
    let file = crate::http::tokens::TokenFile {
        tokens: vec![crate::http::tokens::Entry {
            name: "bench".into(),
            sha256: crate::http::tokens::hash(&token),
            scopes: vec!["read".into()],
        }],
    };
    let tokens_file = dir.join("tokens.yaml");
    crate::http::tokens::store(&tokens_file, &file)?;
    let mut config = config.clone();
    config.http.tokens_file = Some(tokens_file);
    let shared = Arc::new(crate::http::Shared::new(config.clone(), broker.clone()));
    let stop = Arc::new(tokio::sync::Notify::new());
    // Served as `retention run` serves it: on a thread of its own.
    let server = crate::http::serve_apart(listener, shared.clone(), stop.clone())
        .map_err(|e| e.to_string())?;
    let mut sidecar = Sidecar::new(config.clone(), broker.clone());
    sidecar.log_alarms = false;
    // As `retention run` records each tick's answer.
    let record = |s: &Sidecar, r: &crate::tick::TickReport| {
        shared.record(crate::http::Recorded::of(s, r, None));
    };
    let r = holding(&mut sidecar).await?;
    record(&sidecar, &r);
    // Four clients, each a request every 10 ms (400 a second, far above
    // any scrape), while the window is open. Each is a thread of its own,
    // started once, blocking on its socket, as scrapers are processes of
    // their own: on the loop's runtime they would measure its scheduling,
    // not the answers, and a thread or runtime started per sample would
    // measure its own start. Independent scrapers do not keep step: each
    // window gives each client a fresh phase in the 10 ms period, drawn at
    // random, so they sometimes ask at once and sometimes apart.
    const CLIENTS: usize = 4;
    // The clients' window: how many have opened, whether the last is still
    // open, whether the scenario is over. Each client answers every window
    // once (with nothing, if it woke after the window closed), so the loop
    // never waits on a client that missed one.
    #[derive(Clone, Copy, Default)]
    struct Window {
        opened: u64,
        open: bool,
        over: bool,
    }
    let window = Arc::new((
        std::sync::Mutex::new(Window::default()),
        std::sync::Condvar::new(),
    ));
    let set_window = |open: bool, over: bool| {
        let (lock, changed) = &*window;
        let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
        w.opened += u64::from(open);
        (w.open, w.over) = (open, over);
        changed.notify_all();
    };
    let (gave, mut windows) = tokio::sync::mpsc::unbounded_channel::<Vec<Timed>>();
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let (window, gave, token) = (window.clone(), gave.clone(), token.clone());
        let path = if i % 2 == 0 {
            "/metrics"
        } else {
            "/v1/retention"
        };
        clients.push(std::thread::spawn(move || {
            let (lock, changed) = &*window;
            let now = || *lock.lock().unwrap_or_else(|p| p.into_inner());
            let mut served = 0;
            loop {
                served = {
                    let mut w = lock.lock().unwrap_or_else(|p| p.into_inner());
                    while w.opened == served && !w.over {
                        w = changed.wait(w).unwrap_or_else(|p| p.into_inner());
                    }
                    if w.over {
                        return;
                    }
                    w.opened
                };
                let phase = getrandom::u64().unwrap_or(0) % 10_000;
                std::thread::sleep(Duration::from_micros(phase));
                let mut got = Vec::new();
                while matches!(now(), w if w.open && w.opened == served) {
                    got.push(timed_get(port, path, &token).map(|l| (i % 2, l)));
                    std::thread::sleep(Duration::from_millis(10));
                }
                if gave.send(got).is_err() {
                    return;
                }
            }
        }));
    }
    drop(gave);
    let (mut quiet, mut loaded, mut latencies) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_path: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // Quiet then loaded in even samples, loaded then quiet in odd ones:
    // whatever follows from a tick's place (the full read every
    // `retention.full_read_every` ticks lands on one parity; what the tick
    // before left warm) falls on both halves alike.
    for k in 0..samples {
        for loaded_now in [k % 2 == 1, k % 2 == 0] {
            if !loaded_now {
                let t = Instant::now();
                let r = writing_tick(&mut sidecar).await;
                quiet.push(ms(t.elapsed()));
                record(&sidecar, &r);
                continue;
            }
            // The clients' window: from 20 ms before the tick until its
            // answer is recorded.
            set_window(true, false);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let t = Instant::now();
            let r = writing_tick(&mut sidecar).await;
            loaded.push(ms(t.elapsed()));
            record(&sidecar, &r);
            set_window(false, false);
            for _ in 0..CLIENTS {
                let got = windows
                    .recv()
                    .await
                    .ok_or("the bench's HTTP clients stopped")?;
                for l in got {
                    let (which, l) = l?;
                    latencies.push(l);
                    by_path[which].push(l);
                }
            }
        }
    }
    set_window(false, true);
    for c in clients {
        c.join()
            .map_err(|_| "the bench's HTTP clients panicked".to_string())?;
    }
    let sizes = shared.last_sizes().unwrap_or_default();
    // The answer the surface keeps after each tick, written straight
    // (`status_json_text`) against the same bytes made through a value
    // first, as they were before (docs/performance.md), interleaved.
    let last = sidecar.tick().await;
    let kept = crate::http::Recorded::of(&sidecar, &last, None).status;
    let (mut straight, mut through) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        let a = crate::report::status_json_text(&kept);
        straight.push(ms(t.elapsed()));
        let t = Instant::now();
        let b = crate::report::status_json(&kept).to_string();
        through.push(ms(t.elapsed()));
        if a != b {
            return Err("the kept answer written straight differs from the value's".into());
        }
    }
    sidecar.duty.release(&sidecar.broker).await;
    stop.notify_one();
    let _ = server.await;
    let _ = std::fs::remove_dir_all(&dir);
    latencies.sort_by(|a, b| a.total_cmp(b));
    let p99 = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0);
    let p50 = latencies.get(latencies.len() / 2).copied().unwrap_or(0.0);
    let requests = Stats {
        median: p99,
        min: p50,
        max: latencies.last().copied().unwrap_or(0.0),
        n: latencies.len(),
    };
    let mut p99_line = line(
        "http: p99 of /metrics and /v1/retention (4 clients, 10 ms apart, gzip)",
        &requests,
        None,
        None,
        Some(5.0),
    );
    let p99_of = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let (metrics_p99, status_p99) = (p99_of(&mut by_path[0]), p99_of(&mut by_path[1]));
    p99_line.value = format!(
        "{:.2} ms p99 (p50 {:.2}, max {:.2}, n={}; /metrics {:.2}, /v1/retention {:.2}; answers of {} and {})",
        p99,
        p50,
        requests.max,
        requests.n,
        metrics_p99,
        status_p99,
        crate::human::bytes(sizes.1),
        crate::human::bytes(sizes.0)
    );
    Ok(vec![
        p99_line,
        line(
            "http: tick under that load (10k rows)",
            &stats(loaded),
            Some(&stats(quiet)),
            Some(1.1),
            None,
        ),
        line(
            "http: the kept answer, written straight (10k rows)",
            &stats(straight),
            Some(&stats(through)),
            None,
            None,
        ),
    ])
}

/// One client request's latency, with which path it was (0 `/metrics`,
/// 1 `/v1/retention`).
pub(super) type Timed = Result<(usize, f64), String>;
