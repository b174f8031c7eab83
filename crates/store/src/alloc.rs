//! The extent allocator of `volume.dat`, in 512-byte units.
//!
//! Free space is two indexes over the same extents: by start (to merge neighbours and find
//! the run containing a unit) and by (length, start) (best fit). Every operation is
//! O(log n). Free space is never stored on disk: at open it is the complement of the indexed
//! extents.
//!
//! Reservations (docs/storage.md, "Allocation and contiguity") are ranges taken out of the
//! free pool and held for one folder's next appends, so interleaved deliveries still give
//! each folder long runs. They live only in memory; at most `reservations_max` exist, the
//! least recently used is released first, and all are released before the volume grows.
//!
//! Invariant S5, checked by [`Allocator::check_accounting`] after every change and by fsck:
//! `free + reserved + used == volume units - header units`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Clone, Copy)]
struct Reservation {
    start: u64,
    len: u64,
    tick: u64,
}

pub(crate) struct Allocator {
    /// First allocatable unit (after the volume header).
    base: u64,
    /// One past the last unit of the volume.
    end: u64,
    by_start: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
    free_units: u64,
    used_units: u64,
    reserved_units: u64,
    reservations: HashMap<u32, Reservation>,
    by_tick: BTreeMap<u64, u32>,
    tick: u64,
    reservation_units: u64,
    reservations_max: usize,
    /// Frees that overlapped free space (only possible with a damaged index); fsck reports.
    anomalies: u64,
}

impl Allocator {
    /// An allocator over `[base, end)` with the given extents in use. Extents that overlap
    /// an earlier one or leave the volume are reported, not trusted.
    pub(crate) fn build(
        base: u64,
        end: u64,
        mut used: Vec<(u64, u64)>,
        reservation_units: u64,
        reservations_max: usize,
    ) -> (Allocator, Vec<String>) {
        let mut a = Allocator {
            base,
            end,
            by_start: BTreeMap::new(),
            by_size: BTreeSet::new(),
            free_units: 0,
            used_units: 0,
            reserved_units: 0,
            reservations: HashMap::new(),
            by_tick: BTreeMap::new(),
            tick: 0,
            reservation_units,
            reservations_max: reservations_max.max(1),
            anomalies: 0,
        };
        let mut problems = Vec::new();
        used.sort_unstable();
        let mut cursor = base;
        for (start, len) in used {
            let stop = start.saturating_add(len);
            if start < base || stop > end {
                problems.push(format!("extent [{start}, {stop}) lies outside the volume"));
                continue;
            }
            if start < cursor {
                problems.push(format!("extent [{start}, {stop}) overlaps another"));
                if stop > cursor {
                    a.used_units += stop - cursor;
                    cursor = stop;
                }
                continue;
            }
            if start > cursor {
                a.insert_free(cursor, start - cursor);
            }
            a.used_units += len;
            cursor = stop;
        }
        if cursor < end {
            a.insert_free(cursor, end - cursor);
        }
        (a, problems)
    }

    pub(crate) fn end(&self) -> u64 {
        self.end
    }
    pub(crate) fn base(&self) -> u64 {
        self.base
    }
    pub(crate) fn free_units(&self) -> u64 {
        self.free_units
    }
    pub(crate) fn used_units(&self) -> u64 {
        self.used_units
    }
    pub(crate) fn reserved_units(&self) -> u64 {
        self.reserved_units
    }
    pub(crate) fn free_extent_count(&self) -> usize {
        self.by_start.len()
    }
    #[cfg(test)]
    pub(crate) fn anomalies(&self) -> u64 {
        self.anomalies
    }
    pub(crate) fn free_extents(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_start.iter().map(|(&s, &l)| (s, l))
    }
    pub(crate) fn reservations(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.reservations.iter().map(|(&f, r)| (f, r.start, r.len))
    }

