//! Child process for the SIGKILL crash test: runs queue and store load on a real data
//! directory until killed, printing each acknowledged operation (see `bench::crashload`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread;

use bench::crashload::{content, user};
use store::Mailstore as _;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(seed)) = (args.next(), args.next()) else {
        eprintln!("usage: crashload DATA_DIR SEED");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let seed: u64 = seed.parse().unwrap_or(0);
    if let Err(error) = run(&dir, seed) {
        eprintln!("crashload: {error:#}");
        std::process::exit(1);
    }
}

fn run(dir: &std::path::Path, seed: u64) -> anyhow::Result<()> {
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    std::fs::create_dir_all(dir.join("queue"))?;
    std::fs::create_dir_all(dir.join("store"))?;
    let queue_config = bench::crashload::queue_config();
    let store_config = bench::crashload::store_config();
    let (queue, _) = queue::Queue::open(disk.clone(), &dir.join("queue"), queue_config)?;
    let (store, _) = store::Store::open(disk, &dir.join("store"), store_config)?;
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = out.clone();
        move |line: String| {
            let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
            // A failed write means the parent is gone; nothing left to prove.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    };
    say("READY".into());
    let mut handles = Vec::new();
    for t in 0..6u64 {
        let thread_id = seed * 100 + t;
        let queue = queue.clone();
        let say = say.clone();
        handles.push(thread::spawn(move || {
            for serial in 0.. {
                let envelope = queue::Envelope {
                    sender: "crash@example.org".into(),
                    recipients: vec![queue::Recipient {
                        address: format!("r{thread_id}@example.com"),
                        status: queue::RecipientStatus::Pending,
                        last_error: None,
                    }],
                    arrival_ms: 0,
                };
                match queue.enqueue(envelope, content('Q', thread_id, serial)) {
                    Ok(id) => say(format!("Q {id} {thread_id} {serial}")),
                    Err(error) => {
                        eprintln!("enqueue: {error}");
                        return;
                    }
                }
            }
        }));
    }
    for t in 0..6u64 {
        let thread_id = seed * 100 + t;
        let store = store.clone();
        let say = say.clone();
        handles.push(thread::spawn(move || {
            let user = user(thread_id);
            for serial in 0u64.. {
                let message = bench::mail::new_message(content('S', thread_id, serial));
                match store.append(&user, "INBOX", message) {
                    Ok(appended) => say(format!("S {user} {} {thread_id} {serial}", appended.uid)),
                    Err(error) => {
                        eprintln!("append: {error}");
                        return;
                    }
                }
                // Every fifth message, expunge the oldest one: deletions under load too.
                if serial % 5 == 4 {
                    let Ok(view) = store.open_folder(&user, "INBOX") else {
                        return;
                    };
                    if let Some(first) = view.messages.first() {
                        say(format!("d {user} {}", first.uid));
                        if store.expunge(&user, "INBOX", &[first.uid]).is_ok() {
                            say(format!("D {user} {}", first.uid));
                        }
                    }
                }
            }
        }));
    }
    {
        // A delivery agent: finishes queued messages as delivered.
        let queue = queue.clone();
        let say = say.clone();
        handles.push(thread::spawn(move || {
            loop {
                let Ok(batch) = queue.next_batch(u64::MAX, 32, 1 << 20) else {
                    return;
                };
                if batch.is_empty() {
                    thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
                let items: Vec<(u64, Vec<(usize, queue::Outcome)>)> = batch
                    .iter()
                    .map(|m| {
                        let outcomes = m.pending.iter().map(|&i| (i, queue::Outcome::Delivered));
                        (m.id, outcomes.collect())
                    })
                    .collect();
                for (id, _) in &items {
                    say(format!("f {id}"));
                }
                for ((id, _), result) in items.iter().zip(queue.finish_many(&items)) {
                    if result.is_ok() {
                        say(format!("F {id}"));
                    }
                }
            }
        }));
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}
