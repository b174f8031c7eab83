//! The web view in a cluster: any node serves every user, by forwarding the user's requests
//! to the node that holds the mailbox (the seed's interface module in front of the mail
//! servers; IMAP and POP3 do the same in `proxy.rs`).
//!
//! **Which node.** A login (`POST /login`) goes to the owner of the address given, from the
//! directory cache. When the owner answers with a session cookie, this node adds its own
//! cookie `mailstow_node=<owner>` (HttpOnly, SameSite=Strict, Secure over TLS), and every
//! later request that carries it is forwarded to that node, which holds the session. A
//! logout's cleared session clears it too. The cookie grants nothing: a browser that names
//! another node only has its requests forwarded there, where its session token means
//! nothing. Everything else is served here.
//!
//! **Owner down.** The directory's leases (and an owner that did not answer within
//! [`FORWARD_CONNECT_TIMEOUT`], suspect for a while as for IMAP) give that node's users a
//! "temporarily unavailable" page, 503, at once; the users of every other node are served as
//! before.
//!
//! **The client's address.** The owner throttles and logs logins by the browser's address,
//! not by the forwarding node's: a forwarded request carries `x-mailstow-forwarded: v1 <unix
//! seconds> <from node> <client address> <mac>`, the MAC a keyed BLAKE3 under the cluster
//! secret (`Cluster::mac`, protocol `web`). The owner takes the address only from a header
//! whose MAC and time (±`TOKEN_SKEW_MAX`) check, and removes the header from every request
//! before routing, so no browser can claim an address. A forwarded request is never forwarded
//! again (no loops while a user moves).
//!
//! **Transport.** One HTTP/1.1 connection per forwarded request to the owner's `web`
//! address (TLS, unverified like the IMAP proxy's, when this node's view is TLS; the nodes'
//! views are configured alike). A login's password crosses the nodes' network inside it:
//! use `web_tls` where that network is not trusted. Responses, the event stream included,
//! are streamed back as they come.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};

use crate::node::{Cluster, Home};
use crate::preauth::{TOKEN_SKEW_MAX, unix_now};

/// The header that carries a forwarded request's client address.
const FORWARDED: &str = "x-mailstow-forwarded";
/// The cookie naming the node that holds a browser's session.
const NODE_COOKIE: &str = "mailstow_node";
/// The session cookie of the web crate.
const SESSION_COOKIE: &str = "mailstow_session";
/// Connecting to an owner (and its TLS handshake).
pub const FORWARD_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// An owner's answer (its status and header; a body, such as the event stream, may then run
/// on) must begin within this: a little more than the owner's own request deadline, so a
/// stopped owner holds a forwarded request no longer.
const FORWARD_ANSWER_TIMEOUT: Duration = Duration::from_secs(35);
/// A login form's body must arrive within this.
const LOGIN_BODY_WAIT_MAX: Duration = Duration::from_secs(10);

/// Routes the web view's requests in a cluster.
pub struct Forwarder {
    directory: directory::Directory,
    cluster: Arc<Cluster>,
    /// This node's view is TLS: so are the owners', and the node cookie is `Secure`.
    tls: bool,
    /// `web_request_bytes_max`: a login body read here is bounded like any request.
    body_max: usize,
}

/// Where a request goes.
pub enum Routed {
    /// Serve it here, as from this client.
    Here(Request<Body>, SocketAddr),
    Answered(Response<Body>),
}

fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))
}

/// The page for a user whose node cannot be reached.
fn unavailable(why: &str) -> Response<Body> {
    web::problem_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "Temporarily unavailable",
        &format!("Your mailbox cannot be reached right now ({why}). Try again shortly."),
    )
}

impl Forwarder {
    pub fn new(
        directory: directory::Directory,
        cluster: Arc<Cluster>,
        tls: bool,
        body_max: usize,
    ) -> Self {
        Forwarder {
            directory,
            cluster,
            tls,
            body_max,
        }
    }

    /// The header value for a request forwarded on behalf of `client`.
    fn forwarded_value(&self, client: IpAddr) -> String {
        vouch(&self.cluster, client, unix_now())
    }

