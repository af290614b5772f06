//! `crewlet token add|list|revoke`: the HTTP surface's bearer tokens. A
//! new token is printed once and never stored: the file keeps its SHA-256.
//! Nothing here connects to the broker.

use super::{Cli, Token, TokenFileArgs};
use crate::exit::Exit;
use crate::http::tokens::{self, Entry};

/// `--file`, else the configuration's `http.tokens_file`.
fn path_of(cli: &Cli, args: &TokenFileArgs) -> Result<std::path::PathBuf, Exit> {
    if let Some(f) = &args.file {
        return Ok(f.clone());
    }
    let loaded = super::load_config(cli)?;
    loaded.config.http.tokens_file.ok_or_else(|| {
        crate::cli::say::error(format_args!(
            "the configuration sets no http.tokens_file; set it, or pass --file PATH"
        ));
        Exit::Usage
    })
}

pub fn run(cli: &Cli, t: &Token) -> Exit {
    match t {
        Token::Add(a) => add(cli, a),
        Token::List(a) => list(cli, a),
        Token::Revoke(a) => revoke(cli, a),
    }
}

fn load(path: &std::path::Path) -> Result<tokens::TokenFile, Exit> {
    tokens::load(path).map_err(|e| {
        crate::cli::say::error(format_args!("{e}"));
        Exit::Usage
    })
}

fn save(path: &std::path::Path, file: &tokens::TokenFile) -> Result<(), Exit> {
    tokens::store(path, file).map_err(|e| {
        crate::cli::say::error(format_args!("{e}"));
        Exit::Usage
    })
}

fn add(cli: &Cli, a: &super::TokenAddArgs) -> Exit {
    if let Err(e) = crate::rows::check_node_id(&a.name) {
        crate::cli::say::error(format_args!("token name {e}"));
        return Exit::Usage;
    }
    let scopes = match tokens::parse_scopes(&a.scopes) {
        Ok(s) => s,
        Err(e) => {
            crate::cli::say::error(format_args!("--scopes: {e}"));
            return Exit::Usage;
        }
    };
    let path = exit_on_err!(path_of(cli, &a.file));
    let mut file = exit_on_err!(load(&path));
    if file.tokens.iter().any(|t| t.name == a.name) {
        crate::cli::say::error(format_args!(
            "a token named {} exists; revoke it first (crewlet token revoke {} --file {})",
            a.name,
            a.name,
            path.display()
        ));
        return Exit::Usage;
    }
    let token = match tokens::mint() {
        Ok(t) => t,
        Err(e) => {
            crate::cli::say::error(format_args!("{e}"));
            return Exit::Unreachable;
        }
    };
    file.tokens.push(Entry {
        name: a.name.clone(),
        sha256: tokens::hash(&token),
        scopes: scopes.clone(),
    });
    exit_on_err!(save(&path, &file));
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"name": a.name, "scopes": scopes, "token": token, "file": path})
        );
    } else {
        println!("{token}");
        eprintln!(
            "token {} ({}) added to {}; it is printed this once and stored only as its SHA-256",
            a.name,
            scopes.join(","),
            path.display()
        );
    }
    Exit::Ok
}

fn list(cli: &Cli, a: &TokenFileArgs) -> Exit {
    let path = exit_on_err!(path_of(cli, a));
    let file = exit_on_err!(load(&path));
    if cli.json {
        let rows: Vec<_> = file
            .tokens
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "scopes": t.scopes}))
            .collect();
        println!("{}", serde_json::json!({"tokens": rows}));
    } else {
        let mut rows = vec![vec!["NAME".to_string(), "SCOPES".into()]];
        rows.extend(
            file.tokens
                .iter()
                .map(|t| vec![t.name.clone(), t.scopes.join(",")]),
        );
        print!("{}", crate::report::table(&rows, ""));
    }
    Exit::Ok
}

fn revoke(cli: &Cli, a: &super::TokenRevokeArgs) -> Exit {
    let path = exit_on_err!(path_of(cli, &a.file));
    let mut file = exit_on_err!(load(&path));
    let before = file.tokens.len();
    file.tokens.retain(|t| t.name != a.name);
    if file.tokens.len() == before {
        crate::cli::say::error(format_args!(
            "no token named {:?} in {}; known: {}",
            a.name,
            path.display(),
            file.tokens
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Exit::Usage;
    }
    exit_on_err!(save(&path, &file));
    if cli.json {
        println!("{}", serde_json::json!({"revoked": a.name}));
    } else {
        println!("revoked {}", a.name);
    }
    Exit::Ok
}
