//! Which configuration file to read: `--config`, else `$CREWLET_CONFIG`,
//! else `./crewlet.yaml`, else `/etc/crewlet/crewlet.yaml`. Pure: the
//! caller passes in the flag, the environment value and a way to test for
//! a file, so the order is unit-tested without touching the disk.

use std::path::{Path, PathBuf};

/// The last two places looked at when neither flag nor variable is set.
pub const DEFAULT_PATHS: [&str; 2] = ["./crewlet.yaml", "/etc/crewlet/crewlet.yaml"];

/// No file was found; carries every path tried, in order, and what named
/// the one path when it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFound {
    pub tried: Vec<PathBuf>,
    /// `--config` or `$CREWLET_CONFIG`; `None` for the default places.
    pub named_by: Option<&'static str>,
}

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.named_by, self.tried.first()) {
            (Some(by), Some(path)) => write!(f, "no such file: {} (from {by})", path.display()),
            _ => write!(
                f,
                "no configuration file found; tried {}; pass --config PATH or set CREWLET_CONFIG",
                self.tried
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl std::error::Error for NotFound {}

/// Picks the file. An explicit flag or variable is taken as given (a
/// missing file there is an error naming it, never a silent fallback to
/// another file).
pub fn config_path(
    flag: Option<&Path>,
    env: Option<&str>,
    exists: impl Fn(&Path) -> bool,
) -> Result<PathBuf, NotFound> {
    let explicit = flag.map(|f| (f.to_path_buf(), "--config")).or_else(|| {
        env.filter(|e| !e.is_empty())
            .map(|e| (PathBuf::from(e), "$CREWLET_CONFIG"))
    });
    if let Some((path, by)) = explicit {
        return if exists(&path) {
            Ok(path)
        } else {
            Err(NotFound {
                tried: vec![path],
                named_by: Some(by),
            })
        };
    }
    let tried: Vec<PathBuf> = DEFAULT_PATHS.iter().map(PathBuf::from).collect();
    tried.iter().find(|p| exists(p)).cloned().ok_or(NotFound {
        tried,
        named_by: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(present: &'static [&'static str]) -> impl Fn(&Path) -> bool {
        move |p: &Path| present.iter().any(|q| Path::new(q) == p)
    }

    #[test]
    fn order_of_precedence() {
        let all = only(&[
            "/x.yaml",
            "/env.yaml",
            "./crewlet.yaml",
            "/etc/crewlet/crewlet.yaml",
        ]);
        assert_eq!(
            config_path(Some(Path::new("/x.yaml")), Some("/env.yaml"), &all).unwrap(),
            PathBuf::from("/x.yaml")
        );
        assert_eq!(
            config_path(None, Some("/env.yaml"), &all).unwrap(),
            PathBuf::from("/env.yaml")
        );
        assert_eq!(
            config_path(None, None, &all).unwrap(),
            PathBuf::from("./crewlet.yaml")
        );
        assert_eq!(
            config_path(None, Some(""), only(&["/etc/crewlet/crewlet.yaml"])).unwrap(),
            PathBuf::from("/etc/crewlet/crewlet.yaml")
        );
    }

    #[test]
    fn missing_files_name_every_path_tried() {
        let err = config_path(None, None, only(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no configuration file found; tried ./crewlet.yaml, /etc/crewlet/crewlet.yaml; pass --config PATH or set CREWLET_CONFIG"
        );
        let err = config_path(
            Some(Path::new("/nope.yaml")),
            None,
            only(&["./crewlet.yaml"]),
        )
        .unwrap_err();
        assert_eq!(err.tried, vec![PathBuf::from("/nope.yaml")]);
        assert_eq!(err.to_string(), "no such file: /nope.yaml (from --config)");
        let err = config_path(None, Some("/env.yaml"), only(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no such file: /env.yaml (from $CREWLET_CONFIG)"
        );
    }
}
