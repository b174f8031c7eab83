//! RENAMESCRIPT (RFC 5804 2.11).

use crate::harness::check_authenticated;

#[test]
fn renamescript() {
    check_authenticated(
        r#"
        C| RENAMESCRIPT {3+}\r\nold {3+}\r\nnew\r\n
        E: RenameScript { user: "alice", from: "old", to: "new" }
        > rename ok
        S: OK "Renamescript completed"
        C: RENAMESCRIPT "a" "b"
        E: RenameScript { user: "alice", from: "a", to: "b" }
        > rename error exists
        S: NO (ALREADYEXISTS) "A script of that name exists"
        C: RENAMESCRIPT "a" "b"
        E: RenameScript { user: "alice", from: "a", to: "b" }
        > rename error nonexistent
        S: NO (NONEXISTENT) "No such script"
        C: RENAMESCRIPT "a"
        S: NO "Syntax: RENAMESCRIPT old-name new-name"
        "#,
    );
}
