//! The retention answer: its shape (the floors row and `status --json`
//! share it, docs/runbook.md) and how the terms become `trim_to`, `blocked_by`, the
//! floor, and the NOT READY cases.

use crate::rows::Stamped;
use chrono::{DateTime, Utc};

use super::counted::{counted_set, Generation};
use super::parsed::ParsedRows;
use super::published::{PublishedBy, PublishedFloor, PublishedTerm};
use super::{terms, DomainRead, Policy};
use crate::archive::state::ArchiveState;
use crate::config::Domain;
use crate::rows::{Incarnation, Timestamp, Unreadable};
use crate::stream_check::bypasses;

mod shape;
pub use shape::*;

/// PURE: one domain's answer, in the steps of docs/trim-floor.md, The tick,
/// step by step: the generation and whether the live stream is its
/// ([`lineage`]), the counted set, the seven terms ([`seven_terms`]),
/// `trim_to` and the binding term ([`conclude`]), an explicit trim's
/// watermark ([`requested_view`]), `blocked_by` ([`blocked_by_of`]), the
/// floor, and the capacity figures ([`capacity_of`]).
pub fn compute(
    domain: &Domain,
    policy: &Policy,
    rows: &ParsedRows,
    read: &DomainRead,
    now: DateTime<Utc>,
) -> Answer {
    let stream = domain.stream.as_str();
    let at = Timestamp(now);
    let (config_digest, config) = policy.settings.get(domain, policy);
    let previous = rows.published(stream);
    let published = previous.as_ref().ok().and_then(|p| p.as_ref());
    let line = lineage(rows, read, &previous);
    let mut not_ready = line.not_ready.clone();
    // The incarnation the gates view belongs to: the live stream at the
    // domain's generation (unknown when either is).
    let incarnation = super::incarnation(rows, stream, read);

    let state = read.stream.as_ref().ok();
    // The last row's memory, where a recreated bucket or a carried member
    // makes it needed (docs/trim-floor.md, The sidecar's memory).
    let recalled = super::remember::recall(rows, stream);
    let set = counted_set(
        stream,
        rows,
        state,
        Generation {
            number: line.generation,
            created: line.gen_created,
        },
        incarnation,
        policy.fence_window,
        recalled.remembered(),
        now,
    );
    // Without a floors row, positions that name a later generation than 0
    // mean the row was lost: starting over at 0 would count a restored
    // log's old backups and segments again. (A missing row makes no other
    // NOT READY case, so this takes the place lineage would have given it.)
    if matches!(previous, Ok(None)) && not_ready.is_none() {
        let seen =
            set.highest_generation
                .max(super::recorded_generation(rows, stream, line.live_created));
        if let Some(highest) = seen.filter(|g| *g > 0) {
            not_ready = Some(NotReady::GenerationUnknown { highest });
        }
    }
    // A marked log whose memory is gone (docs/trim-floor.md, The log
    // remembers that it was adopted): after generation_unknown, which
    // names the remedy that also opens the memory afresh.
    let memory = match state {
        Some(s) => super::memory_of(rows, stream, s),
        None => super::memory::Memory::Unknown,
    };
    // Since when: the note an earlier tick left, or this answer's instant.
    let note = rows.gates.as_ref().ok().and_then(|g| g.lost.get(stream));
    let lost_since = |lost| NotReady::MemoryLost {
        lost,
        since: note.map_or(at, |n| n.since),
        noted: note.is_some(),
    };
    if let super::memory::Memory::Lost(lost) = memory {
        if not_ready.is_none() {
            not_ready = Some(lost_since(lost));
        }
    }
    // A memory needed (a bucket it names recreated, or members it carries)
    // that cannot be read back whole has lost what it kept.
    if let super::remember::Recalled::Unreadable = &recalled {
        if not_ready.is_none() {
            not_ready = Some(lost_since(super::memory::Lost::MembershipUnreadable));
        }
    }
    if !set.ahead.is_empty() && not_ready.is_none() {
        not_ready = Some(NotReady::AheadOfLog);
    }
    let carried_holds =
        super::remember::carried_holds(rows, stream, recalled.remembered(), incarnation, now);
    // Holds that pin though the bucket does not show them live: carried
    // over a recreated bucket, or a join hold whose readmission is not
    // absorbed yet.
    let lapsed = super::lapsed_join_holds(rows, stream, incarnation, now);
    let extra_holds: Vec<terms::ExtraHold> = carried_holds
        .iter()
        .map(|(id, seq)| terms::ExtraHold {
            id,
            seq: *seq,
            owner: "remembered",
            why: "carried from a recreated holds bucket",
        })
        .chain(lapsed.iter().map(|(id, seq, owner)| terms::ExtraHold {
            id,
            seq: *seq,
            owner,
            why: "expired, its readmission not yet absorbed",
        }))
        .collect();
    let (mut terms, backup_age, archive) = seven_terms(
        domain,
        policy,
        rows,
        read,
        &line,
        &set,
        published,
        &extra_holds,
        at,
        now,
    );
    let stood = |name: TermName| {
        terms.iter().find(|t| t.term == name).map_or(
            super::remember::Stood::Unreadable,
            |t| match t.state {
                TermState::Value { seq, .. } => super::remember::Stood::Value(seq),
                TermState::Unreadable { .. } => super::remember::Stood::Unreadable,
                _ => super::remember::Stood::Unbounded,
            },
        )
    };
    let (memory_record, members_write) = super::remember::keep(
        rows,
        stream,
        &set,
        (
            &carried_holds,
            &lapsed.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
        ),
        &recalled,
        (stood(TermName::Applied), stood(TermName::MinHold)),
        now,
    );
    // Named only by a lost memory's remedy: not copied on every tick.
    let live_holds: Vec<(String, u64)> = match &rows.holds {
        Ok(h) if matches!(not_ready, Some(NotReady::MemoryLost { .. })) => h
            .get(stream)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|h| h.as_ref().ok())
            .filter(|(_, h)| h.expires_at.0 > now)
            .map(|(k, h)| (k.hold_id.clone(), h.seq))
            .collect(),
        _ => Vec::new(),
    };

    let any_unreadable = terms
        .iter()
        .any(|t| matches!(t.state, TermState::Unreadable { .. }));
    let last_seq = state.map_or(0, |s| s.last_seq);
    let first_seq = state.map_or(0, |s| s.first_seq);
    let concludes = !any_unreadable && not_ready.is_none();
    let mut trim_to = conclude(&mut terms, concludes, last_seq);
    let requested = requested_view(
        rows,
        stream,
        incarnation,
        &mut terms,
        &mut trim_to,
        concludes,
        last_seq,
        at,
    );
    let blocked_by = blocked_by_of(&terms);
    let fresh_request = requested
        .as_ref()
        .filter(|r| r.error.is_none() && !r.stale)
        .map(|r| r.seq);
    hold_costs(
        &mut terms,
        &blocked_by,
        Costs {
            trim_to,
            ready: not_ready.is_none(),
            request: fresh_request,
            state,
            before: published.and_then(|(p, _)| p.terms.as_deref()),
            at,
        },
    );
    let held_since = if blocked_by.is_empty() {
        None
    } else {
        Some(line.prev_held.unwrap_or(at))
    };

    let dry_run = !policy.trim_enabled;
    let (floor, trim_floor_state) = if dry_run || !concludes {
        (line.prev_floor, line.prev_state)
    } else {
        let next = trim_to.saturating_add(1);
        (
            Some(line.prev_floor.map_or(next, |f| f.max(next))),
            FloorState::Published,
        )
    };
    let would_purge = if dry_run && concludes {
        super::check_purge(trim_to, first_seq, last_seq).map(|target| WouldPurge {
            records: target - first_seq,
            first_seq,
            last_seq: trim_to,
        })
    } else {
        None
    };
    let cap = capacity_of(domain, state);

    let mut answer = Answer {
        domain: domain.name.clone(),
        stream: stream.to_string(),
        generation: line.generation,
        stream_created: line.gen_created,
        generation_opened_at: line.generation_opened_at,
        floor,
        trim_to,
        trim_floor_state,
        dry_run,
        would_purge,
        terms,
        blocked_by,
        held_since,
        soft_ceiling_bytes: cap.soft_ceiling_bytes,
        max_bytes: cap.max_bytes,
        reserve_bytes: cap.reserve_bytes,
        bytes: cap.bytes,
        headroom_fraction: cap.headroom_fraction,
        first_seq,
        last_seq,
        not_ready,
        evictions_unreadable: set.evictions_unreadable,
        nodes: set.nodes,
        stream_error: read.stream.as_ref().err().map(ToString::to_string),
        backup_age_secs: backup_age.map(|d| d.as_secs()),
        backup_stale: backup_age.is_some_and(|d| d > policy.backup_max_age),
        live_stream_created: if line.recreated {
            line.live_created
        } else {
            None
        },
        broker_retention_bypass: state.map(|s| bypasses(&s.facts)).unwrap_or_default(),
        stream_warnings: state
            .and_then(|s| crate::stream_check::delete_warning(stream, &s.facts))
            .into_iter()
            .collect(),
        unprotected_copies: read.unprotected.clone(),
        orphaned_copies: read.orphaned.clone(),
        published_at: published.map(|(p, _)| p.at),
        current_at: published.map(|(p, _)| {
            // The holder's last tick vouches for every row it did not name
            // as unpublished, and that it wrote in the same duty session
            // (docs/contract.md, `crewlet_floors` — the published answer):
            // a row of a log no longer configured, or of an earlier
            // holder, is not its to vouch for.
            let ticked = rows
                .floors
                .as_ref()
                .ok()
                .and_then(|f| f.tick.as_ref()?.as_ref().ok())
                .filter(|t| !t.session.is_empty() && t.session == p.session)
                .filter(|t| !t.unpublished.iter().any(|s| s == stream))
                .map(|t| t.at);
            ticked.map_or(p.at, |t| t.max(p.at))
        }),
        gate_view: domain.gate_subject.as_ref().map(|_| {
            gate_view(
                rows,
                stream,
                incarnation,
                last_seq,
                read.absorbed.as_ref(),
                published.and_then(|(p, _)| p.gate_view.as_ref()),
                at,
            )
        }),
        purge_clamped_by: None,
        archive,
        requested,
        config_digest,
        published_config: published
            .and_then(|(p, _)| p.config_digest.clone().map(|d| (p.by.clone(), d))),
        config,
        published_by: published.map(|(p, _)| PublishedBy {
            by: p.by.clone(),
            session: p.session.clone(),
            at: p.at,
            config: p.config.clone().unwrap_or_default(),
        }),
        memory: memory_record,
        members_write,
        live_holds,
        published_format: published.map(|(p, _)| p.format.unwrap_or(1)),
        mark_due: match memory {
            super::memory::Memory::Due(due) => Some(due),
            _ => None,
        },
        by: policy.by.clone(),
        session: policy.session.clone(),
        at,
    };
    if super::licensed_purge(&answer).is_some()
        && super::purge_target(&answer) < super::licensed_purge(&answer)
    {
        answer.purge_clamped_by = Some(PurgeClamp::Gates);
    }
    answer
}

