//! The page cache (dissertation 4.3, Figure 22): pages of 4 KiB on an inactive and an active
//! list, each page with two reference flags. A new page enters the inactive list with both
//! flags clear; its first access sets the first flag; its second moves it to the active
//! list. Reclaim takes the inactive list's oldest page, giving a referenced page one more
//! round; when reclaim finds the active list larger than the inactive one, the active
//! list's oldest page goes back to the inactive list first (the kernel's list balancing). Pages being read from the device and dirty
//! pages are never reclaimed.

use std::collections::{BTreeMap, HashMap};

/// A page of a file: (file, page index).
pub type PageKey = (u32, u64);

pub const PAGE_BYTES: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Inactive,
    Active,
}

#[derive(Debug, Clone)]
struct Page {
    list: List,
    /// Position in its list: larger is newer.
    tick: u64,
    referenced: bool,
    /// Being read from the device.
    in_flight: bool,
    dirty: bool,
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Hit,
    /// Present but still being read: wait for it.
    InFlight,
    Miss,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub activations: u64,
    pub deactivations: u64,
}

pub struct PageCache {
    capacity: u64,
    pages: HashMap<PageKey, Page>,
    inactive: BTreeMap<u64, PageKey>,
    active: BTreeMap<u64, PageKey>,
    tick: u64,
    pub stats: CacheStats,
}

impl PageCache {
    /// A cache of `capacity_pages` pages (at least 1).
    pub fn new(capacity_pages: u64) -> PageCache {
        PageCache {
            capacity: capacity_pages.max(1),
            pages: HashMap::new(),
            inactive: BTreeMap::new(),
            active: BTreeMap::new(),
            tick: 0,
            stats: CacheStats::default(),
        }
    }

    pub fn len(&self) -> u64 {
        self.pages.len() as u64
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub fn active_len(&self) -> u64 {
        self.active.len() as u64
    }

    pub fn inactive_len(&self) -> u64 {
        self.inactive.len() as u64
    }

    fn list_mut(&mut self, l: List) -> &mut BTreeMap<u64, PageKey> {
        match l {
            List::Inactive => &mut self.inactive,
            List::Active => &mut self.active,
        }
    }

    fn place(&mut self, key: PageKey, list: List) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(p) = self.pages.get_mut(&key) {
            let (old_list, old_tick) = (p.list, p.tick);
            p.list = list;
            p.tick = tick;
            self.list_mut(old_list).remove(&old_tick);
        }
        self.list_mut(list).insert(tick, key);
    }

    /// Looks a page up as an access (the two-flag promotion); counts hits and misses.
    pub fn access(&mut self, key: PageKey) -> Lookup {
        let Some(p) = self.pages.get_mut(&key) else {
            self.stats.misses += 1;
            return Lookup::Miss;
        };
        if p.in_flight {
            return Lookup::InFlight;
        }
        self.stats.hits += 1;
        match (p.list, p.referenced) {
            (List::Inactive, false) | (List::Active, false) => p.referenced = true,
            (List::Inactive, true) => {
                p.referenced = false;
                self.stats.activations += 1;
                self.place(key, List::Active);
            }
            (List::Active, true) => {}
        }
        Lookup::Hit
    }

    /// Whether the page is present (no access recorded).
    pub fn contains(&self, key: PageKey) -> bool {
        self.pages.contains_key(&key)
    }

    /// Adds a page about to be read from the device, reclaiming room first. False if
    /// nothing could be reclaimed (every page in flight or dirty).
    pub fn insert_in_flight(&mut self, key: PageKey) -> bool {
        if self.pages.contains_key(&key) {
            return true;
        }
        while self.len() >= self.capacity {
            if !self.reclaim_one() {
                return false;
            }
        }
        self.pages.insert(
            key,
            Page {
                list: List::Inactive,
                tick: 0,
                referenced: false,
                in_flight: true,
                dirty: false,
            },
        );
        self.place(key, List::Inactive);
        true
    }

    /// The device delivered the page.
    pub fn filled(&mut self, key: PageKey) {
        if let Some(p) = self.pages.get_mut(&key) {
            p.in_flight = false;
        }
    }

