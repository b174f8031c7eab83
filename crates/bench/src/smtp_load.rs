//! SMTP load from the client side: `connections` sessions each sending messages back to back
//! over one connection, with the latency of every DATA (from the final dot to the reply)
//! recorded. postal and smtp-source count messages but not latency; this is the p50/p99 of the
//! wait that group commit adds or saves, against any server.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;

use crate::result;

pub struct SmtpLoadOptions {
    pub address: SocketAddr,
    pub connections: Vec<usize>,
    pub seconds: f64,
    pub message_bytes: usize,
    pub sender: String,
    /// Recipients, used round robin.
    pub recipients: Vec<String>,
    pub label: String,
    /// Sign every message with this key (as a sending MTA would), so a server that checks
    /// DKIM has a signature to verify.
    pub dkim: Option<DkimKey>,
}

/// A DKIM key for `SmtpLoadOptions::dkim`.
pub struct DkimKey {
    pub domain: String,
    pub selector: String,
    /// `ed25519` or `rsa`.
    pub algorithm: String,
    /// PKCS#8 PEM.
    pub private_key_pem: String,
}

fn reply(reader: &mut BufReader<TcpStream>) -> Result<u16> {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            bail!("the server closed the connection");
        }
        let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
        if line.as_bytes().get(3) != Some(&b'-') {
            return Ok(code);
        }
    }
}

fn expect(reader: &mut BufReader<TcpStream>, want: u16, what: &str) -> Result<()> {
    let code = reply(reader)?;
    if code != want {
        bail!("{what}: expected {want}, got {code}");
    }
    Ok(())
}

/// One session: returns how many messages it sent and their DATA latencies.
fn session(
    options: &SmtpLoadOptions,
    index: usize,
    stop: &AtomicBool,
    latencies: &Mutex<Histogram<u64>>,
) -> Result<u64> {
    let stream = TcpStream::connect(options.address)
        .with_context(|| format!("connecting to {}", options.address))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    expect(&mut reader, 220, "greeting")?;
    writer.write_all(b"EHLO bench.mailstow\r\n")?;
    expect(&mut reader, 250, "EHLO")?;
    let filler = "x".repeat(76);
    let signer = match &options.dkim {
        Some(key) => Some(
            sender_auth::Signer::new(
                &key.domain,
                &key.selector,
                key.algorithm.parse()?,
                &key.private_key_pem,
            )
            .context("the DKIM key")?,
        ),
        None => None,
    };
    let mut local = Histogram::<u64>::new(3)?;
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let rcpt = &options.recipients[(index + sent as usize) % options.recipients.len()];
        let mut message = format!(
            "From: <{}>\r\nTo: <{rcpt}>\r\nSubject: bench {index}-{sent}\r\n\r\n",
            options.sender
        );
        while message.len() + 78 < options.message_bytes {
            message.push_str(&filler);
            message.push_str("\r\n");
        }
        if let Some(signer) = &signer {
            let signature = signer.sign(message.as_bytes())?;
            message.insert_str(0, &signature);
        }
        message.push_str(".\r\n");
        writer.write_all(format!("MAIL FROM:<{}>\r\n", options.sender).as_bytes())?;
        expect(&mut reader, 250, "MAIL")?;
        writer.write_all(format!("RCPT TO:<{rcpt}>\r\n").as_bytes())?;
        expect(&mut reader, 250, "RCPT")?;
        writer.write_all(b"DATA\r\n")?;
        expect(&mut reader, 354, "DATA")?;
        writer.write_all(message.as_bytes())?;
        let start = Instant::now();
        expect(&mut reader, 250, "end of data")?;
        local.record(start.elapsed().as_micros() as u64)?;
        sent += 1;
    }
    let _ = writer.write_all(b"QUIT\r\n");
    latencies
        .lock()
        .map_err(|_| anyhow::anyhow!("lock poisoned"))?
        .add(&local)?;
    Ok(sent)
}

pub fn run(options: &SmtpLoadOptions) -> Result<()> {
    if options.recipients.is_empty() {
        bail!("give at least one recipient");
    }
    for &connections in &options.connections {
        let stop = Arc::new(AtomicBool::new(false));
        let latencies = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
        let start = Instant::now();
        let sent: Vec<Result<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..connections)
                .map(|i| {
                    let (stop, latencies) = (stop.clone(), latencies.clone());
                    s.spawn(move || session(options, i, &stop, &latencies))
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(options.seconds));
            stop.store(true, Ordering::Relaxed);
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a session panicked")))
                })
                .collect()
        });
        let elapsed = start.elapsed().as_secs_f64();
        let mut total = 0;
        for s in sent {
            total += s?;
        }
        let latencies = latencies
            .lock()
            .map_err(|_| anyhow::anyhow!("lock poisoned"))?;
        result(
            "smtp_load",
            &[
                ("label", options.label.clone()),
                ("connections", connections.to_string()),
                ("msgs", total.to_string()),
                ("msgs_per_s", format!("{:.0}", total as f64 / elapsed)),
                ("data_p50_us", latencies.value_at_quantile(0.5).to_string()),
                ("data_p99_us", latencies.value_at_quantile(0.99).to_string()),
            ],
        );
    }
    Ok(())
}