/// What the floors row this tick read says of the domain's history: the
/// generation, the `created` it belongs to, the floor and `held_since`
/// carried over, and whether the domain is NOT READY on that count.
#[derive(Debug, Clone)]
struct Lineage {
    generation: u64,
    gen_created: Option<Timestamp>,
    live_created: Option<Timestamp>,
    generation_opened_at: Option<Timestamp>,
    prev_floor: Option<u64>,
    prev_state: FloorState,
    prev_held: Option<Timestamp>,
    recreated: bool,
    not_ready: Option<NotReady>,
}

/// Step 1: the generation this answer belongs to, and whether the live
/// stream is the one the floor was published for.
fn lineage(
    rows: &ParsedRows,
    read: &DomainRead,
    previous: &Result<Option<(&PublishedFloor, u64)>, Unreadable>,
) -> Lineage {
    let live_created = read.stream.as_ref().ok().map(|s| s.created);
    let mut not_ready: Option<NotReady> = None;
    let (generation, gen_created, prev_floor, prev_state, prev_held, opened_at) = match previous {
        Err(e) => {
            not_ready = Some(NotReady::FloorUnreadable {
                error: e.to_string(),
                row: rows.floors.is_ok(),
            });
            (0, live_created, None, FloorState::None, None, None)
        }
        // A missing row starts at generation 0 (unless positions name a
        // later one: [`compute`] judges that from the counted set's walk).
        Ok(None) => (0, live_created, None, FloorState::None, None, None),
        Ok(Some((p, _))) => {
            let held = if p.blocked_by.is_empty() {
                None
            } else {
                p.held_since
            };
            (
                p.generation,
                p.stream_created.or(live_created),
                p.floor,
                p.trim_floor_state,
                held,
                p.generation_opened_at,
            )
        }
    };
    let recreated = match (gen_created, live_created) {
        (Some(g), Some(l)) => g != l,
        _ => false,
    };
    if recreated && not_ready.is_none() {
        not_ready = Some(NotReady::Recreated);
    }
    Lineage {
        generation,
        gen_created,
        live_created,
        // Generation 0 opened with the stream; a row written before rows
        // carried the instant falls back to the same.
        generation_opened_at: opened_at.or(gen_created),
        prev_floor,
        prev_state,
        prev_held,
        recreated,
        not_ready,
    }
}

