//! The password verification pool: a fixed number of threads, each with its own argon2
//! memory, reused for every verification it runs.
//!
//! Why not the blocking pool: argon2 is memory-hard by design (19 MiB per verification by
//! default). Run on tokio's blocking pool, a burst of failed logins took a fresh server from
//! 16 MB to over 1 GB resident, and the memory stayed after the burst: every blocking thread
//! allocated its own blocks, and the allocator kept them in per-thread arenas. Here the
//! memory is `hash_concurrency_max × hash_memory_bytes_max` at most, allocated once per
//! thread and kept for the next job; a burst waits in a bounded queue (`hash_queue_max`),
//! and beyond it a login gets a temporary failure at once.
//!
//! Two more things keep a flood of wrong passwords from starving everyone else:
//! - two queues: attempts the caller calls [`Priority::Suspect`] (the server's throttle has
//!   seen failures from that address) wait behind [`Priority::Normal`] ones;
//! - the threads run at a lower CPU priority (nice 10), so while they are busy the threads
//!   serving sessions still get the CPU first.
//!
//! Verification parses the PHC string, checks that its memory cost fits the limit, recomputes
//! the hash into the thread's blocks and compares with the stored output in constant time
//! (`Output`'s `PartialEq`).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use argon2::password_hash::phc::{Output, PasswordHash};
use argon2::{Algorithm, Argon2, Block, Params, Version};

use crate::error::DirectoryError;

/// Which queue a verification waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    #[default]
    Normal,
    /// From an address (or network) with recent failed logins: served after every normal
    /// one.
    Suspect,
}

/// The CPU priority of the verifier threads (see the module documentation).
const VERIFIER_NICE: i32 = 10;

/// One verification: a stored PHC string and a candidate password.
struct Job {
    phc: String,
    password: String,
    answer: tokio::sync::oneshot::Sender<Result<bool, DirectoryError>>,
}

#[derive(Default)]
struct Queues {
    normal: VecDeque<Job>,
    suspect: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    queues: Mutex<Queues>,
    ready: Condvar,
    queue_max: usize,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next job, normal ones first; `None` once the pool is closed and drained.
    fn next(&self) -> Option<Job> {
        let mut queues = self.lock();
        loop {
            if let Some(job) = queues
                .normal
                .pop_front()
                .or_else(|| queues.suspect.pop_front())
            {
                return Some(job);
            }
            if queues.closed {
                return None;
            }
            queues = self.ready.wait(queues).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The pool's handle; the threads end when it is dropped.
pub(crate) struct Hashers {
    shared: Arc<Shared>,
}

impl Hashers {
    /// Starts `threads` verifier threads, each allowed `memory_bytes_max` of argon2 memory,
    /// behind two queues of `queue_max` waiting jobs each.
    pub(crate) fn start(
        threads: usize,
        memory_bytes_max: usize,
        queue_max: usize,
    ) -> Result<Hashers, DirectoryError> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
            queue_max,
        });
        for n in 0..threads.max(1) {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("argon2-{n}"))
                .spawn(move || {
                    // Best effort: a thread that cannot lower its priority keeps the default.
                    let _ = rustix::process::setpriority_process(
                        Some(rustix::thread::gettid()),
                        VERIFIER_NICE,
                    );
                    let mut memory: Vec<Block> = Vec::new();
                    while let Some(job) = shared.next() {
                        let result = verify(&job.phc, &job.password, &mut memory, memory_bytes_max);
                        let _ = job.answer.send(result);
                    }
                })
                .map_err(|e| DirectoryError::Task(format!("starting a verifier thread: {e}")))?;
        }
        Ok(Hashers { shared })
    }

    /// Verifies `password` against `phc` on the pool. `Busy` when its queue is full.
    pub(crate) async fn verify(
        &self,
        phc: String,
        password: String,
        priority: Priority,
    ) -> Result<bool, DirectoryError> {
        let (answer, result) = tokio::sync::oneshot::channel();
        {
            let mut queues = self.shared.lock();
            let queue = match priority {
                Priority::Normal => &mut queues.normal,
                Priority::Suspect => &mut queues.suspect,
            };
            if queue.len() >= self.shared.queue_max {
                return Err(DirectoryError::Busy);
            }
            queue.push_back(Job {
                phc,
                password,
                answer,
            });
        }
        self.shared.ready.notify_one();
        result
            .await
            .map_err(|_| DirectoryError::Task("a verifier thread stopped".into()))?
    }
}

impl Drop for Hashers {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
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
        let verify_as =
            |password: &str, priority| hashers.verify(phc.clone(), password.to_string(), priority);
        assert!(verify_as("battery staple", Priority::Normal).await.unwrap());
        assert!(
            !verify_as("battery stable", Priority::Suspect)
                .await
                .unwrap()
        );
        assert!(matches!(
            hashers
                .verify("$argon2id$nonsense".into(), "x".into(), Priority::Normal)
                .await,
            Err(DirectoryError::Corrupt(_))
        ));
        // The production default hash (19 MiB) against a pool allowed 1 MiB.
        let big = crate::password::hash(&Params::default(), "pw").unwrap();
        let err = hashers
            .verify(big, "pw".into(), Priority::Normal)
            .await
            .unwrap_err();
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
        let hashers = Arc::new(Hashers::start(1, 128 << 20, 1).unwrap());
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (hashers, phc) = (hashers.clone(), phc.clone());
            tasks.push(tokio::spawn(async move {
                hashers.verify(phc, "pw".into(), Priority::Normal).await
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn normal_verifications_go_before_suspect_ones() {
        let slow = Params::new(16 << 10, 8, 1, None).unwrap();
        let phc = crate::password::hash(&slow, "pw").unwrap();
        let hashers = Arc::new(Hashers::start(1, 64 << 20, 64).unwrap());
        let order = Arc::new(Mutex::new(Vec::new()));
        // Keep the one thread busy, then queue suspects before a normal one.
        let mut tasks = Vec::new();
        for (n, priority) in [
            (0, Priority::Normal),
            (1, Priority::Suspect),
            (2, Priority::Suspect),
            (3, Priority::Suspect),
            (4, Priority::Normal),
        ] {
            let (hashers, phc, order) = (hashers.clone(), phc.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                hashers.verify(phc, "pw".into(), priority).await.unwrap();
                order.lock().unwrap().push(n);
            }));
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let position = |n: usize| order.iter().position(|&m| m == n).unwrap();
        let before = [1, 2, 3]
            .iter()
            .filter(|&&s| position(s) < position(4))
            .count();
        assert!(
            before <= 1,
            "the normal job waited behind the suspects: {order:?}"
        );
    }
}
