//! The views' own state, pure: what a watcher delivered of a bucket
//! (`Seen`, each key's last message `Kept`), the cut a tick proves a view
//! at (`Cut`), and the checks and answers made from them (the count check,
//! which keys existed at the cut, which aged out). No IO: the watcher and
//! the proof that feed them are in the parent module.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use smol_str::SmolStr;

use crate::floor::parsed::{Patch, Sink};
use crate::floor::Entry;

/// What the watcher delivered so far.
#[derive(Default)]
pub(super) struct Seen {
    /// The last message of each key: its revision, broker timestamp and
    /// what is held of its value. Names inline: a key is short, and an
    /// allocation per key was a good part of a rebuild's cost.
    pub(super) keys: HashMap<SmolStr, Kept>,
    /// Every live key's bytes are kept: the bucket's raw entries are
    /// asked for (the tick writes those buckets back). Other views keep a
    /// key's bytes only until they are parsed into an answer.
    pub(super) keeps_values: bool,
    /// The newest stream sequence delivered.
    pub(super) delivered: u64,
    /// The watcher's consumer sequence (1, 2, 3, … when nothing was lost).
    pub(super) consumer_seq: u64,
    /// The first pass, over the last message per key, is complete.
    pub(super) whole: bool,
    /// Why the view can no longer be proven (the watcher stopped or was
    /// restarted).
    pub(super) broken: Option<String>,
    /// The revision a proof waits for the view to reach (the watcher
    /// wakes it then).
    pub(super) wanted: Option<u64>,
    /// Keys delivered since the view last answered, in delivery order
    /// (repeats possible): what its parsed form must take again.
    pub(super) changed: Vec<String>,
    /// The parsed form the view last answered with, patched at each
    /// answer by the keys that changed or aged out since.
    pub(super) answered: Option<Answered>,
}

/// A view's last answer, kept to be patched rather than parsed again.
pub(super) struct Answered {
    /// The bucket's parsed form (an `Arc<T>`, the `T` of
    /// [`Broker::read_bucket_viewed`]), shared with the answers given: an
    /// idle tick copies nothing, and a patch copies it only while an
    /// earlier answer is still held.
    pub(super) parsed: Box<dyn std::any::Any + Send>,
    /// The broker's clock at that answer's cut: an entry aged out then
    /// stays out at a later cut, not at an earlier one.
    pub(super) at: DateTime<Utc>,
    /// The bucket's max age at that cut.
    pub(super) max_age: Duration,
    /// The live entries that can age out, oldest first: (published,
    /// revision) → key. An entry changed since is skipped when it comes
    /// up (its revision no longer matches).
    pub(super) by_age: ByAge,
}

/// Live entries that can age out, oldest first: (published, revision) →
/// key.
pub(super) type ByAge = std::collections::BTreeMap<(DateTime<Utc>, u64), SmolStr>;

pub(super) struct Kept {
    pub(super) value: Held,
    pub(super) revision: u64,
    pub(super) published: DateTime<Utc>,
    /// The key's message before this one, as the watcher saw it (`None`:
    /// this is the first the watcher saw of the key): whether the key
    /// existed at a cut below this message's revision.
    pub(super) prior: Option<Prior>,
}

/// A key's earlier message: its revision and its broker timestamp (a
/// value or a delete marker alike: either keeps the key's subject in the
/// stream's count).
#[derive(Clone, Copy)]
pub(super) struct Prior {
    pub(super) revision: u64,
    pub(super) published: DateTime<Utc>,
}

impl Kept {
    pub(super) fn live(&self) -> bool {
        !matches!(self.value, Held::Gone)
    }

    /// The value's bytes, or why the view cannot answer without them.
    pub(super) fn bytes(&self, key: &str) -> Result<&bytes::Bytes, String> {
        match &self.value {
            Held::Bytes(bytes) => Ok(bytes),
            _ => Err(format!("the view no longer holds key {key}'s value")),
        }
    }
}

/// What a view holds of a key's value. The parsed answer is the view's
/// copy of a value once it is in it: keeping the bytes as well doubled
/// what a rebuild wrote and what the view held between ticks (a rebuild
/// took 1.4× a bare read, docs/performance.md).
pub(super) enum Held {
    /// Deleted or purged.
    Gone,
    /// Live, and in the view's last answer; its bytes are not kept. A
    /// view that would have to parse it again (its answer cannot be
    /// patched) is rebuilt instead.
    InAnswer,
    /// Live, with its bytes: changed since the last answer, or kept
    /// because the bucket's raw entries are asked for.
    Bytes(bytes::Bytes),
}

