//! Runs a private Dovecot for manual work and benchmarks: prints its port, then serves until
//! stdin closes. `cargo run -p test-peers --example dovecot -- USERS`
fn main() -> std::io::Result<()> {
    let users = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let server = test_peers::Dovecot::start(users)?;
    println!("port={} dir={}", server.port(), server.dir().display());
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line)? > 0 {
        line.clear();
    }
    drop(server);
    Ok(())
}