    /// S5: every unit of the volume is free, reserved or used, exactly once.
    pub(crate) fn check_accounting(&self) -> Result<(), String> {
        let total = self.end - self.base;
        let sum = self.free_units + self.reserved_units + self.used_units;
        if sum != total || self.anomalies != 0 {
            return Err(format!(
                "free {} + reserved {} + used {} = {sum} units, volume has {total}; {} bad frees",
                self.free_units, self.reserved_units, self.used_units, self.anomalies
            ));
        }
        Ok(())
    }

    /// Adds a free range, merging with free neighbours. A range overlapping free space is
    /// refused (counted as an anomaly): freeing twice must never create space twice.
    fn insert_free(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.by_start.range(..=start).next_back() {
            if ps + pl > start {
                self.anomalies += 1;
                return false;
            }
            if ps + pl == start {
                self.by_start.remove(&ps);
                self.by_size.remove(&(pl, ps));
                s = ps;
                l += pl;
            }
        }
        if let Some((&ns, &nl)) = self.by_start.range(start..).next() {
            if ns < start + len {
                self.anomalies += 1;
                // Undo the merge with the predecessor.
                if s != start {
                    self.by_start.insert(s, l - len);
                    self.by_size.insert((l - len, s));
                }
                return false;
            }
            if ns == start + len {
                self.by_start.remove(&ns);
                self.by_size.remove(&(nl, ns));
                l += nl;
            }
        }
        self.by_start.insert(s, l);
        self.by_size.insert((l, s));
        self.free_units += len;
        true
    }

    /// The free extent containing `unit`, if any.
    pub(crate) fn free_run_containing(&self, unit: u64) -> Option<(u64, u64)> {
        let (&s, &l) = self.by_start.range(..=unit).next_back()?;
        (unit < s + l).then_some((s, l))
    }

    /// Removes `[start, start+len)` from the free pool if it lies inside one free extent.
    fn take_free(&mut self, start: u64, len: u64) -> bool {
        let Some((s, l)) = self.free_run_containing(start) else {
            return false;
        };
        if start + len > s + l {
            return false;
        }
        self.by_start.remove(&s);
        self.by_size.remove(&(l, s));
        if start > s {
            self.by_start.insert(s, start - s);
            self.by_size.insert((start - s, s));
        }
        let tail = s + l - (start + len);
        if tail > 0 {
            self.by_start.insert(start + len, tail);
            self.by_size.insert((tail, start + len));
        }
        self.free_units -= len;
        true
    }

    /// Marks a specific free range used (defrag destinations). False if it is not all free.
    pub(crate) fn take(&mut self, start: u64, len: u64) -> bool {
        if self.take_free(start, len) {
            self.used_units += len;
            true
        } else {
            false
        }
    }

    /// Returns a used extent to the free pool.
    pub(crate) fn free(&mut self, start: u64, len: u64) {
        if start < self.base || start + len > self.end {
            self.anomalies += 1;
            return;
        }
        if self.insert_free(start, len) {
            self.used_units = self.used_units.saturating_sub(len);
        }
    }

    /// Allocates `units` for a folder whose last message ends at `tail_end`: from the
    /// folder's reservation, else right after its tail, else a new region (best fit) with a
    /// fresh reservation after it. `None`: no free extent is big enough.
    pub(crate) fn allocate(
        &mut self,
        folder: u32,
        tail_end: Option<u64>,
        units: u64,
    ) -> Option<u64> {
        self.tick += 1;
        if let Some(r) = self.reservations.get(&folder).copied() {
            if r.len >= units {
                self.by_tick.remove(&r.tick);
                self.reserved_units -= units;
                self.used_units += units;
                if r.len == units {
                    self.reservations.remove(&folder);
                } else {
                    let nr = Reservation {
                        start: r.start + units,
                        len: r.len - units,
                        tick: self.tick,
                    };
                    self.reservations.insert(folder, nr);
                    self.by_tick.insert(self.tick, folder);
                }
                return Some(r.start);
            }
            self.release_reservation(folder);
        }
        if let Some(t) = tail_end
            && self.take(t, units)
        {
            self.reserve_after(folder, t + units);
            return Some(t);
        }
        let wanted = units + self.reservation_units;
        let pick = self
            .by_size
            .range((wanted, 0)..)
            .next()
            .or_else(|| self.by_size.range((units, 0)..).next())
            .map(|&(_, s)| s)?;
        let took = self.take(pick, units);
        debug_assert!(took);
        self.reserve_after(folder, pick + units);
        Some(pick)
    }