/// Step 2: the seven terms, in the order of the terms table
/// (`archive_floor` is `n/a` without an archive), with the age of the
/// backup point the trim reads and the archive's state.
#[allow(clippy::too_many_arguments)]
fn seven_terms(
    domain: &Domain,
    policy: &Policy,
    rows: &ParsedRows,
    read: &DomainRead,
    line: &Lineage,
    set: &super::counted::CountedSet,
    published: Option<&(&PublishedFloor, u64)>,
    extra_holds: &[terms::ExtraHold],
    at: Timestamp,
    now: DateTime<Utc>,
) -> (Vec<Term>, Option<std::time::Duration>, Option<ArchiveState>) {
    let stream = domain.stream.as_str();
    let state = read.stream.as_ref().ok();
    let applied = terms::applied(stream, set);
    let min_hold = terms::min_hold(stream, &rows.holds, extra_holds, now);
    // Backups of an earlier incarnation or generation do not count: the
    // later of the stream's created and the generation's opening.
    let history_from = match (line.gen_created, line.generation_opened_at) {
        (Some(c), Some(o)) => Some(c.max(o)),
        (c, o) => c.or(o),
    };
    let (backup, backup_age) =
        terms::backup_floor(stream, &rows.backups, policy, history_from, now);
    let snapshot = terms::snapshot_floor(
        stream,
        &rows.snapshots,
        set,
        line.generation,
        policy.snapshot_quorum,
    );
    let feed = terms::feed_ack_floor(
        domain.feed_consumer.as_deref(),
        &read.feed,
        state.map(|s| s.last_seq),
    );
    let age = terms::age_floor(&read.stream, &read.young_seq, policy.min_age);
    let mut terms = vec![applied, min_hold, backup, snapshot, feed, age];
    let archive = domain.archive.as_ref().map(|_| {
        let published = published.and_then(|(p, _)| p.archive.as_ref());
        archive_of(read, published, state.map_or(0, |s| s.first_seq), at)
    });
    // The seventh term, `n/a` without an archive (docs/archive-format.md).
    terms.push(match &archive {
        Some(a) => terms::archive_floor(a),
        None => Term {
            term: TermName::ArchiveFloor,
            state: TermState::NotApplicable,
            detail: None,
            binding: false,
            held: None,
            replicas: None,
        },
    });
    // The eighth, `n/a` where nothing copies the log durably and no
    // consumer is named (docs/trim-floor.md, Replicas).
    terms.push(terms::replica_floor(
        &read.replicas,
        &read.orphaned,
        state.map(|s| s.last_seq),
    ));
    (terms, backup_age, archive)
}

