//! The ceiling for the mail file system's bandwidth: the same bytes as plain IMAP APPEND and
//! FETCH over the same accounts and connections, with no file system in between (no
//! encryption, no metadata). Used by bench/run-mailfs.sh.
//!
//! `raw_imap PORT USERS CONNECTIONS BLOCK_BYTES TOTAL_BYTES [base64|binary [COPIES]]` where
//! USERS is `user1:pw1,user2:pw2,...`; prints `RESULT raw_write_s=.. raw_read_s=..`. The
//! transfer (default base64) is an account's `transfer` in the mount's config: base64
//! bodies are encoded before APPEND and decoded after FETCH, both timed, as the mount does.
//! COPIES (default 1) is the mount's replication: the users are taken as groups of COPIES
//! accounts in order (as a mount's `[[group]]`s list them), block i goes to every account
//! of group i mod groups, all at once, and is read back from the group's first account, as
//! a mount with a healthy group reads.

use std::sync::Arc;
use std::time::Instant;

use imap_client::{Client, Config, Tls};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if !(6..=8).contains(&args.len()) {
        eprintln!(
            "usage: raw_imap PORT USER:PW,... CONNECTIONS BLOCK_BYTES TOTAL_BYTES \
             [base64|binary [COPIES]]"
        );
        std::process::exit(2);
    }
    let port: u16 = args[1].parse()?;
    let users: Vec<(String, String)> = args[2]
        .split(',')
        .map(|u| {
            let (a, b) = u.split_once(':').expect("user:pw");
            (a.to_string(), b.to_string())
        })
        .collect();
    let connections: usize = args[3].parse()?;
    let block: usize = args[4].parse()?;
    let total: usize = args[5].parse()?;
    let blocks = total.div_ceil(block);
    let binary = match args.get(6).map(String::as_str) {
        None | Some("base64") => false,
        Some("binary") => true,
        Some(other) => {
            eprintln!("transfer is base64 or binary, not {other:?}");
            std::process::exit(2);
        }
    };
    let copies: usize = args.get(7).map_or(Ok(1), |c| c.parse())?;
    if copies == 0 || !users.len().is_multiple_of(copies) {
        eprintln!(
            "{} users do not make groups of {copies} copies",
            users.len()
        );
        std::process::exit(2);
    }
    let groups = users.len() / copies;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let folder = format!("raw{}", rand::random::<u32>());
    let payload: Arc<Vec<u8>> = Arc::new((0..block).map(|i| (i * 7 + 3) as u8).collect());
    rt.block_on(async {
        // One session per (account, connection); block i goes to every account of group
        // i mod groups.
        let mut sessions = Vec::new();
        for (a, (u, p)) in users.iter().enumerate() {
            for _ in 0..connections {
                let mut cfg = Config::new("127.0.0.1", port, u.clone(), p.clone());
                cfg.tls = Tls::None;
                cfg.use_binary = binary;
                let mut c = Client::connect(&cfg).await?;
                c.create(&folder).await?;
                c.select(&folder).await?;
                sessions.push((a, c));
            }
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (s, (a, mut c)) in sessions.into_iter().enumerate() {
            let payload = payload.clone();
            let folder = folder.clone();
            let mine: Vec<usize> = (0..blocks)
                .filter(|i| i % groups == a / copies)
                .filter(|i| (i / groups) % connections == s % connections)
                .collect();
            // Only a group's first account is read back.
            let reader = a.is_multiple_of(copies);
            tasks.push(tokio::spawn(async move {
                let mut uids = Vec::new();
                for chunk in mine.chunks(16) {
                    let msgs: Vec<Vec<u8>> = chunk
                        .iter()
                        .map(|i| {
                            mailfs::imap_remote::build_message(
                                &format!("raw {i}"),
                                &payload,
                                binary,
                            )
                        })
                        .collect();
                    let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
                    let got = c.append(&folder, &refs, binary).await?;
                    uids.extend(got.into_iter().flatten());
                }
                Ok::<_, imap_client::Error>((c, if reader { uids } else { Vec::new() }))
            }));
        }
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.expect("task")?);
        }
        let write_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (mut c, uids) in done {
            tasks.push(tokio::spawn(async move {
                let mut bytes = 0usize;
                for u in uids {
                    // As the mount fetches: BINARY.PEEK[1], or the whole message and
                    // its body decoded.
                    bytes += if binary {
                        c.uid_fetch_body(u, None).await?.map(|b| b.len())
                    } else {
                        c.uid_fetch_message(u).await?.and_then(|m| {
                            let body = &m[imap_client::body_start(&m)..];
                            mailfs::imap_remote::decode_base64_lines(body).map(|b| b.len())
                        })
                    }
                    .unwrap_or(0);
                }
                Ok::<_, imap_client::Error>((c, bytes))
            }));
        }
        let mut read = 0;
        let mut clients = Vec::new();
        for t in tasks {
            let (c, b) = t.await.expect("task")?;
            read += b;
            clients.push(c);
        }
        let read_s = started.elapsed().as_secs_f64();
        assert!(read >= total, "read {read} of {total}");
        println!(
            "RESULT raw_write_s={write_s:.4} raw_read_s={read_s:.4} bytes={} blocks={blocks}",
            blocks * block
        );
        Ok::<(), imap_client::Error>(())
    })?;
    Ok(())
}
