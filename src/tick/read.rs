//! The fresh read every surface shares: the buckets once, each domain's
//! stream, consumer, replicas and age lookup, the archives' listings, and
//! every answer computed from them. `status`, the HTTP surface, the
//! previews and the gestures call [`answers`]; the tick reads the same way
//! from its views.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::alarms::DutyView;
use crate::broker::read::Raw;
use crate::broker::Broker;
use crate::config::Config;
use crate::floor::{self, Answer, DomainRead, ParsedRows, Policy};
use crate::rows::Unreadable;
use crate::tick::duty::{Duty, DutyStatus};

/// Reads everything one domain needs beyond the buckets, in the order
/// docs/trim-floor.md, Read order, fixes: stream info, then the consumer, then the age lookup.
/// `listed`: the log's state as the account's stream listing proved it
/// ([`Broker::listing`]; only the broker vouches for one); without it,
/// the log's stream info is read.
pub async fn read_domain(
    broker: &Broker,
    domain: &crate::config::Domain,
    listed: Option<crate::proven::Proven<(floor::StreamState, crate::clock::Reading)>>,
    min_age: Duration,
    now: DateTime<Utc>,
) -> DomainRead {
    let listed = match listed {
        Some(l) => Ok(l.into_inner()),
        None => broker.stream_state_at(&domain.stream).await,
    };
    let (stream, clock) = match listed {
        Ok((s, c)) => (Ok(s), Some(c)),
        Err(e) => (Err(e), None),
    };
    // The age cutoff on the broker's clock as it answered, never ours.
    let now = clock.map_or(now, |c| c.broker);
    // The consumer after stream info (the feed rule needs last_seq read
    // first); the age lookup beside it.
    // A stream that could not be read is taken as clustered: a consumer's
    // answer must then name its leader to count.
    let clustered = stream.as_ref().map_or(true, |s| s.clustered);
    let feed = async {
        match &domain.feed_consumer {
            Some(c) => Some(broker.feed_state(&domain.stream, c, clustered).await),
            None => None,
        }
    };
    // A log without a single consumer has no replica to list: its stream
    // info, just read from its leader, says so, and a fleet of many logs
    // is spared a listing per log (docs/performance.md). A consumer made
    // after that read is as unseen as one made after the listing would be.
    let none = matches!(&stream, Ok(s) if s.consumers == 0) && domain.replicas.consumers.is_empty();
    let replicas = async {
        if none {
            return Some(Ok(crate::floor::ReplicasRead::default()));
        }
        // Counted from the log's own consumer listing whatever the version
        // of the server this sidecar reaches: on a cluster of mixed
        // releases, a newer server's mirror may copy the log.
        broker
            .replicas(
                &domain.stream,
                &domain.replicas.consumers,
                &domain.replicas.ignore,
                true,
                clustered,
            )
            .await
    };
    let young = async {
        match &stream {
            Err(e) => Err(e.clone()),
            // Nothing retained, or no record can be young: no request needed.
            Ok(s) if s.last_seq < s.first_seq || min_age.is_zero() => Ok(None),
            Ok(s) => {
                let cutoff =
                    now - chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
                // A quiet log's stamps, in the stream info just read, settle
                // it: a fleet of many logs is spared a lookup per log.
                match floor::young_by_stamps(s, crate::rows::Timestamp(cutoff)) {
                    Some(settled) => Ok(settled),
                    None => broker.first_seq_at_or_after(&domain.stream, cutoff).await,
                }
            }
        }
    };
    let (feed, replicas, young_seq) = tokio::join!(feed, replicas, young);
    // The floor is pure: what it keeps of a fault is its sentence, the
    // term's `unreadable` reason.
    DomainRead {
        stream: stream.map_err(Unreadable::from),
        feed: feed.map(|f| f.map_err(Unreadable::from)),
        replicas: replicas.map(|r| r.map_err(Unreadable::from)),
        unprotected: Vec::new(),
        orphaned: Vec::new(),
        young_seq: young_seq.map_err(Unreadable::from),
        absorbed: None,
        clock,
        archive: None,
    }
}

/// One fresh read: the buckets as read and parsed, and every domain's
/// answer.
pub struct Fresh {
    /// The raw gates and floors entries.
    pub raw: Raw,
    pub parsed: ParsedRows,
    pub answers: Vec<Answer>,
    /// How far the broker's clock is ahead of ours (none read: `None`).
    pub offset: Option<chrono::Duration>,
    /// Each domain's reads beyond the buckets (a preview computes on them
    /// again).
    pub reads: Vec<DomainRead>,
}

