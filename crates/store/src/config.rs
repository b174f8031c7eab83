//! Tuning knobs and limits of the store, with the defaults the design document names.
//!
//! Every limit here is enforced with an error, never a panic, and each is tested. The
//! defaults are sized for a mail server (256 MiB volume growth, 64 MiB journal between
//! checkpoints); tests shrink them so a simulated disk stays small.

use crate::StoreError;

/// Keyword sets are a 128-bit mask per message, so a folder can name at most this many.
pub const KEYWORDS_PER_FOLDER_LIMIT: usize = 128;

/// Configuration of a [`crate::Store`]. `Default` gives the production values.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// Largest step `volume.dat` grows by (one `fallocate` each). A step is as large as the
    /// volume already is (so it doubles), between `volume_grow_bytes_min` and this.
    pub volume_grow_bytes: u64,
    /// Free space a growth step leaves on the file system: a step that would eat into it is
    /// cut (to what the message needs at least), so the doubling never takes the room the
    /// server keeps for itself (`disk_reserve_bytes`). Default 0.
    pub disk_reserve_bytes: u64,
    /// Smallest growth step, and the size of a new volume's data area (at most
    /// `volume_grow_bytes`: the smaller of the two applies).
    pub volume_grow_bytes_min: u64,
    /// Largest journal between checkpoints: a checkpoint starts when the current journal holds
    /// as many bytes of records as the last snapshot has (so a checkpoint's cost stays in
    /// proportion to the journal it empties), between `journal_bytes_min` and this. The journal
    /// file is preallocated to that size plus slack, so appends rarely change its length.
    pub journal_checkpoint_bytes: u64,
    /// Smallest journal between checkpoints (what a new store's journal takes; at most
    /// `journal_checkpoint_bytes`: the smaller of the two applies).
    pub journal_bytes_min: u64,
    /// At most this many appends go into one group-commit batch.
    pub batch_messages_max: usize,
    /// At most this many content bytes go into one batch (a bigger single message still goes,
    /// alone).
    pub batch_bytes_max: usize,
    /// Free space held after a folder's last message for that folder's next appends.
    /// 0 turns reservations off.
    pub reservation_bytes: u64,
    /// At most this many folders hold a reservation at once; the least recently used one is
    /// released when a new one is needed.
    pub reservations_max: usize,
    /// Apply the thesis's two-fragments rule after every expunge.
    pub defrag_on_delete: bool,
    /// Bytes of message data one expunge call may move (the whole call, however many UIDs).
    pub defrag_move_bytes_max: u64,
    /// Largest message content accepted.
    pub message_bytes_max: usize,
    /// Largest single read when streaming a folder (runs of adjacent messages).
    pub read_chunk_bytes_max: usize,
    /// Keywords a folder may define (at most [`KEYWORDS_PER_FOLDER_LIMIT`]).
    pub keywords_per_folder_max: usize,
    /// Longest keyword, in bytes.
    pub keyword_bytes_max: usize,
    /// Folders one user may have.
    pub folders_per_user_max: usize,
    /// Longest folder name, in bytes (whole hierarchical name).
    pub folder_name_bytes_max: usize,
    /// Deepest folder hierarchy (number of '/'-separated parts).
    pub folder_depth_max: usize,
    /// Longest user name, in bytes.
    pub user_name_bytes_max: usize,
    /// Each summary field (From, To, Subject, Date, Message-ID) is cut to this many bytes.
    pub summary_field_bytes_max: usize,
    /// Open a damaged store anyway: keep the valid prefix of a broken journal, skip damaged
    /// snapshot sections, then checkpoint at once so the damage is gone from disk. What was
    /// lost is listed in the open report. Off by default: a damaged store refuses to open.
    pub salvage: bool,
    /// Memory for summaries kept after a read ([`crate::Mailstore::summaries`]): searches and
    /// sorts over a folder read each message's summary once. Least recently used folders are
    /// dropped whole past it.
    pub summary_cache_bytes_max: usize,
    /// Memory for folder views shared by the sessions that open an unchanged folder
    /// ([`crate::Mailstore::shared_view`]). Least recently used views are dropped past it.
    pub view_cache_bytes_max: usize,
    /// Keys of handed-over copies kept against a second store of a retried one (a cluster
    /// node's `[cluster] delivered_max`; docs/storage.md, "Delivered keys"): the oldest go
    /// first past it.
    pub delivered_keys_max: usize,
    /// A key older than this is dropped: no origin hands a copy over again after its
    /// queue's lifetime.
    pub delivered_keys_retain: std::time::Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            volume_grow_bytes: 256 << 20,
            volume_grow_bytes_min: 1 << 20,
            disk_reserve_bytes: 0,
            journal_checkpoint_bytes: 64 << 20,
            journal_bytes_min: 1 << 20,
            batch_messages_max: 1024,
            batch_bytes_max: 16 << 20,
            reservation_bytes: 1 << 20,
            reservations_max: 1024,
            defrag_on_delete: true,
            defrag_move_bytes_max: 4 << 20,
            message_bytes_max: 64 << 20,
            read_chunk_bytes_max: 1 << 20,
            keywords_per_folder_max: KEYWORDS_PER_FOLDER_LIMIT,
            keyword_bytes_max: 64,
            folders_per_user_max: 1_000,
            folder_name_bytes_max: 255,
            folder_depth_max: 16,
            user_name_bytes_max: 255,
            summary_field_bytes_max: 1024,
            salvage: false,
            summary_cache_bytes_max: 64 << 20,
            view_cache_bytes_max: 64 << 20,
            delivered_keys_max: 1_000_000,
            // The queue's five days, and a day more.
            delivered_keys_retain: std::time::Duration::from_secs(6 * 86_400),
        }
    }
}

