//! One cell of the validation matrix: a psync run the machine measures and the model
//! simulates.

use sim_models::Op;
use sim_models::localfs::{JournalMode, WritebackParams};
use sim_run::Pattern;

/// One cell: a psync run of `bytes` in `record` calls on a file of `file_bytes`.
#[derive(Debug, Clone)]
pub struct Cell {
    pub name: String,
    pub op: Op,
    pub pattern: Pattern,
    pub record: u64,
    pub bytes: u64,
    pub file_bytes: u64,
    pub warm: bool,
    pub sync: bool,
    pub end_fsync: bool,
    /// The `data=` mode of the file system the cell runs on, and its journal's size.
    pub journal: JournalMode,
    pub journal_bytes: u64,
}

impl Cell {
    pub fn sequential(&self) -> bool {
        self.pattern == Pattern::Sequential
    }
}

impl Cell {
    pub(crate) fn new(
        name: &str,
        op: Op,
        pattern: Pattern,
        record: u64,
        bytes: u64,
        file: u64,
    ) -> Cell {
        Cell {
            name: name.to_string(),
            op,
            pattern,
            record,
            bytes,
            file_bytes: file,
            warm: false,
            sync: false,
            end_fsync: false,
            journal: JournalMode::Ordered,
            journal_bytes: WritebackParams::default().journal_bytes,
        }
    }

    pub(crate) fn on_ext4(mut self, mode: JournalMode) -> Cell {
        self.journal = mode;
        self.journal_bytes = crate::loopfs::JOURNAL_MIB << 20;
        let label = match mode {
            JournalMode::Ordered => "ordered",
            JournalMode::Writeback => "writeback",
            JournalMode::Data => "journal",
            JournalMode::NoJournal => "nojournal",
        };
        self.name = format!("ext4-{label}-{}", self.name);
        self
    }

    /// The cell on a file system journaled in `mode` (the journal's size unchanged).
    pub(crate) fn on_journal(mut self, mode: JournalMode) -> Cell {
        self.journal = mode;
        self
    }

    pub(crate) fn warm(mut self) -> Cell {
        self.warm = true;
        self
    }

    pub(crate) fn osync(mut self) -> Cell {
        self.sync = true;
        self
    }

    pub(crate) fn fsync(mut self) -> Cell {
        self.end_fsync = true;
        self
    }
}
