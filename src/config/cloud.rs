//! The checks of a cloud archive's fields (docs/configuration.md, Cloud
//! archives): each names its field and what is allowed. Whether the bucket
//! is there and the credentials may use it is `validate`'s to prove on the
//! network (src/cloud/access.rs).

use super::{ArchiveConfig, Problem};
use crate::archive::remote::{parse_url, Cloud};

pub(super) fn validate(a: &ArchiveConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<Problem>) {
    let mut err = |field: &str, message: String| {
        out.push(Problem::error(at(&format!("archive.{field}")), message));
    };
    let cloud = match a.url.as_deref().map(parse_url) {
        Some(Ok((cloud, _, _))) => Some(cloud),
        Some(Err(e)) => {
            err("url", e.0);
            None
        }
        None => None,
    };
    let set = [
        ("endpoint", a.endpoint.is_some()),
        ("region", a.region.is_some()),
        ("allow_http", a.allow_http.is_some()),
        ("credentials_file", a.credentials_file.is_some()),
        ("profile", a.profile.is_some()),
        ("instance_metadata", a.instance_metadata.is_some()),
        ("account", a.account.is_some()),
    ];
    if a.url.is_none() {
        for (field, is_set) in set {
            if is_set {
                err(
                    field,
                    "is a setting of a cloud archive; it goes with url: (s3://, gs://, az://), which this archive does not set".to_string(),
                );
            }
        }
        return;
    }
    // Not echoed: what precedes an '@' may be a secret.
    if a.endpoint.as_ref().is_some_and(|e| e.contains('@')) {
        err(
            "endpoint",
            "carries credentials (user:secret@), which are never written in the configuration: put them where the cloud's tools look, or in credentials_file".to_string(),
        );
    } else if let Some(e) = &a.endpoint {
        let plain = e.starts_with("http://");
        if !(plain || e.starts_with("https://")) || e.len() <= "https://".len() {
            err(
                "endpoint",
                format!("{e:?} is not an http:// or https:// URL"),
            );
        } else if plain && a.allow_http != Some(true) {
            err(
                "endpoint",
                format!("{e:?} is plain HTTP, which sends the store's requests unencrypted; use https://, or set allow_http: true for a local test store"),
            );
        }
    }
    if a.allow_http == Some(true) && a.endpoint.is_none() {
        err(
            "allow_http",
            "applies to an endpoint of your own; the cloud's own endpoints are HTTPS: set endpoint, or remove allow_http".to_string(),
        );
    }
    if let Some(f) = &a.credentials_file {
        if !f.is_absolute() {
            err(
                "credentials_file",
                format!(
                    "{:?} is relative; write an absolute path",
                    f.display().to_string()
                ),
            );
        }
    }
    let Some(cloud) = cloud else { return };
    let only = |clouds: &[Cloud]| -> Option<String> {
        (!clouds.contains(&cloud)).then(|| {
            let names: Vec<String> = clouds
                .iter()
                .map(|c| format!("{}://", c.scheme()))
                .collect();
            format!(
                "applies only to {}; this archive's url is {}://",
                names.join(" and "),
                cloud.scheme()
            )
        })
    };
    for (field, is_set, clouds) in [
        ("region", a.region.is_some(), &[Cloud::S3][..]),
        ("profile", a.profile.is_some(), &[Cloud::S3][..]),
        ("account", a.account.is_some(), &[Cloud::Azure][..]),
        (
            "credentials_file",
            a.credentials_file.is_some(),
            &[Cloud::S3, Cloud::Gcs][..],
        ),
    ] {
        if is_set {
            if let Some(m) = only(clouds) {
                err(field, m);
            }
        }
    }
}
