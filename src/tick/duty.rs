//! The trim duty lease (docs/trim-floor.md, Trim duty and Fencing; docs/contract.md, `crewlet_duty` — who trims):
//! claimed with create, renewed every tick with update on the last
//! revision, given up on shutdown by deleting with the last revision. The
//! bucket's `max_age` is the TTL, so expiry is the broker's clock and a
//! holder that dies is replaced within one TTL.
//!
//! Every purge is fenced by a compare-and-set renewal immediately before it
//! ([`Duty::fence`]): a read that a replica may answer proves nothing, an
//! update on the revision we hold does, and it grants a permit that lasts
//! until a deadline (`crate::broker::lease`). A definite refusal gives the
//! duty up; only a renewal whose answer was lost is re-read (each renewal
//! writes an id of its own, so the re-read tells whether it landed), not
//! abandoned for a whole TTL.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::broker::kv::{CasError, KvEntry};
use crate::broker::lease::{FencePermit, Lease, Renewal};
use crate::broker::Broker;
use crate::rows::{DutyRow, OpId, Timestamp, DUTY_KEY};

/// What this sidecar knows about the duty after a tick's attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DutyStatus {
    /// We hold it under our session.
    Held,
    /// Someone else holds it (or held it: a lease we lost).
    Other {
        holder: String,
        session: String,
        claimed_at: Timestamp,
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
    claimed_at: Timestamp,
    /// The revision we last wrote, while we hold the lease.
    revision: Option<u64>,
    /// The last renewal's answer was lost and could not be settled: the
    /// lease may still be ours (the next renewal re-reads the key first and
    /// looks for these `renewal` ids), but this tick does not act on it.
    unsettled: Option<Vec<String>>,
    may_claim: bool,
    /// The lease's TTL as this configuration wants it (three ticks).
    ttl: Duration,
    /// What comes off the lease before a fence grants its purge
    /// ([`crate::config::Retention::fence_margin`]).
    margin: Duration,
    /// The duty bucket's own `max_age`, read at this tick's claim or
    /// renewal; `None` until read, or when this tick could not read it (a
    /// fence then grants nothing). The broker expires the lease by it, so
    /// a fence's permit is cut to it ([`crate::config::fence_window`]).
    bucket_max_age: Option<Duration>,
    /// When this process started taking part, and the sessions it had
    /// before its current one: a floors row published since under this
    /// node id by none of them was published by another sidecar.
    started: Timestamp,
    earlier: Vec<String>,
}

impl Duty {
    /// `ttl` is the lease's configured TTL and `margin` what a fence takes
    /// off it ([`crate::config::Retention::duty_ttl`] and
    /// [`crate::config::Retention::fence_margin`]).
    pub fn new(
        bucket: &str,
        holder: &str,
        may_claim: bool,
        ttl: Duration,
        margin: Duration,
    ) -> Duty {
        let now = Utc::now();
        Duty {
            bucket: bucket.to_string(),
            holder: holder.to_string(),
            session: OpId::mint(now).to_string(),
            claimed_at: Timestamp(now),
            revision: None,
            unsettled: None,
            may_claim,
            ttl,
            margin,
            bucket_max_age: None,
            started: Timestamp(now),
            earlier: Vec::new(),
        }
    }

    /// Every session this process has had, the current one first.
    pub fn sessions(&self) -> Vec<String> {
        std::iter::once(self.session.clone())
            .chain(self.earlier.iter().cloned())
            .collect()
    }

    /// When this process started taking part in the duty.
    pub fn started(&self) -> Timestamp {
        self.started
    }

    /// How long a fence's permit lasts after its renewal is sent, or
    /// `None` while the bucket's `max_age` is unknown.
    fn window(&self) -> Option<Duration> {
        self.bucket_max_age
            .map(|max_age| crate::config::fence_window(self.ttl, max_age, self.margin))
    }

