//! Attempts that fail before any challenge: each is an error that says why, recorded in
//! `state.json` with the failure count and the backoff, and nothing is published or installed.

use std::sync::Mutex;
use std::time::SystemTime;

use acme::{Config, Error, Responder};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Counts every call: none is expected.
#[derive(Default)]
struct Untouched(Mutex<u32>);

impl Responder for Untouched {
    fn put_http01(&self, _: &str, _: &str) {
        *self.0.lock().unwrap() += 1;
    }
    fn put_tls_alpn01(&self, _: &str, _: CertificateDer<'static>, _: PrivateKeyDer<'static>) {
        *self.0.lock().unwrap() += 1;
    }
    fn clear_http01(&self, _: &str) {
        *self.0.lock().unwrap() += 1;
    }
    fn clear_tls_alpn01(&self, _: &str) {
        *self.0.lock().unwrap() += 1;
    }
}

fn names() -> Vec<String> {
    vec!["mail.example.org".into()]
}

#[tokio::test]
async fn failures_are_recorded_with_a_growing_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("acme");
    let responder = Untouched::default();

    // RFC 8555 6.1: HTTPS only.
    let config = Config::new("http://127.0.0.1:1/directory");
    let error = acme::obtain(&config, &store, &names(), &responder)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Config(_)), "{error}");
    let state = acme::load_state(&store).unwrap();
    assert_eq!(state.consecutive_failures, 1);
    assert_eq!(state.last_error, Some(error.to_string()));
    let first = state.last_attempt.unwrap();
    assert!(state.next_attempt.unwrap() >= first + acme::BACKOFF_FIRST);

    // Nothing listens there: the server cannot be reached.
    let config = Config::new("https://127.0.0.1:1/directory");
    let error = acme::obtain(&config, &store, &names(), &responder)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Acme(_)), "{error}");
    let state = acme::load_state(&store).unwrap();
    assert_eq!(state.consecutive_failures, 2);
    let second = state.last_attempt.unwrap();
    assert!(state.next_attempt.unwrap() >= second + acme::backoff(2));

    // A name no challenge can prove.
    let error = acme::obtain(&config, &store, &["*.example.org".into()], &responder)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Name { .. }), "{error}");

    // A contact that is not mailto: (checked before the server is asked).
    let mut config = Config::new("https://127.0.0.1:1/directory");
    config.contact = vec!["postmaster@example.org".into()];
    let error = acme::obtain(&config, &store, &names(), &responder)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("mailto:"), "{error}");

    // Extra roots that are not certificates.
    let mut config = Config::new("https://127.0.0.1:1/directory");
    let junk = dir.path().join("roots.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    config.extra_roots_pem = Some(junk);
    let error = acme::obtain(&config, &store, &names(), &responder)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("roots.pem"), "{error}");

    let status = acme::status(&store, SystemTime::now()).unwrap();
    assert_eq!(status.consecutive_failures, 5);
    assert!(status.names.is_empty());
    assert_eq!(status.days_left, None);
    assert_eq!(acme::load_certificate(&store).unwrap(), None);
    assert_eq!(*responder.0.lock().unwrap(), 0);
}
