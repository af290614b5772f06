//! `crewlet retention evict` and `readmit`: the gesture itself is
//! `crewlet::gesture`; this prints what it came to.

use super::{Cli, GestureArgs};
use crate::exit::Exit;
use crate::gesture::evict::{self as gesture, Ask, Performed};
use crate::rows::GateSign;

pub async fn run(cli: &Cli, sign: GateSign, args: &GestureArgs) -> Exit {
    let loaded = exit_on_err!(super::load_config(cli));
    let config = loaded.config;
    let ask = Ask {
        node: args.node.clone(),
        confirm: args.confirm.clone(),
        force: args.force,
        op_id: args.op_id.clone(),
        reason: args.reason.clone(),
        by: super::by_name(args.by.as_deref()),
    };
    // Bad input is refused before connecting.
    let performed = match gesture::check(&config, &ask) {
        Err(p) => p,
        Ok(op) => {
            let broker = exit_on_err!(super::connect(&config).await);
            gesture::perform(&config, &broker, sign, &ask, op).await
        }
    };
    if cli.json && !matches!(performed, Performed::NoGatedLog) {
        println!(
            "{}",
            gesture::json(sign, &ask, &performed, crate::human::Surface::Cli)
        );
    } else {
        let (out, err) = gesture::text(sign, &ask, &performed);
        print!("{out}");
        eprint!("{err}");
    }
    performed.exit()
}