/// Step 3: `trim_to`, the minimum of the terms and `last_seq`, with the
/// binding term marked; 0 (nothing licensed) when the answer does not
/// conclude (a term unreadable, or NOT READY).
fn conclude(terms: &mut [Term], concludes: bool, last_seq: u64) -> u64 {
    let minimum = terms.iter().filter_map(Term::seq).min();
    if !concludes {
        return 0;
    }
    if let Some(min) = minimum {
        if let Some(t) = terms.iter_mut().find(|t| t.seq() == Some(min)) {
            t.binding = true;
        }
    }
    minimum.unwrap_or(last_seq).min(last_seq)
}

/// Step 4: an explicit trim (docs/http.md): `max(trim_to, min(R - 1,
/// safety, last_seq))`, safety every term but `age_floor`. Only on an
/// answer that concludes; an unreadable request raises nothing, and one
/// of another incarnation is shown, never applied.
#[allow(clippy::too_many_arguments)]
fn requested_view(
    rows: &ParsedRows,
    stream: &str,
    incarnation: Option<Incarnation>,
    terms: &mut [Term],
    trim_to: &mut u64,
    concludes: bool,
    last_seq: u64,
    at: Timestamp,
) -> Option<RequestedView> {
    match rows.requested(stream) {
        Ok(None) => None,
        // A watermark of another incarnation or generation was asked for in
        // a history this log no longer is: shown, never applied (a new
        // request replaces it).
        Ok(Some(r)) if !incarnation.is_some_and(|i| r.belongs_to(&i)) => {
            let made_in = match (r.stream_created, r.generation) {
                (Some(c), Some(g)) => format!("stream created {c}, generation {g}"),
                _ => "a version that did not record its incarnation".to_string(),
            };
            Some(RequestedView {
                seq: r.seq,
                by: r.by,
                at: r.at,
                reason: r.reason,
                bounded_by: None,
                error: Some(format!(
                    "stale (of an earlier incarnation): it was asked in {made_in}, so it trims nothing here, and the next trim request starts afresh"
                )),
                stale: true,
            })
        }
        Ok(Some(r)) => {
            let mut view = RequestedView {
                seq: r.seq,
                by: r.by,
                at: r.at,
                reason: r.reason,
                bounded_by: None,
                error: None,
                stale: false,
            };
            if concludes {
                let (point, by) = explicit_point(terms, r.seq, last_seq);
                if point > *trim_to {
                    *trim_to = point;
                    for t in terms.iter_mut() {
                        t.binding = by == Bound::Term(t.term);
                    }
                    view.bounded_by = Some(by.as_str().to_string());
                } else {
                    // The request moves nothing: what binds is what
                    // bound the trim already.
                    view.bounded_by = Some(terms.iter().find(|t| t.binding).map_or_else(
                        || Bound::LastSeq.as_str().to_string(),
                        |t| t.term.as_str().to_string(),
                    ));
                }
            }
            Some(view)
        }
        Err(e) => Some(RequestedView {
            seq: 0,
            by: String::new(),
            at,
            reason: String::new(),
            bounded_by: None,
            error: Some(format!("{e}; the request raises nothing until it is fixed")),
            stale: false,
        }),
    }
}