    pub fn is_in_flight(&self, key: PageKey) -> bool {
        self.pages.get(&key).is_some_and(|p| p.in_flight)
    }

    pub fn set_dirty(&mut self, key: PageKey, dirty: bool) {
        if let Some(p) = self.pages.get_mut(&key) {
            p.dirty = dirty;
        }
    }

    /// Evicts one page: the oldest inactive one that is neither in flight nor dirty, a
    /// referenced one getting another round first. False if none can go.
    fn reclaim_one(&mut self) -> bool {
        // The kernel's balancing: when the inactive list is the smaller, the active list's
        // oldest page goes back to it before anything is reclaimed.
        if self.inactive.len() < self.active.len() || self.inactive.is_empty() {
            self.deactivate_oldest();
        }
        let mut passes = 0;
        let limit = 2 * self.inactive.len() + 1;
        while passes < limit {
            passes += 1;
            let Some((&tick, &key)) = self.inactive.iter().next() else {
                return false;
            };
            let Some(p) = self.pages.get_mut(&key) else {
                self.inactive.remove(&tick);
                continue;
            };
            if p.in_flight || p.dirty {
                // Not reclaimable now: to the young end.
                self.place(key, List::Inactive);
                continue;
            }
            if p.referenced {
                p.referenced = false;
                self.place(key, List::Inactive);
                continue;
            }
            self.inactive.remove(&tick);
            self.pages.remove(&key);
            self.stats.evictions += 1;
            return true;
        }
        false
    }

    fn deactivate_oldest(&mut self) {
        if let Some((_, &key)) = self.active.iter().next() {
            if let Some(p) = self.pages.get_mut(&key) {
                p.referenced = false;
            }
            self.stats.deactivations += 1;
            self.place(key, List::Inactive);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(c: &mut PageCache, file: u32, pages: std::ops::Range<u64>) {
        for p in pages {
            assert!(c.insert_in_flight((file, p)));
            c.filled((file, p));
        }
    }

    #[test]
    fn the_second_access_activates_and_the_cache_keeps_its_size() {
        let mut c = PageCache::new(4);
        fill(&mut c, 0, 0..4);
        assert_eq!(c.access((0, 0)), Lookup::Hit);
        assert_eq!(c.active_len(), 0, "first access: only the flag");
        assert_eq!(c.access((0, 0)), Lookup::Hit);
        assert_eq!(c.active_len(), 1);
        // A fifth page evicts the oldest unreferenced inactive page (page 1).
        fill(&mut c, 0, 4..5);
        assert_eq!(c.len(), 4);
        assert!(!c.contains((0, 1)) && c.contains((0, 0)));
        assert_eq!(c.access((9, 9)), Lookup::Miss);
        assert_eq!(c.stats.evictions, 1);
    }

    #[test]
    fn a_scan_does_not_flush_the_working_set() {
        // Twice-used pages are active; a long single-use scan cycles through the inactive
        // list and leaves them.
        let mut c = PageCache::new(100);
        fill(&mut c, 1, 0..40);
        for p in 0..40 {
            c.access((1, p));
            c.access((1, p));
        }
        for p in 0..1000 {
            fill(&mut c, 2, p..p + 1);
            c.access((2, p));
        }
        let kept = (0..40).filter(|&p| c.contains((1, p))).count();
        assert!(kept >= 35, "{kept} of the working set kept");
        assert!(c.len() <= 100);
    }

    #[test]
    fn pages_in_flight_or_dirty_are_not_reclaimed() {
        let mut c = PageCache::new(2);
        assert!(c.insert_in_flight((0, 0)));
        assert!(c.insert_in_flight((0, 1)));
        assert_eq!(c.access((0, 0)), Lookup::InFlight);
        // Both busy: nothing can make room.
        assert!(!c.insert_in_flight((0, 2)));
        c.filled((0, 0));
        c.set_dirty((0, 0), true);
        assert!(!c.insert_in_flight((0, 2)));
        c.filled((0, 1));
        assert!(c.insert_in_flight((0, 2)));
        assert!(c.contains((0, 0)) && !c.contains((0, 1)));
    }
}
