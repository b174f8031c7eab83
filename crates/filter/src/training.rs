//! Learning from what users file (docs/spam.md 3): a message moved or copied into Junk is
//! trained as spam, one moved out of Junk (but not to Trash) as ham; `spam train` trains a
//! whole folder. Each message counts once per class: the directory remembers the class a
//! message's content was trained as, and a message trained as the other class before has its
//! counts moved, not added.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TrySendError};

use directory::{SpamClass, SpamOwner};

use crate::Filter;
use crate::jobs::{Filed, Jobs};

/// Messages read and trained per directory transaction.
const BATCH: usize = 200;

/// What a training run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trained {
    /// Messages whose counts changed.
    pub trained: u64,
    /// Messages already trained as this class.
    pub already: u64,
    /// Messages that could not be read (expunged meanwhile).
    pub missing: u64,
}

fn run(filter: std::sync::Weak<Filter>, rx: Receiver<Filed>, runtime: tokio::runtime::Handle) {
    while let Ok(job) = rx.recv() {
        let Some(filter) = filter.upgrade() else {
            return;
        };
        let Some(store) = filter.store.get().cloned() else {
            continue;
        };
        let Some(class) = runtime.block_on(filter.class_of(&job)) else {
            continue;
        };
        let messages = job
            .uids
            .iter()
            .map(|uid| store.read(&job.user, &job.to, *uid).ok());
        match runtime.block_on(async {
            // The reads are the store's (blocking is fine on this thread).
            let messages: Vec<Option<Vec<u8>>> = messages.collect();
            filter
                .train(
                    SpamOwner::User(&job.user),
                    class,
                    messages.into_iter(),
                    "move",
                )
                .await
        }) {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(event = "spam_training_error", user = %telemetry::shown(&job.user), error = %e)
            }
        }
    }
}

impl Filter {
    /// Starts training from users' moves, reading messages from `store`. Once; needs a
    /// tokio runtime (the trainer thread uses its handle for the directory).
    pub fn start_training(self: &Arc<Self>, store: Arc<dyn mail_model::Mailstore>) {
        let _ = self.store.set(store);
        let (jobs, rx) = std::sync::mpsc::sync_channel(self.config.training_queue_max.max(1));
        let runtime = tokio::runtime::Handle::current();
        let filter = Arc::downgrade(self);
        // No thread (the process is out of threads): moves are not trained, mail goes on.
        match std::thread::Builder::new()
            .name("spam-trainer".into())
            .spawn(move || run(filter, rx, runtime))
        {
            Ok(_) => {
                let _ = self.trainer.set(Jobs { jobs });
            }
            Err(e) => tracing::error!(event = "spam_trainer_failed", error = %e),
        }
    }

