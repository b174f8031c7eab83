//! `mailstow setup`: a new server's first configuration, in one command (as `mox quickstart`
//! does). It writes the configuration file, makes the data directory, adds the first domain,
//! its administrator and a DKIM key, and prints the DNS records to publish and what to do
//! next. Every step prints one line.
//!
//! Values come from flags; on a terminal a missing one is asked for, otherwise it is an
//! error naming its flag. Everything is checked before anything is written (the file parsed
//! back and read as `serve` reads it), and a setup that exists already (the file, unless
//! `--force`, or a data directory that is not empty) is refused untouched: setup only ever
//! makes a new server; `domain add`, `user add` and `dkim generate` extend one.
//!
//! The DKIM key is RSA 2048: the server signs with one key per domain (the newest), and RSA
//! is the one every verifier knows (ed25519, RFC 8463, is still unknown to some large
//! receivers, whose verdict would be "no valid signature"). `mailstow dkim generate
//! --algorithm ed25519` can add one later.

use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::config::Config;
use crate::directory_cmd::with_directory;
use crate::paths::Paths;

/// The characters of a generated password: lower-case letters and digits without the ones
/// easily misread (`l`, `o`, `0`, `1`); 32 of them, so one random byte's low 5 bits pick one
/// without bias.
const PASSWORD_ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";

/// A generated password's length: 20 characters of 5 bits each, 100 bits.
const PASSWORD_CHARS: usize = 20;

/// The longest answer read from the terminal for one prompt.
const ANSWER_BYTES_MAX: usize = 1024;

/// How many times a prompt asks again after an empty answer with no default.
const PROMPT_TRIES_MAX: usize = 3;

/// The configuration file written when `--config` is not given.
const CONFIG_FILE_DEFAULT: &str = "mailstow.toml";

/// The standard ports (`--standard-ports`), written as `[server]` listeners.
const STANDARD_PORTS: [(&str, &str); 9] = [
    ("smtp", "0.0.0.0:25"),
    ("submission", "0.0.0.0:587"),
    ("submissions", "0.0.0.0:465"),
    ("imap", "0.0.0.0:143"),
    ("imaps", "0.0.0.0:993"),
    ("pop3", "0.0.0.0:110"),
    ("pop3s", "0.0.0.0:995"),
    ("https", "0.0.0.0:443"),
    ("http", "0.0.0.0:80"),
];

#[derive(Args, Debug)]
pub(crate) struct SetupArgs {
    /// This host's name: the domain's MX, the name clients connect to and the certificate's
    /// name (asked on a terminal; default there: /etc/hostname).
    #[arg(long, value_name = "NAME")]
    hostname: Option<String>,
    /// The first mail domain (asked on a terminal; default there: the host name without its
    /// first label).
    #[arg(long, value_name = "DOMAIN")]
    domain: Option<String>,
    /// The first user, an address in the domain, allowed the web view's admin pages (asked
    /// on a terminal; default there: postmaster@DOMAIN).
    #[arg(long, value_name = "ADDRESS")]
    admin: Option<String>,
    /// A file whose first line is the admin's password; `-` reads it from standard input.
    /// Default: a random password, printed once.
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// Obtain the certificate by ACME (RFC 8555) from this directory URL: writes an `[acme]`
    /// section.
    #[arg(long, value_name = "URL")]
    acme_directory: Option<String>,
    /// The ACME account's contact, `mailto:ADDRESS` (repeatable).
    #[arg(long, value_name = "URI", requires = "acme_directory")]
    acme_contact: Vec<String>,
    /// Listen on the standard ports (SMTP 25, submission 587 and 465, IMAP 143 and 993, POP3
    /// 110 and 995, HTTPS 443, HTTP 80; binding them needs root or CAP_NET_BIND_SERVICE).
    /// Default: the unprivileged ports of the built-in configuration.
    #[arg(long)]
    standard_ports: bool,
    #[command(flatten)]
    host: crate::dns_cmd::HostArgs,
    /// Overwrite an existing configuration file (the data directory must still be new).
    #[arg(long)]
    force: bool,
}

/// What the configuration file is written from.
struct Settings {
    hostname: String,
    data_dir: PathBuf,
    standard_ports: bool,
    acme: Option<(String, Vec<String>)>,
}

