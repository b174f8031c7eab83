//! SETACTIVE (RFC 5804 2.8).

use crate::harness::check_authenticated;

#[test]
fn setactive() {
    check_authenticated(
        r#"
        C: SETACTIVE "vacation"
        E: SetActive { user: "alice", name: Some("vacation") }
        > active ok
        S: OK "Setactive completed"
        C: SETACTIVE "nope"
        E: SetActive { user: "alice", name: Some("nope") }
        > active error nonexistent
        S: NO (NONEXISTENT) "No such script"
        # The empty name deactivates.
        C: SETACTIVE ""
        E: SetActive { user: "alice", name: None }
        > active ok
        S: OK "Setactive completed"
        C: SETACTIVE
        S: NO "Syntax: SETACTIVE name"
        "#,
    );
}
