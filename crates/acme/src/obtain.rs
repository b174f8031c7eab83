//! One attempt at a certificate: account, order, challenges, finalization, download, install.

use std::path::Path;
use std::time::{Duration, SystemTime};

use instant_acme::{
    Account, AuthorizationStatus, ChallengeStatus, ChallengeType, Identifier, NewAccount, NewOrder,
    Order, OrderStatus, RetryPolicy,
};
use rcgen::{CertificateParams, DistinguishedName, KeyPair, PublicKeyData};

use crate::challenge::Published;
use crate::store::{CertificateFacts, Store, StoredAccount};
use crate::{Challenge, Config, Error, Issued, Responder, certificate, http, names, next_attempt};

/// The longest one attempt ([`obtain`]) takes, whatever the server does: a request that hangs
/// ends the attempt here.
pub const OBTAIN_MAX: Duration = Duration::from_secs(5 * 60);

/// The longest the order is polled in each phase (validation, then issuance).
pub const ORDER_POLL_MAX: Duration = Duration::from_secs(2 * 60);

/// The first wait before polling the order; it doubles up to [`ORDER_POLL_WAIT_MAX`] while
/// the challenges are validated, and while the certificate is issued follows the server's
/// `Retry-After` too (instant-acme's `RetryPolicy`, RFC 8555 7.4).
const ORDER_POLL_FIRST: Duration = Duration::from_millis(500);

/// The longest wait between two polls while the challenges are validated.
const ORDER_POLL_WAIT_MAX: Duration = Duration::from_secs(8);

/// Size of the chain the server sends: a few certificates of a few KiB each.
pub const CHAIN_BYTES_MAX: usize = 64 * 1024;

/// Obtains a certificate for `names` from the ACME server of `config` and installs it in
/// `store_dir` (created if missing): the account is loaded or created (agreeing to the CA's
/// terms of service, RFC 8555 7.3), a new order placed, each pending authorization answered
/// with `config.challenge` through `responder`, the order polled for at most
/// [`ORDER_POLL_MAX`] per phase, finalized with a CSR signed by the kept key (a new key the
/// first time, or with `config.rotate_key`), and the chain downloaded and installed. The whole
/// attempt takes at most [`OBTAIN_MAX`]. The challenge answers are withdrawn on every path,
/// also when the returned future is dropped.
///
/// It does not check whether a renewal is due ([`next_attempt`] does); `mailstow acme renew`
/// calls it directly. The attempt is recorded in `state.json` (success, or the error, the
/// failure count and any `Retry-After`) with the next attempt's time. Another `obtain` running
/// on the same directory is [`Error::Busy`], and not recorded. The small files of the directory
/// are read and written with blocking calls.
pub async fn obtain(
    config: &Config,
    store_dir: &Path,
    names: &[String],
    responder: &dyn Responder,
) -> Result<Issued, Error> {
    let store = Store::open(store_dir)?;
    let mut state = store.state()?;
    let result =
        match tokio::time::timeout(OBTAIN_MAX, attempt(config, &store, names, responder)).await {
            Ok(result) => result,
            Err(_) => Err(Error::TimedOut(OBTAIN_MAX)),
        };
    let now = SystemTime::now();
    state.last_attempt = Some(now);
    match &result {
        Ok((_, facts)) => {
            state.certificate = Some(facts.clone());
            state.last_error = None;
            state.consecutive_failures = 0;
            state.retry_after = None;
        }
        Err(error) => {
            state.last_error = Some(error.to_string());
            state.consecutive_failures = state.consecutive_failures.saturating_add(1);
            state.retry_after = error.retry_after();
        }
    }
    state.next_attempt = Some(next_attempt(config, names, &state, now));
    if let Err(error) = store.write_state(&state) {
        // The certificate, if any, is installed; load_state reads its facts from cert.pem.
        tracing::warn!(%error, "acme: the attempt could not be recorded");
        if result.is_ok() {
            return Err(error);
        }
    }
    match result {
        Ok((issued, facts)) => {
            tracing::info!(names = ?facts.names, not_after = ?facts.not_after, "acme: certificate installed");
            Ok(issued)
        }
        Err(error) => {
            tracing::warn!(%error, failures = state.consecutive_failures, "acme: no certificate");
            Err(error)
        }
    }
}

