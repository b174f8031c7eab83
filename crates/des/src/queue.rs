//! The event queue and the virtual clock.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Virtual time in nanoseconds since the start of a run.
pub type Nanos = u64;

struct Entry<E> {
    time: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest event must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// Pending events of type `E` and the current virtual time.
pub struct Scheduler<E> {
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Entry<E>>,
    events_run: u64,
}

impl<E> Default for Scheduler<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Scheduler<E> {
    pub fn new() -> Self {
        Scheduler {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            events_run: 0,
        }
    }

    /// The current virtual time: that of the event being handled.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedules `event` at absolute time `time`, which must not be in the past.
    pub fn at(&mut self, time: Nanos, event: E) {
        // Causality: an event in the past would run after events that depend on it.
        assert!(
            time >= self.now,
            "event scheduled at {time} ns, before now ({} ns)",
            self.now
        );
        self.heap.push(Entry {
            time,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// Schedules `event` `delay` nanoseconds from now.
    pub fn after(&mut self, delay: Nanos, event: E) {
        self.at(self.now.saturating_add(delay), event);
    }

    /// Takes the earliest pending event and moves the clock to its time.
    pub fn pop(&mut self) -> Option<E> {
        let e = self.heap.pop()?;
        debug_assert!(e.time >= self.now, "the clock never goes back");
        self.now = e.time;
        self.events_run += 1;
        Some(e.event)
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.time)
    }

    /// Runs `handle` on every event up to and including time `until`; then the clock
    /// stands at `until`. Returns the events run.
    pub fn run_until(&mut self, until: Nanos, mut handle: impl FnMut(&mut Self, E)) -> u64 {
        let before = self.events_run;
        while self.peek_time().is_some_and(|t| t <= until) {
            let Some(event) = self.pop() else { break };
            handle(self, event);
        }
        self.now = self.now.max(until);
        self.events_run - before
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    /// Events taken from the queue since the start.
    pub fn events_run(&self) -> u64 {
        self.events_run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_the_order_they_were_scheduled() {
        let mut s = Scheduler::new();
        s.at(30, "c");
        s.at(10, "a1");
        s.at(20, "b");
        s.at(10, "a2");
        s.at(10, "a3");
        let mut out = Vec::new();
        while let Some(e) = s.pop() {
            out.push((s.now(), e));
        }
        assert_eq!(
            out,
            [(10, "a1"), (10, "a2"), (10, "a3"), (20, "b"), (30, "c")]
        );
        assert_eq!(s.events_run(), 5);
    }

    #[test]
    fn handlers_schedule_more_and_run_until_stops_at_the_horizon() {
        let mut s = Scheduler::new();
        s.at(0, 0u32);
        // Each event schedules the next 7 ns later.
        let run = s.run_until(100, |s, n| s.after(7, n + 1));
        assert_eq!(run, 15, "events at 0, 7, ..., 98");
        assert_eq!(s.now(), 100);
        assert_eq!(s.peek_time(), Some(105));
        assert_eq!(s.pending(), 1);
    }

    #[test]
    #[should_panic(expected = "before now")]
    fn scheduling_into_the_past_is_refused() {
        let mut s = Scheduler::new();
        s.at(50, ());
        s.pop();
        s.at(10, ());
    }
}
