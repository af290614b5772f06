//! The archive in a local directory: a segment is durable once its file is
//! written to a temporary name, fsynced, renamed into place and the
//! directory fsynced (a crash leaves either no segment or the whole one,
//! never half). A segment that exists is never overwritten: the same bytes
//! are a re-fold (idempotent), other bytes are an error.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::state::Listed;
use super::{segment, Put};

/// Why the directory store did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{path} exists with other content than this fold wrote; it is never overwritten (check what wrote it, and verify-archive)")]
    Conflict { path: String },
    #[error("{0} is not a segment name")]
    BadName(String),
    #[error("{path}: a write of it from an earlier call has not returned yet (the directory stopped answering?); it is not written twice at once")]
    Busy { path: String },
}

/// The files a write of this process is on, each until its call returns,
/// even one its caller gave up on ([`claim`]).
static IN_FLIGHT: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A file a write is on, released when the write returns.
struct Claim(PathBuf);

impl Drop for Claim {
    fn drop(&mut self) {
        if let Ok(mut set) = IN_FLIGHT.lock() {
            set.remove(&self.0);
        }
    }
}

/// Claims `path` for one write. A write given up on a hung mount may wake
/// later and go on: two writes through the same temporary file could then
/// interleave, and the one linked into place be truncated by the other.
fn claim(path: &Path) -> Result<Claim, DirError> {
    let busy = || DirError::Busy {
        path: path.display().to_string(),
    };
    let mut set = IN_FLIGHT.lock().map_err(|_| busy())?;
    if !set.insert(path.to_path_buf()) {
        return Err(busy());
    }
    Ok(Claim(path.to_path_buf()))
}

fn io(path: &Path, e: std::io::Error) -> DirError {
    DirError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// A segment name (`<stream>/<generation>/<first>-<last>.seg`) as a path
/// under `root`; a name that is not one (`..`, absolute) is refused.
fn path_of(root: &Path, name: &str) -> Result<PathBuf, DirError> {
    segment::parse_name(name).ok_or_else(|| DirError::BadName(name.to_string()))?;
    if name
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(DirError::BadName(name.to_string()));
    }
    Ok(root.join(name))
}

fn sync_dir(dir: &Path) -> Result<(), DirError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

/// Writes `bytes` durably to a hidden temporary file beside `path`
/// (`.<file>.<what>-<pid>`), removed again if the write fails.
fn write_beside(path: &Path, what: &str, bytes: &[u8]) -> Result<PathBuf, DirError> {
    let dir = path.parent().unwrap_or(path);
    let tmp = dir.join(format!(
        ".{}.{what}-{}",
        path.file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(&tmp, e));
    }
    Ok(tmp)
}

/// Writes segment `name` durably, unless it is already there.
pub fn put(root: &Path, name: &str, bytes: &[u8]) -> Result<Put, DirError> {
    let path = path_of(root, name)?;
    let _claim = claim(&path)?;
    put_claimed(root, &path, bytes)
}

fn put_claimed(root: &Path, path: &Path, bytes: &[u8]) -> Result<Put, DirError> {
    if let Some(existing) = read_if_there(path)? {
        return if existing == bytes {
            Ok(Put::AlreadyThere)
        } else {
            Err(DirError::Conflict {
                path: path.display().to_string(),
            })
        };
    }
    let dir = path.parent().unwrap_or(root).to_path_buf();
    fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let tmp = write_beside(path, "tmp", bytes)?;
    // Another fold may have put the same segment meanwhile: rename only
    // over nothing (hard_link fails if the target exists), so that an
    // existing segment is never replaced.
    match fs::hard_link(&tmp, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(&tmp);
            return put_claimed(root, path, bytes);
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(io(path, e));
        }
    }
    fs::remove_file(&tmp).map_err(|e| io(&tmp, e))?;
    sync_dir(&dir)?;
    Ok(Put::Written)
}

