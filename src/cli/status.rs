//! `crewlet retention status [--json] [-stream S]`: the retention answer for
//! every domain from a fresh read, the published floors row beside it, and
//! the alarms on stderr. Exit 0 calm, 1 an alarm, 2 config, 3 unreachable.

use chrono::Utc;

use super::{Cli, StatusArgs};
use crate::alarms::{self, AlarmPolicy};
use crate::exit::Exit;
use crate::floor::FloorState;
use crate::preview;
use crate::report::{self, DomainStatus, Status};
use crate::rows::Timestamp;
use crate::tick::duty::{Duty, DutyStatus};

pub async fn run(cli: &Cli, args: &StatusArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let mut config = loaded.config;
    let server = (loaded.server.url.clone(), loaded.server.source.to_string());
    if let Some(s) = &args.stream {
        match super::domain_named(&config, s) {
            Ok(d) => config.domains = vec![d],
            Err(e) => {
                crate::cli::say::error(format_args!("{e}"));
                return Exit::Usage;
            }
        }
    }
    let broker = exit_on_err!(super::connect(&config).await);
    let now = Utc::now();
    let duty = Duty::observe(&broker, &config.buckets.duty).await;
    let crate::tick::Fresh {
        raw: rows,
        parsed,
        answers,
        offset,
        reads,
    } = crate::tick::answers(&broker, &config, "", now).await;
    // Nothing could be read: one broker_unreachable condition, every term
    // unreadable for that reason alone, exit 3 (never row remedies for
    // reads that were not made).
    let nothing = !answers.is_empty()
        && answers.iter().all(|a| a.stream_error.is_some())
        && parsed.all_failed();
    let outage = broker.outage().or_else(|| {
        nothing.then(|| crate::floor::Outage {
            since: Timestamp(now),
            servers: broker.url.clone(),
            refused: None,
        })
    });
    let answers: Vec<crate::floor::Answer> = match &outage {
        Some(o) => answers.into_iter().map(|a| a.unreachable(o)).collect(),
        None => answers,
    };
    // A preview: the same reads with the gestures applied in memory.
    let ask = args.preview();
    let previews = if ask.is_empty() || outage.is_some() {
        None
    } else {
        let policy = crate::floor::Policy::from_config(&config, "");
        let at = crate::clock::broker_now(offset, now);
        match preview::apply(&config, &parsed, &reads, &ask, policy.fence_window, at) {
            Ok(changed) => {
                let after =
                    crate::tick::compute_each(&config, &policy, &changed.rows, &changed.reads, at);
                Some(preview::compare(&ask, &answers, &after, &reads))
            }
            Err(refused) => {
                let message = format!("{refused}; nothing is previewed");
                match refused.class() {
                    crate::exit::Class::BadInput | crate::exit::Class::Unconfigured => {
                        crate::cli::say::error_coded(refused.code(), message)
                    }
                    _ => crate::cli::say::refused(refused.code(), message),
                }
                return refused.class().exit();
            }
        }
    };

    let view = match &duty {
        DutyStatus::Other {
            holder, claimed_at, ..
        } => alarms::DutyView::Held {
            holder: holder.clone(),
            claimed_at: *claimed_at,
        },
        DutyStatus::Held => alarms::DutyView::Unheld,
        DutyStatus::Free => alarms::DutyView::Unheld,
        DutyStatus::Unknown(e) => alarms::DutyView::Unreadable(e.clone()),
    };
    let mut policy = AlarmPolicy::from_config(&config);
    if outage.is_none() {
        policy.duty_max_age = broker
            .lease_max_age(&config.buckets.duty)
            .await
            .ok()
            .flatten();
        policy.presence_max_age = broker
            .lease_max_age(&config.buckets.presence)
            .await
            .ok()
            .flatten();
    }
    let active = alarms::evaluate(
        &answers,
        &view,
        offset,
        &policy,
        crate::clock::broker_now(offset, now),
        outage.as_ref(),
    );

    let domains = answers
        .into_iter()
        .map(|mut answer| {
            let published = match rows.floors() {
                Some(Ok(entries)) => entries
                    .iter()
                    .find(|e| e.key == answer.stream)
                    .and_then(|e| serde_json::from_slice::<serde_json::Value>(&e.value).ok()),
                Some(Err(_)) | None => None,
            };
            // The floor shown is the published one, never this read's guess.
            match parsed.published(&answer.stream) {
                Ok(Some((p, _))) => {
                    answer.floor = p.floor;
                    answer.trim_floor_state = p.trim_floor_state;
                }
                _ => {
                    answer.floor = None;
                    answer.trim_floor_state = FloorState::None;
                }
            }
            DomainStatus { answer, published }
        })
        .collect();
    let (duty_holder, duty_claimed_at) = match &duty {
        DutyStatus::Other {
            holder, claimed_at, ..
        } => (Some(holder.clone()), Some(*claimed_at)),
        _ => (None, None),
    };
    let status = Status {
        at: Timestamp(now),
        node: config.node.id.clone(),
        duty_holder,
        duty_claimed_at,
        duty_unknown: match &duty {
            DutyStatus::Unknown(e) => Some(e.clone()),
            _ => None,
        },
        server: Some(server),
        domains,
        alarms: active,
    };
    if cli.json {
        let mut v = report::status_json(&status);
        if let (Some(p), Some(obj)) = (&previews, v.as_object_mut()) {
            obj.insert(
                "preview".into(),
                serde_json::json!({"asked": preview::asked_json(&ask), "domains": p}),
            );
        }
        println!("{v}");
    } else {
        if let Some(p) = &previews {
            print!("{}", preview::text(p));
        }
        print!("{}", report::status_text(&status, now));
    }
    for a in &status.alarms {
        super::print_alarm(cli, a);
    }
    if outage.is_some() {
        Exit::Unreachable
    } else if status.alarms.is_empty() {
        Exit::Ok
    } else {
        Exit::Attention
    }
}