/// `config_file` is `--config` (the file to write), `data_dir` is `--data-dir`.
pub(crate) fn run(
    args: SetupArgs,
    config_file: Option<&Path>,
    data_dir: Option<&Path>,
) -> Result<()> {
    let config_file = std::path::absolute(config_file.unwrap_or(Path::new(CONFIG_FILE_DEFAULT)))
        .context("the configuration file's path")?;
    let data_dir =
        std::path::absolute(data_dir.unwrap_or(Path::new(crate::config::DATA_DIR_DEFAULT)))
            .context("the data directory's path")?;
    // Refused before any question is asked.
    if config_file.exists() && !args.force {
        bail!(
            "{} exists: setup writes a new configuration (--force overwrites it)",
            config_file.display()
        );
    }
    if is_non_empty_dir(&data_dir)? {
        bail!(
            "the data directory {} is not empty: setup makes a new server (`mailstow domain \
             add`, `user add` and `dkim generate` extend an existing one)",
            data_dir.display()
        );
    }

    let interactive = std::io::stdin().is_terminal();
    let hostname = value(
        args.hostname,
        "--hostname",
        "host name",
        interactive,
        || {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|name| name.trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
        },
    )?;
    let hostname = host_name("host name", &hostname)?;
    let domain = value(args.domain, "--domain", "mail domain", interactive, || {
        hostname
            .split_once('.')
            .map(|(_, rest)| rest.to_string())
            .filter(|rest| rest.contains('.'))
    })?;
    let domain = host_name("domain", &domain)?;
    let admin = value(args.admin, "--admin", "admin address", interactive, || {
        Some(format!("postmaster@{domain}"))
    })?;
    let admin = admin.trim().to_ascii_lowercase();
    match admin.rsplit_once('@') {
        Some((local, at)) if !local.is_empty() && at == domain => {}
        _ => bail!("--admin: '{admin}' is not an address in {domain}"),
    }
    let acme = match args.acme_directory {
        Some(url) => {
            // RFC 8555 6.1: ACME is spoken over HTTPS only.
            if !url.starts_with("https://") {
                bail!("--acme-directory: '{url}' is not an https:// URL");
            }
            for contact in &args.acme_contact {
                if !contact.starts_with("mailto:") || !contact.contains('@') {
                    bail!("--acme-contact: '{contact}' is not mailto:ADDRESS");
                }
            }
            Some((url, args.acme_contact))
        }
        None => None,
    };
    let settings = Settings {
        hostname: hostname.clone(),
        data_dir: data_dir.clone(),
        standard_ports: args.standard_ports,
        acme,
    };

    // The file is read back exactly as every later command reads it, before it is written.
    let text = config_text(&settings)?;
    let config: Config = toml::from_str(&text)
        .map_err(|err| anyhow::anyhow!("the configuration setup made: {}", err.message()))?;
    let paths = Paths {
        data_dir: data_dir.clone(),
        directory_url: None,
        password_length_min: config
            .server
            .password_length_min
            .unwrap_or(directory::PASSWORD_LENGTH_MIN_DEFAULT),
    };
    let server =
        crate::serve_cmd::server_config(&crate::serve_cmd::ServeArgs::default(), &paths, &config)?;
    server::validate(&server)?;

    let (password, generated) = match args.password_file {
        Some(file) => (read_password(&file)?, false),
        None => (generate_password()?, true),
    };
    if password.chars().count() < paths.password_length_min {
        bail!(
            "the password is shorter than {} characters",
            paths.password_length_min
        );
    }

    // From here on, things are written.
    write_config(&config_file, &text, args.force)?;
    out!("config written: {}", config_file.display());
    init(&paths, &config)?;
    out!("data directory made: {}", data_dir.display());
    let records = with_directory(&paths, async |d| {
        d.add_domain(&domain)
            .await
            .with_context(|| format!("adding the domain {domain}"))?;
        out!("domain added: {domain}");
        d.add_user_as(&admin, &password, None, true)
            .await
            .with_context(|| format!("adding the user {admin}"))?;
        if generated {
            out!(
                "admin user added: {admin}, password {password} (generated: note it, it is not shown again)"
            );
        } else {
            out!("admin user added: {admin}");
        }
        let selector = crate::dkim_cmd::default_selector();
        crate::dkim_cmd::add_key(&d, &domain, &selector, sender_auth::Algorithm::Rsa).await?;
        out!("dkim key added: {selector}._domainkey.{domain} (rsa 2048)");
        crate::dns_cmd::zone_output(&d, &server, &domain, &args.host.addresses).await
    })?;
    out!("");
    out!("{}", records.trim_end());
    out!("");

    let run = format!("mailstow --config {}", config_file.display());
    let addresses: String = args
        .host
        .addresses
        .iter()
        .map(|a| format!(" --address {a}"))
        .collect();
    out!("next: publish the records above, then check them: {run} dns check {domain}{addresses}");
    out!("next: start the server: {run} serve");
    // The public HTTPS listener serves the web view too, under the host's name.
    let web = match (server.https, server.web) {
        (Some(address), _) if address.port() == 443 => format!("https://{hostname}/"),
        (Some(address), _) => format!("https://{hostname}:{}/", address.port()),
        (None, Some(address)) => {
            let scheme = if server.web_tls { "https" } else { "http" };
            let host = if address.ip().is_unspecified() {
                hostname.clone()
            } else {
                address.ip().to_string()
            };
            format!("{scheme}://{host}:{}/", address.port())
        }
        (None, None) => "off ([server] web)".to_string(),
    };
    out!("next: the web view: {web} (log in as {admin})");
    Ok(())
}