impl StoreConfig {
    /// The next growth step of a volume whose data area is `volume_bytes` long: as long as it
    /// is, within the configured bounds.
    pub(crate) fn volume_step_bytes(&self, volume_bytes: u64) -> u64 {
        let floor = self.volume_grow_bytes_min.min(self.volume_grow_bytes);
        volume_bytes.clamp(floor, self.volume_grow_bytes)
    }

    /// Journal bytes between checkpoints after a snapshot of `snapshot_bytes`: as many, within
    /// the configured bounds.
    pub(crate) fn checkpoint_after_bytes(&self, snapshot_bytes: u64) -> u64 {
        let floor = self.journal_bytes_min.min(self.journal_checkpoint_bytes);
        snapshot_bytes.clamp(floor, self.journal_checkpoint_bytes)
    }

    /// Rejects settings the formats cannot represent.
    pub fn validate(&self) -> Result<(), StoreError> {
        let bad = |what: &str| Err(StoreError::Config(what.to_string()));
        if self.volume_grow_bytes < 4096 {
            return bad("volume_grow_bytes must be at least 4096");
        }
        if self.volume_grow_bytes_min < 4096 {
            return bad("volume_grow_bytes_min must be at least 4096");
        }
        if self.journal_checkpoint_bytes < 512 {
            return bad("journal_checkpoint_bytes must be at least 512");
        }
        if self.journal_bytes_min < 512 {
            return bad("journal_bytes_min must be at least 512");
        }
        if self.batch_messages_max == 0 || self.batch_bytes_max == 0 {
            return bad("batch limits must be positive");
        }
        if self.keywords_per_folder_max > KEYWORDS_PER_FOLDER_LIMIT {
            return bad("keywords_per_folder_max is at most 128 (keyword sets are 128-bit masks)");
        }
        if self.message_bytes_max == 0 || self.message_bytes_max > (u32::MAX as usize) / 2 {
            return bad("message_bytes_max must be between 1 and 2 GiB");
        }
        if self.read_chunk_bytes_max < 4096 {
            return bad("read_chunk_bytes_max must be at least 4096");
        }
        if self.folder_name_bytes_max == 0
            || self.folder_name_bytes_max > 1024
            || self.user_name_bytes_max == 0
            || self.user_name_bytes_max > 1024
            || self.keyword_bytes_max == 0
            || self.keyword_bytes_max > 1024
            || self.summary_field_bytes_max > 8192
        {
            return bad(
                "name limits must be between 1 and 1024 bytes, summary fields at most 8192",
            );
        }
        if self.delivered_keys_max == 0 {
            return bad("delivered_keys_max must be positive");
        }
        if self.folder_depth_max == 0 || self.folders_per_user_max == 0 {
            return bad("folder_depth_max and folders_per_user_max must be positive");
        }
        Ok(())
    }
}
