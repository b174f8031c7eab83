//! Every limit answered on the wire, and the session still usable after.

use super::*;

fn small() -> Config {
    Config {
        line_bytes_max: 200,
        literal_bytes_max: 100,
        command_bytes_max: 400,
        nesting_depth_max: 4,
        append_messages_max: 3,
        ..test_config()
    }
}

fn client(store: &Store) -> Client {
    let mut c = Client::new(store, small());
    c.greeting();
    assert!(c.send("l LOGIN bob secret\r\n").contains("l OK"));
    c
}

transcript! {
    fn literal_over_appendlimit_is_refused_before_it_is_sent() {
        let store = new_store();
        let mut c = client(&store);
        assert_eq!(
            c.send("a APPEND INBOX {101}\r\n"),
            "a BAD [TOOBIG] literal larger than 100 octets\r\n"
        );
        let mut plus = b"b APPEND INBOX {101+}\r\n".to_vec();
        plus.extend_from_slice(&[b'x'; 101]);
        plus.extend_from_slice(b"\r\nc NOOP\r\n");
        assert_eq!(
            c.send_bytes(&plus),
            "b BAD [TOOBIG] literal larger than 100 octets\r\nc OK NOOP completed\r\n"
        );
        assert!(c.send("d CAPABILITY\r\n").contains("APPENDLIMIT=100"));
    }
}

transcript! {
    fn long_lines_deep_nesting_and_many_messages() {
        let store = new_store();
        let mut c = client(&store);
        let long = format!("a NOOP {}\r\n", "x".repeat(300));
        assert_eq!(c.send(&long), "a BAD line longer than 200 octets\r\n");
        assert_eq!(
            c.send("b SEARCH (((((ALL)))))\r\n"),
            "b BAD parenthesised lists nested deeper than 4\r\n"
        );
        assert_eq!(
            c.send("c APPEND INBOX {1+}\r\na {1+}\r\nb {1+}\r\nc {1+}\r\nd\r\n"),
            "c NO [LIMIT] At most 3 messages per APPEND\r\n"
        );
        assert_eq!(c.send("d NOOP\r\n"), "d OK NOOP completed\r\n");
    }
}

transcript! {
    fn autologout_and_shutdown() {
        let store = new_store();
        let mut c = client(&store);
        assert_eq!(c.session.timeout(), crate::AUTOLOGOUT);
        c.session.timed_out();
        assert_eq!(
            normalise(&c.run()),
            "* BYE Autologout; idle for too long\r\n"
        );
        assert!(c.closed);
        let mut fresh = Client::new(&store, small());
        fresh.greeting();
        assert_eq!(fresh.session.timeout(), crate::LOGIN_TIMEOUT);
        fresh.session.shutting_down();
        assert_eq!(fresh.run(), "* BYE Server shutting down\r\n");
    }
}

transcript! {
    fn before_login_only_small_literals_are_accepted() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        // RFC 7888 4 (LITERAL-): 4096 octets at most; a bigger one gets no `+`.
        assert_eq!(
            c.send("a LOGIN {50331648}\r\n"),
            "a BAD [TOOBIG] literal larger than 4096 octets\r\n"
        );
        assert_eq!(
            c.send("b LOGIN {3}\r\n"),
            "+ Ready for literal data\r\n",
            "a small one is fine"
        );
        assert!(c.send("bob {6}\r\n").starts_with('+'));
        assert!(c.send("secret\r\n").contains("b OK"));
        // After login the APPENDLIMIT applies, not the pre-login limit.
        assert!(c.send("c APPEND INBOX {5000}\r\n").starts_with('+'));
    }
}

transcript! {
    fn a_big_non_synchronising_literal_before_login_closes_the_connection() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        assert_eq!(
            c.send("a LOGIN {50331648+}\r\nxxxx"),
            "a BAD [TOOBIG] literal larger than 4096 octets\r\n\
             * BYE Literal too large before login\r\n"
        );
        assert!(c.closed);
    }
}

transcript! {
    fn a_full_budget_refuses_literals_with_limit_not_bad() {
        let store = new_store();
        let budget = ::limits::ByteBudget::new(64 << 10);
        let mut c = Client::new(
            &store,
            Config {
                inflight: Some(budget.clone()),
                ..test_config()
            },
        );
        c.greeting();
        assert!(c.send("l LOGIN bob secret\r\n").contains("l OK"));
        assert_eq!(
            c.send("a APPEND INBOX {70000}\r\n"),
            "a NO [LIMIT] server busy, no room for this literal now; try again later\r\n"
        );
        let message = "Subject: fits\r\n\r\nbody\r\n";
        assert!(
            c.send(&format!("b APPEND INBOX {{{}}}\r\n", message.len()))
                .starts_with('+')
        );
        assert!(c.send(&format!("{message}\r\n")).contains("b OK"));
        assert_eq!(budget.reserved(), 0);
        assert_eq!(c.send("d NOOP\r\n"), "d OK NOOP completed\r\n");
    }
}

