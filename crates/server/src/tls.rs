//! TLS for every listener: the configured certificate, or a self-signed one generated on first
//! start and kept in the data directory so clients that pinned it keep working after a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Where the certificate comes from.
#[derive(Clone, Debug)]
pub enum TlsSource {
    /// PEM files named in the configuration (chain first, leaf first in it).
    Files { cert: PathBuf, key: PathBuf },
    /// `<dir>/cert.pem` and `<dir>/key.pem`, generated for `hostname` if absent.
    SelfSigned { dir: PathBuf, hostname: String },
}

/// Installs the process-wide crypto provider (aws-lc-rs) once. rustls panics at the first
/// handshake if no provider is installed and more than one is compiled in.
pub(crate) fn install_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Builds the acceptor every TLS listener and STARTTLS/STLS upgrade shares.
pub(crate) fn acceptor(source: &TlsSource) -> Result<tokio_rustls::TlsAcceptor> {
    install_provider();
    let (cert, key) = match source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
        TlsSource::SelfSigned { dir, hostname } => self_signed(dir, hostname)?,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .with_context(|| format!("reading certificate {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing certificate {}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("certificate file {} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(&key)
        .with_context(|| format!("reading private key {}", key.display()))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("certificate and private key do not match")?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The self-signed pair in `dir`, generated on first use. The key is written with mode 0600
/// and both files are synced before they are used, so a crash never leaves a half key.
fn self_signed(dir: &Path, hostname: &str) -> Result<(PathBuf, PathBuf)> {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let names = vec![hostname.to_string(), "localhost".to_string()];
    let generated = rcgen::generate_simple_self_signed(names)
        .context("generating a self-signed certificate")?;
    write_private(&key, generated.signing_key.serialize_pem().as_bytes())?;
    write_private(&cert, generated.cert.pem().as_bytes())?;
    Ok((cert, key))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}
