//! What the server publishes to anyone, without a login (issue 39): the documents mail clients
//! configure themselves from (Thunderbird's autoconfig, Microsoft's Autodiscover, and, for a
//! logged-in user, an Apple configuration profile), our MTA-STS policy (RFC 8461 3.3), and,
//! on the plain HTTP listener, the answers to an ACME server's HTTP-01 challenges (RFC 8555
//! 8.3) with a redirect to HTTPS for everything else.
//!
//! Every document names this server's host, ports and TLS modes ([`Published`]); a domain
//! that is not one of ours gets 404, so the listener cannot be used to learn about others.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::app::{App, not_found};
use crate::backend::Backend;
use crate::published::Http01Answers;

/// Longest domain part of an address or host name looked at (RFC 1035 2.3.4).
const DOMAIN_BYTES_MAX: usize = 253;

/// The routes every HTTP(S) listener of the view serves without a login.
pub(crate) fn routes<B: Backend>(router: Router<Arc<App<B>>>) -> Router<Arc<App<B>>> {
    router
        .route(
            "/.well-known/autoconfig/mail/config-v1.1.xml",
            get(thunderbird::<B>),
        )
        .route("/mail/config-v1.1.xml", get(thunderbird::<B>))
        .route(
            "/autodiscover/autodiscover.xml",
            axum::routing::post(autodiscover::<B>),
        )
        .route(
            "/Autodiscover/Autodiscover.xml",
            axum::routing::post(autodiscover::<B>),
        )
        .route("/.well-known/mta-sts.txt", get(mta_sts::<B>))
}

/// A host name from a `Host` header, lower-cased, without its port; `None` when it is not a
/// plausible DNS name (the header is the client's to write).
fn host_of(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let plausible = !name.is_empty()
        && name.len() <= DOMAIN_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    plausible.then_some(name)
}

/// The domain of `address` (`local@domain`), lower-cased, if it is one.
fn domain_of(address: &str) -> Option<String> {
    let (_, domain) = address.rsplit_once('@')?;
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    (!domain.is_empty() && domain.len() <= DOMAIN_BYTES_MAX).then_some(domain)
}

fn document(content_type: &'static str, body: String) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[derive(Deserialize)]
pub(crate) struct AutoconfigQuery {
    emailaddress: Option<String>,
}

/// Thunderbird's autoconfig (`/.well-known/autoconfig/mail/config-v1.1.xml` on the
/// domain's host, `/mail/config-v1.1.xml` on `autoconfig.DOMAIN`): the domain comes from
/// the `emailaddress` Thunderbird adds, else from the host asked.
pub(crate) async fn thunderbird<B: Backend>(
    State(app): State<Arc<App<B>>>,
    Query(query): Query<AutoconfigQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(published) = &app.config.published else {
        return not_found().await;
    };
    let domain = query
        .emailaddress
        .as_deref()
        .and_then(domain_of)
        .or_else(|| {
            host_of(&headers).map(|h| h.strip_prefix("autoconfig.").unwrap_or(&h).to_string())
        });
    match domain {
        Some(domain) if app.backend.serves_domain(&domain) => document(
            autoconfig::THUNDERBIRD_CONTENT_TYPE,
            autoconfig::thunderbird(&published.offer(&domain)),
        ),
        _ => not_found().await,
    }
}

/// Microsoft Autodiscover, the POX form (MS-OXDSCLI): the request names the address.
pub(crate) async fn autodiscover<B: Backend>(
    State(app): State<Arc<App<B>>>,
    body: Bytes,
) -> Response {
    let Some(published) = &app.config.published else {
        return not_found().await;
    };
    let error = |code| {
        document(
            autoconfig::AUTODISCOVER_CONTENT_TYPE,
            autoconfig::autodiscover_error(code),
        )
    };
    let request = match autoconfig::autodiscover_request(&body) {
        Ok(request) => request,
        Err(e) => return error(e.code()),
    };
    if let autoconfig::ResponseSchema::Unsupported(_) = request.response_schema {
        // ActiveSync (mobilesync) and the like: we speak IMAP, POP3 and submission only.
        return error(autoconfig::AutodiscoverErrorCode::UnsupportedSchema);
    }
    match domain_of(&request.email) {
        Some(domain) if app.backend.serves_domain(&domain) => document(
            autoconfig::AUTODISCOVER_CONTENT_TYPE,
            autoconfig::autodiscover_response(&published.offer(&domain), &request.email),
        ),
        _ => error(autoconfig::AutodiscoverErrorCode::UnknownAddress),
    }
}

/// RFC 8461 3.3: the policy at `https://mta-sts.DOMAIN/.well-known/mta-sts.txt`, for our
/// domains only, as `text/plain`.
pub(crate) async fn mta_sts<B: Backend>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
) -> Response {
    let policy = app
        .config
        .published
        .as_ref()
        .and_then(|p| p.mta_sts_policy.clone());
    let domain = host_of(&headers).and_then(|h| h.strip_prefix("mta-sts.").map(str::to_string));
    match (policy, domain) {
        (Some(policy), Some(domain)) if app.backend.serves_domain(&domain) => {
            document("text/plain; charset=utf-8", policy)
        }
        _ => not_found().await,
    }
}