/// What [`hold_costs`] weighs a pin against.
struct Costs<'a> {
    trim_to: u64,
    /// No NOT READY reason: the answer would conclude with every term read.
    ready: bool,
    /// An explicit trim's watermark that applies (docs/http.md).
    request: Option<u64>,
    state: Option<&'a super::StreamState>,
    /// The terms of the floors row this answer follows.
    before: Option<&'a [PublishedTerm]>,
    at: Timestamp,
}

/// The seq a pin is judged at: its value, or 0 for an unreadable term (it
/// permits nothing).
fn pin_seq(t: &Term) -> u64 {
    t.seq().unwrap_or(0)
}

/// Step 5b: what each binding or blocking term holds back. The records are
/// those the trim would also delete without the term: the answer computed
/// again with the term left out (the others, `last_seq`, an applying
/// explicit trim), counted on the log above `trim_to`. `pinned_since` is
/// kept from the row while the term stays pinned at or above where it
/// was (it has held the trim at or below its current value since then),
/// and starts now when it is new or moved lower.
fn hold_costs(terms: &mut [Term], blocked_by: &[TermName], c: Costs) {
    let (first_seq, last_seq) = c.state.map_or((0, 0), |s| (s.first_seq, s.last_seq));
    // The log's mean record size, from its own counts.
    let per_record = c
        .state
        .filter(|s| s.messages > 0)
        .map_or(0.0, |s| s.bytes as f64 / s.messages as f64);
    let pinned: Vec<usize> = (0..terms.len())
        .filter(|&i| terms[i].binding || blocked_by.contains(&terms[i].term))
        .collect();
    for i in pinned {
        let others: Vec<Term> = terms
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, t)| t.clone())
            .collect();
        let concludes = c.ready && !others.iter().any(Term::state_is_unreadable);
        let mut without = if concludes {
            others
                .iter()
                .filter_map(Term::seq)
                .min()
                .unwrap_or(last_seq)
                .min(last_seq)
        } else {
            0
        };
        if let (Some(r), true) = (c.request, concludes) {
            without = without.max(explicit_point(&others, r, last_seq).0);
        }
        let lower = c.trim_to.max(first_seq.saturating_sub(1));
        let records = without.min(last_seq).saturating_sub(lower);
        let seq = pin_seq(&terms[i]);
        let since = c
            .before
            .and_then(|b| b.iter().find(|p| p.term == terms[i].term))
            .and_then(|p| {
                let was = if p.state == "unreadable" { 0 } else { p.seq? };
                p.pinned_since.filter(|_| seq >= was)
            })
            .unwrap_or(c.at);
        terms[i].held = Some(Held {
            records,
            bytes: (records as f64 * per_record).round() as u64,
            since,
        });
    }
}