/// A required value: the flag's, else asked on a terminal (with `default` offered), else an
/// error naming the flag.
fn value(
    flag: Option<String>,
    flag_name: &str,
    label: &str,
    interactive: bool,
    default: impl FnOnce() -> Option<String>,
) -> Result<String> {
    if let Some(value) = flag {
        return Ok(value);
    }
    if !interactive {
        bail!("{flag_name} is required (standard input is not a terminal to ask on)");
    }
    let default = default();
    let mut stdin = std::io::stdin().lock();
    for _ in 0..PROMPT_TRIES_MAX {
        match &default {
            Some(default) => eprint!("{label} [{default}]: "),
            None => eprint!("{label}: "),
        }
        std::io::stderr().flush()?;
        let mut line = String::new();
        let read = (&mut stdin)
            .take(ANSWER_BYTES_MAX as u64)
            .read_line(&mut line)
            .context("reading the answer")?;
        if read == 0 {
            bail!("no {label} given ({flag_name})");
        }
        let answer = line.trim();
        if !answer.is_empty() {
            return Ok(answer.to_string());
        }
        if let Some(default) = &default {
            return Ok(default.clone());
        }
    }
    bail!("no {label} given ({flag_name})")
}

/// A host or domain name, lower case without the root dot: at least two labels of letters,
/// digits and hyphens (RFC 1035 2.3.1), at most 253 bytes with labels of at most 63.
fn host_name(what: &str, name: &str) -> Result<String> {
    let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let valid = name.len() <= 253
        && name.contains('.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        bail!("the {what} '{name}' is not a fully qualified name like mail.example.org");
    }
    Ok(name)
}

fn is_non_empty_dir(path: &Path) -> Result<bool> {
    match std::fs::read_dir(path) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => {
            bail!("{} is not a directory", path.display())
        }
        Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
    }
}

/// The password's first line, from a file or (`-`) standard input.
fn read_password(file: &Path) -> Result<String> {
    let line = if file.as_os_str() == "-" {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .take(ANSWER_BYTES_MAX as u64)
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        line
    } else {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read password file {}", file.display()))?;
        text.lines().next().unwrap_or("").to_string()
    };
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

/// [`PASSWORD_CHARS`] characters of [`PASSWORD_ALPHABET`] from the system's random source.
fn generate_password() -> Result<String> {
    let mut bytes = [0u8; PASSWORD_CHARS];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| anyhow::anyhow!("no random bytes"))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(PASSWORD_ALPHABET[usize::from(b & 31)]))
        .collect())
}

/// A TOML string (quoted, escaped).
fn quoted(value: &str) -> String {
    toml::Value::String(value.to_string()).to_string()
}

