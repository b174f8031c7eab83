//! Starts one of the test peers for a benchmark script and keeps it running until its
//! standard input closes (bench/run-spam.sh):
//!
//! ```text
//! test-peer rspamd    # prints "milter=ADDR controller=ADDR password=PW", then waits
//! test-peer clamav    # prints "milter=ADDR", then waits
//! ```

use std::io::{Read as _, Write as _};

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let held: Box<dyn std::any::Any> = match which.as_str() {
        "rspamd" => {
            let rspamd = test_peers::Rspamd::start().unwrap_or_else(|e| fail(&e));
            say(&format!(
                "milter={} controller={} password={}",
                rspamd.milter_address(),
                rspamd.controller_address(),
                rspamd.password()
            ));
            Box::new(rspamd)
        }
        "clamav" => {
            let clamav = test_peers::ClamAv::start().unwrap_or_else(|e| fail(&e));
            say(&format!("milter={}", clamav.milter_address()));
            Box::new(clamav)
        }
        _ => fail(&"usage: test-peer rspamd|clamav"),
    };
    // Until the script closes our input (or dies): then the peer stops on drop.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(held);
}

fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    let _ = writeln!(std::io::stderr(), "test-peer: {e}");
    std::process::exit(1)
}
