//! The trim duty lease (floor.md, Trim duty and Fencing; contract.md, duty):
//! claimed with create, renewed every tick with update on the last
//! revision, given up on shutdown by deleting with the last revision. The
//! bucket's `max_age` is the TTL, so expiry is the broker's clock and a
//! holder that dies is replaced within one TTL.
//!
//! Every purge is fenced by a compare-and-set renewal immediately before it
//! ([`Duty::fence`]): a read that a replica may answer proves nothing, an
//! update on the revision we hold does. A renewal whose answer was lost is
//! re-read and retried, not abandoned for a whole TTL.

use chrono::Utc;

use crate::broker::kv::{CasError, KvEntry};
use crate::broker::Broker;
use crate::rows::{DutyRow, Instant, OpId, DUTY_KEY};

/// What this sidecar knows about the duty after a tick's attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DutyStatus {
    /// We hold it under our session.
    Held,
    /// Someone else holds it (or held it: a lease we lost).
    Other {
        holder: String,
        session: String,
        claimed_at: Instant,
    },
    /// Nobody holds it and we may not claim it (`node.duty: false`).
    Free,
    /// The duty bucket could not be read.
    Unknown(String),
}

/// This process's side of the lease.
#[derive(Debug)]
pub struct Duty {
    bucket: String,
    holder: String,
    /// Minted per process: a restarted sidecar never resumes a lease it
    /// held before, it waits for it to expire like anyone else.
    session: String,
    claimed_at: Instant,
    /// The revision we last wrote, while we hold the lease.
    revision: Option<u64>,
    /// The last renewal's answer was lost and could not be settled: the
    /// lease may still be ours (the next renewal tells), but this tick
    /// does not act on it.
    unsettled: bool,
    may_claim: bool,
}

/// How a renewal ended.
enum Renewed {
    Held(u64),
    /// Someone else wrote the key (or it expired): the lease is gone.
    Lost,
    /// No answer we can trust, and the re-read could not settle it.
    Unknown(String),
}

