//! The directory: durable writes, the certificate pair's swap and its recovery, the state, the
//! account (the crash invariant is in the crate doc).

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use instant_acme::AccountCredentials;
use serde::{Deserialize, Serialize};

use crate::certificate;
use crate::{Error, Issued};

const ACCOUNT: &str = "account.json";
const KEY: &str = "key.pem";
const CERT: &str = "cert.pem";
const STATE: &str = "state.json";
const LOCK: &str = "lock";
const KEY_NEW: &str = "key.pem.new";
const CERT_NEW: &str = "cert.pem.new";

/// Mode of the files that hold a private key (the account's, the certificate's).
const SECRET_MODE: u32 = 0o600;
/// Mode of the certificate and the state: public facts.
const PUBLIC_MODE: u32 = 0o644;
/// Mode of the directory when this crate creates it.
const DIR_MODE: u32 = 0o700;

/// Size of any file of the directory read back: a chain of a few certificates, a key, a small
/// JSON state. Anything larger was not written by this crate.
const FILE_BYTES_MAX: u64 = 256 * 1024;

/// Times a reader that cannot take the lock rereads a pair seen mismatched (a renewal is
/// between the two renames of its swap), [`PAIR_REREAD_WAIT`] apart.
const PAIR_REREADS_MAX: u32 = 3;
const PAIR_REREAD_WAIT: Duration = Duration::from_millis(50);

/// What is known of the certificate in the directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateFacts {
    /// The DNS names it covers, sorted.
    pub names: Vec<String>,
    #[serde(with = "unix_time")]
    pub not_before: SystemTime,
    #[serde(with = "unix_time")]
    pub not_after: SystemTime,
    /// When this client installed it.
    #[serde(with = "unix_time")]
    pub issued_at: SystemTime,
}

/// `state.json`: the certificate's facts and how the attempts went. Times are Unix seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// The certificate installed, if any.
    pub certificate: Option<CertificateFacts>,
    /// When the last attempt ended, successful or not.
    #[serde(with = "unix_time::option", default)]
    pub last_attempt: Option<SystemTime>,
    /// Why the last attempt failed (`None` after a success).
    #[serde(default)]
    pub last_error: Option<String>,
    /// Failed attempts since the last success.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The time the ACME server asked not to be asked before (a `Retry-After`), if it did.
    #[serde(with = "unix_time::option", default)]
    pub retry_after: Option<SystemTime>,
    /// When the next attempt is due, as computed at the end of the last one.
    #[serde(with = "unix_time::option", default)]
    pub next_attempt: Option<SystemTime>,
}

/// What `mailstow acme status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Names of the installed certificate (empty when there is none).
    pub names: Vec<String>,
    pub not_after: Option<SystemTime>,
    /// Whole days until `not_after`, negative once it has passed.
    pub days_left: Option<i64>,
    pub last_attempt: Option<SystemTime>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    pub next_attempt: Option<SystemTime>,
}

/// The state of the directory `store_dir` (an empty state when nothing was ever written). The
/// certificate's facts come from `cert.pem` when the two disagree (a crash after the swap,
/// before the state was written).
pub fn load_state(store_dir: &Path) -> Result<State, Error> {
    let lock = Lock::try_take(store_dir)?;
    if lock.is_some() {
        recover(store_dir)?;
    }
    read_state(store_dir)
}

/// What the CLI shows, at `now`.
pub fn status(store_dir: &Path, now: SystemTime) -> Result<Status, Error> {
    let state = load_state(store_dir)?;
    let certificate = state.certificate.as_ref();
    let not_after = certificate.map(|facts| facts.not_after);
    Ok(Status {
        names: certificate
            .map(|facts| facts.names.clone())
            .unwrap_or_default(),
        not_after,
        days_left: not_after.map(|not_after| days_between(now, not_after)),
        last_attempt: state.last_attempt,
        last_error: state.last_error,
        consecutive_failures: state.consecutive_failures,
        next_attempt: state.next_attempt,
    })
}

