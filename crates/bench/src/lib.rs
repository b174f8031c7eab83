//! The storage benchmarks behind `mailstow bench`.
//!
//! Each benchmark prints one `RESULT name key=value ...` line per figure, the same shape as the
//! peer harness in `shared/bench/`, so a run of ours and a run of Postfix/Dovecot can be put
//! side by side by one script (`bench/run-storage.sh`). Details go to stderr.
//!
//! - [`queue_ingest`]: durable enqueues per second with 1..128 producers, against one file per
//!   message with its own fsync (Postfix's queue) and one fdatasync per message in a shared file.
//! - [`commit_ceiling`]: the same ingest with the queue's own work taken away: what this machine
//!   allows any group commit, with one or more rounds in flight.
//! - [`smtp_load`]: SMTP sessions sending back to back against any server, with the p50/p99
//!   latency of DATA.
//! - [`queue_recovery`]: reopening a queue that holds many pending messages, warm and cold.
//! - [`store_open`], [`store_delete`], [`store_frag`]: the thesis's experiments (a), (b), (c).
//!
//! These are measurements, not tests: nothing here asserts a speed.

pub mod commit_ceiling;
pub mod crashload;
pub mod mail;
pub mod queue_ingest;
pub mod queue_recovery;
pub mod replication;
pub mod smtp_load;
pub mod store_delete;
pub mod store_frag;
pub mod store_open;
pub mod sys;

use std::fmt::Write as _;
use std::time::Duration;

/// Prints one result line on stdout: `RESULT name k=v k=v`.
pub fn result(name: &str, fields: &[(&str, String)]) {
    let mut line = format!("RESULT {name}");
    for (key, value) in fields {
        let _ = write!(line, " {key}={value}");
    }
    println!("{line}");
}

/// Milliseconds with three decimals, for result lines.
pub fn ms(duration: Duration) -> String {
    format!("{:.3}", duration.as_secs_f64() * 1000.0)
}

/// The median of a non-empty list of durations (the upper middle for even counts).
pub fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}
