//! The broker's side of `erase`: how many records one subject has on a
//! log, a purge filtered to that subject below a sequence (never one
//! without the filter, never a sequence of 0: either would delete what
//! must stay), and replacing an archive segment in an Object Store.

use super::{Broker, Fault};

impl Broker {
    /// A JetStream API request (`$JS.API.` + `subject`) answered within
    /// the read timeout; an error answer is an error.
    async fn js_request(
        &self,
        subject: String,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, super::Fault> {
        let reply: serde_json::Value = self.ask(&subject, subject.clone(), &body).await?;
        if let Some(err) = reply.get("error") {
            let error: async_nats::jetstream::Error =
                serde_json::from_value(err.clone()).map_err(|e| {
                    Fault::failed(format!(
                        "{subject}: an error answer that does not parse ({e})"
                    ))
                })?;
            return Err(Fault::failed(format!("{subject}: {error}")));
        }
        Ok(reply)
    }

    /// How many records `subject` has on `stream`, and the stream's last
    /// sequence, from one stream-info answer (so the count is of records
    /// at or below that sequence).
    pub async fn subject_count(
        &self,
        stream: &str,
        subject: &str,
    ) -> Result<(u64, u64), super::Fault> {
        let reply = self
            .js_request(
                format!("STREAM.INFO.{stream}"),
                serde_json::json!({"subjects_filter": subject}),
            )
            .await?;
        // A count of 0 from a leaderless member would read as erased.
        super::door::led_raw(stream, &reply)?;
        let state = &reply["state"];
        let last = state["last_seq"].as_u64().ok_or_else(|| {
            Fault::failed(format!("stream {stream}: the answer carries no last_seq"))
        })?;
        let count = state["subjects"][subject].as_u64().unwrap_or(0);
        Ok((count, last))
    }

    /// Purges the records on `subject` below `below` (`{"filter", "seq"}`):
    /// the records of that subject with a lower sequence, no other. Returns
    /// how many went.
    pub async fn purge_subject_below(
        &self,
        stream: &str,
        subject: &str,
        below: u64,
    ) -> Result<u64, super::Fault> {
        // Dangers 0.1 and 0.5 of the broker's behaviour: a seq of 0 or no
        // filter would purge the whole subject or stream.
        if subject.is_empty() || below == 0 {
            return Err(Fault::failed(format!(
                "refusing a purge of {stream} without a subject and a sequence"
            )));
        }
        let reply = self
            .js_request(
                format!("STREAM.PURGE.{stream}"),
                serde_json::json!({"filter": subject, "seq": below}),
            )
            .await?;
        if reply["success"].as_bool() != Some(true) {
            return Err(Fault::failed(format!(
                "stream {stream}: the purge answered {reply}"
            )));
        }
        Ok(reply["purged"].as_u64().unwrap_or(0))
    }

    /// Replaces segment `name` in `bucket` with `bytes`: written first
    /// under a temporary name and read back, then put over the old one and
    /// read back, then the temporary one removed. Until the second put the
    /// old segment is whole; after it the new one is.
    pub async fn replace_segment(
        &self,
        bucket: &str,
        name: &str,
        bytes: &[u8],
        op: &str,
    ) -> Result<(), super::Fault> {
        let store = self.object_store(bucket).await?;
        let temporary = format!("{name}.erasing.{op}");
        let put = |n: String| {
            let store = store.clone();
            async move {
                let mut reader = bytes;
                store
                    .put(n.as_str(), &mut reader)
                    .await
                    .map(|_| ())
                    .map_err(|e| Fault::failed(format!("writing {n} to {bucket}: {e}")))
            }
        };
        put(temporary.clone()).await?;
        if self.get_segment(bucket, &temporary).await?.as_deref() != Some(bytes) {
            return Err(Fault::failed(format!(
                "{bucket}/{temporary} did not read back as written"
            )));
        }
        put(name.to_string()).await?;
        if self.get_segment(bucket, name).await?.as_deref() != Some(bytes) {
            return Err(Fault::failed(format!(
                "{bucket}/{name} did not read back as written"
            )));
        }
        store
            .delete(temporary.as_str())
            .await
            .map_err(|e| Fault::failed(format!("removing {bucket}/{temporary}: {e}")))
    }
}