/// An Apple configuration profile for the logged-in user (`/account/mobileconfig`).
pub(crate) async fn mobileconfig<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let session = match app.session(&headers, peer.ip()) {
        Ok((_, session)) => session,
        Err(denied) => return denied.into_response(),
    };
    let (Some(published), Some(domain)) = (&app.config.published, domain_of(&session.user)) else {
        return not_found().await;
    };
    let profile =
        match autoconfig::apple_profile(&published.offer(&domain), &session.user, &session.user) {
            Ok(profile) => profile,
            // No IMAP/POP3 or no submission listener: nothing a device could use.
            Err(_) => return not_found().await,
        };
    let mut response = document(autoconfig::APPLE_PROFILE_CONTENT_TYPE, profile);
    if let Ok(disposition) =
        HeaderValue::from_str(&format!("attachment; filename=\"{domain}.mobileconfig\""))
    {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

/// The plain HTTP listener's state: the view's, and the pending HTTP-01 answers.
pub(crate) struct Plain<B> {
    pub(crate) app: Arc<App<B>>,
    pub(crate) answers: Http01Answers,
}

/// RFC 8555 8.3: `/.well-known/acme-challenge/TOKEN` answers the key authorization.
pub(crate) async fn acme_challenge<B: Backend>(
    State(plain): State<Arc<Plain<B>>>,
    Path(token): Path<String>,
) -> Response {
    match (plain.answers)(&token) {
        Some(answer) => document("application/octet-stream", answer),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Everything else on plain HTTP goes to the same place over HTTPS, on the host asked when
/// it is a plausible name, else ours.
pub(crate) async fn to_https<B: Backend>(
    State(plain): State<Arc<Plain<B>>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let host = host_of(&headers)
        .or_else(|| {
            plain
                .app
                .config
                .published
                .as_ref()
                .map(|p| p.hostname.clone())
        })
        .unwrap_or_else(|| "localhost".to_string());
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Redirect::permanent(&format!("https://{host}{path}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_domains_are_read_carefully() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_static("Autoconfig.Example.ORG:80"),
        );
        assert_eq!(host_of(&headers).as_deref(), Some("autoconfig.example.org"));
        headers.insert(header::HOST, HeaderValue::from_static("evil/path"));
        assert_eq!(host_of(&headers), None);
        headers.insert(header::HOST, HeaderValue::from_static("[::1]:443"));
        assert_eq!(host_of(&headers), None);
        assert_eq!(domain_of("a@B.example.").as_deref(), Some("b.example"));
        assert_eq!(domain_of("nobody"), None);
        assert_eq!(domain_of("a@"), None);
    }
}
