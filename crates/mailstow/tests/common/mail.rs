//! Mail in and out for the server tests: a server started with its mail log, one SMTP
//! transaction, a folder's messages over IMAP, the mail log's lines.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Server, base64, smtp_reply};

/// Starts a server on `data` with the mail log in `<dir>/mail.log` at level info and
/// `extra` added to its `[server]` table.
pub(crate) fn start(data: &Path, hostname: &str, extra: &str) -> (Server, PathBuf) {
    start_args(data, hostname, extra, &[])
}

pub(crate) fn start_args(
    data: &Path,
    hostname: &str,
    extra: &str,
    args: &[&str],
) -> (Server, PathBuf) {
    let dir = data.parent().unwrap();
    let log = dir.join("mail.log");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nhostname = \"{hostname}\"\nauth_without_tls = true\n{extra}\n\
             [log]\nfile = \"{}\"\nlevel = \"info\"\n",
            log.display()
        ),
    )
    .unwrap();
    (Server::start_opts(data, Some(&config), None, args), log)
}

/// Log lines containing every one of `needles`, waiting up to 20 s for at least `count`.
pub(crate) fn log_lines(log: &Path, needles: &[&str], count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .collect();
        if lines.len() >= count {
            return lines;
        }
        if Instant::now() > deadline {
            eprintln!("mail log without {needles:?} x{count}:\n{text}");
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One SMTP transaction (`service`: "smtp" or "submission" with AUTH PLAIN as `auth`);
/// every reply code from MAIL FROM on and the last reply's text.
pub(crate) fn send(
    server: &Server,
    service: &str,
    auth: Option<&str>,
    from: &str,
    to: &[&str],
    message: &str,
) -> (Vec<u16>, String) {
    send_from(server, None, service, auth, from, to, message)
}

/// A TCP connection to `address` from the local address `source` (any of 127/8 on
/// loopback): a client the server sees at that address (a blocklisted one, say).
pub(crate) fn connect_from(address: &str, source: std::net::IpAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(source, 0)).unwrap();
        socket.connect(address.parse().unwrap()).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// [`send`] from the local address `source` (default 127.0.0.1).
pub(crate) fn send_from(
    server: &Server,
    source: Option<std::net::IpAddr>,
    service: &str,
    auth: Option<&str>,
    from: &str,
    to: &[&str],
    message: &str,
) -> (Vec<u16>, String) {
    let stream = match source {
        Some(ip) => connect_from(&server.addr(service), ip),
        None => TcpStream::connect(server.addr(service)).unwrap(),
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut greeting = String::new();
    reader.read_line(&mut greeting).unwrap();
    if !greeting.starts_with("220") {
        // Refused at connect (a blocklist, a filter): that reply is the answer.
        let code = greeting.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
        return (vec![code], greeting);
    }
    let lmtp = service == "lmtp";
    writer
        .write_all(if lmtp {
            b"LHLO client\r\n"
        } else {
            b"EHLO client\r\n"
        })
        .unwrap();
    assert_eq!(smtp_reply(&mut reader).unwrap(), 250);
    if let Some(user) = auth {
        let plain = base64(format!("\0{user}\0secret-pw").as_bytes());
        writer
            .write_all(format!("AUTH PLAIN {plain}\r\n").as_bytes())
            .unwrap();
        assert_eq!(smtp_reply(&mut reader).unwrap(), 235);
    }
    let mut codes = Vec::new();
    writer
        .write_all(format!("MAIL FROM:<{from}>\r\n").as_bytes())
        .unwrap();
    codes.push(smtp_reply(&mut reader).unwrap());
    for rcpt in to {
        writer
            .write_all(format!("RCPT TO:<{rcpt}>\r\n").as_bytes())
            .unwrap();
        codes.push(smtp_reply(&mut reader).unwrap());
    }
    writer.write_all(b"DATA\r\n").unwrap();
    let data = smtp_reply(&mut reader).unwrap();
    codes.push(data);
    if data != 354 {
        return (codes, String::new());
    }
    writer.write_all(message.as_bytes()).unwrap();
    writer.write_all(b".\r\n").unwrap();
    let replies = if lmtp { to.len() } else { 1 };
    let mut last = String::new();
    for _ in 0..replies {
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.as_bytes().get(3) != Some(&b'-') {
                codes.push(line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0));
                last = line;
                break;
            }
        }
    }
    writer.write_all(b"QUIT\r\n").unwrap();
    (codes, last)
}

/// Every message in `user`'s `folder` with its flags, once there are at least `count`
/// (IMAP FETCH (FLAGS BODY.PEEK[])); waits up to 20 s.
pub(crate) fn messages(
    server: &Server,
    user: &str,
    folder: &str,
    count: usize,
) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = fetch_all(server, user, folder);
        if found.len() >= count || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
pub(crate) fn fetch_all(server: &Server, user: &str, folder: &str) -> Vec<(String, String)> {
    let stream = TcpStream::connect(server.addr("imap")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    writer
        .write_all(
            format!(
                "l LOGIN {user} secret-pw\r\ns EXAMINE \"{folder}\"\r\n\
                 f FETCH 1:* (FLAGS BODY.PEEK[])\r\nq LOGOUT\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut found = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            return found;
        }
        if line.starts_with("s NO") || line.starts_with("q OK") {
            return found;
        }
        if line.starts_with("* ") && line.contains(" FETCH (") && line.contains("BODY[] {") {
            let flags = line
                .split_once("FLAGS (")
                .and_then(|(_, rest)| rest.split_once(')'))
                .map_or(String::new(), |(flags, _)| flags.to_string());
            let size: usize = line
                .rsplit_once('{')
                .and_then(|(_, n)| n.trim_end().strip_suffix('}'))
                .and_then(|n| n.parse().ok())
                .unwrap();
            let mut body = vec![0; size];
            reader.read_exact(&mut body).unwrap();
            found.push((flags, String::from_utf8_lossy(&body).into_owned()));
        }
    }
}
