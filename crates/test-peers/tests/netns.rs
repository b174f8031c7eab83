//! The network namespace harness: hosts reach each other over their private bridge, a cut
//! stops it both ways and a heal restores it, an isolated host reaches nobody, PostgreSQL in
//! its own namespace answers the hosts' psql, and nothing is left behind (namespaces,
//! stale ones of dead test processes included). Needs root, iproute2 and iptables.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use test_peers::Netns;

/// Long enough for a connection on a bridge (microseconds), short enough for a dropped SYN.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(700);

/// A listener on host `host`'s address, answering every connection with one byte, on a
/// thread of its own for the rest of the test.
fn echo_server(net: &Netns, host: usize) -> SocketAddr {
    let addr = net.addr(host);
    let listener = net
        .within(host, move || TcpListener::bind((addr, 0)))
        .unwrap()
        .unwrap();
    let local = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.write_all(b"!");
        }
    });
    local
}

/// Whether host `from` gets the one byte of the server at `to` within the timeout.
fn reaches(net: &Netns, from: usize, to: SocketAddr) -> bool {
    net.within(from, move || {
        let Ok(mut stream) = TcpStream::connect_timeout(&to, CONNECT_TIMEOUT) else {
            return false;
        };
        stream.set_read_timeout(Some(CONNECT_TIMEOUT)).unwrap();
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).is_ok() && byte == *b"!"
    })
    .unwrap()
}

fn namespaces() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn hosts_connect_until_cut_and_again_after_heal() {
    let mut net = Netns::new(3).expect("network namespaces (root, iproute2, iptables)");
    let names: Vec<String> = (0..3).map(|h| net.name(h).to_owned()).collect();
    let servers: Vec<SocketAddr> = (0..3).map(|h| echo_server(&net, h)).collect();
    for (from, to) in [(0, 1), (1, 0), (0, 2), (2, 1)] {
        assert!(reaches(&net, from, servers[to]), "{from} -> {to}");
    }

    net.cut(0, 1).unwrap();
    assert!(
        !reaches(&net, 0, servers[1]),
        "cut 0 -> 1\n{}",
        net.rules(0).unwrap()
    );
    assert!(
        !reaches(&net, 1, servers[0]),
        "cut 1 -> 0\n{}",
        net.rules(1).unwrap()
    );
    assert!(reaches(&net, 0, servers[2]), "0 -> 2 is not cut");
    assert!(reaches(&net, 2, servers[1]), "2 -> 1 is not cut");
    net.heal(0, 1).unwrap();
    assert!(reaches(&net, 0, servers[1]) && reaches(&net, 1, servers[0]));
    assert!(!net.rules(0).unwrap().contains("DROP"), "heal left a rule");

    net.isolate(2).unwrap();
    assert!(!reaches(&net, 0, servers[2]) && !reaches(&net, 2, servers[1]));
    assert!(
        reaches(&net, 2, servers[2]),
        "its own address is local, not cut"
    );
    assert!(reaches(&net, 0, servers[1]));
    net.rejoin(2).unwrap();
    assert!(reaches(&net, 0, servers[2]) && reaches(&net, 2, servers[0]));

    // A command inside a namespace sees that namespace's interfaces.
    let out = net
        .command(1, "ip")
        .args(["-4", "addr", "show", "eth0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{}/24", net.addr(1))));

    drop(net);
    let left = namespaces();
    for name in &names {
        assert!(!left.contains(name.as_str()), "{name} left behind:\n{left}");
    }
}

#[test]
fn postgres_in_its_own_namespace_answers_the_hosts() {
    let mut net = Netns::new(2).expect("network namespaces (root, iproute2, iptables)");
    let db = net
        .start_postgres()
        .expect("PostgreSQL (apt-get install postgresql)");
    let db_name = net.name(db).to_owned();
    let url = net.postgres_url().unwrap();
    assert!(url.contains(&net.addr(db).to_string()), "{url}");
    let select = |net: &Netns, host: usize| -> bool {
        let out = net
            .command(host, "psql")
            .env("PGCONNECT_TIMEOUT", "2")
            .args([url.as_str(), "-AtXqc", "SELECT 40 + 2"])
            .output()
            .unwrap();
        eprintln!(
            "psql on {host}: {} {}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        String::from_utf8_lossy(&out.stdout).trim() == "42"
    };
    assert!(select(&net, 0) && select(&net, 1));
    net.cut(0, db).unwrap();
    assert!(!select(&net, 0), "host 0 is cut from the database");
    assert!(select(&net, 1));
    net.heal(0, db).unwrap();
    assert!(select(&net, 0));
    // Stopped like a crash and started again, on the same address.
    let pg = net.postgres().unwrap();
    pg.stop_immediate();
    pg.start().unwrap();
    assert!(select(&net, 1));

    drop(net);
    assert!(!namespaces().contains(&db_name), "{db_name} left behind");
}

#[test]
fn a_dead_test_processes_namespaces_are_swept() {
    // A pid that runs nowhere (above the kernel's pid_max).
    let stale = "ms4194399x0n1";
    let _ = Command::new("ip").args(["netns", "add", stale]).status();
    assert!(namespaces().contains(stale));
    // Namespaces of the harness's shape but a live pid (this test's) are not touched.
    let live = format!("ms{}x999n1", std::process::id());
    Command::new("ip")
        .args(["netns", "add", &live])
        .status()
        .unwrap();
    let net = Netns::new(1).expect("network namespaces (root, iproute2, iptables)");
    let left = namespaces();
    assert!(!left.contains(stale), "{left}");
    assert!(left.contains(&live), "{left}");
    drop(net);
    Command::new("ip")
        .args(["netns", "del", &live])
        .status()
        .unwrap();
}
