//! Parsing: the file read section by section, each failure a problem at
//! the field it names, so that one mistake never hides the next.

use super::*;

pub(super) const SECTIONS: [&str; 7] = [
    "node",
    "nats",
    "buckets",
    "retention",
    "trim",
    "http",
    "domains",
];

/// Parses and validates `text`. Pure: no files, no environment, no clock.
pub fn check(text: &str) -> Checked {
    let source = match SourceMap::build(text) {
        Ok(map) => map,
        Err(e) => {
            let mut p = Problem::error("(syntax)", format!("not valid YAML: {}", e.message));
            p.line = Some(e.line);
            return Checked {
                config: None,
                problems: vec![p],
                source: SourceMap::default(),
                has_nats_section: false,
            };
        }
    };
    let mut problems = Vec::new();
    // Parsed once; the sections, the quoting of durations and the caller's
    // question about `nats:` all read this value.
    let root: Option<serde_yaml::Value> = match serde_yaml::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            let mut p = Problem::error("(syntax)", format!("not valid YAML: {e}"));
            p.line = e.location().map(|l| l.line());
            problems.push(p);
            None
        }
    };
    let has_nats_section = root.as_ref().is_some_and(|r| r.get("nats").is_some());
    let config = root
        .clone()
        .and_then(|root| parse_sections(root, &mut problems));
    if let (Some(config), Some(root)) = (&config, &root) {
        let mut found = config.validate();
        quote_durations(root, config, &mut found);
        problems.extend(found);
    }
    // A section that failed to parse is replaced by its defaults so that the
    // rest can be validated; drop what validation said about the stand-ins.
    let parse = |p: &Problem| matches!(p.mark, Some(Mark::Parse | Mark::ParseField));
    let failed: Vec<String> = problems
        .iter()
        .filter(|p| p.mark == Some(Mark::Parse))
        .map(|p| p.field.clone())
        .collect();
    // A field taken out stands in with its default: what validation says
    // of it, or of a rule between it and another field, is about the
    // stand-in.
    let taken_out: Vec<String> = problems
        .iter()
        .filter(|p| p.mark == Some(Mark::Removed))
        .map(|p| p.field.clone())
        .collect();
    problems.retain(|p| p.mark != Some(Mark::Removed));
    problems.retain(|p| {
        parse(p)
            || !(failed.iter().any(|f| within(&p.field, f))
                || taken_out
                    .iter()
                    .any(|f| p.field.starts_with(f.as_str()) || mentions(&p.message, f)))
    });
    for p in &mut problems {
        if parse(p) {
            p.mark = None;
        }
        p.line = source.line_of(&p.field);
    }
    // In file order, so the report reads top to bottom like the file.
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    let ok = !problems.iter().any(Problem::is_error);
    Checked {
        config: if ok { config } else { None },
        problems,
        source,
        has_nats_section,
    }
}

/// Whether a message speaks of the field `retention.min_age` (by its key).
pub(super) fn mentions(message: &str, field: &str) -> bool {
    let key = field.rsplit('.').next().unwrap_or(field);
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == key)
}

/// A range error quotes the duration as the file wrote it (`"2400h"`), not
/// as it reads back (`100d`).
pub(super) fn quote_durations(root: &serde_yaml::Value, config: &Config, problems: &mut [Problem]) {
    for p in problems {
        let Some(key) = p.field.strip_prefix("retention.") else {
            continue;
        };
        let Some(b) = DUR_BOUNDS.iter().find(|b| b.field == key) else {
            continue;
        };
        let Some(written) = root
            .get("retention")
            .and_then(|r| r.get(key))
            .and_then(serde_yaml::Value::as_str)
        else {
            continue;
        };
        let shown = (b.get)(&config.retention).to_string();
        if let Some(rest) = p.message.strip_prefix(&shown) {
            p.message = format!("{written:?}{rest}");
        }
    }
}

