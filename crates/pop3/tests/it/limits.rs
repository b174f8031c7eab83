//! Limits: line length (RFC 2449 4), errors, the pipelined input buffer.

use pop3::Config;

use crate::harness::{LOGIN, check, plain};

fn small() -> Config {
    Config {
        line_max: 16,
        input_buffer_max: 32,
        ..plain()
    }
}

#[test]
fn overlong_line_is_discarded_whole() {
    check(
        small(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        # 14 octets + CRLF = 16: accepted.
        C: USER abcdefghi
        S: +OK send PASS
        # 17 octets: refused; the rest of the line is not read as a command.
        C: USER abcdefghij
        S: -ERR line too long
        C: USER abcdefghij STAT STAT STAT STAT STAT
        S: -ERR line too long
        C: CAPA
        S: +OK Capability list follows
        S: TOP
        S: UIDL
        S: RESP-CODES
        S: AUTH-RESP-CODE
        S: PIPELINING
        S: USER
        S: SASL PLAIN
        S: IMPLEMENTATION mailstow
        S: .
        ",
    );
}

#[test]
fn overlong_sasl_response_ends_the_exchange() {
    check(
        small(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: AUTH PLAIN
        S: +\\x20
        C: AGFsaWNlAHNlY3JldA==
        S: -ERR line too long
        C: CAPA x
        S: -ERR syntax: CAPA
        ",
    );
}

#[test]
fn too_many_errors_closes() {
    check(
        Config {
            errors_max: 3,
            ..plain()
        },
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: HELO
        S: -ERR unknown command
        C: USER alice
        S: +OK send PASS
        C: PASS guess
        E: Auth { mechanism: "USER", username: "alice", password: "guess", authzid: "" }
        # Failed logins count: a connection gets errors_max guesses at most.
        > auth bad
        S: -ERR [AUTH] Authentication failed
        C| STAT\r\nNOOP\r\n
        S: -ERR command not valid in this state
        S: -ERR too many errors
        E: Close
        C: QUIT
        > wants-input
        = false
        "#,
    );
}

#[test]
fn server_side_failures_do_not_count() {
    check(
        Config {
            errors_max: 1,
            ..plain()
        },
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth in-use
        S: -ERR [IN-USE] maildrop locked by another session
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth temp try later
        S: -ERR [SYS/TEMP] try later
        C: QUIT
        S: +OK pop.example.org POP3 server signing off
        E: Close
        "#,
    );
}

#[test]
fn input_buffer_holds_pipelined_input_up_to_its_bound() {
    // While a decision is outstanding, input_buffer_max + line_max = 48 bytes wait; a shell
    // that feeds beyond that gets the session closed.
    check(
        small(),
        false,
        &format!(
            r"{LOGIN}
            C: RETR 1
            E: Retrieve {{ uid: 3, top_lines: None }}
            C| NOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNO
            > buffered
            = 44
            C| OP\r\n
            > buffered
            = 48
            C| N
            S: -ERR input buffer full
            E: Close
            > message x
            > buffered
            = 0
            "
        ),
    );
}

#[test]
fn buffered_input_runs_after_the_decision() {
    check(
        small(),
        false,
        &format!(
            r"{LOGIN}
            C| RETR 1\r\nNOOP\r\nNOOP\r\n
            E: Retrieve {{ uid: 3, top_lines: None }}
            > message x
            S: +OK 120 octets
            S: x
            S: .
            S: +OK
            S: +OK
            "
        ),
    );
}
