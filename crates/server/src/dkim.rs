//! DKIM signing of mail our users submit (RFC 6376, RFC 8463): the key of the From: domain,
//! from the directory cache, made into a signer once and kept until the domain's key changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sender_auth::{Algorithm, Signer};

/// Signers by (domain, selector). A rotated key has a new selector, so it gets a new signer;
/// an old one stays until the next rotation replaces the map entry of its domain.
#[derive(Default)]
pub(crate) struct Signers(Mutex<HashMap<String, Arc<Signer>>>);

impl Signers {
    /// The signer for `domain`'s current key, if it has one.
    pub(crate) fn for_domain(
        &self,
        directory: &directory::Directory,
        domain: &str,
    ) -> Option<Arc<Signer>> {
        let key = directory.cache().dkim_key(domain)?;
        let mut signers = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(signer) = signers.get(&key.domain)
            && signer.selector() == key.selector
        {
            return Some(signer.clone());
        }
        let algorithm = match key.algorithm.parse::<Algorithm>() {
            Ok(algorithm) => algorithm,
            Err(e) => {
                tracing::warn!(
                    event = "dkim_error",
                    key = %format!("{}._domainkey.{}", key.selector, key.domain),
                    error = %e
                );
                return None;
            }
        };
        match Signer::new(&key.domain, &key.selector, algorithm, &key.private_key) {
            Ok(signer) => {
                let signer = Arc::new(signer);
                signers.insert(key.domain.clone(), signer.clone());
                Some(signer)
            }
            Err(e) => {
                tracing::warn!(
                    event = "dkim_error",
                    key = %format!("{}._domainkey.{}", key.selector, key.domain),
                    error = %e
                );
                None
            }
        }
    }
}
