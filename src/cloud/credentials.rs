//! Where an archive's cloud credentials come from
//! (docs/configuration.md, Cloud archive credentials): the file the YAML
//! names, else the places the cloud's own tools look. AWS's shared files
//! are read here (the object_store crate reads only the environment); the
//! other clouds' sources are the crate's own.
//!
//! Nothing read here is ever logged or put in an error: an error names the
//! file and the profile, never a value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A static AWS key pair (and session token), as a credentials file holds
/// it.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsKeys {
    // Never prints the secret, whatever prints the keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// The sections of an INI file as AWS writes its shared files: `[name]`
/// headers, `key = value` lines, `#` and `;` comments. A key before any
/// section belongs to none and is ignored, as the AWS tools do.
pub fn sections(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
            out.entry(section.clone())
                .or_default()
                .insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    out
}

/// The keys of `profile` in a shared credentials file's text.
pub fn aws_keys(text: &str, profile: &str) -> Result<AwsKeys, String> {
    let all = sections(text);
    let Some(section) = all.get(profile) else {
        let known: Vec<&str> = all.keys().map(String::as_str).collect();
        return Err(format!(
            "has no profile [{profile}] (it has: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    let get = |k: &str| section.get(k).filter(|v| !v.is_empty()).cloned();
    match (get("aws_access_key_id"), get("aws_secret_access_key")) {
        (Some(id), Some(secret)) => Ok(AwsKeys {
            access_key_id: id,
            secret_access_key: secret,
            session_token: get("aws_session_token"),
        }),
        _ => Err(format!(
            "profile [{profile}] needs both aws_access_key_id and aws_secret_access_key"
        )),
    }
}

/// The region of `profile` in a shared config file's text (`[default]`
/// or `[profile NAME]`).
pub fn aws_region(text: &str, profile: &str) -> Option<String> {
    let all = sections(text);
    let section = if profile == "default" {
        all.get("default")
    } else {
        all.get(&format!("profile {profile}"))
    };
    section?.get("region").filter(|r| !r.is_empty()).cloned()
}

/// The environment the lookups read, passed in so that tests need not
/// change the process's.
pub trait Env {
    fn var(&self, key: &str) -> Option<String>;
}

/// The process's environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.is_empty())
    }
}

/// The AWS profile: the YAML's, else `AWS_PROFILE`, else `default`.
pub fn aws_profile(configured: Option<&str>, env: &dyn Env) -> String {
    configured
        .map(str::to_string)
        .or_else(|| env.var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_string())
}

/// The shared file `var` names, else `~/.aws/NAME`.
pub fn aws_shared_file(env: &dyn Env, var: &str, name: &str) -> Option<PathBuf> {
    env.var(var).map(PathBuf::from).or_else(|| {
        env.var("HOME")
            .map(|h| Path::new(&h).join(".aws").join(name))
    })
}

/// Reads `profile`'s keys from the credentials file at `path`; the error
/// names the file (never a value in it).
pub fn read_aws_keys(path: &Path, profile: &str) -> Result<AwsKeys, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("credentials file {}: {e}", path.display()))?;
    aws_keys(&text, profile).map_err(|e| format!("credentials file {} {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(&'static [(&'static str, &'static str)]);
    impl Env for Vars {
        fn var(&self, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    const FILE: &str = "\
# written by aws configure
[default]
aws_access_key_id = AKIDEFAULT
aws_secret_access_key = s3cr3t

[crewlet]
aws_access_key_id=AKICREWLET
aws_secret_access_key = other
aws_session_token = tok
[half]
aws_access_key_id = AKIHALF
";

    #[test]
    fn a_profiles_keys_are_read_and_a_missing_one_is_named() {
        let d = aws_keys(FILE, "default").expect("default");
        assert_eq!(d.access_key_id, "AKIDEFAULT");
        assert_eq!(d.secret_access_key, "s3cr3t");
        assert_eq!(d.session_token, None);
        let c = aws_keys(FILE, "crewlet").expect("crewlet");
        assert_eq!(c.session_token.as_deref(), Some("tok"));
        let e = aws_keys(FILE, "prod").expect_err("prod");
        assert_eq!(e, "has no profile [prod] (it has: crewlet, default, half)");
        let e = aws_keys(FILE, "half").expect_err("half");
        assert!(e.contains("needs both"), "{e}");
    }

    #[test]
    fn a_secret_is_never_printed() {
        let k = aws_keys(FILE, "default").expect("default");
        assert!(!format!("{k:?}").contains("s3cr3t"));
    }

    #[test]
    fn the_region_and_the_profile_come_from_where_the_aws_tools_look() {
        let config = "[default]\nregion = eu-west-1\n[profile crewlet]\nregion = us-east-2\n";
        assert_eq!(aws_region(config, "default").as_deref(), Some("eu-west-1"));
        assert_eq!(aws_region(config, "crewlet").as_deref(), Some("us-east-2"));
        assert_eq!(aws_region(config, "other"), None);
        assert_eq!(aws_profile(None, &Vars(&[])), "default");
        assert_eq!(aws_profile(None, &Vars(&[("AWS_PROFILE", "p")])), "p");
        assert_eq!(aws_profile(Some("y"), &Vars(&[("AWS_PROFILE", "p")])), "y");
        assert_eq!(
            aws_shared_file(
                &Vars(&[("HOME", "/home/op")]),
                "AWS_SHARED_CREDENTIALS_FILE",
                "credentials"
            ),
            Some(PathBuf::from("/home/op/.aws/credentials"))
        );
        assert_eq!(
            aws_shared_file(
                &Vars(&[
                    ("HOME", "/home/op"),
                    ("AWS_SHARED_CREDENTIALS_FILE", "/etc/c")
                ]),
                "AWS_SHARED_CREDENTIALS_FILE",
                "credentials"
            ),
            Some(PathBuf::from("/etc/c"))
        );
    }
}
