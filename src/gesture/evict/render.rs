//! What `evict` and `readmit` say: the JSON both surfaces return, the
//! text the CLI prints, and the exact commands that run or finish the
//! gesture (each one the operator can paste as printed).

use super::*;

/// The command that runs (or, with `op`, finishes) this gesture.
fn command(sign: GateSign, args: &Ask, op: Option<&OpId>) -> String {
    let mut c = format!(
        "crewlet retention {} {} -confirm {}",
        sign.as_str(),
        args.node,
        args.node
    );
    if let Some(op) = op {
        c.push_str(&format!(" -op-id {op}"));
    }
    if args.force {
        c.push_str(" -force");
    }
    if let Some(r) = &args.reason {
        c.push_str(&format!(" -reason {}", crate::human::shell_word(r)));
    }
    c
}

/// The command that finishes a log that did not finish, if any.
fn finish_cmd(sign: GateSign, args: &Ask, op: &OpId, o: &LogOutcome) -> Option<String> {
    match o {
        LogOutcome::Applied { .. } | LogOutcome::Pending { .. } => None,
        LogOutcome::NotWritten { reason, .. } if reason.needs_new_gesture() => {
            Some(command(sign, args, None))
        }
        _ => Some(command(sign, args, Some(op))),
    }
}

/// What a gesture means for a log without a `gate_subject`.
fn ungated_words(sign: GateSign, domain: &str, node: &str) -> String {
    let effect = match sign {
        GateSign::Evict => format!("this log keeps counting {node}"),
        GateSign::Readmit => format!("this log never stopped counting {node}"),
    };
    format!("takes no gate record (domain {domain} has no gate_subject): nothing written, {effect}")
}

/// The gesture's answer as `--json` prints it (and the HTTP route answers).
pub fn json(
    sign: GateSign,
    args: &Ask,
    p: &Performed,
    surface: crate::human::Surface,
) -> serde_json::Value {
    match p {
        Performed::NoGatedLog => {
            json!({"sign": sign.as_str(), "node": args.node, "op_id": null, "refused": "no_gated_log", "message": NO_GATED_LOG, "logs": []})
        }
        Performed::Refused { op, refusal } => {
            json!({"sign": sign.as_str(), "node": args.node, "op_id": op.as_ref().map(|o| o.to_string()), "refused": refusal.code(), "message": refusal.words(surface), "logs": []})
        }
        Performed::Done { op, logs, ungated } => {
            let rows: Vec<_> = logs
                .iter()
                .map(|(stream, o)| {
                    let mut v = serde_json::to_value(o).unwrap_or_default();
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert("stream".into(), json!(stream));
                        obj.insert("finish".into(), json!(finish_cmd(sign, args, op, o)));
                    }
                    v
                })
                .collect();
            let ungated: Vec<_> = ungated
                .iter()
                .map(|(domain, stream)| json!({"domain": domain, "stream": stream, "message": ungated_words(sign, domain, &args.node)}))
                .collect();
            json!({"sign": sign.as_str(), "node": args.node, "op_id": op.to_string(), "finished": p.finished(), "logs": rows, "ungated": ungated})
        }
    }
}

/// The gesture's answer as text: (stdout, stderr).
pub fn text(sign: GateSign, args: &Ask, p: &Performed) -> (String, String) {
    match p {
        Performed::NoGatedLog => (String::new(), format!("error: {NO_GATED_LOG}\n")),
        Performed::Refused { op, refusal } => {
            let op_txt = op
                .as_ref()
                .map(|o| format!(" (op {o})"))
                .unwrap_or_default();
            (
                String::new(),
                format!(
                    "refused {} {}{op_txt}: {refusal}\n",
                    sign.as_str(),
                    args.node
                ),
            )
        }
        Performed::Done { op, logs, ungated } => {
            let mut out = format!("{} {} (op {op}):\n", sign.as_str(), args.node);
            let width = logs
                .iter()
                .map(|(s, _)| s.len())
                .chain(ungated.iter().map(|(_, s)| s.len()))
                .max()
                .unwrap_or(0);
            for (stream, o) in logs {
                out.push_str(&format!("  {stream:<width$}  {}\n", o.text()));
                if let Some(cmd) = finish_cmd(sign, args, op, o) {
                    out.push_str(&format!("    finish: {cmd}\n"));
                }
            }
            for (domain, stream) in ungated {
                out.push_str(&format!(
                    "  {stream:<width$}  {}\n",
                    ungated_words(sign, domain, &args.node)
                ));
            }
            if sign == GateSign::Evict && p.finished() {
                out.push_str(
                    "the node stops being counted once the fence window passes after each record lands\n",
                );
            }
            (out, String::new())
        }
    }
}
