//! `fsync` of a new file on ext4 without a journal (`ext4_fsync_nojournal`): the file's
//! data, then its inode's block, the directory's block and the directory's inode's block,
//! each written and waited for in turn, then a cache flush. Those blocks are buffer heads
//! other files' fsyncs share: one write at a time each, under its lock, the others
//! waiting in order (`sync_dirty_buffer`). A waiter whose changes a write already carried
//! writes nothing; but files are created while a block is being written, so under load
//! nearly every fsync writes the directory's block and its inode's again, one after
//! another: those two blocks, not the device's parallelism, bound the rate.

use std::collections::{HashMap, VecDeque};

use des::Nanos;
use sim_models::{Op, Request};

use super::{PAGE, Sim};
use crate::error::SimError;

/// 256-byte inodes: sixteen to a block. The directory's own inode is the first of the
/// table, its files' inodes follow.
const INODES_PER_BLOCK: u64 = 16;
/// Directory entries of short names (8 bytes and a name of up to 8, rounded to 4).
const ENTRIES_PER_DIR_BLOCK: u64 = 256;
/// Where the inode table and the directory's blocks are: the start of the file system's
/// first block group, before the data.
const INODE_TABLE_AT: u64 = 0;
const DIR_BLOCKS_AT: u64 = 64 << 20;

/// A metadata block many fsyncs write.
#[derive(Default)]
struct Buffer {
    /// Changes made to it (each file's creation) and how many the last write carried.
    changes: u64,
    written: Option<u64>,
    /// The fsync whose write is in flight, and the ones waiting for the lock.
    writer: Option<usize>,
    waiters: VecDeque<usize>,
}

impl Buffer {
    fn dirty(&self) -> bool {
        self.written != Some(self.changes)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    Data,
    Inode,
    Directory,
    DirectoryInode,
    Flush,
}

struct Fsync {
    arrived: Nanos,
    /// The file's number in the directory.
    file: u64,
    step: Step,
}

impl Fsync {
    /// The block the current step writes.
    fn block(&self) -> Option<u64> {
        match self.step {
            Step::Inode => Some(INODE_TABLE_AT + (self.file + 1) / INODES_PER_BLOCK * PAGE),
            Step::Directory => Some(DIR_BLOCKS_AT + self.file / ENTRIES_PER_DIR_BLOCK * PAGE),
            Step::DirectoryInode => Some(INODE_TABLE_AT),
            Step::Data | Step::Flush => None,
        }
    }
}

#[derive(Default)]
pub(super) struct Unjournaled {
    buffers: HashMap<u64, Buffer>,
    fsyncs: HashMap<usize, Fsync>,
    /// Requests in flight: request id -> fsync.
    requests: HashMap<u64, usize>,
    files: u64,
    next: usize,
}

impl Unjournaled {
    /// A file created in the directory and its data written to `at`: the blocks its
    /// creation changed are dirty, and its fsync begins with the data.
    pub(super) fn create(
        &mut self,
        sim: &mut Sim,
        arrived: Nanos,
        at: u64,
        bytes: u64,
    ) -> Result<(), SimError> {
        let file = self.files;
        self.files += 1;
        let mut fsync = Fsync {
            arrived,
            file,
            step: Step::Inode,
        };
        for step in [Step::Inode, Step::Directory, Step::DirectoryInode] {
            fsync.step = step;
            if let Some(block) = fsync.block() {
                self.buffers.entry(block).or_default().changes += 1;
            }
        }
        fsync.step = Step::Data;
        let index = self.next;
        self.next += 1;
        self.fsyncs.insert(index, fsync);
        self.requests.insert(sim.io(Op::Write, at, bytes)?, index);
        Ok(())
    }

    /// `done` completed; returns the arrivals of the fsyncs it ended.
    pub(super) fn done(&mut self, sim: &mut Sim, done: &Request) -> Result<Vec<Nanos>, SimError> {
        let mut ended = Vec::new();
        for id in &done.ids {
            let Some(index) = self.requests.remove(id) else {
                continue;
            };
            if let Some(block) = self.fsyncs.get(&index).and_then(Fsync::block) {
                self.unlock(sim, block, &mut ended)?;
            }
            self.advance(sim, index, &mut ended)?;
        }
        Ok(ended)
    }

    /// The write of `block` ended: the lock goes to the first waiter that still has
    /// something to write; the ones before it find their changes written and go on.
    fn unlock(
        &mut self,
        sim: &mut Sim,
        block: u64,
        ended: &mut Vec<Nanos>,
    ) -> Result<(), SimError> {
        let buffer = self.buffers.entry(block).or_default();
        buffer.writer = None;
        while let Some(waiter) = self.buffers.entry(block).or_default().waiters.pop_front() {
            if self.buffers[&block].dirty() {
                return self.write(sim, waiter, block);
            }
            self.advance(sim, waiter, ended)?;
        }
        Ok(())
    }

    fn write(&mut self, sim: &mut Sim, index: usize, block: u64) -> Result<(), SimError> {
        let buffer = self.buffers.entry(block).or_default();
        buffer.writer = Some(index);
        buffer.written = Some(buffer.changes);
        self.requests.insert(sim.io(Op::Write, block, PAGE)?, index);
        Ok(())
    }

    /// Moves fsync `index` past its current step, through every step with nothing to
    /// write, until it waits for a request or a lock, or has ended.
    fn advance(
        &mut self,
        sim: &mut Sim,
        index: usize,
        ended: &mut Vec<Nanos>,
    ) -> Result<(), SimError> {
        loop {
            let Some(fsync) = self.fsyncs.get_mut(&index) else {
                return Ok(());
            };
            fsync.step = match fsync.step {
                Step::Data => Step::Inode,
                Step::Inode => Step::Directory,
                Step::Directory => Step::DirectoryInode,
                Step::DirectoryInode => Step::Flush,
                Step::Flush => {
                    ended.push(fsync.arrived);
                    self.fsyncs.remove(&index);
                    return Ok(());
                }
            };
            let Some(block) = fsync.block() else {
                let id = sim.flush()?;
                self.requests.insert(id, index);
                return Ok(());
            };
            let buffer = self.buffers.entry(block).or_default();
            // Clean: an earlier write carried this file's change (written or in flight,
            // the kernel does not wait for the latter either).
            if !buffer.dirty() {
                continue;
            }
            if buffer.writer.is_some() {
                buffer.waiters.push_back(index);
                return Ok(());
            }
            return self.write(sim, index, block);
        }
    }
}
