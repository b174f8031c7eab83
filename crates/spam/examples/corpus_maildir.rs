//! Writes the synthetic corpus as a maildir for benchmarks (bench/run-spam.sh):
//!
//! ```text
//! cargo run -p spam --release --features corpus --example corpus_maildir OUT COUNT [SEED]
//! ```
//!
//! Ham goes to `OUT/cur` (INBOX when imported), spam to `OUT/.Junk/cur` (the Junk folder).

use std::io::Write as _;
use std::path::Path;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(out), Some(count)) = (args.next(), args.next().and_then(|c| c.parse().ok())) else {
        let _ = writeln!(std::io::stderr(), "usage: corpus_maildir OUT COUNT [SEED]");
        std::process::exit(2);
    };
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let out = Path::new(&out);
    for folder in [out.to_path_buf(), out.join(".Junk")] {
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(folder.join(sub)).expect("create the maildir");
        }
    }
    let (mut spam, mut ham) = (0, 0);
    for (n, (class, message)) in spam::corpus::generate(seed, count).into_iter().enumerate() {
        let folder = match class {
            spam::Class::Spam => {
                spam += 1;
                out.join(".Junk/cur")
            }
            spam::Class::Ham => {
                ham += 1;
                out.join("cur")
            }
        };
        std::fs::write(folder.join(format!("{n}.corpus:2,S")), message).expect("write a message");
    }
    println!("ham={ham} spam={spam}");
}
