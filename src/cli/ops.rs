//! `set-capacity` and `erase`: a check, the gesture, its words.

use super::*;

/// Who a gesture is by: `-by`, else the OS account's login name, else
/// `$USER` or `$LOGNAME`, else `unknown`. The account comes first: cron and
/// systemd units often run without `$USER`, and the record should still
/// name someone.
/// `crewlet retention set-capacity`: judged before anything is written
/// (`crewlet::gesture::capacity`).
pub(super) async fn set_capacity(cli: &Cli, args: &SetCapacityArgs) -> Exit {
    use crate::gesture::capacity::{self as set_capacity, Ask, BadInput, Outcome};
    let loaded = exit_on_err!(load_config(cli));
    let config = loaded.config;
    let ask = Ask {
        stream: args.stream.clone(),
        bytes: args.bytes.clone(),
        confirm: args.confirm.clone().unwrap_or_default(),
        surface: crate::human::Surface::Cli,
    };
    let outcome = if args.confirm.is_none() {
        Outcome::BadInput(BadInput {
            code: crate::exit::InputFault::ConfirmMismatch,
            message: format!(
                "confirm_mismatch: -confirm is required: repeat the target ({}) exactly as given; nothing written",
                args.bytes
            ),
        })
    } else {
        match set_capacity::check(&config, &ask) {
            Err(b) => Outcome::BadInput(b),
            Ok((domain, target)) => {
                let broker = exit_on_err!(connect(&config).await);
                set_capacity::perform(&config, &broker, &domain, target).await
            }
        }
    };
    if cli.json {
        println!("{}", set_capacity::json(&outcome));
    } else {
        let (out, err) = set_capacity::text(&outcome);
        print!("{out}");
        eprint!("{err}");
    }
    outcome.exit()
}

/// `crewlet retention erase` (`crewlet::gesture::erase`).
pub(super) async fn erase(cli: &Cli, args: &EraseArgs) -> Exit {
    use crate::gesture::erase::{self, Ask, Outcome};
    let loaded = exit_on_err!(load_config(cli));
    let config = loaded.config;
    let ask = Ask {
        stream: args.stream.clone(),
        subject: args.subject.clone(),
        reason: args.reason.clone(),
        confirm: args.confirm.clone(),
        op_id: args.op_id.clone(),
        by: by_name(args.by.as_deref()),
        surface: crate::human::Surface::Cli,
    };
    let outcome = match erase::check(&config, &ask) {
        Err(b) => Outcome::BadInput(b),
        Ok((domain, op)) => {
            let broker = exit_on_err!(connect(&config).await);
            // Said once it is judged, before anything is removed: a run
            // killed part-way is finished by this command.
            let said = |op: &crate::rows::OpId| {
                eprintln!(
                    "erasing {} from {} as op {op}; if this stops part-way, finish it with: {}",
                    ask.subject,
                    domain.stream,
                    erase::finish_command(&ask, &domain.stream, op.as_str())
                )
            };
            erase::perform(&config, &broker, &domain, &ask, op, said).await
        }
    };
    if cli.json {
        println!("{}", erase::json(&ask, &outcome));
    } else {
        let archived = config
            .domains
            .iter()
            .any(|d| d.archive.is_some() && Some(d.stream.as_str()) == outcome.stream());
        let (out, err) = erase::text(&ask, &outcome, &config.buckets.erasures, archived);
        print!("{out}");
        eprint!("{err}");
    }
    outcome.exit()
}