    /// The start of the smallest free run that holds `units`, without taking it.
    pub(crate) fn best_fit(&self, units: u64) -> Option<u64> {
        self.by_size
            .range((units, 0)..)
            .next()
            .map(|&(_, start)| start)
    }

    /// Reserves up to `reservation_units` of free space starting exactly at `at` for `folder`.
    fn reserve_after(&mut self, folder: u32, at: u64) {
        if self.reservation_units == 0 || self.reservations.contains_key(&folder) {
            return;
        }
        let Some(&len) = self.by_start.get(&at) else {
            return;
        };
        let len = len.min(self.reservation_units);
        if !self.take_free(at, len) {
            return;
        }
        while self.reservations.len() >= self.reservations_max {
            let Some((_, &oldest)) = self.by_tick.iter().next() else {
                break;
            };
            self.release_reservation(oldest);
        }
        self.reserved_units += len;
        self.reservations.insert(
            folder,
            Reservation {
                start: at,
                len,
                tick: self.tick,
            },
        );
        self.by_tick.insert(self.tick, folder);
    }

    /// Gives a folder's reservation back to the free pool.
    pub(crate) fn release_reservation(&mut self, folder: u32) {
        if let Some(r) = self.reservations.remove(&folder) {
            self.by_tick.remove(&r.tick);
            self.reserved_units -= r.len;
            self.insert_free(r.start, r.len);
        }
    }

    pub(crate) fn release_all_reservations(&mut self) {
        let folders: Vec<u32> = self.reservations.keys().copied().collect();
        for f in folders {
            self.release_reservation(f);
        }
    }

