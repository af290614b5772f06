//! `crewlet retention adopt -stream S [-confirm CREATED]`: the gesture is
//! `crewlet::gesture::adopt`; this prints what it came to.

use super::{AdoptArgs, Cli};
use crate::exit::{Class, Exit, Outcome as _};
use crate::gesture::adopt::{self, Outcome, Plan};

pub async fn run(cli: &Cli, args: &AdoptArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let checked = match adopt::check(&config, &args.stream, args.confirm.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Class::BadInput.exit();
        }
    };
    let broker = exit_on_err!(super::connect(&config).await);
    if let Err(exit) = super::require_stream(&broker, &config, &checked.domain).await {
        return exit;
    }
    let found = match adopt::facts(&broker, &config, &checked.domain).await {
        Ok(f) => f,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Class::Unreachable.exit();
        }
    };
    let outcome = match adopt::judge(&found.facts, checked.confirm) {
        Plan::Adopt => {
            let by = super::by_name(args.by.as_deref());
            adopt::apply(&broker, &config, &checked.domain, &found, &by).await
        }
        plan => Outcome::Judged {
            plan,
            stream: checked.domain.stream.clone(),
            facts: found.facts.clone(),
        },
    };
    let (out, err) = adopt::text(&outcome);
    match (cli.json, adopt::json(&outcome)) {
        (true, Some(v)) => println!("{v}"),
        _ => print!("{out}"),
    }
    if let Some(message) = err {
        match outcome.class() {
            Class::Refused => crate::cli::say::refused(outcome.code(), format_args!("{message}")),
            _ => crate::cli::say::error(format_args!("{message}")),
        }
    }
    outcome.exit()
}
