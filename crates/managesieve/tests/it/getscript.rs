//! GETSCRIPT (RFC 5804 2.9).

use crate::harness::check_authenticated;

#[test]
fn getscript() {
    check_authenticated(
        r#"
        C: GETSCRIPT "myscript"
        E: GetScript { user: "alice", name: "myscript" }
        > get require "fileinto";\r\nkeep;\r\n
        S: {28}
        S: require "fileinto";
        S: keep;
        S:
        S: OK "Getscript completed"
        C: GETSCRIPT "empty"
        E: GetScript { user: "alice", name: "empty" }
        > get
        S: {0}
        S:
        S: OK "Getscript completed"
        C: GETSCRIPT "nope"
        E: GetScript { user: "alice", name: "nope" }
        > get error nonexistent
        S: NO (NONEXISTENT) "No such script"
        C: GETSCRIPT
        S: NO "Syntax: GETSCRIPT name"
        "#,
    );
}
