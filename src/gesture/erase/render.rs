//! What `erase` says: the JSON both surfaces return and the text the CLI
//! prints.

use super::*;

/// The outcome as `--json` prints it (and the route answers).
pub fn json(ask: &Ask, o: &Outcome) -> serde_json::Value {
    match o {
        Outcome::BadInput(b) => json!({"error": b.code.code(), "message": b.message}),
        Outcome::Refused { refusal, message } => {
            json!({"error": refusal.code(), "message": message})
        }
        Outcome::Stopped { row, message } => json!({
            "error": "unfinished", "message": message, "row": row,
            "finish": finish_command(ask, &row.stream, &row.op_id),
        }),
        Outcome::Done { row, again } => json!({
            "op_id": row.op_id, "stream": row.stream, "subject": row.subject,
            "live_records": row.live_records, "archived_records": row.archived_records,
            "segments_rewritten": row.segments_rewritten, "finished": true, "again": again,
            "not_reached": NOT_REACHED,
        }),
    }
}

impl Outcome {
    /// The log an outcome with a row speaks of.
    pub fn stream(&self) -> Option<&str> {
        match self {
            Outcome::Stopped { row, .. } | Outcome::Done { row, .. } => Some(&row.stream),
            _ => None,
        }
    }
}

/// The outcome as text: (stdout, stderr); `archived`: the log has an
/// archive.
pub fn text(ask: &Ask, o: &Outcome, bucket: &str, archived: bool) -> (String, String) {
    match o {
        Outcome::BadInput(BadInput { message, .. }) | Outcome::Refused { message, .. } => {
            (String::new(), format!("refused erase: {message}\n"))
        }
        Outcome::Stopped { row, message } => (
            String::new(),
            format!(
                "erase {} from {} (op {}) stopped: {message}\n  so far: {} live record(s), {} archived record(s) in {} segment(s)\n  finish: {}\n",
                row.subject,
                row.stream,
                row.op_id,
                row.live_records,
                row.archived_records,
                row.segments_rewritten,
                finish_command(ask, &row.stream, &row.op_id)
            ),
        ),
        Outcome::Done { row, again } => {
            let mut out = format!(
                "erase {} from {} (op {}){}:\n",
                row.subject,
                row.stream,
                row.op_id,
                if *again { ", finished earlier; nothing done now" } else { "" }
            );
            out.push_str(&format!(
                "  live log: {} record(s) purged (a purge filtered to {}; no other record moved)\n",
                row.live_records, row.subject
            ));
            // A log without an archive has nothing there to erase: say so,
            // not "0 record(s) removed", which reads as a search that found
            // nothing.
            if archived {
                out.push_str(&format!(
                    "  archive: {} record(s) removed, {} segment(s) rewritten and verified\n",
                    row.archived_records, row.segments_rewritten
                ));
            } else {
                out.push_str("  archive: none configured for this log\n");
            }
            out.push_str(&format!(
                "  recorded in {bucket} as {}.{} (by {}, at {}, reason {:?})\n",
                row.stream, row.op_id, row.by, row.at, row.reason
            ));
            out.push_str(&format!("  {NOT_REACHED}\n"));
            (out, String::new())
        }
    }
}