/// Step 5: `blocked_by`: unreadable terms first (table order), then every
/// value below the age policy's, lowest first. The archive only follows
/// the other terms (the fold goes as far as they allow): it holds the trim
/// back only where it binds below all of them.
fn blocked_by_of(terms: &[Term]) -> Vec<TermName> {
    let mut blocked_by: Vec<TermName> = terms
        .iter()
        .filter(|t| matches!(t.state, TermState::Unreadable { .. }))
        .map(|t| t.term)
        .collect();
    let age_seq = terms
        .iter()
        .find(|t| t.term == TermName::AgeFloor)
        .and_then(Term::seq);
    if let Some(age_seq) = age_seq {
        let others = terms
            .iter()
            .filter(|t| t.term != TermName::ArchiveFloor)
            .filter_map(Term::seq)
            .min();
        let mut below: Vec<(u64, TermName)> = terms
            .iter()
            .filter(|t| {
                t.term != TermName::ArchiveFloor
                    || t.seq().is_some_and(|s| others.is_none_or(|o| s < o))
            })
            .filter_map(|t| t.seq().filter(|s| *s < age_seq).map(|s| (s, t.term)))
            .collect();
        below.sort();
        blocked_by.extend(below.into_iter().map(|(_, n)| n));
    }
    blocked_by
}

mod parts;
use parts::{archive_of, capacity_of, gate_view};