    /// The volume grew to `new_end` units.
    pub(crate) fn grow(&mut self, new_end: u64) {
        if new_end > self.end {
            let old = self.end;
            self.end = new_end;
            self.insert_free(old, new_end - old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &Allocator) {
        a.check_accounting().unwrap();
        // The two indexes agree and no two free extents touch (they would have merged).
        assert_eq!(a.by_start.len(), a.by_size.len());
        let mut prev_end = None;
        for (s, l) in a.free_extents() {
            assert!(a.by_size.contains(&(l, s)));
            if let Some(p) = prev_end {
                assert!(s > p, "free extents touch or overlap at {s}");
            }
            prev_end = Some(s + l);
        }
    }

    #[test]
    fn build_derives_free_space_from_used_extents() {
        let (a, problems) = Allocator::build(8, 100, vec![(20, 5), (8, 4), (50, 10)], 0, 4);
        assert!(problems.is_empty());
        check(&a);
        assert_eq!(
            a.free_extents().collect::<Vec<_>>(),
            vec![(12, 8), (25, 25), (60, 40)]
        );
        assert_eq!(a.used_units(), 19);
    }

    #[test]
    fn build_reports_overlaps_and_outside_extents() {
        let (a, problems) =
            Allocator::build(8, 100, vec![(10, 10), (15, 10), (99, 5), (2, 1)], 0, 4);
        assert_eq!(problems.len(), 3, "{problems:?}");
        check(&a);
        assert_eq!(a.used_units(), 15);
    }

    #[test]
    fn free_merges_both_neighbours() {
        let (mut a, _) = Allocator::build(0, 30, vec![(0, 10), (10, 10), (20, 10)], 0, 4);
        assert_eq!(a.free_extent_count(), 0);
        a.free(0, 10);
        a.free(20, 10);
        assert_eq!(a.free_extent_count(), 2);
        a.free(10, 10);
        assert_eq!(a.free_extents().collect::<Vec<_>>(), vec![(0, 30)]);
        check(&a);
    }

    #[test]
    fn double_free_is_refused_not_doubled() {
        let (mut a, _) = Allocator::build(0, 30, vec![(0, 10)], 0, 4);
        a.free(0, 10);
        a.free(0, 10);
        a.free(5, 10);
        assert_eq!(a.free_units(), 30);
        assert_eq!(a.anomalies(), 2);
        assert!(a.check_accounting().is_err());
    }

    #[test]
    fn allocate_best_fit_and_after_tail() {
        let (mut a, _) = Allocator::build(0, 100, vec![(10, 10), (30, 10)], 0, 4);
        // Free: [0,10) [20,30) [40,100). Best fit for 10 is [0,10).
        assert_eq!(a.allocate(1, None, 10), Some(0));
        // After a tail at 20: right there.
        assert_eq!(a.allocate(1, Some(20), 5), Some(20));
        assert_eq!(a.allocate(1, Some(25), 5), Some(25));
        // Tail space taken: next best fit.
        assert_eq!(a.allocate(1, Some(20), 5), Some(40));
        assert_eq!(a.allocate(2, None, 1000), None);
        check(&a);
    }

    #[test]
    fn reservations_keep_interleaved_folders_contiguous() {
        let (mut a, _) = Allocator::build(0, 1000, vec![], 10, 8);
        let mut tails: HashMap<u32, u64> = HashMap::new();
        let mut places: HashMap<u32, Vec<u64>> = HashMap::new();
        for i in 0..30 {
            let f = i % 3;
            let s = a.allocate(f, tails.get(&f).copied(), 2).unwrap();
            tails.insert(f, s + 2);
            places.entry(f).or_default().push(s);
            check(&a);
        }
        // Each folder gets runs of 5 messages (10 reserved units / 2) plus its first.
        for (f, starts) in places {
            let breaks = starts.windows(2).filter(|w| w[1] != w[0] + 2).count();
            assert!(breaks <= 2, "folder {f}: {starts:?}");
        }
        assert!(a.reserved_units() > 0);
        a.release_all_reservations();
        assert_eq!(a.reserved_units(), 0);
        check(&a);
    }

    #[test]
    fn reservations_max_evicts_least_recently_used() {
        let (mut a, _) = Allocator::build(0, 1000, vec![], 10, 2);
        a.allocate(1, None, 1).unwrap();
        a.allocate(2, None, 1).unwrap();
        a.allocate(1, Some(1), 1).unwrap();
        a.allocate(3, None, 1).unwrap();
        let held: Vec<u32> = {
            let mut v: Vec<u32> = a.reservations().map(|r| r.0).collect();
            v.sort();
            v
        };
        assert_eq!(held, vec![1, 3]);
        check(&a);
    }

    #[test]
    fn reservation_too_small_is_released_and_space_reused() {
        let (mut a, _) = Allocator::build(0, 40, vec![], 10, 4);
        assert_eq!(a.allocate(1, None, 2), Some(0));
        assert_eq!(a.reserved_units(), 10);
        // Needs 20: the reservation (10) is too small: released, then extended after tail.
        assert_eq!(a.allocate(1, Some(2), 20), Some(2));
        check(&a);
        assert_eq!(a.allocate(2, None, 20), None);
        a.release_all_reservations();
        assert_eq!(a.allocate(2, None, 18), Some(22));
        check(&a);
    }

    #[test]
    fn grow_and_take() {
        let (mut a, _) = Allocator::build(8, 16, vec![(8, 8)], 0, 1);
        assert_eq!(a.allocate(1, None, 4), None);
        a.grow(32);
        assert!(a.take(16, 4));
        assert!(!a.take(18, 4));
        assert_eq!(a.free_run_containing(25), Some((20, 12)));
        assert_eq!(a.free_run_containing(10), None);
        check(&a);
    }
}
