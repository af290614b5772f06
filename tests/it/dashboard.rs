//! The dashboard (http.md, Dashboard) in a real headless Chromium against a
//! real sidecar and nats-server: what an on-call engineer sees, and that
//! the browser contacted nothing but the sidecar on loopback.
//!
//! Chromium is Debian's package (`scripts/install-test-deps` installs it);
//! the test runs the real binary, not the wrapper script, with every
//! phone-home switched off, a dead proxy and a resolver that resolves
//! nothing, and reads Chromium's own network log afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::http::Served;
use crate::support::fleet::*;
use crate::support::Scratch;

const CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// What one headless load of a page left behind.
struct Load {
    /// The DOM after the page's scripts ran (with `--dump-dom`).
    dom: String,
    net: NetLog,
}

/// What Chromium's own network log says was asked for and contacted.
#[derive(Debug, Default)]
struct NetLog {
    /// URLs the page asked for: the main frame and every request the page
    /// initiated (its origin is the initiator).
    page: Vec<String>,
    /// URLs the browser asked for on its own behalf (update checks,
    /// accounts, autofill): each must have died at the dead proxy.
    browser: Vec<String>,
    /// Every address a TCP connection was attempted to.
    attempted: Vec<String>,
    /// Every address a TCP connection was made to.
    connected: Vec<String>,
    /// The request lines sent (`GET /v1/retention HTTP/1.1`).
    lines: Vec<String>,
    /// UDP datagrams sent (the resolver's reachability probes connect a UDP
    /// socket, which sends nothing; QUIC is off).
    udp_sent: usize,
}

/// Loads `url` in headless Chromium for `budget_ms` of virtual time (timers
/// and fetches run to completion within it), dumping the DOM or, with
/// `screenshot`, writing a PNG there.
fn chromium(url: &str, budget_ms: u64, screenshot: Option<&Path>) -> Load {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: scripts/install-test-deps installs Debian's chromium"
    );
    let scratch = Scratch::new();
    let profile = scratch.dir.path().join("profile");
    let netlog = scratch.dir.path().join("netlog.json");
    let mut cmd = Command::new(CHROMIUM);
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--window-size=1200,860",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--log-net-log={}", netlog.display()))
    .arg(format!("--virtual-time-budget={budget_ms}"));
    // Root cannot have Chromium's sandbox; CI runs tests as root.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--no-sandbox");
    }
    match screenshot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().expect("start chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Load {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        net: net_log(&netlog, url),
    }
}

/// Reads a Chromium net log (a log cut short at exit lacks its closing
/// brackets; it is completed before parsing).
fn net_log(path: &Path, page: &str) -> NetLog {
    let text = std::fs::read_to_string(path).expect("chromium wrote its net log");
    let v: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .expect("a net log that parses");
    let types: std::collections::HashMap<u64, String> = v["constants"]["logEventTypes"]
        .as_object()
        .expect("event types")
        .iter()
        .filter_map(|(name, id)| Some((id.as_u64()?, name.clone())))
        .collect();
    let origin = page.split('/').take(3).collect::<Vec<_>>().join("/");
    let events = v["events"].as_array().expect("events");
    assert!(!events.is_empty(), "an empty net log proves nothing");
    let mut net = NetLog::default();
    for e in events {
        let kind = e["type"]
            .as_u64()
            .and_then(|t| types.get(&t))
            .map_or("", String::as_str);
        let p = &e["params"];
        let s = |k: &str| p[k].as_str().map(str::to_string);
        match kind {
            "URL_REQUEST_START_JOB" => {
                let Some(url) = s("url") else { continue };
                let by_page = s("initiator").as_deref() == Some(origin.as_str())
                    || s("request_type").as_deref() == Some("main frame");
                if by_page {
                    net.page.push(url);
                } else {
                    net.browser.push(url);
                }
            }
            "HTTP_TRANSACTION_SEND_REQUEST_HEADERS" => net
                .lines
                .extend(s("line").map(|l| l.trim_end().to_string())),
            "TCP_CONNECT_ATTEMPT" => net.attempted.extend(s("address")),
            "TCP_CONNECT" => net.connected.extend(s("remote_address")),
            "UDP_BYTES_SENT" => net.udp_sent += 1,
            _ => {}
        }
    }
    net
}

