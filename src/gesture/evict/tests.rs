use super::*;

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).expect("instant")
}

fn domain(stream: &str, gated: bool) -> Domain {
    Domain {
        name: stream.to_lowercase(),
        stream: stream.into(),
        gate_subject: gated.then(|| format!("{stream}.gate")),
        gate_reserve: true,
        feed_consumer: None,
        archive: None,
        replicas: Default::default(),
    }
}

fn ask(node: &str, force: bool) -> Ask {
    Ask {
        node: node.into(),
        confirm: Some(node.into()),
        force,
        by: "alice".into(),
        ..Ask::default()
    }
}

fn state() -> floor::StreamState {
    floor::StreamState {
        first_seq: 1,
        last_seq: 100,
        bytes: 0,
        messages: 100,
        consumers: 0,
        max_bytes: -1,
        created: at("2026-11-01T00:00:00Z"),
        first_ts: at("2026-11-01T00:00:00Z"),
        last_ts: at("2026-11-01T00:00:00Z"),
        facts: Default::default(),
        clustered: false,
        mark: None,
    }
}

fn gate_row(stream: &str, op: &str, seq: u64, state: GateState) -> GateRow {
    GateRow {
        node: "n1".into(),
        stream: stream.into(),
        state,
        op_id: op.into(),
        seq,
        landed_at: at("2026-11-30T00:00:00Z"),
        by: "bob".into(),
        force: false,
        reason: String::new(),
        stream_created: Some(at("2026-11-01T00:00:00Z")),
        generation: Some(0),
        format: crate::rows::FORMAT,
    }
}

/// Two gated logs (A, B) and an ungated one (C); the node seen, its
/// lease absent, the gates view readable with nothing in it.
fn facts() -> Facts {
    let logs = vec![domain("A", true), domain("B", true)];
    let at = logs
        .iter()
        .map(|d| {
            let incarnation = Incarnation {
                stream_created: at("2026-11-01T00:00:00Z"),
                generation: 0,
            };
            (
                d.stream.clone(),
                Ok(GatedAt {
                    incarnation,
                    state: state(),
                }),
            )
        })
        .collect();
    Facts {
        logs,
        ungated: vec![("c".into(), "C".into())],
        at,
        view: Ok(GatesView {
            op_row: None,
            gate_rows: BTreeMap::new(),
            entries: Vec::new(),
            errors: BTreeMap::new(),
        }),
        node: NodeFacts {
            seen: true,
            presence: Presence::Absent,
            evicted: false,
            readmit: Vec::new(),
        },
    }
}

fn readmit(stream: &str, position: Option<u64>, floor: Option<u64>) -> ReadmitFacts {
    ReadmitFacts {
        stream: stream.into(),
        position,
        left_gen: None,
        floor,
        first_seq: 1,
        generation: 0,
    }
}

fn view(f: &mut Facts) -> &mut GatesView {
    f.view.as_mut().expect("view")
}

/// What the judge gave, short: per log "write" or the outcome's words,
/// or the refusal's code.
fn verdict(sign: GateSign, a: &Ask, op: &OpId, f: &Facts) -> Result<Vec<String>, &'static str> {
    judge(sign, a, op, f)
        .map(|p| {
            p.logs
                .iter()
                .map(|(s, step)| match step {
                    Step::Write => format!("{s}: write"),
                    Step::Known(o) => format!("{s}: {}", o.text()),
                })
                .collect()
        })
        .map_err(|r| r.code())
}

