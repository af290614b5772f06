//! The duty lease's compare-and-set renewal, and the fence permit it
//! grants (docs/trim-floor.md, Fencing).
//!
//! A purge is sent only with a [`FencePermit`], and a permit exists only
//! where this module made one: after the broker acknowledged an update of
//! the lease on the revision we held, or after a re-read showed that this
//! very renewal (its own `renewal` id) landed. A permit is a deadline, not
//! a moment: the lease was stored no earlier than the request was sent, so
//! it lives at least a TTL from then by the broker's clock; the permit ends
//! `window` after the send (the TTL less the clock skew allowed and one read
//! timeout, so that a purge sent just before the deadline is applied before
//! anyone else may claim the lease). The TTL is the duty bucket's own
//! `max_age` where that is shorter than the configuration's: the broker
//! expires the lease by the bucket, whoever created it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant as Monotonic;

use super::kv::CasError;
use super::{Broker, Fault};
use crate::rows::{DutyRow, OpId, Timestamp, DUTY_KEY};

/// Licence for one purge: granted by a renewal of the duty lease the
/// broker took, valid until its deadline. Only `src/broker/` makes one, and
/// [`Broker::purge_to`] takes it by value: one fence, one purge.
#[derive(Debug)]
pub struct FencePermit {
    deadline: Monotonic,
}

impl FencePermit {
    /// What is left of the permit, or `None` once its deadline has passed.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .checked_duration_since(Monotonic::now())
            .filter(|d| !d.is_zero())
    }
}

/// Our side of the lease, as one renewal writes it.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub bucket: &'a str,
    pub holder: &'a str,
    pub session: &'a str,
    pub claimed_at: Timestamp,
    /// How long after a renewal is sent its permit lasts.
    pub window: Duration,
}

/// How a renewal ended.
#[derive(Debug)]
pub enum Renewal {
    /// The broker took it (or a re-read showed this renewal's own value).
    Held { revision: u64, permit: FencePermit },
    /// The broker answered that the key is not at our revision: a definite
    /// refusal, whatever the key now holds (someone else wrote it, even if
    /// with our holder and session).
    Refused,
    /// After a lost answer the key holds another write than ours: the lease
    /// is gone.
    Lost,
    /// No answer, and the re-read could not settle it. `tried` are the
    /// `renewal` ids of the writes that may have landed: the next renewal
    /// settles them first.
    Unknown { error: String, tried: Vec<String> },
}

impl Lease<'_> {
    /// The lease row of one write: a fresh `renewal` id and the broker
    /// time of the write (`now`, our clock moved by the offset last read).
    pub fn row(&self, renewal: &str, now: DateTime<Utc>) -> Vec<u8> {
        let row = DutyRow {
            holder: self.holder.to_string(),
            session: self.session.to_string(),
            claimed_at: self.claimed_at,
            renewed_at: Some(Timestamp(now)),
            renewal: Some(renewal.to_string()),
            format: crate::rows::FORMAT,
        };
        serde_json::to_vec(&row).unwrap_or_default()
    }
}

impl Broker {
    /// The duty bucket's `max_age`, by which the broker expires the lease
    /// (`None`: there is no such bucket), within the read timeout.
    pub async fn lease_max_age(&self, bucket: &str) -> Result<Option<Duration>, Fault> {
        let settings = self
            .bounded(&format!("bucket {bucket}"), self.bucket_settings(bucket))
            .await?;
        Ok(settings.map(|s| s.max_age))
    }

