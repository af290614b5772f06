use super::*;

fn row(stream: &str, subject: &str, finished: bool) -> ErasureRow {
    ErasureRow {
        op_id: "op".into(),
        stream: stream.into(),
        subject: subject.into(),
        reason: "r".into(),
        by: "me".into(),
        at: Timestamp(chrono::DateTime::<Utc>::UNIX_EPOCH),
        live_records: 0,
        archived_records: 0,
        segments_rewritten: 0,
        live_through: 0,
        pending: None,
        finished,
    }
}

#[test]
fn judge_target_table() {
    let subjects = vec!["L.>".to_string(), "crewlet.l.gate".to_string()];
    let gate = Some("crewlet.l.gate");
    for (subject, want) in [
        ("L.user.1", None),
        ("crewlet.l.gate", Some(Refusal::GateSubject)),
        ("M.user.1", Some(Refusal::SubjectNotInStream)),
    ] {
        let got = judge_target("L", gate, Some(&subjects), subject)
            .err()
            .map(|r| r.0);
        assert_eq!(got, want, "{subject}");
    }
    // Before the stream is read, only the gate subject is judged.
    assert!(judge_target("L", gate, None, "M.user.1").is_ok());
    assert!(judge_target("L", gate, None, "crewlet.l.gate").is_err());
}

#[test]
fn judge_prior_table() {
    let j = |prior| judge_prior("L", "L.u", "op", "crewlet_erasures/L.op", prior);
    assert_eq!(j(None), Ok(Start::Fresh));
    assert_eq!(
        j(Some(Ok(row("L", "L.u", false)))),
        Ok(Start::Resume(Box::new(row("L", "L.u", false))))
    );
    assert_eq!(
        j(Some(Ok(row("L", "L.u", true)))),
        Ok(Start::Finished(Box::new(row("L", "L.u", true))))
    );
    for prior in [
        Some(Ok(row("L", "L.other", false))),
        Some(Ok(row("M", "L.u", false))),
        Some(Err("not json".to_string())),
    ] {
        assert_eq!(j(prior).err().map(|r| r.0), Some(Refusal::OpReused));
    }
}

#[test]
fn only_a_literal_subject_is_taken() {
    for ok in ["user.42", "a", "people.eu.7f3a-9", "p_1.x-y"] {
        assert_eq!(check_subject(ok), Ok(()), "{ok}");
    }
    for bad in [
        "", "user.*", "user.>", ">", "user..42", ".user", "user.", "user 42", "a.\t",
    ] {
        assert!(check_subject(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn stream_subjects_capture_literal_ones() {
    assert!(crate::rows::subject_matches("LOG.>", "LOG.user.42"));
    assert!(crate::rows::subject_matches("LOG.*.x", "LOG.a.x"));
    assert!(crate::rows::subject_matches("exact", "exact"));
    assert!(!crate::rows::subject_matches("LOG.>", "LOG"));
    assert!(!crate::rows::subject_matches("LOG.*", "LOG.a.b"));
    assert!(!crate::rows::subject_matches("OTHER.>", "LOG.a"));
}

/// The judge's table: the subject against the stream, the row under
/// the op id, and the row a run starts from (new, resumed at its
/// revision, or finished already).
#[test]
fn the_judge_plans_a_new_a_resumed_or_a_finished_erasure() {
    let domain = Domain {
        name: "tracker".into(),
        stream: "LOG".into(),
        gate_subject: Some("LOG.gate".into()),
        gate_reserve: true,
        feed_consumer: None,
        archive: None,
        replicas: Default::default(),
    };
    let ask = Ask {
        stream: "LOG".into(),
        subject: "LOG.user.7".into(),
        confirm: Some("LOG.user.7".into()),
        reason: Some(" gdpr 7 ".into()),
        op_id: None,
        by: "alice".into(),
        surface: crate::human::Surface::Cli,
    };
    let op = OpId::mint(Utc::now());
    let facts = |prior: Option<(Result<ErasureRow, String>, u64)>, subjects: &[&str]| Facts {
        subjects: subjects.iter().map(|s| s.to_string()).collect(),
        prior,
        place: "crewlet_erasures/LOG.op".into(),
        now: chrono::DateTime::<Utc>::UNIX_EPOCH,
    };
    let taken = ["LOG.>"];
    let verdict = |f: &Facts, a: &Ask| -> Result<(bool, u64, u64), Refusal> {
        match judge(&domain, a, &op, f) {
            Ok(Plan::Finished(r)) => Ok((true, r.live_records, 0)),
            Ok(Plan::Run { row, revision }) => Ok((false, row.live_records, revision)),
            Err((r, _)) => Err(r),
        }
    };
    let mut resumed = row("LOG", "LOG.user.7", false);
    resumed.live_records = 3;
    let mut done = row("LOG", "LOG.user.7", true);
    done.live_records = 5;
    type Case = (&'static str, Facts, Ask, Result<(bool, u64, u64), Refusal>);
    let cases: Vec<Case> = vec![
        ("new", facts(None, &taken), ask.clone(), Ok((false, 0, 0))),
        (
            "resumed",
            facts(Some((Ok(resumed), 9)), &taken),
            ask.clone(),
            Ok((false, 3, 9)),
        ),
        (
            "finished",
            facts(Some((Ok(done), 9)), &taken),
            ask.clone(),
            Ok((true, 5, 0)),
        ),
        (
            "another erasure's op id",
            facts(Some((Ok(row("LOG", "LOG.user.8", false)), 9)), &taken),
            ask.clone(),
            Err(Refusal::OpReused),
        ),
        (
            "a row that is not an erasure",
            facts(Some((Err("not JSON".into()), 9)), &taken),
            ask.clone(),
            Err(Refusal::OpReused),
        ),
        (
            "a subject the stream does not take",
            facts(None, &["OTHER.>"]),
            ask.clone(),
            Err(Refusal::SubjectNotInStream),
        ),
        (
            "the gate subject",
            facts(None, &taken),
            Ask {
                subject: "LOG.gate".into(),
                ..ask.clone()
            },
            Err(Refusal::GateSubject),
        ),
    ];
    for (what, f, a, want) in cases {
        assert_eq!(verdict(&f, &a), want, "{what}");
    }
    // A new row says who, why (trimmed) and when.
    let Ok(Plan::Run { row, .. }) = judge(&domain, &ask, &op, &facts(None, &taken)) else {
        panic!("a new erasure");
    };
    assert_eq!(
        (
            row.by.as_str(),
            row.reason.as_str(),
            row.op_id.as_str(),
            row.finished
        ),
        ("alice", "gdpr 7", op.as_str(), false)
    );
}