async fn attempt(
    config: &Config,
    store: &Store,
    names: &[String],
    responder: &dyn Responder,
) -> Result<(Issued, CertificateFacts), Error> {
    let names = names::normalize(names)?;
    let account = account(config, store).await?;
    let identifiers: Vec<Identifier> = names.iter().cloned().map(Identifier::Dns).collect();
    let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
    let mut published = Published::new(responder);
    answer(&mut order, config.challenge, &mut published).await?;
    wait_until_ready(&mut order).await?;
    drop(published);

    let (key, key_pem, key_is_new) = certificate_key(config, store)?;
    let mut params = CertificateParams::new(names.clone())
        .map_err(|error| Error::Certificate(format!("request: {error}")))?;
    params.distinguished_name = DistinguishedName::new();
    let csr = params
        .serialize_request(&key)
        .map_err(|error| Error::Certificate(format!("request: {error}")))?;
    // RFC 8555 7.4: finalize, then poll until the certificate is issued.
    order.finalize_csr(csr.der()).await?;
    let polling = RetryPolicy::new()
        .initial_delay(ORDER_POLL_FIRST)
        .backoff(2.0)
        .timeout(ORDER_POLL_MAX);
    let chain_pem = order.poll_certificate(&polling).await?;

    if chain_pem.len() > CHAIN_BYTES_MAX {
        return Err(Error::Certificate(format!(
            "a chain of {} bytes, at most {CHAIN_BYTES_MAX}",
            chain_pem.len()
        )));
    }
    let leaf = certificate::leaf(&chain_pem).map_err(Error::Certificate)?;
    if leaf.public_key_info != key.subject_public_key_info() {
        return Err(Error::Certificate(
            "the certificate is not for the requested key".into(),
        ));
    }
    if let Some(missing) = names.iter().find(|name| !leaf.names.contains(name)) {
        return Err(Error::Certificate(format!(
            "the certificate does not cover {missing}"
        )));
    }
    store.install_pair(&chain_pem, key_is_new.then_some(key_pem.as_str()))?;
    let facts = CertificateFacts {
        names: leaf.names.clone(),
        not_before: leaf.not_before,
        not_after: leaf.not_after,
        issued_at: SystemTime::now(),
    };
    let issued = Issued {
        names: leaf.names,
        not_after: leaf.not_after,
        chain_pem,
        key_pem,
    };
    Ok((issued, facts))
}

