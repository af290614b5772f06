//! `crewlet retention reanchor -stream S [-confirm CREATED]`: the gesture
//! is `crewlet::gesture::reanchor`; this prints what it came to.

use super::{Cli, ReanchorArgs};
use crate::exit::{Class, Exit, Outcome as _};
use crate::gesture::reanchor::{self, Outcome};

pub async fn run(cli: &Cli, args: &ReanchorArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let checked = match reanchor::check(&config, &args.stream, args.confirm.as_deref()) {
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
    let found = match reanchor::facts(&broker, &config, &checked.domain).await {
        Ok(f) => f,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Class::Unreachable.exit();
        }
    };
    let outcome = match reanchor::decide(&checked, &found) {
        Ok(next) => {
            let by = super::by_name(args.by.as_deref());
            reanchor::apply(&broker, &config, &checked.domain, &found, next, &by).await
        }
        Err(o) => o,
    };
    let (out, err) = reanchor::text(&outcome);
    match (cli.json, reanchor::json(&outcome)) {
        (true, Some(v)) => println!("{v}"),
        _ => print!("{out}"),
    }
    if let Some(message) = err {
        match outcome {
            Outcome::ConfirmMismatch { .. } => {
                crate::cli::say::refused(outcome.code(), format_args!("{message}"))
            }
            _ => crate::cli::say::error(format_args!("{message}")),
        }
    }
    outcome.exit()
}
