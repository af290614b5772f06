//! PURE: an archive in cloud object storage, as the configuration names it
//! (docs/archive-format.md, Cloud object storage): which cloud, which
//! bucket, under which prefix, and the overrides an operator may give.
//! Where the credentials come from is decided by src/cloud/, which reads
//! them; nothing here holds a secret.

use std::path::PathBuf;

use crate::rows::Invalid;

/// Which cloud's protocol the store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cloud {
    /// AWS S3 and every S3-compatible store (MinIO, Ceph, R2, Garage, …).
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
}

impl Cloud {
    pub fn scheme(self) -> &'static str {
        match self {
            Cloud::S3 => "s3",
            Cloud::Gcs => "gs",
            Cloud::Azure => "az",
        }
    }

    /// What an operator calls the bucket.
    pub fn bucket_word(self) -> &'static str {
        match self {
            Cloud::Azure => "container",
            _ => "bucket",
        }
    }
}

/// An archive in cloud object storage: `url:` and its overrides.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Remote {
    pub cloud: Cloud,
    pub bucket: String,
    /// The objects' common prefix, without a leading or trailing `/`
    /// (empty: the bucket's root).
    pub prefix: String,
    /// Another endpoint than the cloud's own (an S3-compatible store).
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Plain HTTP to the endpoint (a local test store); HTTPS otherwise.
    pub allow_http: bool,
    /// The credentials, in the cloud's own file format (AWS's shared
    /// credentials file, a GCS service-account key); unset: where the
    /// cloud's own tools look.
    pub credentials_file: Option<PathBuf>,
    /// The profile of an AWS credentials file (unset: `AWS_PROFILE`, else
    /// `default`).
    pub profile: Option<String>,
    /// Whether the instance's metadata service (an instance role, a
    /// managed identity) may be asked when nothing else gives credentials.
    pub instance_metadata: bool,
    /// The Azure storage account (unset: `AZURE_STORAGE_ACCOUNT_NAME`).
    pub account: Option<String>,
}

impl Remote {
    /// How the published archive state names the store: its URL.
    pub fn id(&self) -> String {
        if self.prefix.is_empty() {
            format!("{}://{}", self.cloud.scheme(), self.bucket)
        } else {
            format!("{}://{}/{}", self.cloud.scheme(), self.bucket, self.prefix)
        }
    }

    /// The object key of segment `name`.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    /// The segment name of object `key`, when it lies under the prefix.
    pub fn name_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            Some(key)
        } else {
            key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
        }
    }
}

/// Splits `url` into its cloud, bucket and prefix; the error says what is
/// allowed.
pub fn parse_url(url: &str) -> Result<(Cloud, String, String), Invalid> {
    let allowed = "write s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX";
    // Not echoed: what precedes an '@' may be a secret.
    if url.contains('@') {
        return Err(format!(
            "the store URL carries credentials (user:secret@), which are never written in the configuration: put them where the cloud's tools look, or in credentials_file; {allowed}"
        ).into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("{url:?} is not a URL; {allowed}").into());
    };
    let cloud = match scheme {
        "s3" => Cloud::S3,
        "gs" => Cloud::Gcs,
        "az" => Cloud::Azure,
        other => {
            return Err(format!(
                "{url:?}: the scheme {other:?} is not a cloud store crewlet knows; {allowed}"
            )
            .into())
        }
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("{url:?} names no {}; {allowed}", cloud.bucket_word()).into());
    }
    let bucket_ok = bucket.len() <= 255
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_'));
    if !bucket_ok {
        return Err(format!(
            "{url:?}: the {} {bucket:?} may hold only lower-case letters, digits, '-', '.' and '_'",
            cloud.bucket_word()
        )
        .into());
    }
    if url.contains(['?', '#']) {
        return Err(format!("{url:?}: a store URL carries no query or fragment; {allowed}").into());
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|p| p == "." || p == "..")
        || prefix.contains("//")
        || prefix.chars().any(|c| c.is_control())
    {
        return Err(format!(
            "{url:?}: the prefix {prefix:?} must be plain path segments (no '.', '..', empty segments or control characters)"
        ).into());
    }
    Ok((cloud, bucket.to_string(), prefix.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(url: &str) -> Remote {
        let (cloud, bucket, prefix) = parse_url(url).expect("parses");
        Remote {
            cloud,
            bucket,
            prefix,
            endpoint: None,
            region: None,
            allow_http: false,
            credentials_file: None,
            profile: None,
            instance_metadata: true,
            account: None,
        }
    }

    #[test]
    fn a_url_names_the_cloud_the_bucket_and_the_prefix() {
        assert_eq!(
            parse_url("s3://acme-archive/crewlet/prod/"),
            Ok((Cloud::S3, "acme-archive".into(), "crewlet/prod".into()))
        );
        assert_eq!(
            parse_url("gs://b"),
            Ok((Cloud::Gcs, "b".into(), String::new()))
        );
        assert_eq!(
            parse_url("az://c/p"),
            Ok((Cloud::Azure, "c".into(), "p".into()))
        );
    }

    #[test]
    fn a_bad_url_says_what_is_allowed() {
        for (url, says) in [
            ("acme-archive/crewlet", "is not a URL"),
            ("http://acme/crewlet", "not a cloud store"),
            ("s3:///crewlet", "names no bucket"),
            ("az:///x", "names no container"),
            ("s3://Acme/x", "lower-case"),
            ("s3://a/x?versionId=1", "no query"),
            ("s3://AKIA:hunter2@a/x", "credentials"),
            ("s3://a/x/../y", "plain path segments"),
            ("s3://a/x//y", "plain path segments"),
        ] {
            let e = parse_url(url).expect_err(url).0;
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("hunter2"), "never echoes a secret: {e}");
        }
    }

    #[test]
    fn keys_sit_under_the_prefix_and_come_back_to_names() {
        let r = remote("s3://a/crewlet/prod");
        let key = r.key("LOG/1/00000000000000000001-00000000000000000010.seg");
        assert_eq!(
            key,
            "crewlet/prod/LOG/1/00000000000000000001-00000000000000000010.seg"
        );
        assert_eq!(
            r.name_of(&key),
            Some("LOG/1/00000000000000000001-00000000000000000010.seg")
        );
        assert_eq!(r.name_of("crewlet/production/x"), None);
        let root = remote("s3://a");
        assert_eq!(root.key("x/1/y.seg"), "x/1/y.seg");
        assert_eq!(root.id(), "s3://a");
        assert_eq!(r.id(), "s3://a/crewlet/prod");
    }
}