/// The stored account if it belongs to the configured directory (its contacts updated when the
/// configuration changed them, RFC 8555 7.3.2), or a new one.
async fn account(config: &Config, store: &Store) -> Result<Account, Error> {
    if let Some(bad) = config
        .contact
        .iter()
        .find(|contact| !contact.starts_with("mailto:"))
    {
        return Err(Error::Config(format!(
            "contact {bad:?} is not a mailto: URL"
        )));
    }
    let contacts: Vec<&str> = config.contact.iter().map(String::as_str).collect();
    let builder = Account::builder_with_http(http::client(config)?);
    if let Some(stored) = store.account()? {
        if stored.directory_url == config.directory_url {
            let account = builder.from_credentials(stored.credentials()?).await?;
            if stored.contact != config.contact {
                account.update_contacts(&contacts).await?;
                store.write_account(&StoredAccount::new(
                    &config.directory_url,
                    &config.contact,
                    &stored.credentials()?,
                )?)?;
            }
            return Ok(account);
        }
        tracing::info!(directory = %config.directory_url, "acme: another directory URL, a new account");
    }
    let (account, credentials) = builder
        .create(
            &NewAccount {
                contact: &contacts,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            config.directory_url.clone(),
            None,
        )
        .await?;
    store.write_account(&StoredAccount::new(
        &config.directory_url,
        &config.contact,
        &credentials,
    )?)?;
    Ok(account)
}

/// Publishes the answer of every pending authorization and tells the server it is ready
/// (RFC 8555 7.5.1). Authorizations already valid (reused by the server) need nothing.
async fn answer(
    order: &mut Order,
    challenge: Challenge,
    published: &mut Published<'_>,
) -> Result<(), Error> {
    let challenge_type = match challenge {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization?;
        let name = match &authorization.identifier().identifier {
            Identifier::Dns(name) => name.clone(),
            other => {
                return Err(Error::Validation(format!(
                    "an identifier not asked for: {other:?}"
                )));
            }
        };
        match authorization.status {
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            other => {
                return Err(Error::Validation(format!(
                    "{name}: authorization {other:?}"
                )));
            }
        }
        let Some(mut handle) = authorization.challenge(challenge_type.clone()) else {
            return Err(Error::ChallengeNotOffered { name, challenge });
        };
        let key_authorization = handle.key_authorization();
        match challenge {
            Challenge::Http01 => published.http01(&handle.token, key_authorization.as_str()),
            // RFC 8737 3: the certificate is presented for the identifier's name.
            Challenge::TlsAlpn01 => published.tls_alpn01(&name, key_authorization.as_str())?,
        }
        handle.set_ready().await?;
    }
    Ok(())
}

/// Polls the order until it is ready for finalization (RFC 8555 7.1.6), at most
/// [`ORDER_POLL_MAX`]. Each poll also reads the authorizations, so that a challenge the server
/// found invalid ends the wait at once with its error (RFC 8555 7.1.6: it makes its
/// authorization and the order invalid; some servers leave the order pending).
async fn wait_until_ready(order: &mut Order) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + ORDER_POLL_MAX;
    let mut wait = ORDER_POLL_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        let state = order.refresh().await?;
        if let Some(problem) = &state.error {
            return Err(Error::Validation(problem.to_string()));
        }
        match state.status {
            OrderStatus::Ready => return Ok(()),
            OrderStatus::Valid | OrderStatus::Processing => {
                return Err(Error::Validation(format!(
                    "the order is {:?} before it was finalized",
                    state.status
                )));
            }
            OrderStatus::Invalid => {
                let (failed, _) = authorization_problems(order).await;
                return Err(Error::Validation(if failed.is_empty() {
                    "the order is invalid".into()
                } else {
                    failed.join("; ")
                }));
            }
            OrderStatus::Pending => {}
        }
        let (failed, pending) = authorization_problems(order).await;
        if !failed.is_empty() {
            return Err(Error::Validation(failed.join("; ")));
        }
        if tokio::time::Instant::now() + wait > deadline {
            return Err(Error::Validation(format!(
                "not validated within {ORDER_POLL_MAX:?}: {} still pending",
                pending.join(", ")
            )));
        }
        wait = (wait * 2).min(ORDER_POLL_WAIT_MAX);
    }
}

/// The authorizations' failures (a name and its challenge's error, or its invalid status), and
/// the names still pending. An authorization that cannot be read is counted as pending.
async fn authorization_problems(order: &mut Order) -> (Vec<String>, Vec<String>) {
    let mut failed = Vec::new();
    let mut pending = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authorization)) = authorizations.next().await {
        let Ok(state) = authorization.refresh().await else {
            pending.push(authorization.url().to_owned());
            continue;
        };
        let name = match &state.identifier().identifier {
            Identifier::Dns(name) => name.clone(),
            other => format!("{other:?}"),
        };
        let errors: Vec<String> = state
            .challenges
            .iter()
            .filter(|challenge| challenge.status == ChallengeStatus::Invalid)
            .map(|challenge| match &challenge.error {
                Some(problem) => format!("{name}: {problem}"),
                None => format!("{name}: {:?} invalid", challenge.r#type),
            })
            .collect();
        match state.status {
            AuthorizationStatus::Valid => {}
            AuthorizationStatus::Pending if errors.is_empty() => pending.push(name),
            AuthorizationStatus::Pending => failed.extend(errors),
            other if errors.is_empty() => failed.push(format!("{name}: authorization {other:?}")),
            _ => failed.extend(errors),
        }
    }
    (failed, pending)
}

/// The key to certify, its PEM as kept in `key.pem`, and whether it is new (to be installed
/// with the certificate).
fn certificate_key(config: &Config, store: &Store) -> Result<(KeyPair, String, bool), Error> {
    if !config.rotate_key
        && let Some(pem) = store.key()?
    {
        let key = KeyPair::from_pem(&pem).map_err(|error| Error::Corrupt {
            path: store.key_path(),
            reason: format!("the kept private key: {error}"),
        })?;
        return Ok((key, pem, false));
    }
    let key =
        KeyPair::generate().map_err(|error| Error::Certificate(format!("new key: {error}")))?;
    let pem = key.serialize_pem();
    Ok((key, pem, true))
}
