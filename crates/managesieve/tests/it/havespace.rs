//! HAVESPACE (RFC 5804 2.5).

use crate::harness::check_authenticated;

#[test]
fn havespace() {
    check_authenticated(
        r#"
        C: HAVESPACE "myscript" 999
        E: HaveSpace { user: "alice", name: "myscript", size: 999 }
        > space ok
        S: OK "Putscript would succeed"
        C: HAVESPACE "myscript" 100
        E: HaveSpace { user: "alice", name: "myscript", size: 100 }
        > space error quota-scripts
        S: NO (QUOTA/MAXSCRIPTS) "Too many scripts"
        C: HAVESPACE "myscript" 100
        E: HaveSpace { user: "alice", name: "myscript", size: 100 }
        > space error unavailable
        S: NO (TRYLATER) "Temporary failure, try again later"
        # Larger than script_bytes_max (64 KiB): refused without asking.
        C: HAVESPACE "foobar" 4294967295
        S: NO (QUOTA/MAXSIZE) "Script too large"
        C: HAVESPACE "foobar" 4294967296
        S: NO "Syntax: HAVESPACE name size"
        C: HAVESPACE "foobar" "10"
        S: NO "Syntax: HAVESPACE name size"
        C: HAVESPACE "foobar" -1
        S: NO "Syntax: HAVESPACE name size"
        C: HAVESPACE "" 1
        S: NO "Invalid script name: empty"
        "#,
    );
}