/// Replaces segment `name` with `bytes` (an erasure's rewrite): written
/// and synced under a temporary name and read back, then renamed over the
/// old one in one step, then the directory synced. A reader sees the old segment whole or
/// the new one whole, never neither.
pub fn replace(root: &Path, name: &str, bytes: &[u8]) -> Result<(), DirError> {
    let path = path_of(root, name)?;
    let _claim = claim(&path)?;
    let dir = path.parent().unwrap_or(root).to_path_buf();
    let tmp = write_beside(&path, "erasing", bytes)?;
    // Read back before the old one goes: the rename is the removal.
    match fs::read(&tmp) {
        Ok(back) if back == bytes => {}
        Ok(_) => {
            let _ = fs::remove_file(&tmp);
            return Err(DirError::Conflict {
                path: tmp.display().to_string(),
            });
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(io(&tmp, e));
        }
    }
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_file(&tmp);
        return Err(io(&path, e));
    }
    sync_dir(&dir)
}

/// Whether a fold could write under `root`: a file can be created,
/// synced and removed in it or, while it does not exist yet (the first
/// fold creates it), in the nearest directory above it that does. Nothing
/// is left behind.
pub fn check_writable(root: &Path) -> Result<(), DirError> {
    let mut at = root;
    while !at.exists() {
        at = at.parent().unwrap_or(Path::new("/"));
    }
    if !at.is_dir() {
        return Err(io(at, std::io::Error::other("is not a directory")));
    }
    let probe = at.join(format!(".crewlet-probe-{}", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"probe").and_then(|()| f.sync_all()));
    let _ = fs::remove_file(&probe);
    written.map_err(|e| io(at, e))
}

fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>, DirError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path, e)),
    }
}

/// The bytes of segment `name`.
pub fn get(root: &Path, name: &str) -> Result<Vec<u8>, DirError> {
    let path = path_of(root, name)?;
    fs::read(&path).map_err(|e| io(&path, e))
}

/// Every segment of `stream` at `generation`, in sequence order, with its
/// size. A file there that is not a segment name (a temporary file of a
/// fold that crashed) is not listed.
pub fn list(root: &Path, stream: &str, generation: u64) -> Result<Vec<Listed>, DirError> {
    let dir = root.join(stream).join(generation.to_string());
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io(&dir, e))?;
        let file = entry.file_name().to_string_lossy().to_string();
        let name = format!("{stream}/{generation}/{file}");
        if let Some((_, _, first_seq, last_seq)) = segment::parse_name(&name) {
            let bytes = entry.metadata().map_err(|e| io(&entry.path(), e))?.len();
            out.push(Listed {
                name,
                first_seq,
                last_seq,
                bytes,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_is_durable_idempotent_and_never_overwrites() {
        let root = tempfile::tempdir().expect("dir");
        let a = segment::name("S", 0, 1, 10);
        let b = segment::name("S", 0, 11, 20);
        assert_eq!(put(root.path(), &b, b"two").expect("put"), Put::Written);
        assert_eq!(put(root.path(), &a, b"one").expect("put"), Put::Written);
        assert_eq!(
            put(root.path(), &a, b"one").expect("again"),
            Put::AlreadyThere
        );
        assert!(matches!(
            put(root.path(), &a, b"other"),
            Err(DirError::Conflict { .. })
        ));
        assert_eq!(get(root.path(), &a).expect("get"), b"one");
        // A leftover temporary file is not a segment.
        std::fs::write(root.path().join("S/0/.junk.tmp-1"), b"x").expect("junk");
        let names: Vec<String> = list(root.path(), "S", 0)
            .expect("list")
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names, [a, b]);
        assert!(list(root.path(), "S", 1).expect("list").is_empty());
        assert!(matches!(
            put(root.path(), "../x.seg", b""),
            Err(DirError::BadName(_))
        ));
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_segment() {
        let root = tempfile::tempdir().expect("dir");
        let blocked = root.path().join("file");
        std::fs::write(&blocked, b"not a directory").expect("file");
        let name = segment::name("S", 0, 1, 10);
        assert!(matches!(
            put(&blocked, &name, b"x"),
            Err(DirError::Io { .. })
        ));
    }
}