/// The bucket's stream at the tick's cut, from its leader.
pub(super) struct Cut {
    pub(super) last_seq: u64,
    pub(super) messages: u64,
    pub(super) subjects: u64,
    pub(super) created: DateTime<Utc>,
    /// The broker's clock in the answer.
    pub(super) broker: DateTime<Utc>,
    /// The bucket's max age; zero: entries never age out.
    pub(super) max_age: Duration,
}

/// Nothing went missing unseen: the keys the view holds at or below the
/// cut that have not aged out are no more than the keys the stream holds
/// (a purge or a raw delete removes messages without an event). A key
/// whose last message is a delete marker counts as the broker counts it:
/// the marker keeps its subject in `num_subjects`, so leaving it out
/// would let it hide one key removed without an event.
pub(super) fn counts_agree(s: &Seen, cut: &Cut) -> Result<(), String> {
    let held = s.keys.values().filter(|k| existed_at(k, cut)).count() as u64;
    if held > cut.subjects {
        return Err(format!(
            "the view holds {held} keys (delete markers included), the bucket's stream {} (messages removed without an event)",
            cut.subjects
        ));
    }
    Ok(())
}

/// Whether the key's subject held a message (a value or a delete marker)
/// at the cut, as far as the view says. A key written again after the cut
/// existed at it when its earlier message did: left out, each such rewrite
/// would hide one key removed without an event (docs/trim-floor.md, Proven
/// current). Two writes after the cut leave its state at the cut unknown:
/// counted, so that the check errs toward reading the bucket whole. A key
/// the watcher first saw after the cut did not exist at it as far as the
/// view knows.
pub(super) fn existed_at(k: &Kept, cut: &Cut) -> bool {
    if k.revision <= cut.last_seq {
        return !aged_out(k, cut);
    }
    match k.prior {
        None => false,
        Some(p) if p.revision <= cut.last_seq => !aged(p.published, cut),
        Some(_) => true,
    }
}

/// Whether the entry's age on the broker's clock passed the bucket's max
/// age at the cut.
pub(super) fn aged_out(k: &Kept, cut: &Cut) -> bool {
    aged(k.published, cut)
}

/// Whether an entry published at `published` is past the bucket's max age
/// at the cut, on the broker's clock.
pub(super) fn aged(published: DateTime<Utc>, cut: &Cut) -> bool {
    !cut.max_age.is_zero()
        && chrono::Duration::from_std(cut.max_age).is_ok_and(|age| published + age <= cut.broker)
}

/// Every live entry of the view parsed afresh, kept as the view's answer
/// to patch at the next.
pub(super) fn parse_whole<T: Patch>(
    s: &mut Seen,
    cut: &Cut,
    add: Sink<T>,
) -> Result<Arc<T>, String> {
    let mut parsed = T::default();
    let mut by_age = std::collections::BTreeMap::new();
    for (key, k) in live_in_order(s, cut) {
        let bytes = k.bytes(key).map_err(|e| {
            format!("the view's answer cannot be patched at this cut (the broker's clock went back, or the bucket's max age changed), and {e}")
        })?;
        add(&mut parsed, key, bytes, k.revision);
        if !cut.max_age.is_zero() {
            by_age.insert((k.published, k.revision), key.clone());
        }
    }
    parsed.settle();
    if !s.keeps_values {
        for k in s.keys.values_mut() {
            if k.live() {
                k.value = Held::InAnswer;
            }
        }
    }
    let parsed = Arc::new(parsed);
    s.changed.clear();
    s.answered = Some(Answered {
        parsed: Box::new(parsed.clone()),
        at: cut.broker,
        max_age: cut.max_age,
        by_age,
    });
    Ok(parsed)
}

/// The view's live entries at the cut, in revision order.
pub(super) fn live_in_order<'s>(s: &'s Seen, cut: &Cut) -> Vec<(&'s SmolStr, &'s Kept)> {
    let mut live: Vec<(&SmolStr, &Kept)> = s
        .keys
        .iter()
        .filter(|(_, k)| k.live() && !aged_out(k, cut))
        .collect();
    live.sort_unstable_by_key(|(_, k)| k.revision);
    live
}

pub(super) fn raw_entries(s: &Seen, cut: &Cut) -> Result<Vec<Entry>, String> {
    if !s.keeps_values {
        return Err("the view keeps no raw entries".into());
    }
    live_in_order(s, cut)
        .into_iter()
        .map(|(key, k)| {
            Ok(Entry {
                key: key.to_string(),
                value: k.bytes(key)?.to_vec(),
                revision: k.revision,
            })
        })
        .collect()
}
