//! CHECKSCRIPT (RFC 5804 2.12).

use managesieve::Config;

use crate::harness::{check, check_authenticated, login, plain};

#[test]
fn checkscript() {
    check_authenticated(
        r#"
        C| CHECKSCRIPT {8+}\r\nkeep;\r\n \r\n
        E: CheckScript { user: "alice", script: "keep;\r\n " }
        > check ok
        S: OK "Checkscript completed"
        C: CHECKSCRIPT "discard"
        E: CheckScript { user: "alice", script: "discard" }
        > check error invalid line 1, column 8: missing ;
        S: NO "line 1, column 8: missing ;"
        C| CHECKSCRIPT "redirect \\"a@b\\";"\r\n
        E: CheckScript { user: "alice", script: "redirect \"a@b\";" }
        > check warn too many redirects
        S: OK (WARNINGS) "too many redirects"
        C: CHECKSCRIPT
        S: NO "Syntax: CHECKSCRIPT script"
        "#,
    );
}

#[test]
fn oversized_checkscript() {
    let config = Config {
        script_bytes_max: 4,
        ..plain()
    };
    check(
        config,
        false,
        &format!(
            r#"{}
            C| CHECKSCRIPT {{5}}\r\nkeep;\r\n
            S: NO (QUOTA/MAXSIZE) "Script too large"
            C| CHECKSCRIPT {{4}}\r\nstop\r\n
            E: CheckScript {{ user: "alice", script: "stop" }}
            "#,
            login()
        ),
    );
}
