//! The archive in cloud object storage, against moto's S3-compatible server
//! on loopback (installed by scripts/install-s3-server): the fold of
//! 100,000 records of 200 bytes against bare PUTs of the same segment
//! bytes by the same client, and the archived idle tick against the same
//! tick without an archive.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::archive::fold::{fold, Store};
use crate::archive::remote::{Cloud, Remote};
use crate::broker::Broker;
use crate::config::Config;

use super::measure::*;

const BUCKET: &str = "crewlet-bench";

/// moto, stopped on drop.
struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts moto on a free loopback port and makes the bench's bucket.
fn start_moto(dir: &Path) -> Result<(Moto, u16), String> {
    let moto = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join(".tools/moto");
    if !moto.join("moto/server.py").exists() {
        return Err(format!(
            "moto is not installed at {}: run scripts/install-s3-server (scripts/bench does)",
            moto.display()
        ));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let child = Command::new("python3")
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
        .map_err(|e| format!("starting moto: {e}"))?;
    let server = Moto(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("moto did not listen on {port} within 30 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let made = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:{port}', aws_access_key_id='bench', aws_secret_access_key='bench', region_name='us-east-1').create_bucket(Bucket='{BUCKET}')"
        ))
        .env("PYTHONPATH", &moto)
        .status()
        .map_err(|e| e.to_string())?;
    if !made.success() {
        return Err("moto did not make the bench's bucket".into());
    }
    let credentials = dir.join("bench-aws-credentials");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = bench\naws_secret_access_key = bench-secret\n",
    )
    .map_err(|e| e.to_string())?;
    Ok((server, port))
}

fn remote(port: u16, dir: &Path, prefix: &str) -> Remote {
    Remote {
        cloud: Cloud::S3,
        bucket: BUCKET.into(),
        prefix: prefix.into(),
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        region: Some("us-east-1".into()),
        allow_http: true,
        credentials_file: Some(dir.join("bench-aws-credentials")),
        profile: None,
        instance_metadata: false,
        account: None,
    }
}

/// The cloud archive's figures (docs/performance.md, The archive). `log`
/// holds 100,000 records of 200 bytes from the archive scenario's stream
/// `stream` (created at `created`); `tick_config` is the tick scenario's.
pub(super) async fn cloud_lines(
    js: &Broker,
    url: &str,
    dir: &Path,
    tick_config: &Config,
    samples: usize,
) -> Result<Vec<Line>, String> {
    const N: u64 = 100_000;
    const LOG: &str = "BENCH_CLOUD_LOG";
    eprintln!("starting moto and publishing 100,000 records of 200 bytes of text …");
    let (_moto, port) = start_moto(dir)?;
    // Text records, not the other scenarios' one repeated byte: those
    // compress to almost nothing, and the PUTs this fold is measured
    // against would weigh nothing.
    let super::archive::FoldLog {
        broker,
        target,
        limits,
        ..
    } = super::archive::fold_log(js, url, LOG, N, true).await?;
    let deadline = || tokio::time::Instant::now() + Duration::from_secs(120);
    let runs = samples.max(3);
    let (mut folds, mut puts, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let t = Instant::now();
        let n = js.bare_slice(LOG, 1, N).await?;
        raw.push(ms(t.elapsed()));
        if n as u64 != N {
            return Err(format!("the raw read saw {n} records, not {N}"));
        }
        let store = Store::Cloud(remote(port, dir, &format!("fold-{i}")));
        let t = Instant::now();
        let f = fold(&broker, &store, &target, (0, N), limits, deadline())
            .await
            .map_err(|e| e.to_string())?;
        folds.push(ms(t.elapsed()));
        if f.frontier != N || f.already_there != 0 {
            return Err(format!(
                "the fold stopped at {} ({} already there)",
                f.frontier, f.already_there
            ));
        }
        // The same segments' bytes, put again by the same client under
        // other names: one PUT each, nothing read or checked.
        let mut segments = Vec::new();
        for l in &f.written {
            segments.push((l.name.clone(), store.get(&broker, &l.name).await?));
        }
        let bare = crate::cloud::client(
            &remote(port, dir, &format!("bare-{i}")),
            broker.read_timeout(),
        )?;
        let t = Instant::now();
        for (name, bytes) in &segments {
            bare.put_segment(name, bytes).await?;
        }
        puts.push(ms(t.elapsed()));
        let listed = bare.listing(LOG, 0).await.map_err(|e| e.message)?;
        if listed.len() != segments.len() {
            return Err(format!(
                "{} bare PUTs listed {} objects",
                segments.len(),
                listed.len()
            ));
        }
    }
    let folds = stats(folds);
    let mut lines = vec![
        line(
            "archive: fold 100,000 × 200 B into S3 (moto), vs bare PUTs",
            &folds,
            Some(&stats(puts)),
            Some(1.25),
            None,
        ),
        // The same fold against the raw read of its records: the broker's
        // share, which on loopback outweighs the store's.
        line(
            "archive: fold 100,000 × 200 B into S3 (moto), vs raw read",
            &folds,
            Some(&stats(raw)),
            Some(1.25),
            None,
        ),
    ];
    let _ = js.delete_stream(LOG).await;
    lines.push(
        super::archive::idle_tick_against(
            (js, &broker, url),
            ("cl", &Store::Cloud(remote(port, dir, "tick"))),
            tick_config,
            samples,
            "archive: tick, archived in S3, nothing to fold (10k rows)",
        )
        .await?,
    );
    Ok(lines)
}
