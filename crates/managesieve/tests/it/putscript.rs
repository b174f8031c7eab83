//! PUTSCRIPT (RFC 5804 2.6).

use managesieve::Config;

use crate::harness::{check, check_authenticated, login, plain};

#[test]
fn putscript_with_literals_of_both_kinds() {
    check_authenticated(
        r#"
        C| PUTSCRIPT "vacation" {14+}\r\nkeep;\r\nstop;\r\n\r\n
        E: PutScript { user: "alice", name: "vacation", script: "keep;\r\nstop;\r\n" }
        > put ok
        S: OK "Putscript completed"
        C| putscript {4}\r\nmain {5}\r\nkeep;\r\n
        E: PutScript { user: "alice", name: "main", script: "keep;" }
        > put warn line 8: redirect might be ignored
        S: OK (WARNINGS) "line 8: redirect might be ignored"
        C: PUTSCRIPT "quoted" "keep;"
        E: PutScript { user: "alice", name: "quoted", script: "keep;" }
        > put ok
        S: OK "Putscript completed"
        "#,
    );
}

#[test]
fn compile_errors_reach_the_client() {
    // The shell's compile error text: quoted on one line, a literal when it has line breaks.
    check_authenticated(
        r#"
        C| PUTSCRIPT "bad" {4+}\r\nkeep\r\n
        E: PutScript { user: "alice", name: "bad", script: "keep" }
        > put error invalid line 1, column 5: expected ";" after "keep"
        S: NO "line 1, column 5: expected \\";\\" after \\"keep\\""
        C| PUTSCRIPT "bad" {4+}\r\nkeep\r\n
        E: PutScript { user: "alice", name: "bad", script: "keep" }
        > put error invalid line 1: one\nline 2: two
        S: NO {23}
        S: line 1: one\nline 2: two
        "#,
    );
}

#[test]
fn quota_and_storage_failures() {
    check_authenticated(
        r#"
        C: PUTSCRIPT "a" "keep;"
        E: PutScript { user: "alice", name: "a", script: "keep;" }
        > put error quota-scripts
        S: NO (QUOTA/MAXSCRIPTS) "Too many scripts"
        C: PUTSCRIPT "a" "keep;"
        E: PutScript { user: "alice", name: "a", script: "keep;" }
        > put error quota
        S: NO (QUOTA) "Quota exceeded"
        C: PUTSCRIPT "a" "keep;"
        E: PutScript { user: "alice", name: "a", script: "keep;" }
        > put error unavailable store\r\ndown
        S: NO (TRYLATER) "store  down"
        "#,
    );
}

#[test]
fn oversized_scripts_are_refused_and_skipped() {
    // RFC 5804 1.3 QUOTA/MAXSIZE. The literal is read and dropped, not run as commands.
    let config = Config {
        script_bytes_max: 8,
        ..plain()
    };
    check(
        config,
        false,
        &format!(
            r#"{}
            C| PUTSCRIPT "big" {{9+}}\r\nLOGOUT\r\nX\r\n
            S: NO (QUOTA/MAXSIZE) "Script too large"
            > buffered
            = 0
            C| PUTSCRIPT "fits" {{8+}}\r\nkeep;\r\n \r\n
            E: PutScript {{ user: "alice", name: "fits", script: "keep;\r\n " }}
            "#,
            login()
        ),
    );
}

#[test]
fn bad_names_scripts_and_syntax() {
    check_authenticated(
        r#"
        C: PUTSCRIPT "" "keep;"
        S: NO "Invalid script name: empty"
        C| PUTSCRIPT "a\x01b" "keep;"\r\n
        S: NO "Invalid script name: control character"
        C| PUTSCRIPT "a\xe2\x80\xa8b" "keep;"\r\n
        S: NO "Invalid script name: control character"
        C| PUTSCRIPT "\xffb" "keep;"\r\n
        S: NO "Invalid script name: not UTF-8"
        # "e" and a combining acute accent: NFD, not NFC (RFC 5804 1.6).
        C| PUTSCRIPT "e\xcc\x81" "keep;"\r\n
        S: NO "Invalid script name: not in Unicode NFC"
        C| PUTSCRIPT "\xc3\xa9" "keep;"\r\n
        E: PutScript { user: "alice", name: "é", script: "keep;" }
        > put ok
        S: OK "Putscript completed"
        C| PUTSCRIPT "a" {2+}\r\n\xff\xfe\r\n
        S: NO "Script is not UTF-8"
        C: PUTSCRIPT "a"
        S: NO "Syntax: PUTSCRIPT name script"
        C: PUTSCRIPT a "keep;"
        S: NO "Syntax: PUTSCRIPT name script"
        C: PUTSCRIPT "a" "keep;" "x"
        S: NO "Syntax: PUTSCRIPT name script"
        "#,
    );
}

#[test]
fn long_names_are_refused() {
    let config = Config {
        script_name_bytes_max: 4,
        ..plain()
    };
    check(
        config,
        false,
        &format!(
            r#"{}
            C: PUTSCRIPT "abcde" "keep;"
            S: NO "Invalid script name: too long"
            C: PUTSCRIPT "abcd" "keep;"
            E: PutScript {{ user: "alice", name: "abcd", script: "keep;" }}
            "#,
            login()
        ),
    );
}