/// The judge's table: where evict refuses a live node (`node_live`), an
/// unknown one, unreadable presence; where readmit refuses a node not
/// evicted or one behind what a log still holds; and per log what a
/// retry, a reused or undone operation, a gate in force and an
/// unreadable view come to.
#[test]
fn the_judge_refuses_or_plans_each_log() {
    use GateSign::{Evict, Readmit};
    let op = OpId::mint(chrono::Utc::now());
    let other = OpId::mint(chrono::Utc::now());
    let write_both = Ok(vec!["A: write".to_string(), "B: write".to_string()]);
    let f = facts();
    let with = |change: &dyn Fn(&mut Facts)| {
        let mut f = facts();
        change(&mut f);
        f
    };
    let op_row = |sign: GateSign, node: &str, logs: &[(&str, u64)]| OpRow {
        op_id: op.to_string(),
        sign,
        node: node.into(),
        logs: logs.iter().map(|(s, q)| (s.to_string(), *q)).collect(),
        format: crate::rows::FORMAT,
    };
    type Case = (
        &'static str,
        GateSign,
        Ask,
        Facts,
        Result<Vec<String>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        ("evict a node gone", Evict, ask("n1", false), f.clone(), write_both.clone()),
        (
            "evict a live node",
            Evict,
            ask("n1", false),
            with(&|f| f.node.presence = Presence::Live),
            Err("node_live"),
        ),
        (
            "evict a live node, forced",
            Evict,
            ask("n1", true),
            with(&|f| f.node.presence = Presence::Live),
            write_both.clone(),
        ),
        (
            "evict with presence unreadable",
            Evict,
            ask("n1", false),
            with(&|f| f.node.presence = Presence::Unreadable("gone".into())),
            Err("unjudged"),
        ),
        (
            "evict a node never seen",
            Evict,
            ask("n1", false),
            with(&|f| f.node.seen = false),
            Err("unknown_node"),
        ),
        (
            "a retry of an eviction is judged already",
            Evict,
            ask("n1", false),
            with(&|f| {
                f.node.presence = Presence::Live;
                view(f).op_row = Some(op_row(Evict, "n1", &[("A", 40)]));
            }),
            Ok(vec!["A: applied at 40".into(), "B: write".into()]),
        ),
        (
            "evicted already on a log",
            Evict,
            ask("n1", false),
            with(&|f| {
                view(f)
                    .gate_rows
                    .insert("B".into(), gate_row("B", other.as_str(), 30, GateState::Evicted));
            }),
            Ok(vec!["A: write".into(), "B: applied at 30".into()]),
        ),
        (
            "an operation id of another gesture",
            Evict,
            ask("n1", false),
            with(&|f| view(f).op_row = Some(op_row(Readmit, "n1", &[]))),
            Ok(vec![
                format!("A: not written: op_reused ({op} names readmit n1; start a new gesture without -op-id)"),
                format!("B: not written: op_reused ({op} names readmit n1; start a new gesture without -op-id)"),
            ]),
        ),
        (
            "undone by a later gate",
            Evict,
            ask("n1", false),
            with(&|f| {
                view(f).op_row = Some(op_row(Evict, "n1", &[("A", 40)]));
                view(f)
                    .gate_rows
                    .insert("A".into(), gate_row("A", other.as_str(), 50, GateState::Admitted));
            }),
            Ok(vec![
                "A: applied at 40".into(),
                format!("B: not written: superseded (a later gate ({other}) on n1 undid it on A; start a new gesture)"),
            ]),
        ),
        (
            "a log whose view cannot be brought up to date",
            Evict,
            ask("n1", false),
            with(&|f| {
                view(f).errors.insert("A".into(), "no leader".into());
            }),
            Ok(vec!["A: unknown (the gates view of this log cannot be brought up to date (no leader); nothing written)".into(), "B: write".into()]),
        ),
        (
            "the gates view unreadable",
            Evict,
            ask("n1", false),
            with(&|f| f.view = Err("bucket gone".into())),
            Ok(vec![
                "A: unknown (the gates view cannot be read: bucket gone)".into(),
                "B: unknown (the gates view cannot be read: bucket gone)".into(),
            ]),
        ),
        (
            "readmit a node not evicted",
            Readmit,
            ask("n1", false),
            f.clone(),
            Err("not_evicted"),
        ),
        (
            "readmit a node that kept up",
            Readmit,
            ask("n1", false),
            with(&|f| {
                f.node.evicted = true;
                f.node.readmit = vec![Ok(readmit("A", Some(60), Some(50))), Ok(readmit("B", Some(60), None))];
            }),
            write_both.clone(),
        ),
        (
            "readmit a node behind the floor",
            Readmit,
            ask("n1", false),
            with(&|f| {
                f.node.evicted = true;
                f.node.readmit = vec![Ok(readmit("A", Some(40), Some(50))), Ok(readmit("B", Some(60), None))];
            }),
            Err("below_floor"),
        ),
        (
            "readmit with a log unread",
            Readmit,
            ask("n1", false),
            with(&|f| {
                f.node.evicted = true;
                f.node.readmit = vec![Err("no leader".into()), Ok(readmit("B", Some(60), None))];
            }),
            Err("readmission_unjudged"),
        ),
    ];
    for (what, sign, a, f, want) in cases {
        assert_eq!(verdict(sign, &a, &op, &f), want, "{what}");
    }
    // A readmission places a join hold on each log it judged; a forced
    // eviction is said as forced.
    let mut r = facts();
    r.node.evicted = true;
    r.node.readmit = vec![Ok(readmit("A", Some(60), Some(50)))];
    let plan = judge(Readmit, &ask("n1", false), &op, &r).expect("plan");
    assert_eq!(plan.join, vec![readmit("A", Some(60), Some(50))]);
    let mut live = facts();
    live.node.presence = Presence::Live;
    let plan = judge(Evict, &ask("n1", true), &op, &live).expect("plan");
    assert_eq!(plan.forced, Some(EvictJudged::ForcedLive));
    assert!(plan.join.is_empty());
    assert_eq!(plan.ungated, vec![("c".to_string(), "C".to_string())]);
}