transcript! {
    fn deadlines_cover_login_idle_and_each_command() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        let d = c.session.deadlines();
        assert_eq!(
            d.phase.map(|d| d.within),
            Some(test_config().login_deadline)
        );
        assert_eq!(d.request, None);
        c.send("a NO");
        let request = c
            .session
            .deadlines()
            .request
            .expect("a command is arriving");
        assert_eq!(request.within, test_config().command_deadline);
        c.send("OP\r\n");
        assert_eq!(c.session.deadlines().request, None);
        assert!(c.send("l LOGIN bob secret\r\n").contains("l OK"));
        assert_eq!(c.session.deadlines(), ::limits::Deadlines::default());
        // A literal earns time as it arrives.
        c.send("b APPEND INBOX {30000}\r\n");
        let before = c.session.deadlines().request.unwrap();
        c.send(&"x".repeat(20_480));
        let after = c.session.deadlines().request.unwrap();
        assert_eq!(after.step, before.step);
        assert_eq!(
            after.within,
            before.within + std::time::Duration::from_secs(20)
        );
        c.send(&format!("{}\r\n", "x".repeat(30_000 - 20_480)));
        // IDLE: its own clock, a new step each time.
        c.send("i IDLE\r\n");
        let idle = c.session.deadlines().phase.expect("idling");
        assert_eq!(idle.within, test_config().idle_deadline);
        c.send("DONE\r\n");
        assert_eq!(c.session.deadlines().phase, None);
        c.send("j IDLE\r\n");
        assert_ne!(c.session.deadlines().phase.unwrap().step, idle.step);
        c.session.deadline_passed();
        assert_eq!(
            c.run(),
            "* BYE Autologout; IDLE for too long, re-issue it more often\r\n"
        );
        assert!(c.closed);

        let mut c = Client::new(&store, test_config());
        c.greeting();
        c.session.deadline_passed();
        assert_eq!(c.run(), "* BYE Too slow; closing\r\n");
        let mut c = Client::login(&store, "bob");
        c.session.revoked();
        assert_eq!(c.run(), "* BYE Account removed\r\n");
        assert!(c.closed);
        let mut c = Client::login(&store, "bob");
        c.session.moving();
        assert_eq!(c.run(), "* BYE [UNAVAILABLE] Mailbox moving, reconnect\r\n");
        assert!(c.closed);
    }
}

transcript! {
    fn a_refused_create_leaves_nothing_behind() {
        let store = new_store();
        let mut c = client(&store);
        let before = store.list_folders("bob");
        let deep = (1..=17)
            .map(|n| format!("l{n}"))
            .collect::<Vec<_>>()
            .join("/");
        assert_eq!(
            c.send(&format!("a CREATE {deep}\r\n")),
            "a NO [CANNOT] Invalid mailbox name: deeper than 16 levels\r\n"
        );
        assert_eq!(
            store.list_folders("bob"),
            before,
            "not one parent was created"
        );
        let fits = (1..=16)
            .map(|n| format!("l{n}"))
            .collect::<Vec<_>>()
            .join("/");
        assert!(c.send(&format!("b CREATE {fits}\r\n")).contains("b OK"));
        assert_eq!(store.list_folders("bob").len(), before.len() + 16);
    }
}

#[test]
fn the_folder_limit_counts_the_parents_a_create_would_add() {
    let store = real_store(StoreConfig {
        folders_per_user_max: 6,
        ..StoreConfig::default()
    });
    let mut c = client(&store);
    // INBOX and the special-use defaults exist after login.
    let before = store.list_folders("bob").len();
    let room = 6 - before;
    let path = (0..=room)
        .map(|n| format!("p{n}"))
        .collect::<Vec<_>>()
        .join("/");
    assert_eq!(
        c.send(&format!("a CREATE {path}\r\n")),
        "a NO [LIMIT] Limit reached: 6 folders per user\r\n"
    );
    assert_eq!(store.list_folders("bob").len(), before);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Arbitrary bytes after login never panic the session, and every output line ends in
    /// CRLF.
    #[test]
    fn garbage_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), 0..12)) {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut c = client(&store);
        c.send("s SELECT INBOX\r\n");
        for chunk in &chunks {
            let out = c.send_bytes(chunk);
            proptest::prop_assert!(out.is_empty() || out.ends_with("\r\n"));
        }
    }

    /// Command-shaped garbage: valid tags and command names with random arguments.
    #[test]
    fn command_shaped_garbage_gets_an_answer(
        name in proptest::sample::select(vec!["FETCH", "UID FETCH", "STORE", "SEARCH", "UID SEARCH", "COPY", "MOVE", "LIST", "STATUS", "APPEND", "SELECT", "EXPUNGE", "UID EXPUNGE", "ENABLE", "ID", "IDLE"]),
        args in "[ -~]{0,60}",
    ) {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut c = client(&store);
        c.send("s SELECT INBOX\r\n");
        let out = c.send(&format!("t {name} {args}\r\n"));
        let answered = out.contains("t OK") || out.contains("t NO") || out.contains("t BAD") || out.starts_with('+');
        proptest::prop_assert!(answered, "{}", out);
    }
}