    /// A user moved or copied messages between folders (IMAP COPY/MOVE, the web view): if
    /// that trains them, queue it. Never waits: a full queue drops the job (counted).
    pub fn filed(&self, job: Filed) {
        if !(self.config.enabled || self.config.rspamd_controller.is_some()) || job.uids.is_empty()
        {
            return;
        }
        // Whether the folders train anything is the trainer's to find out (a folder not
        // named Junk may carry the \Junk special use): the move is not held up for it.
        let Some(trainer) = self.trainer.get() else {
            return;
        };
        match trainer.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job)) => self.telemetry.spam_training_dropped(&job.user),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// The class a filing trains, from the folders' names and special uses (RFC 6154).
    async fn class_of(&self, job: &Filed) -> Option<spam::Class> {
        let uses = self
            .directory
            .special_uses(&job.user)
            .await
            .unwrap_or_default();
        let has = |folder: &str, attribute: &str, default: &str| {
            folder.eq_ignore_ascii_case(default)
                || uses
                    .iter()
                    .any(|(f, a)| f == folder && a.eq_ignore_ascii_case(attribute))
        };
        spam::training_class(
            has(&job.from, "\\Junk", "Junk"),
            has(&job.to, "\\Junk", "Junk"),
            has(&job.to, "\\Trash", "Trash"),
        )
    }

    /// Trains `owner`'s model on `messages` (`None`: could not be read) as `class`, in
    /// batches; a user's reputation learns each sender too. Every training also goes to
    /// rspamd's controller when one is configured.
    pub async fn train(
        &self,
        owner: SpamOwner<'_>,
        class: spam::Class,
        messages: impl Iterator<Item = Option<Vec<u8>>>,
        source: &str,
    ) -> Result<Trained, String> {
        let mut report = Trained::default();
        let mut batch = Vec::with_capacity(BATCH);
        for message in messages {
            match message {
                Some(m) => batch.push(m),
                None => report.missing += 1,
            }
            if batch.len() == BATCH {
                self.train_batch(owner, class, std::mem::take(&mut batch), &mut report)
                    .await?;
            }
        }
        if !batch.is_empty() {
            self.train_batch(owner, class, batch, &mut report).await?;
        }
        let who = match owner {
            SpamOwner::User(u) => u.to_string(),
            SpamOwner::Site => "site".to_string(),
        };
        self.telemetry
            .spam_trained(&who, class.name(), report.trained, report.already, source);
        Ok(report)
    }

    async fn train_batch(
        &self,
        owner: SpamOwner<'_>,
        class: spam::Class,
        messages: Vec<Vec<u8>>,
        report: &mut Trained,
    ) -> Result<(), String> {
        let config = &self.config;
        if !config.enabled {
            // The built-in filter is off: only rspamd learns (it remembers what it learnt).
            report.trained += messages.len() as u64;
            self.learn_rspamd(class, &messages).await;
            return Ok(());
        }
        let limits = config.token_limits();
        let stored = match class {
            spam::Class::Spam => SpamClass::Spam,
            spam::Class::Ham => SpamClass::Ham,
        };
        let mut delta = DeltaSum::default();
        let mut reputation: std::collections::HashMap<String, (i64, i64)> = Default::default();
        let mut digests = Vec::new();
        for message in &messages {
            let digest = spam::digest(message);
            let before = self
                .directory
                .spam_trained(owner, &digest)
                .await
                .map_err(|e| e.to_string())?;
            if before == Some(stored) {
                report.already += 1;
                continue;
            }
            let tokens = spam::tokenize(message, &limits);
            // Trained as the other class before: its counts move.
            let sign_other = before.is_some();
            delta.add(&tokens, class, 1);
            if sign_other {
                delta.add(&tokens, other(class), -1);
            }
            if let SpamOwner::User(_) = owner {
                let keys = crate::keys::of_stored(message, &self.hostname);
                for key in keys.keys() {
                    let entry = reputation.entry(key).or_default();
                    let (spam_d, ham_d) = match class {
                        spam::Class::Spam => (1, if sign_other { -1 } else { 0 }),
                        spam::Class::Ham => (if sign_other { -1 } else { 0 }, 1),
                    };
                    entry.0 += spam_d;
                    entry.1 += ham_d;
                }
            }
            digests.push(digest);
            report.trained += 1;
        }
        if digests.is_empty() {
            return Ok(());
        }
        self.directory
            .spam_apply(owner, &delta.into_delta(), config.bayes_tokens_max)
            .await
            .map_err(|e| e.to_string())?;
        let now = crate::now_s();
        for digest in &digests {
            self.directory
                .spam_set_trained(owner, digest, stored, now, config.trained_records_max)
                .await
                .map_err(|e| e.to_string())?;
        }
        if let SpamOwner::User(user) = owner
            && !reputation.is_empty()
        {
            let entries: Vec<(String, i64, i64)> = reputation
                .into_iter()
                .map(|(k, (s, h))| (k, s, h))
                .collect();
            self.directory
                .spam_reputation_add(user, &entries, now, config.reputation_rows_max)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.states.forget(owner);
        self.learn_rspamd(class, &messages).await;
        Ok(())
    }

    /// rspamd's controller learns `messages` as `class` too, when one is configured. Its
    /// failures are logged, never the training's.
    async fn learn_rspamd(&self, class: spam::Class, messages: &[Vec<u8>]) {
        let Some(controller) = &self.config.rspamd_controller else {
            return;
        };
        let learn = match class {
            spam::Class::Spam => crate::rspamd::Learn::Spam,
            spam::Class::Ham => crate::rspamd::Learn::Ham,
        };
        for message in messages {
            if let Err(e) = crate::rspamd::learn(
                controller,
                self.config.rspamd_password.as_deref(),
                learn,
                message,
                std::time::Duration::from_secs(10),
            )
            .await
            {
                tracing::warn!(event = "rspamd_learn_error", controller = %controller, error = %telemetry::shown(&e));
            }
        }
    }

    /// Our users' mail to `recipients`: replies from them are welcome (one ham count each
    /// in `user`'s address reputation). In the background; a failure only costs the count.
    pub fn sent(self: &Arc<Self>, user: &str, recipients: &[String]) {
        if !self.config.enabled || recipients.is_empty() {
            return;
        }
        let entries: Vec<(String, i64, i64)> = recipients
            .iter()
            .take(100)
            .map(|r| (format!("a:{}", r.to_ascii_lowercase()), 0, 1))
            .collect();
        let filter = self.clone();
        let user = user.to_string();
        tokio::spawn(async move {
            let now = crate::now_s();
            match filter
                .directory
                .spam_reputation_add(&user, &entries, now, filter.config.reputation_rows_max)
                .await
            {
                Ok(()) => filter.states.forget(SpamOwner::User(&user)),
                Err(e) => tracing::debug!(event = "spam_reputation_error", error = %e),
            }
        });
    }
}

fn other(class: spam::Class) -> spam::Class {
    match class {
        spam::Class::Spam => spam::Class::Ham,
        spam::Class::Ham => spam::Class::Spam,
    }
}

/// Token count changes summed over a batch.
#[derive(Default)]
struct DeltaSum {
    spam_messages: i64,
    ham_messages: i64,
    tokens: std::collections::HashMap<u64, (i64, i64)>,
}

impl DeltaSum {
    fn add(&mut self, tokens: &[u64], class: spam::Class, sign: i64) {
        match class {
            spam::Class::Spam => self.spam_messages += sign,
            spam::Class::Ham => self.ham_messages += sign,
        }
        for token in tokens {
            let entry = self.tokens.entry(*token).or_default();
            match class {
                spam::Class::Spam => entry.0 += sign,
                spam::Class::Ham => entry.1 += sign,
            }
        }
    }

    fn into_delta(self) -> directory::SpamDelta {
        directory::SpamDelta {
            spam_messages: self.spam_messages,
            ham_messages: self.ham_messages,
            tokens: self
                .tokens
                .into_iter()
                .filter(|(_, (s, h))| *s != 0 || *h != 0)
                .map(|(t, (s, h))| (t, s, h))
                .collect(),
        }
    }
}