/// Every domain's answer from one fresh read (the buckets once, then each
/// domain's stream concurrently), without absorbing gate records. `status`
/// uses this.
pub async fn answers(broker: &Broker, config: &Config, session: &str, now: DateTime<Utc>) -> Fresh {
    let ((raw, parsed), listings) = tokio::join!(
        broker.read_all(&config.buckets),
        prefetch_archives(broker, config)
    );
    let policy = Policy::from_config(config, session);
    let mut reads = read_domains(broker, config, &policy, now).await;
    read_archives(broker, config, parsed.get(), &mut reads, listings).await;
    // What status and the gestures read: answers to show, never to purge by.
    let answers = compute_all(config, &policy, &parsed, &reads, now)
        .into_iter()
        .map(floor::Licensed::into_answer)
        .collect();
    Fresh {
        raw,
        parsed: parsed.into_inner(),
        answers,
        offset: clock_offset(&reads),
        reads,
    }
}

/// Every domain's reads beyond the buckets, concurrently.
pub async fn read_domains(
    broker: &Broker,
    config: &Config,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Vec<DomainRead> {
    // One listing of the account's streams first: it proves most logs'
    // state (the leader's word, the broker's clock), so that a fleet of
    // many logs is read in a few pages rather than a request per log; a
    // log it does not prove is read alone. It also says what no consumer
    // protects, which is said, never a pin (a listing that fails says
    // nothing, and costs the trim nothing). Bounded by a quarter of a
    // read, so that a listing that hangs and the reads after it stay
    // inside the tick's budget (docs/decisions.md, A fleet of many logs).
    let streams: Vec<&str> = config.domains.iter().map(|d| d.stream.as_str()).collect();
    let listing = broker.listing(&streams, broker.read_timeout() / 4).await;
    let (states, copies) = match listing {
        Ok(l) => (l.states, Some(l.copies)),
        Err(_) => (Default::default(), None),
    };
    read_listed(broker, config, policy, now, states, copies.as_ref()).await
}

/// Every domain's reads beyond the buckets, concurrently, given what a
/// listing proved: `states` (a log not among them is read on its own)
/// and what copies each log (`None`: unknown, so nothing is said of
/// copies).
pub async fn read_listed(
    broker: &Broker,
    config: &Config,
    policy: &Policy,
    now: DateTime<Utc>,
    mut states: super::account::States,
    copies: Option<&crate::broker::listing::Copies>,
) -> Vec<DomainRead> {
    let mut reads = futures::future::join_all(
        config
            .domains
            .iter()
            .map(|d| read_domain(broker, d, states.remove(&d.stream), policy.min_age, now)),
    )
    .await;
    if let Some(copies) = copies {
        for (read, d) in reads.iter_mut().zip(&config.domains) {
            read.unprotected = copies
                .unprotected
                .get(&d.stream)
                .cloned()
                .unwrap_or_default();
            if let Some(Ok(r)) = &mut read.replicas {
                for c in &mut r.replicas {
                    c.feeds = copies
                        .feeds
                        .get(&(d.stream.clone(), c.consumer.clone()))
                        .map(|f| f.stream.clone());
                }
                read.orphaned = orphaned(copies, &d.stream, r, &d.replicas.ignore);
            }
        }
        // The listing may be some ticks old: an orphan is asked again, and
        // one no longer copying the log (deleted, or given another
        // consumer) is dropped; one that cannot be asked stays (it holds
        // the trim, the safe direction).
        for (read, d) in reads.iter_mut().zip(&config.domains) {
            let mut kept = Vec::new();
            for o in std::mem::take(&mut read.orphaned) {
                if !matches!(
                    broker.still_copies(&o.stream, &d.stream, &o.consumer).await,
                    Ok(false)
                ) {
                    kept.push(o);
                }
            }
            read.orphaned = kept;
        }
    }
    reads
}

/// The streams copying `log` through a durable consumer the log does not
/// have (its listing, `r`, did not name it), unless `replicas.ignore`
/// leaves the consumer out: what they have stored is invisible, so the
/// trim must wait (docs/trim-floor.md, Replicas).
fn orphaned(
    copies: &crate::broker::listing::Copies,
    log: &str,
    r: &floor::ReplicasRead,
    ignore: &[String],
) -> Vec<floor::OrphanedCopy> {
    copies
        .feeds
        .range((log.to_string(), String::new())..)
        .take_while(|((l, _), _)| l == log)
        .filter(|((_, c), _)| !r.present.contains(c) && !ignore.contains(c))
        .map(|((_, c), f)| floor::OrphanedCopy {
            stream: f.stream.clone(),
            consumer: c.clone(),
            deliver_subject: f.deliver_subject.clone(),
            mirror: f.mirror,
        })
        .collect()
}

/// The log, generation and incarnation an archived domain's segments
/// belong to, from this read (`None` when the stream or floors row cannot
/// be read: the answer then concludes nothing anyway).
pub fn archive_target(
    parsed: &ParsedRows,
    domain: &crate::config::Domain,
    read: &DomainRead,
) -> Option<crate::archive::fold::Target> {
    let incarnation = floor::incarnation(parsed, &domain.stream, read)?;
    Some(crate::archive::fold::Target {
        stream: domain.stream.clone(),
        generation: incarnation.generation,
        stream_created: incarnation.stream_created.to_rfc3339(),
    })
}

/// The archive state the floors row this tick read published for `stream`
/// (none when it does not parse: the answer says so).
pub(super) fn published_archive(
    parsed: &ParsedRows,
    stream: &str,
) -> Option<crate::archive::state::ArchiveState> {
    let (p, _) = parsed.published(stream).ok()??;
    <crate::archive::state::ArchiveState as serde::Deserialize>::deserialize(p.archive.as_ref()?)
        .ok()
}

/// Each domain's store listing where it is an Object Store (`None`
/// otherwise), taken beside the bucket reads: the listing does not depend
/// on the log's incarnation, only what is taken from it does, so its
/// round trips need not wait for stream info. Taken a little earlier in
/// the tick, it can only miss a segment written since (a lower archive
/// floor, never a higher one).
pub async fn prefetch_archives(broker: &Broker, config: &Config) -> Vec<Option<Listing>> {
    // A fleet without an archive is spared a thousand empty tasks a tick.
    if config.domains.iter().all(|d| d.archive.is_none()) {
        return Vec::new();
    }
    futures::future::join_all(config.domains.iter().map(|d| async move {
        let archive = d.archive.as_ref()?;
        archive.store().prefetch(broker).await
    }))
    .await
}

/// A store's whole listing, or why it could not be had.
pub type Listing = Result<Vec<crate::archive::state::Listed>, crate::archive::state::ListError>;

/// Reads every archived domain's archive, concurrently, after stream info
/// (which names the incarnation its segments belong to), from the
/// listings [`prefetch_archives`] took.
pub async fn read_archives(
    broker: &Broker,
    config: &Config,
    parsed: &ParsedRows,
    reads: &mut [DomainRead],
    listings: Vec<Option<Listing>>,
) {
    if config.domains.iter().all(|d| d.archive.is_none()) {
        return;
    }
    let found = futures::future::join_all(
        config
            .domains
            .iter()
            .zip(reads.iter())
            .zip(listings.into_iter().chain(std::iter::repeat_with(|| None)))
            .map(|((d, read), listing)| async move {
                let archive = d.archive.as_ref()?;
                let target = archive_target(parsed, d, read)?;
                let published = published_archive(parsed, &d.stream);
                Some(
                    crate::archive::read(
                        broker,
                        &archive.store(),
                        &target,
                        published.as_ref(),
                        listing,
                        read.stream.as_ref().ok().map(|s| s.first_seq),
                    )
                    .await,
                )
            }),
    )
    .await;
    for (read, found) in reads.iter_mut().zip(found) {
        read.archive = found;
    }
}

/// Every domain's answer from what was read: pure. The rows must be a
/// read proven current: the tick publishes and purges by these answers.
pub fn compute_all(
    config: &Config,
    policy: &Policy,
    parsed: &crate::proven::Proven<ParsedRows>,
    reads: &[DomainRead],
    now: DateTime<Utc>,
) -> Vec<floor::Licensed> {
    // Each log's answer on its own, so on every core (a fleet's answers
    // were half its quiet tick on one).
    let domains = &config.domains;
    super::spread::map(domains.len().min(reads.len()), |i| {
        let read = &reads[i];
        floor::Licensed::compute(
            &domains[i],
            policy,
            parsed,
            read,
            read.clock.map_or(now, |c| c.broker),
        )
    })
}

/// Every domain's answer from `rows` and its reads, each at the broker's
/// instant in its own stream info. [`compute_all`] gives it proven rows;
/// a preview of a gesture gives it rows changed in memory, whose answers
/// are never published or purged by.
pub fn compute_each(
    config: &Config,
    policy: &Policy,
    rows: &ParsedRows,
    reads: &[DomainRead],
    now: DateTime<Utc>,
) -> Vec<Answer> {
    config
        .domains
        .iter()
        .zip(reads)
        .map(|(d, read)| {
            floor::compute(d, policy, rows, read, read.clock.map_or(now, |c| c.broker))
        })
        .collect()
}

/// How far the broker's clock is ahead of ours, from this tick's reads.
pub fn clock_offset(reads: &[DomainRead]) -> Option<chrono::Duration> {
    let readings: Vec<crate::clock::Reading> = reads.iter().filter_map(|r| r.clock).collect();
    crate::clock::offset_of(&readings)
}

/// The duty as the alarms see it.
pub fn duty_view(status: &DutyStatus, duty: &Duty) -> DutyView {
    match status {
        DutyStatus::Held => DutyView::Held {
            holder: duty.holder().to_string(),
            claimed_at: duty.claimed_at(),
        },
        DutyStatus::Other {
            holder, claimed_at, ..
        } => DutyView::Held {
            holder: holder.clone(),
            claimed_at: *claimed_at,
        },
        DutyStatus::Free => DutyView::Unheld,
        DutyStatus::Unknown(e) => DutyView::Unreadable(e.clone()),
    }
}