/// The certificate and key installed in `store_dir`, if there are any. An interrupted swap is
/// completed first (when no renewal holds the directory); a pair whose key is not the leaf's is
/// an error.
pub fn load_certificate(store_dir: &Path) -> Result<Option<Issued>, Error> {
    let lock = Lock::try_take(store_dir)?;
    if lock.is_some() {
        recover(store_dir)?;
    }
    let mut rereads = 0;
    loop {
        let Some(chain_pem) = read_text(&store_dir.join(CERT))? else {
            return Ok(None);
        };
        let key_path = store_dir.join(KEY);
        let Some(key_pem) = read_text(&key_path)? else {
            return Err(Error::Corrupt {
                path: key_path,
                reason: "missing while cert.pem exists".into(),
            });
        };
        let cert_path = store_dir.join(CERT);
        let leaf = certificate::leaf(&chain_pem).map_err(|reason| Error::Corrupt {
            path: cert_path.clone(),
            reason,
        })?;
        let key_info = certificate::key_public_info(&key_pem).map_err(|reason| Error::Corrupt {
            path: key_path.clone(),
            reason,
        })?;
        if key_info == leaf.public_key_info {
            return Ok(Some(Issued {
                names: leaf.names,
                not_after: leaf.not_after,
                chain_pem,
                key_pem,
            }));
        }
        // Without the lock a renewal may be between its two renames: read again.
        if lock.is_some() || rereads == PAIR_REREADS_MAX {
            return Err(Error::Corrupt {
                path: cert_path,
                reason: "the certificate's public key is not key.pem's".into(),
            });
        }
        rereads += 1;
        std::thread::sleep(PAIR_REREAD_WAIT);
    }
}

/// The directory opened for one renewal: created if missing, locked, and recovered.
pub(crate) struct Store {
    dir: PathBuf,
    _lock: Lock,
}

/// The account as stored: the credentials belong to one directory URL; the contacts are
/// remembered so that a change is sent to the server.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredAccount {
    pub(crate) directory_url: String,
    pub(crate) contact: Vec<String>,
    /// instant-acme's `AccountCredentials`, kept as JSON (the type is neither `Clone` nor
    /// readable).
    credentials: serde_json::Value,
}

impl StoredAccount {
    pub(crate) fn new(
        directory_url: &str,
        contact: &[String],
        credentials: &AccountCredentials,
    ) -> Result<Self, Error> {
        let credentials = serde_json::to_value(credentials)
            .map_err(|error| Error::Config(format!("account credentials: {error}")))?;
        Ok(Self {
            directory_url: directory_url.to_owned(),
            contact: contact.to_vec(),
            credentials,
        })
    }

    pub(crate) fn credentials(&self) -> Result<AccountCredentials, Error> {
        AccountCredentials::deserialize(&self.credentials).map_err(|error| Error::Corrupt {
            path: PathBuf::from(ACCOUNT),
            reason: format!("account credentials: {error}"),
        })
    }
}