/// The page asked only for the sidecar, and nothing but the sidecar on
/// loopback was connected to: the browser's own requests died at the dead
/// proxy.
fn only_the_sidecar(load: &Load, port: u16) {
    let ours = format!("127.0.0.1:{port}");
    let net = &load.net;
    let elsewhere: Vec<&String> = net
        .page
        .iter()
        .filter(|u| !u.starts_with(&format!("http://{ours}/")))
        .collect();
    assert!(elsewhere.is_empty(), "the page asked for {elsewhere:?}");
    assert!(
        !net.page.is_empty(),
        "the net log names no page request: {net:?}"
    );
    let connected: Vec<&String> = net.connected.iter().filter(|a| **a != ours).collect();
    assert!(connected.is_empty(), "connected to {connected:?}: {net:?}");
    let attempted: Vec<&String> = net
        .attempted
        .iter()
        .filter(|a| **a != ours && a.as_str() != "127.0.0.1:9")
        .collect();
    assert!(attempted.is_empty(), "tried to connect to {attempted:?}");
    assert_eq!(net.udp_sent, 0, "UDP datagrams sent");
}

fn requests_to(load: &Load, path: &str) -> usize {
    load.net.page.iter().filter(|u| u.ends_with(path)).count()
}

/// The DOM from `marker` (an attribute of the element wanted) on.
fn section<'a>(dom: &'a str, marker: &str) -> &'a str {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in the DOM:\n{dom}"));
    &dom[start..]
}