    /// Renews the lease on `revision`. A definite refusal is
    /// [`Renewal::Refused`]; only an answer that never came is settled by
    /// re-reading the key: this renewal's own `renewal` id there means it
    /// landed; the key still at `revision` with our session means it did
    /// not (it is sent again, at most three times in all); anything else is
    /// a lease lost. `earlier` are the ids of an earlier renewal that was
    /// never settled ([`Renewal::Unknown`]): the key is re-read first, and
    /// one of them there means that write landed and its revision is ours.
    pub async fn renew_lease(
        &self,
        lease: &Lease<'_>,
        revision: u64,
        earlier: &[String],
        now: DateTime<Utc>,
    ) -> Renewal {
        let mut revision = revision;
        let mut tried: Vec<String> = earlier.to_vec();
        // Writes of ours whose answers never came (an earlier renewal's and
        // this one's): one of them may still land.
        let mut unanswered: Vec<String> = earlier.to_vec();
        if !unanswered.is_empty() {
            match self.settle(lease, revision, &unanswered).await {
                Ok(Settled::Landed(rev, _)) => {
                    revision = rev;
                    unanswered.clear();
                }
                Ok(Settled::NotLanded) => {}
                Ok(Settled::Lost) => return Renewal::Lost,
                Err(error) => {
                    return Renewal::Unknown {
                        error: error.to_string(),
                        tried,
                    }
                }
            }
        }
        let mut last_error = String::new();
        let mut sent: Vec<(String, Monotonic)> = Vec::new();
        for _ in 0..3 {
            let renewal = OpId::mint(Utc::now()).to_string();
            let started = Monotonic::now();
            sent.push((renewal.clone(), started));
            tried.push(renewal.clone());
            let update = self.kv_update(lease.bucket, DUTY_KEY, lease.row(&renewal, now), revision);
            let mut refused = false;
            match tokio::time::timeout(self.read_timeout, update).await {
                Ok(Ok(rev)) => {
                    return Renewal::Held {
                        revision: rev,
                        permit: FencePermit {
                            deadline: started + lease.window,
                        },
                    }
                }
                // A refusal is a refusal, unless the key moved on to a write
                // of ours whose answer was lost (it landed after the re-read
                // that found it missing): only that write's own id, re-read,
                // makes the lease ours.
                Ok(Err(CasError::Conflict { .. })) | Ok(Err(CasError::Exists { .. })) => {
                    if unanswered.is_empty() {
                        return Renewal::Refused;
                    }
                    refused = true;
                }
                Ok(Err(CasError::Failed { reason, .. })) => {
                    last_error = reason;
                    unanswered.push(renewal.clone());
                }
                Err(_) => {
                    last_error =
                        format!("no answer within {}", crate::config::Dur(self.read_timeout));
                    unanswered.push(renewal.clone());
                }
            }
            match self.settle(lease, revision, &unanswered).await {
                Ok(Settled::Landed(rev, id)) => {
                    // A write of this renewal: its permit runs from when it
                    // was sent.
                    if let Some((_, sent_at)) = sent.iter().find(|(i, _)| *i == id) {
                        return Renewal::Held {
                            revision: rev,
                            permit: FencePermit {
                                deadline: *sent_at + lease.window,
                            },
                        };
                    }
                    // An earlier renewal's: the lease is ours; renew on it
                    // for a permit of this renewal's own.
                    revision = rev;
                    unanswered.clear();
                }
                Ok(Settled::NotLanded) if refused => return Renewal::Refused,
                Ok(Settled::NotLanded) => {}
                Ok(Settled::Lost) if refused => return Renewal::Refused,
                Ok(Settled::Lost) => return Renewal::Lost,
                Err(e) => {
                    return Renewal::Unknown {
                        error: format!("{last_error}; re-reading: {e}"),
                        tried,
                    }
                }
            }
        }
        Renewal::Unknown {
            error: last_error,
            tried,
        }
    }

    /// Re-reads the lease after writes whose answers were lost: one of
    /// `ids` there has landed; the key still at `revision` under our
    /// session has not; anything else is another's lease.
    async fn settle(
        &self,
        lease: &Lease<'_>,
        revision: u64,
        ids: &[String],
    ) -> Result<Settled, super::Fault> {
        let read = self.kv_entry(lease.bucket, DUTY_KEY);
        let entry = match tokio::time::timeout(self.read_timeout, read).await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(Fault::failed(format!(
                    "no answer within {}",
                    crate::config::Dur(self.read_timeout)
                )))
            }
        };
        let Some(entry) = entry else {
            return Ok(Settled::Lost);
        };
        let Ok(row) = DutyRow::parse(DUTY_KEY, &entry.value) else {
            return Ok(Settled::Lost);
        };
        if let Some(id) = ids
            .iter()
            .find(|id| row.renewal.as_deref() == Some(id.as_str()))
        {
            return Ok(Settled::Landed(entry.revision, id.clone()));
        }
        if row.session == lease.session && entry.revision == revision {
            return Ok(Settled::NotLanded);
        }
        Ok(Settled::Lost)
    }
}

/// What a re-read after a lost answer found.
enum Settled {
    /// The write with this id landed, at this revision.
    Landed(u64, String),
    /// The key is where we left it: the write did not land.
    NotLanded,
    /// Someone else's write is there, or nothing.
    Lost,
}