impl Store {
    /// Opens `dir` for a renewal: an error when another one holds it.
    pub(crate) fn open(dir: &Path) -> Result<Self, Error> {
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
        {
            Ok(()) => {}
            Err(source) => {
                return Err(Error::Io {
                    path: dir.to_owned(),
                    source,
                });
            }
        }
        let Some(lock) = Lock::try_take(dir)? else {
            return Err(Error::Busy {
                path: dir.join(LOCK),
            });
        };
        recover(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
            _lock: lock,
        })
    }

    pub(crate) fn state(&self) -> Result<State, Error> {
        read_state(&self.dir)
    }

    pub(crate) fn write_state(&self, state: &State) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(state).map_err(|error| Error::Corrupt {
            path: self.dir.join(STATE),
            reason: error.to_string(),
        })?;
        write_durable(&self.dir, STATE, &json, PUBLIC_MODE)?;
        sync_dir(&self.dir)
    }

    pub(crate) fn account(&self) -> Result<Option<StoredAccount>, Error> {
        let path = self.dir.join(ACCOUNT);
        let Some(json) = read_text(&path)? else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|error| Error::Corrupt {
                path,
                reason: error.to_string(),
            })
    }

    pub(crate) fn write_account(&self, account: &StoredAccount) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(account).map_err(|error| Error::Corrupt {
            path: self.dir.join(ACCOUNT),
            reason: error.to_string(),
        })?;
        write_durable(&self.dir, ACCOUNT, &json, SECRET_MODE)?;
        sync_dir(&self.dir)
    }

    pub(crate) fn key_path(&self) -> PathBuf {
        self.dir.join(KEY)
    }

    /// The certificate key in `key.pem`, if there is one.
    pub(crate) fn key(&self) -> Result<Option<String>, Error> {
        read_text(&self.dir.join(KEY))
    }

    /// Installs a new chain, and a new key when `key_pem` is given (the swap of the crate doc).
    pub(crate) fn install_pair(&self, chain_pem: &str, key_pem: Option<&str>) -> Result<(), Error> {
        if let Some(key_pem) = key_pem {
            write_durable(&self.dir, KEY_NEW, key_pem.as_bytes(), SECRET_MODE)?;
        }
        // Its existence is the commit point: everything the swap needs is durable from here.
        write_durable(&self.dir, CERT_NEW, chain_pem.as_bytes(), PUBLIC_MODE)?;
        sync_dir(&self.dir)?;
        finish_swap(&self.dir)
    }
}

/// Completes or undoes a swap a crash interrupted (the crate doc's invariant), and removes
/// leftover `.tmp` files. Only with the lock held.
fn recover(dir: &Path) -> Result<(), Error> {
    let mut changed = false;
    if exists(&dir.join(CERT_NEW))? {
        tracing::warn!(dir = %dir.display(), "acme: completing an interrupted certificate swap");
        finish_swap(dir)?;
    } else if exists(&dir.join(KEY_NEW))? {
        tracing::warn!(dir = %dir.display(), "acme: undoing an interrupted certificate swap");
        remove(&dir.join(KEY_NEW))?;
        changed = true;
    }
    for name in [ACCOUNT, KEY, CERT, STATE, KEY_NEW, CERT_NEW] {
        let tmp = dir.join(format!("{name}.tmp"));
        if exists(&tmp)? {
            remove(&tmp)?;
            changed = true;
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Step 3 of the swap: the key first (if it changes), then the certificate.
fn finish_swap(dir: &Path) -> Result<(), Error> {
    if exists(&dir.join(KEY_NEW))? {
        rename(&dir.join(KEY_NEW), &dir.join(KEY))?;
    }
    rename(&dir.join(CERT_NEW), &dir.join(CERT))?;
    sync_dir(dir)
}

fn read_state(dir: &Path) -> Result<State, Error> {
    let path = dir.join(STATE);
    let mut state = match read_text(&path)? {
        Some(json) => serde_json::from_str::<State>(&json).map_err(|error| Error::Corrupt {
            path: path.clone(),
            reason: format!("not a state this crate wrote: {error}"),
        })?,
        None => State::default(),
    };
    // The certificate on disk is the truth for its names and dates.
    if let Some(chain_pem) = read_text(&dir.join(CERT))? {
        let leaf = certificate::leaf(&chain_pem).map_err(|reason| Error::Corrupt {
            path: dir.join(CERT),
            reason,
        })?;
        let agrees = state.certificate.as_ref().is_some_and(|facts| {
            facts.names == leaf.names
                && facts.not_before == leaf.not_before
                && facts.not_after == leaf.not_after
        });
        if !agrees {
            state.certificate = Some(CertificateFacts {
                names: leaf.names,
                not_before: leaf.not_before,
                not_after: leaf.not_after,
                // Not recorded: the certificate's own start is the latest it can have been.
                issued_at: leaf.not_before,
            });
        }
    } else {
        state.certificate = None;
    }
    Ok(state)
}

/// An exclusive `flock` on `<dir>/lock`, released when dropped.
struct Lock {
    _file: File,
}

impl Lock {
    /// The lock, or `None` when another holder has it. A missing directory is not locked.
    fn try_take(dir: &Path) -> Result<Option<Lock>, Error> {
        let path = dir.join(LOCK);
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(SECRET_MODE)
            .open(&path)
        {
            Ok(file) => file,
            // Nothing was ever written here, so there is nothing to recover; a read-only
            // directory is read without the lock too.
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::NotFound
                        | ErrorKind::PermissionDenied
                        | ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                return Ok(None);
            }
            Err(source) => return Err(Error::Io { path, source }),
        };
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(errno) => Err(Error::Io {
                path,
                source: errno.into(),
            }),
        }
    }
}

/// `dir/name` replaced whole: `name.tmp` written, fsynced, renamed over `name`. The caller
/// fsyncs the directory.
fn write_durable(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let tmp = dir.join(format!("{name}.tmp"));
    let io = |source| Error::Io {
        path: tmp.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    // The mode given to open applies only to a new file; a leftover keeps its own.
    file.set_permissions(Permissions::from_mode(mode))
        .map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    rename(&tmp, &dir.join(name))
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })
}

