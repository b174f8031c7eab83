//! Sending blocks: to every member of their groups now, or through the journal.

use std::collections::HashSet;

use super::quorum::Outgoing;
use super::*;

impl Fs {
    /// Sends blocks now (synchronous mode) or through the journal (asynchronous mode), and
    /// keeps them in the memory cache: what was just written is what is read next (the
    /// page cache would have kept it, and files bypass it).
    pub(super) fn emit_blocks(
        &self,
        file: u64,
        jobs: &[(BlockRef, Arc<Vec<u8>>)],
    ) -> Result<(), FsError> {
        if jobs.is_empty() {
            return Ok(());
        }
        if self.asynchronous {
            self.journal.append(&crate::journal::Record::Blocks {
                file,
                blocks: jobs
                    .iter()
                    .map(|(b, d)| (b.clone(), serde_bytes::ByteBuf::from(d.as_ref().clone())))
                    .collect(),
            })?;
        } else {
            self.put_blocks(file, jobs)?;
        }
        for (r, data) in jobs {
            self.blocks
                .cache
                .put_memory_only(BlockId::of(file, r), data.clone());
        }
        Ok(())
    }

    pub(crate) fn superblock_sealing(&self) -> Sealing {
        keys::superblock_sealing(&self.kek)
    }

    /// Sends what the journal holds, in order (the background writer and unmount).
    /// Returns the records sent.
    pub fn drain_journal(&self) -> Result<usize, FsError> {
        let drained = self.journal.drain(|record| self.send_journaled(record));
        if let Ok(d) = &drained {
            self.stats
                .journal_sent
                .fetch_add(d.sent as u64, Ordering::Relaxed);
            self.stats
                .journal_coalesced
                .fetch_add(d.coalesced as u64, Ordering::Relaxed);
        }
        drained.map(|d| d.sent)
    }

    /// Puts one journal record on the servers: a directory (or superblock) message on
    /// every account, or a batch of blocks on their groups.
    fn send_journaled(&self, record: &crate::journal::Record) -> Result<(), FsError> {
        match record {
            crate::journal::Record::Dir { name, payload } => {
                let name = MessageName::parse(name)
                    .ok_or_else(|| FsError::Corrupt(format!("journal record {name}")))?;
                let sealing = if name.kind == MsgKind::Superblock {
                    self.superblock_sealing()
                } else {
                    self.sealing().clone()
                };
                self.put(&self.all_accounts(), name, payload, &sealing)
            }
            crate::journal::Record::Blocks { file, blocks } => {
                let jobs: Vec<(BlockRef, Arc<Vec<u8>>)> = blocks
                    .iter()
                    .map(|(b, d)| (b.clone(), Arc::new(d.to_vec())))
                    .collect();
                self.put_blocks(*file, &jobs)
            }
        }
    }

    /// Uploads blocks to every member of their groups. A block whose version carries
    /// [`MANIFEST_BIT`] goes as content-defined chunks (those not already stored) and then
    /// its manifest, in that order: a manifest that arrived means its chunks did, which is
    /// what crash repair checks (docs/mailfs.md 5, deduplication).
    pub(crate) fn put_blocks(
        &self,
        file: u64,
        jobs: &[(BlockRef, Arc<Vec<u8>>)],
    ) -> Result<(), FsError> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut blocks = Vec::with_capacity(jobs.len());
        let mut chunks = Vec::new();
        let mut seen = HashSet::new();
        for (r, data) in jobs {
            let name = self.message_name(MsgKind::Block, file, r.index, r.version);
            if r.version & MANIFEST_BIT != 0 {
                let manifest = self.chunk_block(data, &mut seen, &mut chunks);
                let manifest = Arc::new(meta::encode(&manifest));
                blocks.push(self.outgoing(name, r.group, manifest, None));
            } else {
                let block = Some(BlockId::of(file, r));
                blocks.push(self.outgoing(name, r.group, data.clone(), block));
            }
        }
        self.put_messages(&chunks)?;
        self.put_messages(&blocks)?;
        self.stats
            .blocks_written
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Cuts a block into content-defined chunks (FastCDC 2020), queues the chunks no member
    /// of their group holds a reusable copy of, and returns the block's manifest.
    fn chunk_block(
        &self,
        data: &[u8],
        seen: &mut HashSet<[u8; 16]>,
        out: &mut Vec<Outgoing>,
    ) -> meta::Manifest {
        let (min, avg, max) = self.chunk_sizes();
        let mut chunks = Vec::new();
        for c in fastcdc::v2020::FastCDC::new(data, min, avg, max) {
            let bytes = &data[c.offset..c.offset + c.length];
            let hash = blake3::keyed_hash(&self.chunk_key, bytes);
            let mut id = [0u8; 16];
            id.copy_from_slice(&hash.as_bytes()[..16]);
            let chunk = meta::ChunkRef {
                id,
                len: c.length as u32,
            };
            chunks.push(chunk);
            let name_id = chunk.name_id();
            let group = self.chunk_group(&chunk);
            if !seen.insert(id) || self.chunk_reusable(group, &name_id) {
                self.stats.chunks_reused.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .bytes_deduplicated
                    .fetch_add(c.length as u64, Ordering::Relaxed);
                continue;
            }
            let name = self.message_name(MsgKind::Chunk, name_id.object, name_id.index, 0);
            out.push(self.outgoing(name, group, Arc::new(bytes.to_vec()), None));
        }
        meta::Manifest {
            format: meta::META_FORMAT,
            chunks,
        }
    }

    /// FastCDC sizes (min, average, max): about eight chunks per block, 1 KiB to 256 KiB
    /// on average.
    pub(crate) fn chunk_sizes(&self) -> (usize, usize, usize) {
        let avg = (self.block_size as usize / 8).clamp(1 << 10, 256 << 10);
        (avg / 4, avg, avg * 4)
    }

    /// A chunk's group follows from its name, so equal chunks meet in the same group.
    pub(crate) fn chunk_group(&self, c: &meta::ChunkRef) -> u8 {
        (c.id[0] as usize % self.replicas.groups.len()) as u8
    }

    /// A stored chunk is reused only when every live member of its group holds a copy
    /// younger than half of `orphan_grace`: gc removes an unreferenced chunk only once it
    /// is older than `orphan_grace`, so a chunk named by a commit in progress cannot be
    /// collected under it. An older one is sent again (the old copy goes with gc if
    /// nothing names it).
    fn chunk_reusable(&self, group: u8, name_id: &NameId) -> bool {
        let young_after = now_secs() - (self.orphan_grace.as_secs() / 2) as i64;
        let mut live = self.replicas.groups[group as usize]
            .iter()
            .filter(|&&m| self.replicas.accounts[m].is_up())
            .peekable();
        live.peek().is_some()
            && live.all(|&m| {
                self.replicas.accounts[m]
                    .chunk_time(name_id)
                    .is_some_and(|t| t > young_after)
            })
    }
}
