//! The broker's side of the log's adoption mark (docs/contract.md, The mark
//! on the log's own configuration): the two `crewlet.*` keys written into
//! the log stream's `metadata` by one stream update that sends every other
//! setting back exactly as the broker returned it, then read back and
//! compared.

use serde_json::Value;

use super::{Broker, Fault};
use crate::rows::{Mark, Timestamp};

/// Metadata keys the broker writes itself (2.11 and later: `_nats.ver`,
/// `_nats.req.level`, …): it may set them afresh on any update, so the
/// read-back does not compare them.
const BROKER_METADATA_PREFIX: &str = "_nats.";

impl Broker {
    /// Writes the mark `adopted_at` / `floors_created` into `stream`'s
    /// configuration and verifies it. The update carries the configuration
    /// as the leader returned it a moment before, fields this program does
    /// not know included, so nothing else can change; the read-back
    /// proves it (a difference is an error naming the fields, and is
    /// logged: the update was taken). The broker offers no expected
    /// revision for a stream update: docs/decisions.md says why the
    /// window left is accepted.
    pub async fn write_mark(
        &self,
        stream: &str,
        adopted_at: Timestamp,
        floors_created: Timestamp,
    ) -> Result<(), Fault> {
        let Some(read) = self.raw_config(stream).await? else {
            return Err(Fault::Missing(format!("stream {stream} does not exist")));
        };
        let mut wanted = read;
        let Some(config) = wanted.as_object_mut() else {
            return Err(Fault::failed(format!(
                "stream {stream}: its configuration is not an object"
            )));
        };
        let metadata = config
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if metadata.is_null() {
            *metadata = Value::Object(Default::default());
        }
        let Some(metadata) = metadata.as_object_mut() else {
            return Err(Fault::failed(format!(
                "stream {stream}: its metadata is not an object"
            )));
        };
        for (k, v) in Mark::keys(adopted_at, floors_created) {
            metadata.insert(k.to_string(), Value::String(v));
        }
        let reply: Value = self
            .ask(
                &format!("the mark's update of {stream}"),
                format!("STREAM.UPDATE.{stream}"),
                &wanted,
            )
            .await?;
        if let Some(err) = reply.get("error") {
            return Err(
                match serde_json::from_value::<async_nats::jetstream::Error>(err.clone()) {
                    Ok(e) => Fault::refused(&e, format!("stream {stream}: the mark's update: {e}")),
                    Err(_) => Fault::failed(format!("stream {stream}: the mark's update: {err}")),
                },
            );
        }
        let Some(back) = self.raw_config(stream).await? else {
            return Err(Fault::Missing(format!("stream {stream} does not exist")));
        };
        let differ = differing_fields(&comparable(&wanted), &comparable(&back));
        if differ.is_empty() {
            Ok(())
        } else {
            tracing::warn!(event = "mark_readback_differs", stream, fields = %differ.join(","), "the stream's configuration read back after the mark's update differs from what was sent");
            Err(Fault::failed(format!(
                "stream {stream}: the configuration read back after the mark's update differs in {}",
                differ.join(", ")
            )))
        }
    }
}

/// The configuration without the keys the broker writes itself.
fn comparable(config: &Value) -> Value {
    let mut c = config.clone();
    if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        m.retain(|k, _| !k.starts_with(BROKER_METADATA_PREFIX));
    }
    c
}

/// PURE: the top-level fields (and metadata keys) where `a` and `b` differ.
fn differing_fields(a: &Value, b: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        match (a.get(k.as_str()), b.get(k.as_str())) {
            (Some(x), Some(y)) if x == y => {}
            (Some(Value::Object(x)), Some(Value::Object(y))) if k == "metadata" => {
                let mut inner: Vec<&String> = x.keys().chain(y.keys()).collect();
                inner.sort();
                inner.dedup();
                out.extend(
                    inner
                        .into_iter()
                        .filter(|i| x.get(i.as_str()) != y.get(i.as_str()))
                        .map(|i| format!("metadata.{i}")),
                );
            }
            _ => out.push(k.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_read_back_names_what_differs_and_ignores_the_brokers_own_metadata() {
        let sent = json!({"name": "L", "max_bytes": 10, "metadata": {"crewlet.adopted_at": "a", "_nats.ver": "2.11"}});
        let same = json!({"name": "L", "max_bytes": 10, "metadata": {"crewlet.adopted_at": "a", "_nats.ver": "2.12", "_nats.level": "1"}});
        assert!(differing_fields(&comparable(&sent), &comparable(&same)).is_empty());
        let other = json!({"name": "L", "max_bytes": 11, "metadata": {"crewlet.adopted_at": "b"}, "max_age": 5});
        assert_eq!(
            differing_fields(&comparable(&sent), &comparable(&other)),
            vec!["max_age", "max_bytes", "metadata.crewlet.adopted_at"]
        );
    }
}
