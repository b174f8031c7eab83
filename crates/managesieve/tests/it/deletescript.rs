//! DELETESCRIPT (RFC 5804 2.10).

use crate::harness::check_authenticated;

#[test]
fn deletescript() {
    check_authenticated(
        r#"
        C: DELETESCRIPT "old"
        E: DeleteScript { user: "alice", name: "old" }
        > delete ok
        S: OK "Deletescript completed"
        C: DELETESCRIPT "main"
        E: DeleteScript { user: "alice", name: "main" }
        > delete error active
        S: NO (ACTIVE) "The active script cannot be deleted"
        C: DELETESCRIPT "nope"
        E: DeleteScript { user: "alice", name: "nope" }
        > delete error nonexistent
        S: NO (NONEXISTENT) "No such script"
        C: DELETESCRIPT ""
        S: NO "Invalid script name: empty"
        "#,
    );
}
