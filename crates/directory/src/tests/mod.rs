//! Tests of the directory, each on a real SQLite file in a fresh temporary directory.

mod address;
mod auth;
mod cluster;
mod provisioning;
mod refresh;
mod reports;
mod resolve;
mod sieve;
mod spam;
mod user_life;

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::{Argon2Params, Directory, Options};

/// Production options with the cheapest argon2 parameters, so tests hash in microseconds.
pub(crate) fn fast_options() -> Options {
    Options {
        argon2_params: Argon2Params::new(Argon2Params::MIN_M_COST, 1, 1, None)
            .expect("minimum argon2 parameters are valid"),
        ..Options::default()
    }
}

/// A fresh directory file and one handle on it.
pub(crate) struct Fixture {
    _temp: TempDir,
    pub(crate) path: PathBuf,
    pub(crate) dir: Directory,
}

impl Fixture {
    pub(crate) async fn new() -> Fixture {
        Fixture::with_options(fast_options()).await
    }

    pub(crate) async fn with_options(options: Options) -> Fixture {
        let temp = tempfile::tempdir().expect("tempdir");
        let path = temp.path().join("directory.db");
        let dir = Directory::open_with(&path, options).await.expect("open");
        Fixture {
            _temp: temp,
            path,
            dir,
        }
    }

    /// Another handle on the same file (its own pool and cache): the CLI beside the server.
    pub(crate) async fn second_handle(&self) -> Directory {
        open(&self.path).await
    }
}

pub(crate) async fn open(path: &Path) -> Directory {
    Directory::open_with(path, fast_options())
        .await
        .expect("open")
}

/// The generation as stored (not as cached).
pub(crate) async fn stored_generation(dir: &Directory) -> i64 {
    crate::db::generation(&dir.inner.pool)
        .await
        .expect("generation")
}

#[test]
fn handles_are_shareable_across_tasks() {
    fn assert_shareable<T: Send + Sync + 'static>() {}
    assert_shareable::<Directory>();
    assert_shareable::<crate::Cache>();
    assert_shareable::<crate::DirectoryError>();
}

#[tokio::test]
async fn open_with_production_options() {
    let temp = tempfile::tempdir().expect("tempdir");
    let path = temp.path().join("directory.db");
    let dir = Directory::open(&path).await.expect("open");
    assert!(path.exists());
    assert!(dir.list_domains().await.expect("list").is_empty());
    assert_eq!(dir.cache().generation(), 0);
}

/// The server spawns tasks that await these; they must be `Send`.
#[tokio::test]
async fn futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let f = Fixture::new().await;
    let d = &f.dir;
    assert_send(&d.authenticate("a@b.org", "pw"));
    assert_send(&d.add_user("a@b.org", "pw"));
    assert_send(&d.set_password("a@b.org", "pw"));
    assert_send(&d.add_alias("a@b.org", "c@d.org"));
    assert_send(&d.list_users(None));
    assert_send(&d.cache().refresh_if_changed());
}
