//! Training rspamd through its controller (docs/spam.md 3): `POST /learnspam` or
//! `/learnham` with the message as the body and the controller's password in the `Password`
//! header.
//!
//! A minimal HTTP/1.1 exchange over one TCP connection (`Connection: close`), smaller than a
//! client library for one request: the request with its `Content-Length`, then the status
//! line, the header and a body of at most `RESPONSE_BYTES_MAX` bytes in all. The whole
//! exchange is bounded by the timeout.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The class a message is trained as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learn {
    Spam,
    Ham,
}

/// The most of a controller's answer that is read: its answers are a line of JSON.
const RESPONSE_BYTES_MAX: usize = 64 * 1024;

/// Trains rspamd's Bayes classifier with the message. `Ok` when the controller learned it,
/// or answered that it had already learned it as this class (rspamd 3.4: status 208 with
/// `{"error":"<id> has been already learned as spam, ignore it"}`). `Err` carries the
/// controller's status and answer, or what failed.
pub async fn learn(
    controller: &str,
    password: Option<&str>,
    class: Learn,
    message: &[u8],
    timeout: Duration,
) -> Result<(), String> {
    let exchange = exchange(controller, password, class, message);
    let (status, body) = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("rspamd controller {controller}: no answer within {timeout:?}"))??;
    match status {
        200..=299 => Ok(()),
        _ => Err(format!(
            "rspamd controller {controller}: {status} {}",
            String::from_utf8_lossy(&body).trim()
        )),
    }
}

/// Sends the request; returns the status code and the body.
async fn exchange(
    controller: &str,
    password: Option<&str>,
    class: Learn,
    message: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let path = match class {
        Learn::Spam => "/learnspam",
        Learn::Ham => "/learnham",
    };
    let failed = |what: &str, error: std::io::Error| {
        format!("rspamd controller {controller}: {what}: {error}")
    };
    let mut stream = tokio::net::TcpStream::connect(controller)
        .await
        .map_err(|e| failed("connect", e))?;
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {controller}\r\nContent-Length: {}\r\nConnection: close\r\n",
        message.len()
    );
    if let Some(password) = password {
        if password.contains(['\r', '\n']) {
            return Err("the rspamd controller password has a line break".to_string());
        }
        request.push_str(&format!("Password: {password}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| failed("write", e))?;
    stream
        .write_all(message)
        .await
        .map_err(|e| failed("write", e))?;
    let mut response = Vec::new();
    let mut piece = [0u8; 8192];
    loop {
        let count = stream
            .read(&mut piece)
            .await
            .map_err(|e| failed("read", e))?;
        if count == 0 {
            break;
        }
        response.extend_from_slice(&piece[..count]);
        if response.len() > RESPONSE_BYTES_MAX {
            return Err(format!(
                "rspamd controller {controller}: an answer longer than {RESPONSE_BYTES_MAX} bytes"
            ));
        }
        if complete(&response) {
            break;
        }
    }
    parse(&response).ok_or_else(|| {
        format!(
            "rspamd controller {controller}: not an HTTP answer: {:?}",
            String::from_utf8_lossy(&response[..response.len().min(200)])
        )
    })
}

/// Whether the header and a body of its `Content-Length` have arrived.
fn complete(response: &[u8]) -> bool {
    let Some(end) = header_end(response) else {
        return false;
    };
    content_length(&response[..end]).is_some_and(|length| response.len() >= end + length)
}

fn header_end(response: &[u8]) -> Option<usize> {
    response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

fn content_length(header: &[u8]) -> Option<usize> {
    String::from_utf8_lossy(header).lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })
}

/// `HTTP/1.x NNN reason`, the header, and the body (up to its `Content-Length` if given).
fn parse(response: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = header_end(response)?;
    let header = &response[..end];
    let status_line = header.split(|&b| b == b'\n').next()?;
    let status_line = std::str::from_utf8(status_line).ok()?;
    let mut words = status_line.split_ascii_whitespace();
    if !words.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = words.next()?.parse().ok()?;
    let body = &response[end..];
    let body = match content_length(header) {
        Some(length) => &body[..length.min(body.len())],
        None => body,
    };
    Some((status, body.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let answer =
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 16\r\n\r\n{\"success\":true}";
        assert!(complete(answer));
        assert_eq!(parse(answer), Some((200, b"{\"success\":true}".to_vec())));
        assert!(!complete(&answer[..answer.len() - 1]));
        assert_eq!(
            parse(b"HTTP/1.0 208 Already\r\n\r\n{}"),
            Some((208, b"{}".to_vec()))
        );
        assert_eq!(parse(b"SMTP 200\r\n\r\n"), None);
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n"), None);
    }
}