/// The configuration file, commented.
fn config_text(settings: &Settings) -> Result<String> {
    let data_dir = settings
        .data_dir
        .to_str()
        .context("the data directory's path is not UTF-8")?;
    let mut text = String::from(
        "# mailstow's configuration, written by `mailstow setup`. Every key is optional;\n\
         # `mailstow --config THIS_FILE config check` prints the effective configuration,\n\
         # defaults included.\n\n\
         # The queue, the mailbox store, the directory and the certificates live here.\n",
    );
    text += &format!("data_dir = {}\n\n[server]\n", quoted(data_dir));
    text += "# This host's name: the MX of our domains, the name clients connect to and the\n\
             # certificate's name. Its A/AAAA records must point here.\n";
    text += &format!("hostname = {}\n\n", quoted(&settings.hostname));
    if settings.standard_ports {
        text += "# The standard ports (binding them needs root or CAP_NET_BIND_SERVICE). https\n\
                 # serves the web view, client autoconfiguration and the MTA-STS policy; http\n\
                 # ACME's challenges and redirects.\n";
        for (key, address) in STANDARD_PORTS {
            text += &format!("{key} = {}\n", quoted(address));
        }
    } else {
        text += "# The listeners are the built-in unprivileged ones: SMTP 2525, submission 5587\n\
                 # and 5465, IMAP 1143 and 1993, POP3 1110 and 1995, LMTP 127.0.0.1:2424,\n\
                 # ManageSieve 4190, the web view 127.0.0.1:8080. Other servers deliver mail to\n\
                 # port 25 only, and the SRV records name these ports: for a public server use\n\
                 # the standard ports (`mailstow setup --standard-ports` writes them):\n";
        for (key, address) in STANDARD_PORTS {
            text += &format!("# {key} = {}\n", quoted(address));
        }
    }
    text += "\n# Without tls_cert and tls_key (or [acme]) the server makes a self-signed\n\
             # certificate in <data_dir>/tls, which every client must be told to trust.\n\
             # tls_cert = \"/etc/ssl/mail/fullchain.pem\"\n\
             # tls_key = \"/etc/ssl/mail/key.pem\"\n";
    if let Some((url, contacts)) = &settings.acme {
        text += "\n[acme]\n\
                 # The certificate for the host name (and our domains' mta-sts. and autoconfig.\n\
                 # names) from this ACME directory (RFC 8555), renewed before it expires.\n";
        text += &format!("directory_url = {}\n", quoted(url));
        let contacts: Vec<String> = contacts.iter().map(|c| quoted(c)).collect();
        text += &format!("contact = [{}]\n", contacts.join(", "));
    }
    Ok(text)
}

/// Writes the file: a new one, or over the old one with `--force` (through a temporary file
/// and a rename, so it is never half written).
fn write_config(path: &Path, text: &str, force: bool) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if force {
        let temporary = path.with_extension("toml.tmp");
        std::fs::write(&temporary, text)
            .with_context(|| format!("writing {}", temporary.display()))?;
        std::fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))?;
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// Makes the data directory with an empty queue and store, as `mailstow init` does.
fn init(paths: &Paths, config: &Config) -> Result<()> {
    let disk: std::sync::Arc<dyn disk::Disk> = std::sync::Arc::new(disk::RealDisk);
    for dir in [paths.queue(), paths.store()] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let (queue, _) = queue::Queue::open(disk.clone(), &paths.queue(), config.queue_config())?;
    queue.close()?;
    let (store, _) = store::Store::open(disk, &paths.store(), config.store_config())?;
    drop(store);
    crate::data_format::record(&paths.data_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_two_labels_and_host_name_characters() {
        assert_eq!(
            host_name("x", "Mail.Example.ORG.").unwrap(),
            "mail.example.org"
        );
        for bad in ["localhost", "a..b", "-a.b", "a_b.c", "a b.c", ""] {
            assert!(host_name("x", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generated_passwords_use_the_alphabet() {
        let one = generate_password().unwrap();
        assert_eq!(one.len(), PASSWORD_CHARS);
        assert!(one.bytes().all(|b| PASSWORD_ALPHABET.contains(&b)));
        assert_ne!(one, generate_password().unwrap());
    }

    /// Every form of the file parses as a `Config`.
    #[test]
    fn the_written_configuration_parses() {
        for (standard_ports, with_acme) in [(false, false), (true, false), (false, true)] {
            let acme = with_acme.then(|| {
                (
                    "https://acme.example/directory".to_string(),
                    vec!["mailto:me@example.org".to_string()],
                )
            });
            let text = config_text(&Settings {
                hostname: "mail.example.org".into(),
                data_dir: PathBuf::from("/var/lib/mailstow \"x\""),
                standard_ports,
                acme,
            })
            .unwrap();
            let config: Config = toml::from_str(&text).unwrap();
            assert_eq!(config.server.hostname.as_deref(), Some("mail.example.org"));
            assert_eq!(
                config.data_dir.as_deref(),
                Some(Path::new("/var/lib/mailstow \"x\""))
            );
            assert_eq!(
                config.server.smtp.as_deref(),
                standard_ports.then_some("0.0.0.0:25")
            );
            let acme = config.acme.as_ref();
            assert_eq!(acme.is_some(), with_acme);
            if let Some(acme) = acme {
                assert_eq!(acme.directory_url, "https://acme.example/directory");
                assert_eq!(acme.contact, ["mailto:me@example.org"]);
            }
        }
    }
}
