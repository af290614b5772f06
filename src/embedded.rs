//! The embedded default: with `nats.url: embedded` the sidecar starts a
//! local nats-server child (loopback only, store under an owner-only data
//! directory), supervises it, and stops it on exit.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// Why the embedded broker could not be started.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("no nats-server binary found (looked at $CREWLET_NATS_SERVER, $NATS_SERVER_BIN, .tools/nats/bin/nats-server and PATH); run scripts/install-nats-server")]
    NoBinary,
    #[error("embedded broker: {0}")]
    Io(String),
    #[error("embedded broker did not accept connections on 127.0.0.1:{port} within {secs}s")]
    NotReady { port: u16, secs: u64 },
}

/// A running child nats-server.
pub struct EmbeddedServer {
    child: Child,
    pub url: String,
    pub store: PathBuf,
}

/// Finds nats-server: `$CREWLET_NATS_SERVER`, `$NATS_SERVER_BIN`, the
/// project-local install (relative to the working directory and to the
/// executable, for `cargo run`), then PATH.
pub fn find_binary() -> Option<PathBuf> {
    for var in ["CREWLET_NATS_SERVER", "NATS_SERVER_BIN"] {
        if let Some(p) = std::env::var_os(var) {
            let p = PathBuf::from(p);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let local = Path::new(".tools/nats/bin/nats-server");
    if local.is_file() {
        return Some(local.to_path_buf());
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/crewlet → the checkout's .tools
        for up in exe.ancestors().skip(1).take(4) {
            let p = up.join(".tools/nats/bin/nats-server");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// Creates `dir` (and parents) readable by the owner only.
pub fn owner_only_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A free loopback port (released just before a server binds it).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EmbeddedServer {
    /// Starts nats-server with JetStream on 127.0.0.1, its store in
    /// `data_dir/store`. `port` 0 picks a free one.
    pub async fn start(data_dir: &Path, port: u16) -> Result<EmbeddedServer, EmbeddedError> {
        Self::start_with_args(data_dir, port, &[]).await
    }

    /// One of `routes.len()` servers of a loopback cluster (for `bench`):
    /// named `name`, routing on `cluster_port` to every port in `routes`.
    pub async fn start_member(
        data_dir: &Path,
        name: &str,
        cluster_port: u16,
        routes: &[u16],
    ) -> Result<EmbeddedServer, EmbeddedError> {
        let routes = routes
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let args = [
            "--server_name".to_string(),
            name.to_string(),
            "--cluster_name".to_string(),
            "crewlet-bench".to_string(),
            "--cluster".to_string(),
            format!("nats://127.0.0.1:{cluster_port}"),
            "--routes".to_string(),
            routes,
        ];
        Self::start_with_args(data_dir, 0, &args).await
    }

    async fn start_with_args(
        data_dir: &Path,
        port: u16,
        extra: &[String],
    ) -> Result<EmbeddedServer, EmbeddedError> {
        let bin = find_binary().ok_or(EmbeddedError::NoBinary)?;
        owner_only_dir(data_dir)
            .map_err(|e| EmbeddedError::Io(format!("{}: {e}", data_dir.display())))?;
        let store = data_dir.join("store");
        owner_only_dir(&store)
            .map_err(|e| EmbeddedError::Io(format!("{}: {e}", store.display())))?;
        let port = if port == 0 {
            free_port().map_err(|e| EmbeddedError::Io(e.to_string()))?
        } else {
            port
        };
        let log = std::fs::File::create(data_dir.join("nats-server.log"))
            .map_err(|e| EmbeddedError::Io(e.to_string()))?;
        let child = Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&store)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| EmbeddedError::Io(format!("starting {}: {e}", bin.display())))?;
        let server = EmbeddedServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            store,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                tracing::info!(event = "embedded_started", url = %server.url, store = %server.store.display(), binary = %bin.display(), "started the embedded nats-server");
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err(EmbeddedError::NotReady { port, secs: 15 })
    }

    /// Stops the child: SIGTERM (it flushes its store), then SIGKILL if it
    /// has not exited within five seconds.
    pub async fn stop(mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a pid we spawned and still own (not yet
            // reaped, so it cannot have been reused) and a valid signal.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        tracing::info!(
            event = "embedded_stopped",
            "stopped the embedded nats-server"
        );
    }
}