    /// The client address a forwarded request vouches for, if its header checks.
    fn vouched_client(&self, value: &str) -> Option<IpAddr> {
        vouched(&self.cluster, value, unix_now())
    }

    /// Decides where `request` from `peer` goes: here, or (answered) to its owner node.
    pub async fn route(&self, peer: SocketAddr, mut request: Request<Body>) -> Routed {
        let vouched = request
            .headers_mut()
            .remove(FORWARDED)
            .and_then(|v| v.to_str().ok().and_then(|v| self.vouched_client(v)));
        if let Some(client) = vouched {
            // Forwarded by another node: served here, never forwarded again.
            return Routed::Here(request, SocketAddr::new(client, peer.port()));
        }
        let is_login =
            request.method() == axum::http::Method::POST && request.uri().path() == "/login";
        let owner = if is_login {
            // The address in the form decides: read the (small) body, then put it back.
            let (parts, body) = request.into_parts();
            let read = tokio::time::timeout(
                LOGIN_BODY_WAIT_MAX,
                axum::body::to_bytes(body, self.body_max),
            )
            .await;
            let Ok(Ok(bytes)) = read else {
                return Routed::Answered(web::problem_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Refused",
                    "The login form was too large or too slow.",
                ));
            };
            let username = form_urlencoded(&bytes, "username").unwrap_or_default();
            request = Request::from_parts(parts, Body::from(bytes));
            match self
                .cluster
                .home(&self.directory, &username.to_ascii_lowercase())
            {
                Home::Local => None,
                Home::Node(info) => Some(*info),
                Home::Unavailable(why) => return Routed::Answered(unavailable(&why)),
            }
        } else {
            match cookie(request.headers(), NODE_COOKIE) {
                Some(node) if node != self.cluster.node => {
                    match self.directory.cache().node(node) {
                        // A node no longer in the directory: its sessions are gone.
                        None => None,
                        Some(info) if !info.up => {
                            return Routed::Answered(unavailable(&format!(
                                "mailbox node {} is down",
                                info.name
                            )));
                        }
                        Some(info) => Some(info),
                    }
                }
                _ => None,
            }
        };
        match owner {
            None => Routed::Here(request, peer),
            Some(owner) => Routed::Answered(self.forward(owner, peer.ip(), request).await),
        }
    }

    /// Sends `request` to `owner`'s web view and streams its answer back.
    async fn forward(
        &self,
        owner: directory::NodeInfo,
        client: IpAddr,
        mut request: Request<Body>,
    ) -> Response<Body> {
        let Some(address) = owner.web.clone() else {
            return unavailable(&format!("mailbox node {} has no web view", owner.name));
        };
        if let Ok(value) = HeaderValue::from_str(&self.forwarded_value(client)) {
            request.headers_mut().insert(FORWARDED, value);
        }
        let is_login = request.uri().path() == "/login";
        let answer =
            match tokio::time::timeout(FORWARD_CONNECT_TIMEOUT, self.connect(&address)).await {
                Ok(Ok(mut sender)) => {
                    match tokio::time::timeout(FORWARD_ANSWER_TIMEOUT, sender.send_request(request))
                        .await
                    {
                        Ok(answer) => answer.map_err(|e| e.to_string()),
                        Err(_) => Err("no answer in time".to_string()),
                    }
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err("timed out".to_string()),
            };
        let response = match answer {
            Ok(response) => response,
            Err(e) => {
                self.cluster.suspect(&owner.name);
                tracing::warn!(event = "web_forward_failed", node = %owner.name, error = %e);
                return unavailable(&format!("mailbox node {} does not answer", owner.name));
            }
        };
        let mut response = response.map(Body::new);
        // The owner opened or ended a session: name its node, or forget it.
        let session_set = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
            .map(|rest| !rest.starts_with(';') && !rest.is_empty());
        match session_set {
            Some(true) if is_login => self.set_node_cookie(&mut response, &owner.name, None),
            Some(false) => self.set_node_cookie(&mut response, "", Some(0)),
            _ => {}
        }
        response
    }

    fn set_node_cookie(&self, response: &mut Response<Body>, node: &str, max_age: Option<u64>) {
        let secure = if self.tls { "; Secure" } else { "" };
        let age = max_age.map_or(String::new(), |s| format!("; Max-Age={s}"));
        if let Ok(value) = HeaderValue::from_str(&format!(
            "{NODE_COOKIE}={node}; Path=/; HttpOnly; SameSite=Strict{secure}{age}"
        )) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }

    /// An HTTP/1.1 connection to an owner's web view.
    async fn connect(
        &self,
        address: &str,
    ) -> Result<hyper::client::conn::http1::SendRequest<Body>, String> {
        use hyper_util::rt::TokioIo;
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("{address}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        if self.tls {
            let stream = self
                .cluster
                .tls_connect(tcp)
                .await
                .map_err(|e| format!("{address}: TLS: {e}"))?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            Ok(sender)
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            Ok(sender)
        }
    }
}

