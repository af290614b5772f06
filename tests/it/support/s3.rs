//! A real S3-compatible server for the cloud archive's tests: moto's server
//! mode (PyPI, installed into .tools/moto by scripts/install-s3-server),
//! started per test on loopback and stopped on drop, with a loopback relay
//! in front of it that a test can cut (the store stopped, refusing
//! connections) or stall (the store accepting and never answering) while
//! moto keeps what it holds.
//!
//! Every store a test names has its credentials given (a credentials file
//! in the test's own directory) and `instance_metadata: false`, and its
//! endpoint on loopback: no client reaches any other address. A missing
//! moto is a loud failure, never a skip.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crewlet::archive::fold::Store;
use crewlet::archive::remote::{Cloud, Remote};

/// Where moto is installed.
pub fn moto_path() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/moto");
    assert!(
        p.join("moto/server.py").exists(),
        "moto is not installed at {}: run scripts/install-s3-server (scripts/install-test-deps does)",
        p.display()
    );
    p
}

const PASS: u8 = 0;
const REFUSE: u8 = 1;
const STALL: u8 = 2;

/// The relay's state, shared with its threads.
#[derive(Default)]
struct Shared {
    mode: AtomicU8,
    /// Cut at the PUT with this number (0: never), counted from when it
    /// was set.
    cut_at_put: AtomicU64,
    puts: AtomicU64,
    open: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn drop_open(&self) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|p| p.into_inner()));
        for s in open {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// A running moto server and the relay in front of it.
pub struct S3 {
    child: Child,
    /// moto's own port (the admin calls go there).
    pub port: u16,
    /// The relay's port: the endpoint every store of the test names.
    pub relay: u16,
    shared: Arc<Shared>,
    pub dir: tempfile::TempDir,
}

impl S3 {
    /// moto on loopback with bucket `bucket`, behind a relay that passes.
    pub fn start(bucket: &str) -> S3 {
        let moto = moto_path();
        let dir = tempfile::tempdir().expect("temp dir");
        let mut last = String::new();
        for _ in 0..5 {
            let port = super::free_port();
            let mut child = Command::new("python3")
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .env("PYTHONPATH", &moto)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start moto");
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut up = false;
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                if super::listening(port) {
                    up = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            if !up {
                let _ = child.kill();
                let _ = child.wait();
                last = format!("moto did not listen on {port}");
                continue;
            }
            let (relay, shared) = relay_to(port);
            let s3 = S3 {
                child,
                port,
                relay,
                shared,
                dir,
            };
            s3.admin(&["create-bucket", bucket]);
            std::fs::write(
                s3.credentials_file(),
                "[default]\naws_access_key_id = crewlet-test\naws_secret_access_key = crewlet-test-secret\n",
            )
            .expect("write credentials");
            return s3;
        }
        panic!("moto did not start in five tries: {last}");
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.relay)
    }

    pub fn credentials_file(&self) -> PathBuf {
        self.dir.path().join("credentials")
    }

    /// The store of `bucket` under `prefix`, as every test names it.
    pub fn remote(&self, bucket: &str, prefix: &str) -> Remote {
        Remote {
            cloud: Cloud::S3,
            bucket: bucket.into(),
            prefix: prefix.into(),
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            allow_http: true,
            credentials_file: Some(self.credentials_file()),
            profile: None,
            instance_metadata: false,
            account: None,
        }
    }

    pub fn store(&self, bucket: &str, prefix: &str) -> Store {
        Store::Cloud(self.remote(bucket, prefix))
    }

    /// Runs tests/it/support/s3_admin.py against moto itself (not the
    /// relay); its standard output.
    pub fn admin(&self, args: &[&str]) -> String {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/s3_admin.py");
        let out = Command::new("python3")
            .arg(script)
            .arg(format!("http://127.0.0.1:{}", self.port))
            .args(args)
            .env("PYTHONPATH", moto_path())
            .env_remove("AWS_PROFILE")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
            .env("AWS_CONFIG_FILE", "/nonexistent")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .expect("run s3_admin.py");
        assert!(
            out.status.success(),
            "s3_admin.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The store stops: every connection through the relay is cut, and
    /// new ones are closed at once.
    pub fn cut(&self) {
        self.shared.mode.store(REFUSE, Ordering::SeqCst);
        self.shared.drop_open();
    }

    /// The store stops as the `n`th PUT from now reaches it (that PUT is
    /// not relayed): a fold cut between one segment and the next.
    pub fn cut_at_put(&self, n: u64) {
        self.shared.puts.store(0, Ordering::SeqCst);
        self.shared.cut_at_put.store(n, Ordering::SeqCst);
    }

    /// The store stops answering: connections are accepted and held, and
    /// nothing is relayed either way.
    pub fn stall(&self) {
        self.shared.mode.store(STALL, Ordering::SeqCst);
        self.shared.drop_open();
    }

    /// The store answers again.
    pub fn pass(&self) {
        self.shared.drop_open();
        self.shared.cut_at_put.store(0, Ordering::SeqCst);
        self.shared.mode.store(PASS, Ordering::SeqCst);
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        self.cut();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback relay to `port` on threads of its own (a test's runtime may
/// block on a subprocess while the relay must go on).
fn relay_to(port: u16) -> (u16, Arc<Shared>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("relay port");
    let relay = listener.local_addr().expect("relay addr").port();
    let shared = Arc::new(Shared::default());
    let sh = shared.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(client) = conn else { continue };
            match sh.mode.load(Ordering::SeqCst) {
                REFUSE => {
                    let _ = client.shutdown(Shutdown::Both);
                }
                STALL => {
                    // Held open, never answered, until the mode changes.
                    if let Ok(c) = client.try_clone() {
                        sh.open.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                    }
                }
                _ => {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                        let _ = client.shutdown(Shutdown::Both);
                        continue;
                    };
                    {
                        let mut kept = sh.open.lock().unwrap_or_else(|p| p.into_inner());
                        for s in [&client, &server] {
                            if let Ok(c) = s.try_clone() {
                                kept.push(c);
                            }
                        }
                    }
                    pipe(&client, &server, Some(sh.clone()));
                    pipe(&server, &client, None);
                }
            }
        }
    });
    (relay, shared)
}

/// Copies `from` to `to`; on the way to the server (`watch`), counts the
/// PUTs and cuts the store at the one [`S3::cut_at_put`] names.
fn pipe(from: &TcpStream, to: &TcpStream, watch: Option<Arc<Shared>>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(sh) = &watch {
                        let at = sh.cut_at_put.load(Ordering::SeqCst);
                        let puts = buf[..n].windows(5).filter(|w| w == b"PUT /").count() as u64;
                        if at > 0
                            && puts > 0
                            && sh.puts.fetch_add(puts, Ordering::SeqCst) + puts >= at
                        {
                            sh.mode.store(REFUSE, Ordering::SeqCst);
                            sh.drop_open();
                            let _ = from.shutdown(Shutdown::Both);
                            break;
                        }
                    }
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// An archive block naming `store`, as YAML's flow mapping (JSON), with
/// these limits (`fold_per_tick` unset: the default).
pub fn archive_yaml(store: &Store, segment_records: u64, fold_per_tick: Option<u64>) -> String {
    let mut a = crewlet::config::ArchiveConfig::of(store);
    a.segment_records = segment_records;
    if let Some(n) = fold_per_tick {
        a.fold_per_tick = n;
    }
    serde_json::to_string(&a).expect("an archive block")
}
