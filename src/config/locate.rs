//! Where each field of a YAML file stands: a map from a field path
//! (`domains[1].name`) to its line, so that every configuration problem,
//! including ones found long after parsing, points at the line to edit.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Field paths to 1-based line numbers.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    lines: HashMap<String, usize>,
}

/// A YAML syntax error with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub message: String,
}

impl SourceMap {
    /// Scans `text`. A syntax error is returned with its line, since nothing
    /// else can be said about a file that does not parse.
    pub fn build(text: &str) -> Result<Self, SyntaxError> {
        let mut recv = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut recv, false).map_err(|e| SyntaxError {
            line: e.marker().line(),
            message: e.info().to_string(),
        })?;
        Ok(SourceMap { lines: recv.lines })
    }

    /// The line of `path`, or of its nearest ancestor that is in the file
    /// (a missing field is reported at the section that lacks it).
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(line) = self.lines.get(p) {
                return Some(*line);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

enum Frame {
    Map {
        path: String,
        /// The path of the key whose value comes next, if a key was read.
        pending_key: Option<String>,
    },
    Seq {
        path: String,
        index: usize,
    },
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Recorder {
    /// The path of the node that starts now, recording its line when it is
    /// a sequence item; `None` when the node is a mapping key.
    fn node_path(&mut self, line: usize) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Map { pending_key, .. }) => pending_key.take(),
            Some(Frame::Seq { path, index }) => {
                let item = format!("{path}[{index}]");
                *index += 1;
                self.lines.entry(item.clone()).or_insert(line);
                Some(item)
            }
        }
    }
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(value, ..) => {
                if let Some(Frame::Map { path, pending_key }) = self.stack.last_mut() {
                    if pending_key.is_none() {
                        let key = join(path, &value);
                        self.lines.entry(key.clone()).or_insert(line);
                        *pending_key = Some(key);
                        return;
                    }
                }
                self.node_path(line);
            }
            Event::Alias(_) => {
                self.node_path(line);
            }
            Event::MappingStart(..) => {
                let path = self.node_path(line).unwrap_or_default();
                self.stack.push(Frame::Map {
                    path,
                    pending_key: None,
                });
            }
            Event::SequenceStart(..) => {
                let path = self.node_path(line).unwrap_or_default();
                self.stack.push(Frame::Seq { path, index: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_fields_and_list_items() {
        let text = "node:\n  id: n1\nretention:\n  min_age: 2h\ndomains:\n  - name: a\n    stream: A\n  - name: b\n    stream: B\nnats: {url: x, tls: {ca: c}}\n";
        let map = SourceMap::build(text).expect("parses");
        assert_eq!(map.line_of("node"), Some(1));
        assert_eq!(map.line_of("node.id"), Some(2));
        assert_eq!(map.line_of("retention.min_age"), Some(4));
        assert_eq!(map.line_of("domains[0].name"), Some(6));
        assert_eq!(map.line_of("domains[1].stream"), Some(9));
        assert_eq!(map.line_of("domains[1]"), Some(8));
        assert_eq!(map.line_of("nats.tls.ca"), Some(10));
        // A field the file lacks is placed at its section.
        assert_eq!(map.line_of("retention.tick"), Some(3));
        assert_eq!(map.line_of("trim.enabled"), None);
    }

    #[test]
    fn syntax_errors_carry_their_line() {
        let err = SourceMap::build("node:\n  id: n1\n  duty: [true\nretention: {}\n").unwrap_err();
        assert!(err.line >= 3, "{err:?}");
    }
}
