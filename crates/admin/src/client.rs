//! The CLI's side of the admin socket: one request line, the answer (or streamed lines for
//! an import or export), then the connection closes. `None` when no server listens, so the
//! CLI may do the work itself.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use crate::request::Request;

/// Where the server listens for admin commands.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.sock")
}

/// Sends `request` to a running server. `None` when no server listens at the socket (it does
/// not exist, or nobody accepts: a stale file left by a killed server); then the caller may
/// open the queue itself.
pub fn request(data_dir: &Path, request: &Request) -> Option<Result<Vec<u8>, String>> {
    let path = socket_path(data_dir);
    let mut stream = std::os::unix::net::UnixStream::connect(&path).ok()?;
    let mut exchange = || -> std::io::Result<Vec<u8>> {
        stream.write_all(format!("{}\n", request.line()).as_bytes())?;
        stream.shutdown(std::net::Shutdown::Write)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        Ok(response)
    };
    let response = match exchange() {
        Ok(r) => r,
        Err(e) => return Some(Err(format!("{}: {e}", path.display()))),
    };
    let (status, output) = match response.iter().position(|&b| b == b'\n') {
        Some(n) => (&response[..n], &response[n + 1..]),
        None => (&response[..], &[][..]),
    };
    Some(match std::str::from_utf8(status) {
        Ok("ok") => Ok(output.to_vec()),
        Ok(s) if s.starts_with("error: ") => Err(s["error: ".len()..].to_string()),
        _ => Err(format!(
            "{}: the server closed the connection without an answer",
            path.display()
        )),
    })
}

/// Sends a streaming `request` (import, export) to a running server, calling `line` with
/// each `progress` and `problem` line. `None` when no server listens; else the last line:
/// `Ok(summary)` or `Err(message)`.
pub fn request_streaming(
    data_dir: &Path,
    request: &Request,
    line: &mut dyn FnMut(&str),
) -> Option<Result<String, String>> {
    let path = socket_path(data_dir);
    let mut stream = std::os::unix::net::UnixStream::connect(&path).ok()?;
    let sent = stream
        .write_all(format!("{}\n", request.line()).as_bytes())
        .and_then(|()| stream.shutdown(std::net::Shutdown::Write));
    if let Err(e) = sent {
        return Some(Err(format!("{}: {e}", path.display())));
    }
    let mut reader = std::io::BufReader::new(stream);
    let mut first = true;
    let mut text = String::new();
    loop {
        text.clear();
        match std::io::BufRead::read_line(&mut reader, &mut text) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Some(Err(format!("{}: {e}", path.display()))),
        }
        let l = text.trim_end_matches(['\r', '\n']);
        if let Some(message) = l.strip_prefix("error: ") {
            return Some(Err(message.to_string()));
        }
        if std::mem::replace(&mut first, false) {
            if l != "ok" {
                break;
            }
            continue;
        }
        if let Some(summary) = l.strip_prefix("done ") {
            return Some(Ok(summary.to_string()));
        }
        line(l);
    }
    Some(Err(format!(
        "{}: the server closed the connection without an answer",
        path.display()
    )))
}
