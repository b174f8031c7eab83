//! The password verification pool: a fixed number of threads, each with its own argon2
//! memory, reused for every verification it runs.
//!
//! Why not the blocking pool: argon2 is memory-hard by design (19 MiB per verification by
//! default). Run on tokio's blocking pool, a burst of failed logins took a fresh server from
//! 16 MB to over 1 GB resident, and the memory stayed after the burst: every blocking thread
//! allocated its own blocks, and the allocator kept them in per-thread arenas. Here the
//! memory is `hash_concurrency_max × hash_memory_bytes_max` at most, allocated once per
//! thread and kept for the next job; a burst waits in a bounded queue
//! (`hash_queue_max`), and beyond it a login gets a temporary failure at once.
//!
//! Verification parses the PHC string (RFC-less, but the argon2 crate's format), checks that
//! its memory cost fits the limit, recomputes the hash into the thread's blocks and compares
//! with the stored output in constant time (`Output`'s `PartialEq`).

use std::sync::mpsc;

use argon2::password_hash::phc::{Output, PasswordHash};
use argon2::{Algorithm, Argon2, Block, Params, Version};

use crate::error::DirectoryError;

/// One verification: a stored PHC string and a candidate password.
struct Job {
    phc: String,
    password: String,
    answer: tokio::sync::oneshot::Sender<Result<bool, DirectoryError>>,
}

/// The pool's handle; the threads end when it is dropped.
pub(crate) struct Hashers {
    jobs: mpsc::SyncSender<Job>,
}

impl Hashers {
    /// Starts `threads` verifier threads, each allowed `memory_bytes_max` of argon2 memory,
    /// behind a queue of `queue_max` waiting jobs.
    pub(crate) fn start(
        threads: usize,
        memory_bytes_max: usize,
        queue_max: usize,
    ) -> Result<Hashers, DirectoryError> {
        let (jobs, receiver) = mpsc::sync_channel::<Job>(queue_max);
        let receiver = std::sync::Arc::new(std::sync::Mutex::new(receiver));
        for n in 0..threads.max(1) {
            let receiver = receiver.clone();
            std::thread::Builder::new()
                .name(format!("argon2-{n}"))
                .spawn(move || {
                    let mut memory: Vec<Block> = Vec::new();
                    loop {
                        // One thread takes the next job; the lock is held only to receive.
                        let job = {
                            let receiver = receiver.lock().unwrap_or_else(|p| p.into_inner());
                            receiver.recv()
                        };
                        let Ok(job) = job else {
                            return;
                        };
                        let result = verify(&job.phc, &job.password, &mut memory, memory_bytes_max);
                        let _ = job.answer.send(result);
                    }
                })
                .map_err(|e| DirectoryError::Task(format!("starting a verifier thread: {e}")))?;
        }
        Ok(Hashers { jobs })
    }

    /// Verifies `password` against `phc` on the pool. `Busy` when the queue is full.
    pub(crate) async fn verify(
        &self,
        phc: String,
        password: String,
    ) -> Result<bool, DirectoryError> {
        let (answer, result) = tokio::sync::oneshot::channel();
        let job = Job {
            phc,
            password,
            answer,
        };
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(_)) => return Err(DirectoryError::Busy),
            Err(mpsc::TrySendError::Disconnected(_)) => {
                return Err(DirectoryError::Task("the verifier threads are gone".into()));
            }
        }
        result
            .await
            .map_err(|_| DirectoryError::Task("a verifier thread stopped".into()))?
    }
}

/// Whether `password` matches `phc`, computed in `memory` (grown to the hash's cost, never
/// past `memory_bytes_max`).
pub(crate) fn verify(
    phc: &str,
    password: &str,
    memory: &mut Vec<Block>,
    memory_bytes_max: usize,
) -> Result<bool, DirectoryError> {
    let corrupt =
        |e: &dyn std::fmt::Display| DirectoryError::Corrupt(format!("password hash: {e}"));
    let hash = PasswordHash::new(phc).map_err(|e| corrupt(&e))?;
    let algorithm = Algorithm::try_from(hash.algorithm.as_str()).map_err(|e| corrupt(&e))?;
    let version = hash
        .version
        .map(Version::try_from)
        .transpose()
        .map_err(|e| corrupt(&e))?
        .unwrap_or_default();
    let params = Params::try_from(&hash).map_err(|e| corrupt(&e))?;
    let (Some(salt), Some(expected)) = (&hash.salt, &hash.hash) else {
        return Err(corrupt(&"no salt or no hash"));
    };
    let blocks = params.block_count();
    if blocks.saturating_mul(Block::SIZE) > memory_bytes_max {
        return Err(DirectoryError::Corrupt(format!(
            "password hash needs {} KiB of memory, more than hash_memory_bytes_max",
            params.m_cost()
        )));
    }
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut computed = [0u8; Output::MAX_LENGTH];
    let computed = computed
        .get_mut(..expected.len())
        .ok_or_else(|| corrupt(&"hash longer than any output"))?;
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt.as_ref(),
            computed,
            &mut memory[..blocks],
        )
        .map_err(|e| corrupt(&e))?;
    let computed = Output::new(computed).map_err(|e| corrupt(&e))?;
    // Constant time: `Output`'s equality is `ct_eq`.
    Ok(&computed == expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params::new(Params::MIN_M_COST, 1, 1, None).unwrap()
    }

    #[tokio::test]
    async fn verifies_like_the_argon2_crate_and_reuses_its_memory() {
        let phc = crate::password::hash(&params(), "battery staple").unwrap();
        let hashers = Hashers::start(2, 1 << 20, 8).unwrap();
        assert!(
            hashers
                .verify(phc.clone(), "battery staple".into())
                .await
                .unwrap()
        );
        assert!(
            !hashers
                .verify(phc.clone(), "battery stable".into())
                .await
                .unwrap()
        );
        assert!(matches!(
            hashers
                .verify("$argon2id$nonsense".into(), "x".into())
                .await,
            Err(DirectoryError::Corrupt(_))
        ));
        // The production default hash (19 MiB) against a pool allowed 1 MiB.
        let big = crate::password::hash(&Params::default(), "pw").unwrap();
        let err = hashers.verify(big, "pw".into()).await.unwrap_err();
        assert!(err.to_string().contains("hash_memory_bytes_max"), "{err}");
        // The same memory serves every job of a thread.
        let mut memory = Vec::new();
        assert!(verify(&phc, "battery staple", &mut memory, 1 << 20).unwrap());
        let address = memory.as_ptr();
        assert!(!verify(&phc, "nope", &mut memory, 1 << 20).unwrap());
        assert_eq!(memory.as_ptr(), address);
    }

    #[tokio::test]
    async fn a_full_queue_answers_busy_at_once() {
        let slow = Params::new(64 << 10, 4, 1, None).unwrap();
        let phc = crate::password::hash(&slow, "pw").unwrap();
        let hashers = std::sync::Arc::new(Hashers::start(1, 128 << 20, 1).unwrap());
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (hashers, phc) = (hashers.clone(), phc.clone());
            tasks.push(tokio::spawn(async move {
                hashers.verify(phc, "pw".into()).await
            }));
        }
        let mut busy = 0;
        let mut ok = 0;
        for task in tasks {
            match task.await.unwrap() {
                Err(DirectoryError::Busy) => busy += 1,
                Ok(true) => ok += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(busy >= 1 && ok >= 1, "busy {busy}, ok {ok}");
    }
}
