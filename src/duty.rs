//! The trim duty lease (floor.md, Trim duty; contract.md, duty): claimed
//! with create, renewed every tick with update on the last revision, given
//! up on shutdown by deleting with the last revision. The bucket's
//! `max_age` is the TTL, so expiry is the broker's clock and a holder that
//! dies is replaced within one TTL.

use async_nats::jetstream::kv;
use chrono::Utc;

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
    may_claim: bool,
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

    pub fn holds(&self) -> bool {
        self.revision.is_some()
    }

    fn row(&self) -> Vec<u8> {
        let row = DutyRow {
            holder: self.holder.clone(),
            session: self.session.clone(),
            claimed_at: self.claimed_at,
        };
        serde_json::to_vec(&row).unwrap_or_default()
    }

    /// Renews a held lease, or tries to claim a free one. Call once per tick.
    pub async fn claim_or_renew(&mut self, broker: &Broker) -> DutyStatus {
        let store = match broker.kv(&self.bucket).await {
            Ok(s) => s,
            Err(e) => {
                self.revision = None;
                return DutyStatus::Unknown(e);
            }
        };
        if let Some(rev) = self.revision {
            match store.update(DUTY_KEY, self.row().into(), rev).await {
                Ok(new_rev) => {
                    self.revision = Some(new_rev);
                    return DutyStatus::Held;
                }
                Err(e) => {
                    self.revision = None;
                    if e.kind() != kv::UpdateErrorKind::WrongLastRevision {
                        broker.forget_kv(&self.bucket);
                        return DutyStatus::Unknown(format!("renewing the duty lease: {e}"));
                    }
                    tracing::warn!(event = "duty_lost", session = %self.session, "the duty lease was taken or expired");
                }
            }
        }
        if self.may_claim {
            self.claimed_at = Instant(Utc::now());
            match store.create(DUTY_KEY, self.row().into()).await {
                Ok(rev) => {
                    self.revision = Some(rev);
                    tracing::info!(event = "duty_claimed", session = %self.session, holder = %self.holder, "claimed the trim duty");
                    return DutyStatus::Held;
                }
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
                Err(e) => {
                    broker.forget_kv(&self.bucket);
                    return DutyStatus::Unknown(format!("claiming the duty lease: {e}"));
                }
            }
        }
        Self::current_holder(&store).await
    }

    /// Who holds the duty, without trying to claim it (for `status`).
    pub async fn observe(broker: &Broker, bucket: &str) -> DutyStatus {
        match broker.kv(bucket).await {
            Ok(store) => Self::current_holder(&store).await,
            Err(e) => DutyStatus::Unknown(e),
        }
    }

    async fn current_holder(store: &kv::Store) -> DutyStatus {
        match store.entry(DUTY_KEY).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                match DutyRow::parse(DUTY_KEY, &entry.value) {
                    Ok(row) => DutyStatus::Other {
                        holder: row.holder,
                        session: row.session,
                        claimed_at: row.claimed_at,
                    },
                    Err(e) => DutyStatus::Unknown(e.to_string()),
                }
            }
            Ok(_) => DutyStatus::Free,
            Err(e) => DutyStatus::Unknown(format!("reading the duty lease: {e}")),
        }
    }

    /// Fencing before a purge: the key is still at our revision, so nobody
    /// has taken over since we renewed.
    pub async fn still_held(&self, broker: &Broker) -> bool {
        let Some(rev) = self.revision else {
            return false;
        };
        let Ok(store) = broker.kv(&self.bucket).await else {
            return false;
        };
        match store.entry(DUTY_KEY).await {
            Ok(Some(entry)) => {
                entry.revision == rev
                    && entry.operation == kv::Operation::Put
                    && DutyRow::parse(DUTY_KEY, &entry.value)
                        .is_ok_and(|r| r.session == self.session)
            }
            _ => false,
        }
    }

    /// Gives the lease up so another sidecar takes over at once.
    pub async fn release(&mut self, broker: &Broker) {
        let Some(rev) = self.revision.take() else {
            return;
        };
        match broker.kv(&self.bucket).await {
            Ok(store) => match store.delete_expect_revision(DUTY_KEY, Some(rev)).await {
                Ok(()) => {
                    tracing::info!(event = "duty_released", session = %self.session, "released the trim duty")
                }
                Err(e) => {
                    tracing::warn!(event = "duty_release_failed", error = %e, "could not release the duty lease; it expires by itself")
                }
            },
            Err(e) => {
                tracing::warn!(event = "duty_release_failed", error = %e, "could not release the duty lease; it expires by itself")
            }
        }
    }
}