    /// Reads the duty bucket's `max_age` for this tick's fences; a lease
    /// the bucket keeps for less than the configuration's is said each
    /// time, with what to set it to.
    async fn read_max_age(&mut self, broker: &Broker) {
        self.bucket_max_age = match broker.lease_max_age(&self.bucket).await {
            Ok(max_age) => max_age,
            Err(e) => {
                tracing::warn!(event = "duty_bucket_unreadable", bucket = %self.bucket, error = %e, "the duty bucket's settings could not be read: this tick purges nothing");
                None
            }
        };
        if let Some(max_age) = self.bucket_max_age {
            if !max_age.is_zero() && max_age < self.ttl {
                let (bucket, want) = (&self.bucket, crate::config::Dur(self.ttl));
                let (has, grant) = (
                    crate::config::Dur(max_age),
                    crate::config::Dur(self.window().unwrap_or_default()),
                );
                tracing::warn!(
                    event = "duty_bucket_short",
                    bucket = %bucket,
                    "the duty bucket {bucket} expires its lease after {has} (max_age), sooner than this sidecar's {want} (three ticks): each fence grants its purge only {grant}; give every sidecar the same retention.tick, and the bucket a max_age of {want} (nats stream edit KV_{bucket} --max-age {want})"
                );
            }
        }
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    /// The duty bucket's `max_age` as this tick read it (`None`: not read).
    pub fn bucket_max_age(&self) -> Option<Duration> {
        self.bucket_max_age
    }

    pub fn claimed_at(&self) -> Timestamp {
        self.claimed_at
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Whether this sidecar holds the duty for this tick.
    pub fn holds(&self) -> bool {
        self.revision.is_some() && self.unsettled.is_none()
    }

    /// The lease as this tick renews it; a permit it grants lasts
    /// `window` ([`Duty::window`]).
    fn lease(&self, window: Duration) -> Lease<'_> {
        Lease {
            bucket: &self.bucket,
            holder: &self.holder,
            session: &self.session,
            claimed_at: self.claimed_at,
            window,
        }
    }

    /// Whether `entry` is our lease (our session wrote it).
    fn is_ours(&self, entry: &KvEntry) -> bool {
        DutyRow::parse(DUTY_KEY, &entry.value).is_ok_and(|r| r.session == self.session)
    }

    /// Renews a held lease, or tries to claim a free one. Call once per
    /// tick; `now` is the broker's time as last read (the row's
    /// `renewed_at`).
    pub async fn claim_or_renew(&mut self, broker: &Broker, now: DateTime<Utc>) -> DutyStatus {
        let earlier = self.unsettled.take().unwrap_or_default();
        if self.revision.is_some() || self.may_claim {
            self.read_max_age(broker).await;
        }
        // The tick's own renewal grants no purge (the fence before it
        // does): its permit's length is never used.
        let window = self.window().unwrap_or_default();
        if let Some(rev) = self.revision {
            match broker
                .renew_lease(&self.lease(window), rev, &earlier, now)
                .await
            {
                Renewal::Held { revision, .. } => {
                    self.revision = Some(revision);
                    return DutyStatus::Held;
                }
                Renewal::Refused => {
                    self.lost();
                    tracing::warn!(
                        event = "duty_lost",
                        "the duty lease's renewal was refused (the key moved on): given up"
                    );
                }
                Renewal::Lost => {
                    self.lost();
                    tracing::warn!(event = "duty_lost", "the duty lease was taken or expired");
                }
                Renewal::Unknown { error, tried } => {
                    // Keep the revision: the next tick's renewal settles it.
                    // This tick neither publishes nor purges.
                    self.unsettled = Some(tried);
                    return DutyStatus::Unknown(format!("renewing the duty lease: {error}"));
                }
            }
        }
        if self.may_claim {
            self.claimed_at = Timestamp(Utc::now());
            let row = self.lease(window).row(OpId::mint(Utc::now()).as_str(), now);
            match broker.kv_create(&self.bucket, DUTY_KEY, row).await {
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
            // No duty bucket yet: no sidecar has ever run, nobody holds it.
            Err(_) if matches!(broker.bucket_settings(bucket).await, Ok(None)) => DutyStatus::Free,
            Err(e) => DutyStatus::Unknown(format!("reading the duty lease: {e}")),
        }
    }

    /// Fencing, immediately before a purge: a compare-and-set renewal on
    /// the revision we hold. Only a write the broker took proves that
    /// nobody has taken over, and it grants the purge until a deadline; a
    /// refused one gives the duty up for this tick (the next tick claims
    /// again), and purges nothing.
    pub async fn fence(&mut self, broker: &Broker, now: DateTime<Utc>) -> Option<FencePermit> {
        let rev = self.revision?;
        if self.unsettled.is_some() {
            return None;
        }
        let Some(window) = self.window() else {
            tracing::warn!(event = "fence_failed", bucket = %self.bucket, "the duty bucket's max_age was not read this tick, so how long the lease lives is unknown; nothing purged");
            return None;
        };
        match broker.renew_lease(&self.lease(window), rev, &[], now).await {
            Renewal::Held { revision, permit } => {
                self.revision = Some(revision);
                Some(permit)
            }
            Renewal::Refused | Renewal::Lost => {
                self.lost();
                tracing::warn!(
                    event = "duty_lost",
                    "the duty lease changed hands before the purge"
                );
                None
            }
            Renewal::Unknown { error, tried } => {
                self.unsettled = Some(tried);
                tracing::warn!(event = "fence_failed", error = %error, "the duty lease could not be renewed before the purge; nothing purged");
                None
            }
        }
    }

    /// The lease is gone: forget its revision and take a new session. A
    /// write of the old session that is still in flight, or that lands
    /// late, is then never mistaken for a lease of ours, and a claim later
    /// is a new lease, not the old one resumed.
    fn lost(&mut self) {
        let old = std::mem::replace(&mut self.session, OpId::mint(Utc::now()).to_string());
        // Kept (the last few) so that rows this process published under an
        // earlier session are known for its own.
        self.earlier.push(old.clone());
        if self.earlier.len() > 16 {
            self.earlier.remove(0);
        }
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