impl Duty {
    pub fn new(bucket: &str, holder: &str, may_claim: bool) -> Duty {
        let now = Utc::now();
        Duty {
            bucket: bucket.to_string(),
            holder: holder.to_string(),
            session: OpId::mint(now).to_string(),
            claimed_at: Instant(now),
            revision: None,
            unsettled: false,
            may_claim,
        }
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn claimed_at(&self) -> Instant {
        self.claimed_at
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Whether this sidecar holds the duty for this tick.
    pub fn holds(&self) -> bool {
        self.revision.is_some() && !self.unsettled
    }

    fn row(&self) -> Vec<u8> {
        let row = DutyRow {
            holder: self.holder.clone(),
            session: self.session.clone(),
            claimed_at: self.claimed_at,
        };
        serde_json::to_vec(&row).unwrap_or_default()
    }

    /// Whether `entry` is our lease (our session wrote it).
    fn is_ours(&self, entry: &KvEntry) -> bool {
        DutyRow::parse(DUTY_KEY, &entry.value).is_ok_and(|r| r.session == self.session)
    }

    /// An update on the revision we hold. A refused or unanswered update is
    /// settled by re-reading the key: only this process writes our session,
    /// so a key that carries it is our lease (an earlier write whose answer
    /// was lost landed), and one more update on the revision read renews
    /// it. Anything else is a lease lost.
    async fn renew(&self, broker: &Broker, revision: u64) -> Renewed {
        let mut revision = revision;
        let mut last_error = String::new();
        for _ in 0..3 {
            match broker
                .kv_update(&self.bucket, DUTY_KEY, self.row(), revision)
                .await
            {
                Ok(rev) => return Renewed::Held(rev),
                Err(e) => last_error = e.to_string(),
            }
            match broker.kv_entry(&self.bucket, DUTY_KEY).await {
                Ok(Some(entry)) if self.is_ours(&entry) => revision = entry.revision,
                Ok(_) => return Renewed::Lost,
                Err(e) => return Renewed::Unknown(format!("{last_error}; re-reading: {e}")),
            }
        }
        Renewed::Unknown(last_error)
    }

    /// Renews a held lease, or tries to claim a free one. Call once per tick.
    pub async fn claim_or_renew(&mut self, broker: &Broker) -> DutyStatus {
        self.unsettled = false;
        if let Some(rev) = self.revision {
            match self.renew(broker, rev).await {
                Renewed::Held(new_rev) => {
                    self.revision = Some(new_rev);
                    return DutyStatus::Held;
                }
                Renewed::Lost => {
                    self.lost();
                    tracing::warn!(event = "duty_lost", "the duty lease was taken or expired");
                }
                Renewed::Unknown(e) => {
                    // Keep the revision: the next tick's renewal settles it.
                    // This tick neither publishes nor purges.
                    self.unsettled = true;
                    return DutyStatus::Unknown(format!("renewing the duty lease: {e}"));
                }
            }
        }
        if self.may_claim {
            self.claimed_at = Instant(Utc::now());
            match broker.kv_create(&self.bucket, DUTY_KEY, self.row()).await {
                Ok(rev) => {
                    self.revision = Some(rev);
                    tracing::info!(event = "duty_claimed", session = %self.session, holder = %self.holder, "claimed the trim duty");
                    return DutyStatus::Held;
                }
                Err(CasError::Exists { .. }) | Err(CasError::Conflict { .. }) => {}
                Err(CasError::Failed { reason, .. }) => {
                    // The create may have landed: if the key is ours, so is
                    // the lease.
                    return match broker.kv_entry(&self.bucket, DUTY_KEY).await {
                        Ok(Some(entry)) if self.is_ours(&entry) => {
                            self.revision = Some(entry.revision);
                            DutyStatus::Held
                        }
                        Ok(_) => Self::current_holder(broker, &self.bucket).await,
                        Err(e) => DutyStatus::Unknown(format!(
                            "claiming the duty lease: {reason}; re-reading: {e}"
                        )),
                    };
                }
            }
        }
        Self::current_holder(broker, &self.bucket).await
    }

    /// Who holds the duty, without trying to claim it (for `status`).
    pub async fn observe(broker: &Broker, bucket: &str) -> DutyStatus {
        Self::current_holder(broker, bucket).await
    }

    async fn current_holder(broker: &Broker, bucket: &str) -> DutyStatus {
        match broker.kv_entry(bucket, DUTY_KEY).await {
            Ok(Some(entry)) => match DutyRow::parse(DUTY_KEY, &entry.value) {
                Ok(row) => DutyStatus::Other {
                    holder: row.holder,
                    session: row.session,
                    claimed_at: row.claimed_at,
                },
                Err(e) => DutyStatus::Unknown(e.to_string()),
            },
            Ok(None) => DutyStatus::Free,
            Err(e) => DutyStatus::Unknown(format!("reading the duty lease: {e}")),
        }
    }

    /// Fencing, immediately before a purge: a compare-and-set renewal on
    /// the revision we hold. Only a successful write proves that nobody
    /// has taken over; a refused one gives the duty up for this tick (the
    /// next tick claims again), and purges nothing.
    pub async fn fence(&mut self, broker: &Broker) -> bool {
        let Some(rev) = self.revision else {
            return false;
        };
        match self.renew(broker, rev).await {
            Renewed::Held(new_rev) => {
                self.revision = Some(new_rev);
                true
            }
            Renewed::Lost => {
                self.lost();
                tracing::warn!(
                    event = "duty_lost",
                    "the duty lease changed hands before the purge"
                );
                false
            }
            Renewed::Unknown(e) => {
                self.unsettled = true;
                tracing::warn!(event = "fence_failed", error = %e, "the duty lease could not be renewed before the purge; nothing purged");
                false
            }
        }
    }

    /// The lease is gone: forget its revision and take a new session. A
    /// write of the old session that is still in flight, or that lands
    /// late, is then never mistaken for a lease of ours, and a claim later
    /// is a new lease, not the old one resumed.
    fn lost(&mut self) {
        let old = std::mem::replace(&mut self.session, OpId::mint(Utc::now()).to_string());
        self.revision = None;
        tracing::info!(event = "duty_session_renewed", old_session = %old, session = %self.session, "a new session for any later claim");
    }

    /// Gives the lease up so another sidecar takes over at once.
    pub async fn release(&mut self, broker: &Broker) {
        let Some(rev) = self.revision.take() else {
            return;
        };
        match broker.kv_delete_at(&self.bucket, DUTY_KEY, rev).await {
            Ok(()) => {
                tracing::info!(event = "duty_released", session = %self.session, "released the trim duty")
            }
            // The key moved on since our last write: the lease is no longer
            // ours to delete (it expired and was claimed), so there is
            // nothing to release.
            Err(CasError::Conflict { .. }) => {
                self.lost();
                tracing::info!(
                    event = "duty_already_gone",
                    "the duty lease had already passed on; nothing to release"
                )
            }
            Err(e) => {
                tracing::warn!(event = "duty_release_failed", error = %e, "could not release the duty lease; it expires by itself")
            }
        }
    }
}
