//! Transcripts of the QUOTA extension (RFC 9208) and the quota check of APPEND, COPY and MOVE.

use mail_model::Quota;

use super::*;

fn limit(bytes_max: Option<u64>, messages_max: Option<u64>) -> Quota {
    Quota {
        bytes_max,
        messages_max,
    }
}

transcript! {
    fn capability_after_login_offers_quota() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        let greeting = c.greeting();
        assert!(!greeting.contains("QUOTA"), "{greeting}");
        let out = c.send("a LOGIN bob secret\r\n");
        assert!(
            out.contains(" QUOTA QUOTA=RES-STORAGE QUOTA=RES-MESSAGE"),
            "{out}"
        );
    }
}

transcript! {
    fn getquotaroot_and_getquota() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let used = store.usage("bob");
        let mut c = Client::login(&store, "bob");
        // No limits: no quota root.
        assert_eq!(
            c.send("a GETQUOTAROOT INBOX\r\n"),
            "* QUOTAROOT INBOX\r\na OK GETQUOTAROOT completed\r\n"
        );
        assert_eq!(
            c.send("b GETQUOTA \"\"\r\n"),
            "b NO [NONEXISTENT] No such quota root\r\n"
        );
        c.quotas.set("bob", limit(Some(1 << 20), Some(10)));
        let kib = used.bytes.div_ceil(1024);
        let quota = format!("* QUOTA \"\" (STORAGE {kib} 1024 MESSAGE 2 10)\r\n");
        assert_eq!(
            c.send("c GETQUOTAROOT INBOX\r\n"),
            format!("* QUOTAROOT INBOX \"\"\r\n{quota}c OK GETQUOTAROOT completed\r\n")
        );
        assert_eq!(
            c.send("d GETQUOTAROOT \"New folder\"\r\n"),
            format!("* QUOTAROOT \"New folder\" \"\"\r\n{quota}d OK GETQUOTAROOT completed\r\n")
        );
        // The name comes back as the client sent it: modified UTF-7 to an IMAP4rev1 client
        // that did not enable UTF8=ACCEPT (RFC 3501 5.1.3), not the store's UTF-8.
        assert_eq!(
            c.send("d2 GETQUOTAROOT \"Entw&APw-rfe/&U,BTFw- &- co\"\r\n"),
            format!(
                "* QUOTAROOT \"Entw&APw-rfe/&U,BTFw- &- co\" \"\"\r\n{quota}d2 OK GETQUOTAROOT completed\r\n"
            )
        );
        assert_eq!(
            c.send("e GETQUOTA \"\"\r\n"),
            format!("{quota}e OK GETQUOTA completed\r\n")
        );
        assert_eq!(
            c.send("f GETQUOTA other\r\n"),
            "f NO [NONEXISTENT] No such quota root\r\n"
        );
        assert!(
            c.send("g SETQUOTA \"\" (STORAGE 1)\r\n")
                .starts_with("g NO [NOPERM] "),
            "SETQUOTA is refused"
        );
        // Only a message limit: STORAGE is left out.
        c.quotas.set("bob", limit(None, Some(10)));
        assert_eq!(
            c.send("h GETQUOTA \"\"\r\n"),
            "* QUOTA \"\" (MESSAGE 2 10)\r\nh OK GETQUOTA completed\r\n"
        );
        let mut anonymous = Client::new(&store, test_config());
        anonymous.greeting();
        assert_eq!(
            anonymous.send("i GETQUOTAROOT INBOX\r\n"),
            "i BAD Log in first\r\n"
        );
    }
}

transcript! {
    fn append_over_quota_is_refused_before_writing() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.quotas.set("bob", limit(Some(100), None));
        let small = "x".repeat(60);
        assert!(
            c.send(&format!("a APPEND INBOX {{60+}}\r\n{small}\r\n"))
                .contains("a OK [APPENDUID")
        );
        // 60 + 60 > 100: full; a message larger than the quota alone is too large.
        assert_eq!(
            c.send(&format!("b APPEND INBOX {{60+}}\r\n{small}\r\n")),
            "b NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        let big = "y".repeat(101);
        assert_eq!(
            c.send(&format!("c APPEND INBOX {{101+}}\r\n{big}\r\n")),
            "c NO [OVERQUOTA] Larger than the mailbox quota\r\n"
        );
        // MULTIAPPEND counts all its messages together: 60 + 20 + 30 is over, and neither is
        // written; 60 + 20 + 20 is exactly the limit.
        assert_eq!(
            c.send("d APPEND INBOX {20+}\r\n01234567890123456789 {30+}\r\n012345678901234567890123456789\r\n"),
            "d NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        assert_eq!(store.usage("bob").messages, 1);
        let out =
            c.send("d APPEND INBOX {20+}\r\n01234567890123456789 {20+}\r\n01234567890123456789\r\n");
        assert!(out.contains("d OK [APPENDUID"), "{out}");
        assert_eq!(store.usage("bob").messages, 3);
        // A limit raised while the session is open applies to its next APPEND.
        c.quotas.set("bob", limit(Some(1000), Some(3)));
        assert_eq!(
            c.send("e APPEND INBOX {1+}\r\nz\r\n"),
            "e NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        c.quotas.set("bob", limit(Some(1000), Some(4)));
        assert!(
            c.send("f APPEND INBOX {1+}\r\nz\r\n")
                .contains("f OK [APPENDUID")
        );
        assert_eq!(store.usage("bob").messages, 4);
    }
}

transcript! {
    fn copy_and_move_over_quota_are_refused() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut c = Client::login(&store, "bob");
        c.send("a SELECT INBOX\r\n");
        c.quotas.set("bob", limit(None, Some(4)));
        assert_eq!(
            c.send("b COPY 1:2 Archive\r\n"),
            "b NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        // MOVE is checked like the copy it starts with (see command/copy.rs).
        assert_eq!(
            c.send("c MOVE 1:2 Archive\r\n"),
            "c NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        assert_eq!(
            c.send("d UID MOVE 1:3 Archive\r\n"),
            "d NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
        assert_eq!(store.usage("bob").messages, 3, "nothing was copied");
        assert_eq!(store.uids("bob", "Archive").unwrap(), Vec::<u32>::new());
        assert_eq!(
            c.send("e COPY 1 Archive\r\n"),
            "e OK [COPYUID V 1 1] COPY completed\r\n"
        );
        assert_eq!(
            c.send("f MOVE 1 Trash\r\n"),
            "f NO [OVERQUOTA] Mailbox quota exceeded\r\n"
        );
    }
}
