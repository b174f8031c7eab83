//! LISTSCRIPTS (RFC 5804 2.7).

use crate::harness::check_authenticated;

#[test]
fn listscripts() {
    check_authenticated(
        r#"
        C: LISTSCRIPTS
        E: ListScripts { user: "alice" }
        > list summer_script vacation_script main_script* clever"script
        S: "summer_script"
        S: "vacation_script"
        S: "main_script" ACTIVE
        S: "clever\\"script"
        S: OK "Listscripts completed"
        C: LISTSCRIPTS
        E: ListScripts { user: "alice" }
        > list
        S: OK "Listscripts completed"
        C: LISTSCRIPTS
        E: ListScripts { user: "alice" }
        > list error unavailable store down
        S: NO (TRYLATER) "store down"
        C: LISTSCRIPTS "x"
        S: NO "Syntax: LISTSCRIPTS"
        "#,
    );
}

#[test]
fn pipelined_commands_wait_for_the_answer() {
    check_authenticated(
        r#"
        C| LISTSCRIPTS\r\nNOOP\r\n
        E: ListScripts { user: "alice" }
        > wants-input
        = false
        > list a*
        S: "a" ACTIVE
        S: OK "Listscripts completed"
        S: OK "Done"
        > wants-input
        = true
        # An answer nobody asked for is ignored.
        > list b
        > get keep;
        "#,
    );
}