/// Is `field` the same as `section` or inside it?
pub(super) fn within(field: &str, section: &str) -> bool {
    let section = section_of(section);
    field == section
        || field.starts_with(&format!("{section}."))
        || field.starts_with(&format!("{section}["))
}

/// The section (or domain) a parse error path belongs to: `domains[2].x`
/// belongs to `domains[2]`, `retention.tick` to `retention`.
pub(super) fn section_of(field: &str) -> &str {
    if let Some(rest) = field.strip_prefix("domains[") {
        if let Some(end) = rest.find(']') {
            return &field[..8 + end + 1];
        }
    }
    field.split(['.', '[']).next().unwrap_or(field)
}

/// What a problem marks while `check` is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A parse failure: the whole section (or domain) stands in with its
    /// defaults.
    Parse,
    /// As `Parse`, for one field taken out of a section that then parsed.
    ParseField,
    /// Not a problem: the path of what was taken out for a `ParseField`
    /// (the field itself, or the block that held a required one), so that
    /// what validation says of its stand-in is dropped. `check` removes it.
    Removed,
}

impl Problem {
    fn marked(mut self, mark: Mark) -> Problem {
        self.mark = Some(mark);
        self
    }
}

pub(super) fn parse_sections(
    root: serde_yaml::Value,
    problems: &mut Vec<Problem>,
) -> Option<Config> {
    let map = match root {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => serde_yaml::Mapping::new(),
        _ => {
            problems.push(Problem::error(
                "(top level)",
                format!(
                    "the file must be a mapping with the sections {}",
                    SECTIONS.join(", ")
                ),
            ));
            return None;
        }
    };
    for key in map.keys() {
        let name = key.as_str().unwrap_or("");
        if !SECTIONS.contains(&name) {
            problems.push(Problem::error(
                yaml_key_text(key),
                format!("unknown section; allowed: {}", SECTIONS.join(", ")),
            ));
        }
    }
    let get = |name: &str| map.get(name).cloned();

    let node: Option<NodeConfig> = match get("node") {
        None => {
            problems.push(Problem::error(
                "node",
                "missing; every sidecar needs node.id (a node id: letter or digit, then letters, digits, '.', '_' or '-')",
            ));
            None
        }
        Some(v) => section(v, "node", problems),
    };
    let nats = get("nats").map_or(Some(NatsConfig::default()), |v| {
        section(v, "nats", problems)
    });
    let buckets = get("buckets").map_or(Some(Buckets::default()), |v| {
        section(v, "buckets", problems)
    });
    let retention = get("retention").map_or(Some(Retention::default()), |v| {
        section(v, "retention", problems)
    });
    let trim = get("trim").map_or(Some(Trim::default()), |v| section(v, "trim", problems));
    let http = get("http").map_or(Some(Http::default()), |v| section(v, "http", problems));

    let mut domains = Vec::new();
    match get("domains") {
        None | Some(serde_yaml::Value::Null) => {}
        Some(serde_yaml::Value::Sequence(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                let path = format!("domains[{i}]");
                let domain = section::<Domain>(item, &path, problems).unwrap_or_else(|| Domain {
                    name: String::new(),
                    stream: String::new(),
                    gate_subject: None,
                    gate_reserve: true,
                    feed_consumer: None,
                    archive: None,
                    replicas: Replicas::default(),
                });
                domains.push(domain);
            }
        }
        Some(_) => problems.push(
            Problem::error(
                "domains",
                "must be a list of domains (- name: …, stream: …)",
            )
            .marked(Mark::Parse),
        ),
    }

    // Stand-ins keep validation going over the sections that did parse.
    Some(Config {
        node: node.unwrap_or(NodeConfig {
            id: "placeholder".into(),
            duty: true,
        }),
        nats: nats.unwrap_or_default(),
        buckets: buckets.unwrap_or_default(),
        retention: retention.unwrap_or_default(),
        trim: trim.unwrap_or_default(),
        http: http.unwrap_or_default(),
        domains,
    })
}

