//! The KV buckets of the contract and the settings `init` gives them
//! (docs/contract.md). Pure: which buckets exist and how they are set is derived
//! from the configuration; the broker module creates and reads them.

use std::time::Duration;

use crate::config::Config;

/// One bucket as the contract wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpec {
    /// The `buckets.*` field it comes from (`presence`, `floors`, …).
    pub role: &'static str,
    pub name: String,
    /// Values kept per key.
    pub history: i64,
    /// The bucket's TTL; zero keeps values for ever. On presence and duty
    /// this is the lease: expiry is the broker's clock.
    pub max_age: Duration,
    /// Written by the sidecar itself (floors, duty, gates), so `run` may
    /// create it. Node-written buckets are only ever created by `init`.
    pub sidecar_owned: bool,
    /// `buckets.replicas`.
    pub replicas: usize,
}

/// Every bucket of the contract, in contract order.
pub fn contract_buckets(config: &Config) -> Vec<BucketSpec> {
    let b = &config.buckets;
    let r = &config.retention;
    let spec = |role, name: &str, max_age, sidecar_owned| BucketSpec {
        role,
        name: name.to_string(),
        history: 1,
        max_age,
        sidecar_owned,
        replicas: b.replicas,
    };
    vec![
        spec("presence", &b.presence, r.presence_ttl.0, false),
        spec("positions", &b.positions, Duration::ZERO, false),
        spec("holds", &b.holds, Duration::ZERO, false),
        spec("backups", &b.backups, Duration::ZERO, false),
        spec("snapshots", &b.snapshots, Duration::ZERO, false),
        spec("floors", &b.floors, Duration::ZERO, true),
        spec("duty", &b.duty, r.duty_ttl(), true),
        spec("gates", &b.gates, Duration::ZERO, true),
        spec("erasures", &b.erasures, Duration::ZERO, true),
    ]
}

/// The settings of a bucket that already exists, as the broker reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSettings {
    pub history: i64,
    pub max_age: Duration,
    pub replicas: usize,
}

/// Each way `have` differs from `spec`, as a sentence for a warning.
pub fn differences(spec: &BucketSpec, have: &BucketSettings) -> Vec<String> {
    let mut out = Vec::new();
    if have.max_age != spec.max_age {
        out.push(format!(
            "bucket {} ({}) has max_age {} but the configuration wants {}",
            spec.name,
            spec.role,
            show(have.max_age),
            show(spec.max_age)
        ));
    }
    if have.replicas != spec.replicas {
        out.push(format!(
            "bucket {} ({}) has {} replica(s) but buckets.replicas is {}; change it with: nats stream edit KV_{} --replicas {}",
            spec.name, spec.role, have.replicas, spec.replicas, spec.name, spec.replicas
        ));
    }
    if have.history != spec.history {
        out.push(format!(
            "bucket {} ({}) keeps history {} but the contract uses {}",
            spec.name, spec.role, have.history, spec.history
        ));
    }
    out
}

fn show(d: Duration) -> String {
    if d.is_zero() {
        "none (values never expire)".into()
    } else {
        crate::config::Dur(d).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::check;

    fn config() -> Config {
        check("node: {id: n1}\nretention: {tick: 5s, presence_ttl: 20s, backup_owner: x}\ndomains: [{name: t, stream: T}]\n")
            .config
            .expect("valid")
    }

    #[test]
    fn leases_get_their_ttls() {
        let specs = contract_buckets(&config());
        assert_eq!(specs.len(), 9);
        let by = |role: &str| {
            specs
                .iter()
                .find(|s| s.role == role)
                .cloned()
                .expect("present")
        };
        assert_eq!(by("presence").max_age, Duration::from_secs(20));
        assert_eq!(by("duty").max_age, Duration::from_secs(15), "three ticks");
        assert!(by("floors").max_age.is_zero());
        let owned: Vec<_> = specs
            .iter()
            .filter(|s| s.sidecar_owned)
            .map(|s| s.role)
            .collect();
        assert_eq!(owned, ["floors", "duty", "gates", "erasures"]);
    }

    #[test]
    fn differences_are_named() {
        let spec = contract_buckets(&config()).remove(0);
        assert!(differences(
            &spec,
            &BucketSettings {
                history: 1,
                max_age: Duration::from_secs(20),
                replicas: 1,
            }
        )
        .is_empty());
        let d = differences(
            &spec,
            &BucketSettings {
                history: 5,
                max_age: Duration::ZERO,
                replicas: 3,
            },
        );
        assert_eq!(d.len(), 3);
        assert!(
            d[0].contains("max_age none (values never expire) but the configuration wants 20s"),
            "{}",
            d[0]
        );
        assert!(
            d[1].contains("has 3 replica(s) but buckets.replicas is 1"),
            "{}",
            d[1]
        );
    }
}