/// The words of `html` as a reader sees them: no style, script or tags.
fn text(html: &str) -> String {
    let blocks = regex::Regex::new(r"(?s)<(style|script)>.*?</(style|script)>").expect("regex");
    let tags = regex::Regex::new(r"<[^>]*>").expect("regex");
    let html = blocks.replace_all(html, " ");
    tags.replace_all(&html, " ")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fleet in which node-3, not live, pins `applied` at 40 (the trim_held
/// alarm, with its remedy), served by a sidecar with HTTP on.
async fn pinned_fleet() -> (Fleet, Served) {
    let f = Fleet::new(100).await;
    f.healthy(&[("node-1", 100), ("node-2", 100)], 100).await;
    f.position("node-3", 40).await;
    f.snapshot("node-3", 40).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let s = Served::start_with(&f, ", held_alarm_after: 0s");
    (f, s)
}

#[tokio::test]
async fn the_dashboard_shows_why_and_the_fix_and_contacts_only_the_sidecar() {
    let (_f, s) = pinned_fleet().await;
    let reader = s.token("dashboard", "read");
    // The tick after the purge: the log held at 40.
    assert!(
        eventually(20, || async {
            let (_, body) = s.get("/v1/retention", Some(&reader));
            crate::http::json(&body)["domains"][0]["first_seq"] == 41
        })
        .await,
        "the tick after the purge"
    );
    // The page itself needs no token, and is served locked down.
    let (code, page) = s.get("/", None);
    assert_eq!(code, 200);
    assert!(page.contains("crewlet retention"), "{page}");
    assert!(!page.contains("{{TICK_MS}}") && page.contains(r#"content="1000""#));

    // The token from the fragment: the data, refreshed every tick.
    let url = format!("http://127.0.0.1:{}/#token={reader}", s.port);
    let load = chromium(&url, 4500, None);
    only_the_sidecar(&load, s.port);
    assert!(
        requests_to(&load, "/v1/retention") >= 2,
        "refreshes every tick (1 s here): {:?}",
        load.net.page
    );
    // The fragment never reaches the server: the request lines sent.
    assert!(
        load.net.lines.iter().any(|l| l == "GET / HTTP/1.1"),
        "{:?}",
        load.net.lines
    );
    assert!(
        !load.net.lines.iter().any(|l| l.contains(&reader)),
        "{:?}",
        load.net.lines
    );
    let dom = &load.dom;
    assert!(
        dom.contains(r#"id="token-form" hidden"#),
        "no prompt with a good token"
    );
    // Prose first: the status sentence, then the domain, then the alarms.
    let all = text(dom);
    let prose = all
        .find("tracker is trimmed up to 40 and held there: node-3 is not live")
        .unwrap_or_else(|| panic!("the status sentence:\n{all}"));
    let domain = all
        .find(&format!("tracker ({STREAM})"))
        .unwrap_or_else(|| panic!("the domain heading:\n{all}"));
    let alarms = all.find("Alarms").expect("the alarms heading");
    assert!(prose < domain && domain < alarms, "{all}");
    // The capacity bar: bytes against the soft ceiling, the reserve above.
    let d = text(section(dom, r#"data-domain="tracker""#));
    assert!(d.contains("of the soft ceiling is free"), "{d}");
    assert!(
        d.contains("soft ceiling 960.0 MiB, max_bytes 1.0 GiB, gate reserve 64.0 MiB above the soft ceiling"),
        "{d}"
    );
    assert!(dom.contains(r#"class="reserve""#) && dom.contains(r#"class="used""#));
    // The terms on one line: each a mark at its seq or its state in words,
    // the binding one emphasised, trim_to and the floor marked.
    assert!(
        dom.contains(r#"class="lane binding" data-term="applied" data-state="value""#),
        "applied binds: {dom}"
    );
    assert!(d.contains("applied 40 node-3 (binding)"), "{d}");
    // What the pin holds: 41..=100 would go without node-3.
    assert!(
        d.contains("applied 40 node-3 (binding) — holding back 60 records, about ")
            && d.contains(", pinned since "),
        "{d}"
    );
    assert!(
        d.contains("min_hold unbounded: does not bound the trim"),
        "{d}"
    );
    assert!(d.contains("archive_floor n/a"), "{d}");
    assert!(d.contains("backup_floor 100 b1 on node-1"), "{d}");
    assert!(d.contains("trim_to 40") && d.contains("floor 41"), "{d}");
    assert!(
        d.contains("first_seq 41") && d.contains("last_seq 100"),
        "{d}"
    );
    assert!(d.contains("replica_floor unbounded"), "{d}");
    assert_eq!(dom.matches(r#"class="lane"#).count(), 8, "eight terms");
    // The alarm with its remedy, a command that exists.
    let a = text(section(dom, r#"data-alarm="trim_held""#));
    assert!(
        a.contains("Fix:") || dom.contains(r#"class="remedy""#),
        "the remedy: {a}"
    );
    assert!(
        a.contains("crewlet retention evict node-3 -confirm node-3"),
        "{a}"
    );

    // A screenshot of the same: a real picture of the page, not a blank.
    let shots = Scratch::new();
    let png = shots.dir.path().join("dashboard.png");
    let load = chromium(&url, 3000, Some(&png));
    only_the_sidecar(&load, s.port);
    let picture = picture(&png);
    assert_eq!((picture.width, picture.height), (1200, 860));
    // The binding term is drawn in its colour (#b3261e), the reserve
    // hatched in its (#f0c36d): the data arrived and was drawn.
    assert!(
        picture.has_colour([0xb3, 0x26, 0x1e]),
        "no binding mark drawn"
    );
    assert!(picture.has_colour([0xf0, 0xc3, 0x6d]), "no reserve drawn");
    if let Some(keep) = std::env::var_os("CREWLET_DASHBOARD_SCREENSHOT") {
        std::fs::copy(&png, PathBuf::from(keep)).expect("keep the screenshot");
    }
    let logs = s.stop();
    assert!(!logs.contains(&reader), "a token in the sidecar's logs");
}

#[tokio::test]
async fn without_a_good_token_the_page_asks_for_one_and_shows_nothing() {
    let (_f, s) = pinned_fleet().await;
    let writer = s.token("writer", "trim,ack");
    // No token: the prompt, and no request for the data at all.
    let load = chromium(&format!("http://127.0.0.1:{}/", s.port), 2000, None);
    only_the_sidecar(&load, s.port);
    assert_eq!(
        requests_to(&load, "/v1/retention"),
        0,
        "{:?}",
        load.net.page
    );
    assert!(
        load.dom.contains(r#"<main id="view" hidden"#),
        "no data shown"
    );
    assert!(
        !load.dom.contains(r#"id="token-form" hidden"#),
        "the prompt"
    );
    assert!(text(&load.dom).contains("read token"));
    // A token that is not one, or lacks the read scope: refused, said so,
    // asked again, nothing shown.
    for (token, said) in [
        ("crewlet_not-a-token", "401 unauthorized"),
        (writer.as_str(), "403 forbidden"),
    ] {
        let load = chromium(
            &format!("http://127.0.0.1:{}/#token={token}", s.port),
            2000,
            None,
        );
        only_the_sidecar(&load, s.port);
        let all = text(&load.dom);
        assert!(
            all.contains(&format!("The token was refused ({said})")),
            "{all}"
        );
        assert!(load.dom.contains(r#"<main id="view" hidden"#));
        assert!(!all.contains("node-3"), "nothing of the answer: {all}");
        assert_eq!(
            requests_to(&load, "/v1/retention"),
            1,
            "asked once, not again with a refused token"
        );
    }
    s.stop();
}

/// An RGB picture decoded from a PNG.
struct Picture {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Picture {
    fn has_colour(&self, want: [u8; 3]) -> bool {
        self.rgb
            .chunks_exact(3)
            .filter(|p| {
                p.iter()
                    .zip(want)
                    .all(|(a, b)| (i16::from(*a) - i16::from(b)).abs() <= 6)
            })
            .count()
            > 20
    }
}

fn picture(png: &Path) -> Picture {
    let file = std::fs::File::open(png).expect("chromium wrote the screenshot");
    let decoder = png::Decoder::new(std::io::BufReader::new(file));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let bytes = &buf[..info.buffer_size()];
    let rgb = match info.color_type {
        png::ColorType::Rgb => bytes.to_vec(),
        png::ColorType::Rgba => bytes
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        other => panic!("an unexpected PNG colour type {other:?}"),
    };
    Picture {
        width: info.width,
        height: info.height,
        rgb,
    }
}

/// An operator's trial: a page opened with the broker gone says that no
/// answer is available and why (the JSON route answers 503 `unreachable`;
/// the page had said "not loaded" beside "STALE … 31 s old" over nothing).
#[tokio::test]
async fn opened_with_the_broker_gone_the_page_says_no_answer_is_available() {
    let (mut f, s) = pinned_fleet().await;
    let reader = s.token("dashboard", "read");
    assert!(
        eventually(20, || async {
            s.get("/v1/retention", Some(&reader)).0 == 200
        })
        .await,
        "the first tick"
    );
    f.server.kill();
    assert!(
        eventually(10, || async {
            s.get("/v1/retention", Some(&reader)).0 == 503
        })
        .await,
        "unreachable"
    );
    let url = format!("http://127.0.0.1:{}/#token={reader}", s.port);
    let load = chromium(&url, 2500, None);
    only_the_sidecar(&load, s.port);
    // Opened during the outage, the page has no answer of its own to
    // call stale: it says none is available, and why, and gives no age.
    let stale = text(section(&load.dom, r#"id="stale""#));
    assert!(
        stale.contains("No answer is available: the broker cannot be reached")
            && stale.contains(&f.server.url())
            && !stale.contains("STALE")
            && !stale.contains("s old"),
        "{stale}"
    );
    let meta = text(section(&load.dom, r#"id="meta""#));
    assert!(meta.contains("no answer to show"), "{meta}");
    s.stop();
}