pub(super) fn yaml_key_text(key: &serde_yaml::Value) -> String {
    match key {
        // A key that is the empty string is written as YAML writes it, so
        // that the problem names something the reader can find.
        serde_yaml::Value::String(s) if s.is_empty() => "\"\"".into(),
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into()),
    }
}

/// Deserializes one section, turning each failure into a problem at the
/// exact field serde stopped on. A field that fails is reported and taken
/// out (its default stands in), and the section is read again, so a type
/// error in one field does not hide one in the next (docs/runbook.md, Configuration
/// errors). A section that cannot stand without the field (a required one)
/// is given up: `None`.
pub(super) fn section<T: DeserializeOwned>(
    value: serde_yaml::Value,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    // An empty section (`trim:` with nothing under it) means its defaults.
    let mut value = match value {
        serde_yaml::Value::Null => serde_yaml::Value::Mapping(serde_yaml::Mapping::new()),
        v => v,
    };
    // The paths (below the section) taken out so far.
    let mut taken_out: Vec<Vec<String>> = Vec::new();
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => return Some(v),
            Err(e) => e,
        };
        let inner = e.path().to_string();
        let raw = e.inner().to_string();
        let at_root = inner == "." || inner.is_empty() || inner == "?";
        let mut keys: Vec<String> = if at_root {
            Vec::new()
        } else {
            map_keys(&inner)
        };
        // Taking a required field out only makes it missing, which was
        // already said: take out what holds it instead (a nested block
        // stands in with its defaults), or give the section up.
        let missing = taken_out.iter().find(|t| {
            t.last()
                .is_some_and(|k| raw.starts_with(&format!("missing field `{k}`")))
                && t[..t.len() - 1] == keys[..]
        });
        if let Some(t) = missing {
            if t.len() < 2 {
                return None;
            }
            let parent = t[..t.len() - 1].to_vec();
            remove_at(&mut value, &parent);
            taken_out.push(parent);
            continue;
        }
        let field = if at_root {
            path.to_string()
        } else {
            format!("{path}.{inner}")
        };
        // The deepest key of the path that names a mapping entry: only the
        // field that failed stands in with its default, so that the rest of
        // its block is still checked (a relative archive dir beside an
        // unknown field in the same block).
        while !keys.is_empty() && !has_at(&value, &keys) {
            keys.pop();
        }
        let removable = !keys.is_empty();
        let mark = if removable {
            Mark::ParseField
        } else {
            Mark::Parse
        };
        problems.push(Problem::error(field, crate::human::serde_message(&raw)).marked(mark));
        if !removable || taken_out.len() > 64 {
            return None;
        }
        remove_at(&mut value, &keys);
        problems
            .push(Problem::error(format!("{path}.{}", keys.join(".")), "").marked(Mark::Removed));
        taken_out.push(keys);
    }
}

/// The mapping keys of a serde path (`archive.segment_bytes`), up to the
/// first sequence index (`subjects[0]` stops at `subjects`).
pub(super) fn map_keys(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((key, _)) => {
                if !key.is_empty() {
                    out.push(key.to_string());
                }
                break;
            }
            None => out.push(part.to_string()),
        }
    }
    out
}

/// Whether `keys` names an entry of nested mappings in `value`.
pub(super) fn has_at(value: &serde_yaml::Value, keys: &[String]) -> bool {
    let mut v = value;
    for k in keys {
        match v.as_mapping().and_then(|m| m.get(k.as_str())) {
            Some(next) => v = next,
            None => return false,
        }
    }
    true
}

/// Removes the entry `keys` names in nested mappings of `value`.
pub(super) fn remove_at(value: &mut serde_yaml::Value, keys: &[String]) {
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut v = value;
    for k in parents {
        match v.as_mapping_mut().and_then(|m| m.get_mut(k.as_str())) {
            Some(next) => v = next,
            None => return,
        }
    }
    if let Some(m) = v.as_mapping_mut() {
        m.remove(last.as_str());
    }
}