/// The `x-mailstow-forwarded` value for `client`, made by `cluster`'s node at `now`.
fn vouch(cluster: &Cluster, client: IpAddr, now: u64) -> String {
    let ip = client.to_string();
    let mac = cluster.mac("web", "", &cluster.node, &ip, now, b"");
    format!("v1 {now} {} {ip} {}", cluster.node, mac.to_hex())
}

/// The client address an `x-mailstow-forwarded` value vouches for at `now`, if its MAC and
/// time check.
fn vouched(cluster: &Cluster, value: &str, now: u64) -> Option<IpAddr> {
    let mut fields = value.split(' ');
    let (Some("v1"), Some(at), Some(node), Some(ip), Some(mac), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return None;
    };
    let at: u64 = at.parse().ok()?;
    if now.abs_diff(at) > TOKEN_SKEW_MAX {
        return None;
    }
    let expected = cluster.mac("web", "", node, ip, at, b"");
    let given = blake3::Hash::from_hex(mac).ok()?;
    // `blake3::Hash`'s equality is constant-time.
    (given == expected).then(|| ip.parse().ok())?
}

/// The first value of `key` in an `application/x-www-form-urlencoded` body.
fn form_urlencoded(body: &[u8], key: &str) -> Option<String> {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(body).ok()?;
    form.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::{form_urlencoded, vouch, vouched};
    use crate::preauth::tests::cluster;

    #[test]
    fn only_a_node_with_the_secret_vouches_for_an_address() {
        let n1 = cluster("n1", b"the cluster secret");
        let n2 = cluster("n2", b"the cluster secret");
        let stranger = cluster("n1", b"another secret");
        let client = "192.0.2.7".parse().unwrap();
        let value = vouch(&n1, client, 1_000_000);
        assert_eq!(vouched(&n2, &value, 1_000_000), Some(client));
        assert_eq!(
            vouched(&n2, &value, 1_000_100),
            Some(client),
            "within the skew"
        );
        assert_eq!(vouched(&n2, &value, 1_000_121), None, "too old");
        assert_eq!(
            vouched(&n2, &vouch(&stranger, client, 1_000_000), 1_000_000),
            None
        );
        let other_address = value.replace("192.0.2.7", "192.0.2.8");
        assert_eq!(vouched(&n2, &other_address, 1_000_000), None);
        let other_node = value.replace(" n1 ", " n3 ");
        assert_eq!(vouched(&n2, &other_node, 1_000_000), None);
        assert_eq!(vouched(&n2, &format!("{value} extra"), 1_000_000), None);
        assert_eq!(vouched(&n2, "v1 x n1 192.0.2.7 00", 1_000_000), None);
        assert_eq!(vouched(&n2, "", 1_000_000), None);
        let v6 = "2001:db8::1".parse().unwrap();
        assert_eq!(vouched(&n2, &vouch(&n1, v6, 5), 5), Some(v6));
    }

    #[test]
    fn the_login_address_is_read_from_the_form() {
        assert_eq!(
            form_urlencoded(b"username=ann%40example.org&password=x", "username").as_deref(),
            Some("ann@example.org")
        );
        assert_eq!(form_urlencoded(b"password=x", "username"), None);
        assert_eq!(form_urlencoded(b"\xff\xfe=%%", "username"), None);
    }
}
