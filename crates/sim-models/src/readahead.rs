//! Read-ahead, adaptive as the dissertation's 8.4.1 asks: the window grows while a file is
//! read sequentially (doubling up to `max_pages`, as the kernel's on-demand read-ahead
//! does) and falls back to the request itself when an access is not sequential. What a
//! window holds past the read that caused it is read ahead asynchronously: when a read
//! reaches the window's mark, the next window is requested without waiting for it. The
//! mark is where the kernel's `PG_readahead` goes (mm/readahead.c): just past the request
//! in the first window, on the first page of every later one.

use std::ops::Range;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReadaheadParams {
    /// The largest window (`read_ahead_kb` / 4: 128 KiB is 32 pages).
    pub max_pages: u64,
    /// Pages read for a random access (the request's own pages, at least this many).
    pub min_pages: u64,
}

impl Default for ReadaheadParams {
    fn default() -> Self {
        ReadaheadParams {
            max_pages: 32,
            min_pages: 1,
        }
    }
}

/// One open file's read-ahead state.
#[derive(Debug, Clone, Default)]
pub struct Readahead {
    /// Where the last read ended (page).
    prev_end: Option<u64>,
    window: u64,
    /// Reaching this page starts the next window.
    mark: Option<u64>,
    /// Where the next window starts.
    next: u64,
}

impl Readahead {
    fn init_window(req: u64, max: u64) -> u64 {
        // The kernel's get_init_ra_size: small first reads get 4x, larger 2x, up to max.
        let size = req.next_power_of_two();
        if size <= max / 32 {
            size * 4
        } else if size <= max / 4 {
            size * 2
        } else {
            max
        }
    }

    /// A read of pages `pages` that found one of them missing: the pages to read now, which
    /// include the missing ones. `file_pages` bounds everything.
    pub fn on_miss(
        &mut self,
        p: &ReadaheadParams,
        pages: Range<u64>,
        file_pages: u64,
    ) -> Range<u64> {
        let req = pages.end - pages.start;
        let sequential = match self.prev_end {
            Some(e) => pages.start == e || (self.mark.is_some() && pages.start == self.next),
            None => pages.start == 0,
        };
        self.prev_end = Some(pages.end);
        if !sequential || p.max_pages == 0 {
            self.window = 0;
            self.mark = None;
            let n = req.max(p.min_pages);
            return pages.start
                ..(pages.start + n)
                    .min(file_pages)
                    .max(pages.end.min(file_pages));
        }
        self.window = if self.window == 0 {
            Self::init_window(req, p.max_pages)
        } else {
            (self.window * 2).min(p.max_pages)
        }
        .max(req);
        let end = (pages.start + self.window).min(file_pages);
        // What the window holds past the request is its asynchronous part: the next read
        // reaches it and starts the next window (the kernel's `async_size = size - req`).
        self.mark = Some(pages.end).filter(|&m| m < end);
        self.next = end;
        pages.start..end
    }

    /// A read of pages `pages` that found all of them (present or on their way): the next
    /// window to read in the background, if the read reached the mark.
    pub fn on_hit(
        &mut self,
        p: &ReadaheadParams,
        pages: Range<u64>,
        file_pages: u64,
    ) -> Option<Range<u64>> {
        let sequential = self.prev_end.is_some_and(|e| pages.start == e);
        self.prev_end = Some(pages.end);
        if !sequential {
            return None;
        }
        let mark = self.mark?;
        if pages.end <= mark || self.next >= file_pages {
            return None;
        }
        self.window = (self.window * 2).min(p.max_pages).max(1);
        let start = self.next;
        let end = (start + self.window).min(file_pages);
        // A window read ahead is asynchronous all through (`async_size = size`): reading
        // its first page starts the next, so one window is always on its way.
        self.mark = Some(start);
        self.next = end;
        Some(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_reader_gets_a_growing_window_read_ahead() {
        let p = ReadaheadParams::default();
        let mut ra = Readahead::default();
        // 4 KiB reads from the start of a 1000-page file: first 4 pages (4x the request).
        assert_eq!(ra.on_miss(&p, 0..1, 1000), 0..4);
        // The next read reaches the window's asynchronous part (past the first request):
        // the next, doubled window goes out in the background.
        assert_eq!(ra.on_hit(&p, 1..2, 1000), Some(4..12));
        assert_eq!(ra.on_hit(&p, 2..3, 1000), None);
        assert_eq!(ra.on_hit(&p, 3..4, 1000), None);
        // Reading the first page of a window read ahead starts the one after it.
        assert_eq!(ra.on_hit(&p, 4..5, 1000), Some(12..28));
        let mut windows = Vec::new();
        for page in 5..200 {
            if let Some(w) = ra.on_hit(&p, page..page + 1, 1000) {
                windows.push((page, w));
            }
        }
        assert_eq!(
            windows[..3],
            [(12, 28..60), (28, 60..92), (60, 92..124)],
            "doubling up to 128 KiB, one window always ahead"
        );
    }

    #[test]
    fn a_random_reader_reads_only_what_it_asks_for() {
        let p = ReadaheadParams::default();
        let mut ra = Readahead::default();
        assert_eq!(ra.on_miss(&p, 500..502, 1000), 500..502);
        assert_eq!(ra.on_miss(&p, 10..11, 1000), 10..11);
        assert_eq!(ra.on_hit(&p, 700..701, 1000), None);
        // Back to sequential: the window starts over small.
        assert_eq!(ra.on_miss(&p, 701..702, 1000), 701..705);
        // Never past the file's end.
        assert_eq!(ra.on_miss(&p, 999..1000, 1000), 999..1000);
        let big = ReadaheadParams {
            min_pages: 8,
            ..ReadaheadParams::default()
        };
        let mut ra = Readahead::default();
        assert_eq!(ra.on_miss(&big, 300..301, 1000), 300..308, "the minimum");
    }
}