fn rename(from: &Path, to: &Path) -> Result<(), Error> {
    fs::rename(from, to).map_err(|source| Error::Io {
        path: from.to_owned(),
        source,
    })
}

fn remove(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

fn exists(path: &Path) -> Result<bool, Error> {
    path.try_exists().map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// A file's text, `None` when it does not exist; bounded by [`FILE_BYTES_MAX`].
fn read_text(path: &Path) -> Result<Option<String>, Error> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut bytes = Vec::new();
    file.take(FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            reason: format!("larger than {FILE_BYTES_MAX} bytes"),
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Error::Corrupt {
            path: path.to_owned(),
            reason: "not UTF-8 text".into(),
        })
}

/// Whole days from `now` to `then`, negative when `then` has passed.
fn days_between(now: SystemTime, then: SystemTime) -> i64 {
    const DAY: u64 = 86_400;
    match then.duration_since(now) {
        Ok(ahead) => i64::try_from(ahead.as_secs() / DAY).unwrap_or(i64::MAX),
        Err(behind) => {
            -i64::try_from(behind.duration().as_secs().div_ceil(DAY)).unwrap_or(i64::MAX)
        }
    }
}

/// `SystemTime` as whole Unix seconds in `state.json`.
mod unix_time {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        time: &SystemTime,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        // A time before 1970 is never written (certificates and attempts are later).
        let seconds = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        serializer.serialize_u64(seconds)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SystemTime, D::Error> {
        let seconds = u64::deserialize(deserializer)?;
        UNIX_EPOCH
            .checked_add(Duration::from_secs(seconds))
            .ok_or_else(|| serde::de::Error::custom("a time out of range"))
    }

    pub(super) mod option {
        use std::time::SystemTime;

        use serde::{Deserialize, Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(
            time: &Option<SystemTime>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match time {
                Some(time) => super::serialize(time, serializer),
                None => serializer.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<SystemTime>, D::Error> {
            #[derive(Deserialize)]
            struct Wrapped(#[serde(with = "super")] SystemTime);
            Ok(Option::<Wrapped>::deserialize(deserializer)?.map(|Wrapped(time)| time))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    fn self_signed(names: &[&str], key: &KeyPair) -> String {
        let names = names
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).unwrap();
        params.not_before = rcgen::date_time_ymd(2030, 1, 1);
        params.not_after = rcgen::date_time_ymd(2030, 4, 1);
        params.self_signed(key).unwrap().pem()
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn an_empty_directory_has_no_certificate_and_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("acme");
        assert_eq!(load_state(&missing).unwrap(), State::default());
        assert_eq!(load_certificate(&missing).unwrap(), None);
        let status = status(&missing, SystemTime::now()).unwrap();
        assert!(status.names.is_empty());
        assert_eq!(status.days_left, None);
    }

    #[test]
    fn state_round_trips_in_unix_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let state = State {
            certificate: None,
            last_attempt: Some(UNIX_EPOCH + Duration::from_secs(1_900_000_000)),
            last_error: Some("ACME server: rate limited".into()),
            consecutive_failures: 3,
            retry_after: None,
            next_attempt: Some(UNIX_EPOCH + Duration::from_secs(1_900_000_480)),
        };
        store.write_state(&state).unwrap();
        let json = fs::read_to_string(dir.path().join(STATE)).unwrap();
        assert!(json.contains("\"last_attempt\": 1900000000"), "{json}");
        drop(store);
        assert_eq!(load_state(dir.path()).unwrap(), state);
    }

    #[test]
    fn a_torn_state_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.write_state(&State::default()).unwrap();
        drop(store);
        let path = dir.path().join(STATE);
        let json = fs::read(&path).unwrap();
        for torn in [
            &json[..json.len() / 2],
            b"",
            b"\xff\xfe",
            b"{\"certificate\": 7}",
        ] {
            fs::write(&path, torn).unwrap();
            let error = load_state(dir.path()).unwrap_err();
            assert!(matches!(error, Error::Corrupt { .. }), "{error}");
            assert!(error.to_string().contains("state.json"), "{error}");
            let error = status(dir.path(), SystemTime::now()).unwrap_err();
            assert!(error.to_string().contains("state.json"), "{error}");
            let store = Store::open(dir.path()).unwrap();
            assert!(matches!(store.state(), Err(Error::Corrupt { .. })));
        }
    }

    #[test]
    fn pair_install_sets_modes_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let chain = self_signed(&["mail.example.org"], &key);
        let store = Store::open(dir.path()).unwrap();
        store
            .install_pair(&chain, Some(&key.serialize_pem()))
            .unwrap();
        drop(store);
        assert_eq!(mode(&dir.path().join(KEY)), SECRET_MODE);
        assert_eq!(mode(&dir.path().join(CERT)), PUBLIC_MODE);
        let issued = load_certificate(dir.path()).unwrap().unwrap();
        assert_eq!(issued.names, ["mail.example.org"]);
        assert_eq!(issued.chain_pem, chain);
        assert_eq!(issued.key_pem, key.serialize_pem());
        // No state written: its facts come from the certificate.
        let state = load_state(dir.path()).unwrap();
        assert_eq!(state.certificate.unwrap().names, ["mail.example.org"]);
        let status = status(dir.path(), rcgen::date_time_ymd(2030, 3, 2).into()).unwrap();
        assert_eq!(status.days_left, Some(30));
        let status = status_at(dir.path(), 2030, 4, 3);
        assert_eq!(status.days_left, Some(-2));
    }

    fn status_at(dir: &Path, year: i32, month: u8, day: u8) -> Status {
        status(dir, rcgen::date_time_ymd(year, month, day).into()).unwrap()
    }

    /// Every point where a crash can stop the swap: the directory as left there, then recovery.
    #[test]
    fn an_interrupted_swap_rolls_forward_or_back_to_a_matching_pair() {
        let old_key = KeyPair::generate().unwrap();
        let new_key = KeyPair::generate().unwrap();
        let old_chain = self_signed(&["old.example.org"], &old_key);
        let new_chain = self_signed(&["new.example.org"], &new_key);
        let setup = || {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store
                .install_pair(&old_chain, Some(&old_key.serialize_pem()))
                .unwrap();
            drop(store);
            dir
        };
        let write = |dir: &Path, name: &str, text: &str| fs::write(dir.join(name), text).unwrap();
        let names_after_recovery = |dir: &Path| {
            let issued = load_certificate(dir).unwrap().unwrap();
            for name in [KEY_NEW, CERT_NEW] {
                assert!(!dir.join(name).exists(), "{name} left");
            }
            assert!(fs::read_dir(dir).unwrap().all(|entry| {
                !entry
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            }));
            issued.names
        };

        // Crash while writing the new key: a torn tmp file only.
        let dir = setup();
        write(dir.path(), "key.pem.new.tmp", "-----BEGIN PRIV");
        assert_eq!(names_after_recovery(dir.path()), ["old.example.org"]);

        // The new key durable, the certificate not yet: roll back.
        let dir = setup();
        write(dir.path(), KEY_NEW, &new_key.serialize_pem());
        write(dir.path(), "cert.pem.new.tmp", "-----BEGIN CERT");
        assert_eq!(names_after_recovery(dir.path()), ["old.example.org"]);

        // Both durable, nothing renamed: roll forward.
        let dir = setup();
        write(dir.path(), KEY_NEW, &new_key.serialize_pem());
        write(dir.path(), CERT_NEW, &new_chain);
        assert_eq!(names_after_recovery(dir.path()), ["new.example.org"]);

        // The key renamed, the certificate not: the mismatched pair a crash can leave.
        let dir = setup();
        write(dir.path(), KEY, &new_key.serialize_pem());
        write(dir.path(), CERT_NEW, &new_chain);
        assert_eq!(names_after_recovery(dir.path()), ["new.example.org"]);

        // The key kept: only the certificate swaps.
        let dir = setup();
        let renewed = self_signed(&["old.example.org", "more.example.org"], &old_key);
        write(dir.path(), CERT_NEW, &renewed);
        assert_eq!(
            names_after_recovery(dir.path()),
            ["more.example.org", "old.example.org"]
        );
    }

    #[test]
    fn a_mismatched_pair_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let other = KeyPair::generate().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .install_pair(
                &self_signed(&["mail.example.org"], &key),
                Some(&other.serialize_pem()),
            )
            .unwrap();
        drop(store);
        let error = load_certificate(dir.path()).unwrap_err();
        assert!(error.to_string().contains("not key.pem's"), "{error}");

        fs::write(dir.path().join(CERT), "-----BEGIN CERTIFICATE-----\ntorn").unwrap();
        assert!(matches!(
            load_certificate(dir.path()),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(load_state(dir.path()), Err(Error::Corrupt { .. })));
        fs::remove_file(dir.path().join(KEY)).unwrap();
        fs::write(
            dir.path().join(CERT),
            self_signed(&["mail.example.org"], &key),
        )
        .unwrap();
        let error = load_certificate(dir.path()).unwrap_err();
        assert!(error.to_string().contains("key.pem"), "{error}");
    }

    #[test]
    fn a_second_renewal_on_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::open(dir.path()).unwrap();
        assert!(matches!(Store::open(dir.path()), Err(Error::Busy { .. })));
        // Readers still read, without recovering.
        assert_eq!(load_state(dir.path()).unwrap(), State::default());
        drop(first);
        assert!(Store::open(dir.path()).is_ok());
    }

    #[test]
    fn the_account_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.account().unwrap().is_none());
        // instant-acme's own credential format (its test vector).
        let vector = r#"{"id":"https://acme.example/acct/1","key_pkcs8":"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJVWC_QzOTCS5vtsJp2IG-UDc8cdDfeoKtxSZxaznM-mhRANCAAQenCPoGgPFTdPJ7VLLKt56RxPlYT1wNXnHc54PEyBg3LxKaH0-sJkX0mL8LyPEdsfL_Oz4TxHkWLJGrXVtNhfH","directory":"https://acme.example/directory"}"#;
        let credentials: AccountCredentials = serde_json::from_str(vector).unwrap();
        let credentials_copy: AccountCredentials = serde_json::from_str(vector).unwrap();
        let account = StoredAccount::new(
            "https://acme.example/directory",
            &["mailto:postmaster@example.org".into()],
            &credentials,
        )
        .unwrap();
        store.write_account(&account).unwrap();
        assert_eq!(mode(&dir.path().join(ACCOUNT)), SECRET_MODE);
        let account = store.account().unwrap().unwrap();
        assert_eq!(account.contact, ["mailto:postmaster@example.org"]);
        assert_eq!(
            account
                .credentials()
                .unwrap()
                .private_key()
                .secret_pkcs8_der(),
            credentials_copy.private_key().secret_pkcs8_der()
        );
        fs::write(dir.path().join(ACCOUNT), "{").unwrap();
        assert!(matches!(store.account(), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn days_left_round_towards_the_deadline() {
        let now = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        assert_eq!(
            days_between(now, now + Duration::from_secs(86_400 * 2 + 5)),
            2
        );
        assert_eq!(days_between(now, now + Duration::from_secs(5)), 0);
        assert_eq!(days_between(now, now - Duration::from_secs(5)), -1);
    }
}
