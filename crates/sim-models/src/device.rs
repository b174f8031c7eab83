//! Device service times. A device serves one request after another (a disk) or several at
//! once (an SSD's channels) and says when each completes.

use des::{MILLISECOND, Nanos, SECOND, Stream};
use rand::RngExt;
use serde::Deserialize;

use crate::{Op, Request, SECTOR_BYTES};

/// Longest time one device parameter may stand for (a latency, a seek, a lookup): a
/// minute. Slowest and fastest rate: 1 KB/s and 1 PB/s. Within these a run's virtual clock
/// cannot overflow.
pub const DEVICE_TIME_US_MAX: f64 = 60e6;
pub const DEVICE_MB_S_MIN: f64 = 1e-3;
pub const DEVICE_MB_S_MAX: f64 = 1e9;

/// `us` within 0 and [`DEVICE_TIME_US_MAX`], else why not, naming `name`.
pub fn check_us(name: &str, us: f64) -> Result<(), String> {
    if (0.0..=DEVICE_TIME_US_MAX).contains(&us) {
        Ok(())
    } else {
        Err(format!(
            "{name} must be between 0 and {DEVICE_TIME_US_MAX} us (a minute), not {us}"
        ))
    }
}

/// `mb_s` within [`DEVICE_MB_S_MIN`] and [`DEVICE_MB_S_MAX`], else why not, naming `name`.
pub fn check_mb_s(name: &str, mb_s: f64) -> Result<(), String> {
    if (DEVICE_MB_S_MIN..=DEVICE_MB_S_MAX).contains(&mb_s) {
        Ok(())
    } else {
        Err(format!(
            "{name} must be between {DEVICE_MB_S_MIN} and {DEVICE_MB_S_MAX} MB/s, not {mb_s}"
        ))
    }
}

pub trait Device {
    /// Requests it can work on at once.
    fn parallelism(&self) -> u32;
    /// Starts `req` at `now` and returns when it completes; the device's state (head
    /// position, busy bus) moves on.
    fn start(&mut self, now: Nanos, req: &Request, rng: &mut Stream) -> Nanos;
    fn capacity_sectors(&self) -> u64;
    /// How long a path all requests share (an SSD's transfer path) has been busy: a
    /// device can be saturated there with most of its channels idle.
    fn shared_busy_ns(&self) -> Nanos {
        0
    }
}

/// A spinning disk (defaults: a 7200 rpm, 1 TB SATA drive).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HddParams {
    pub capacity_bytes: u64,
    pub rpm: u32,
    /// Seek across one track, across a third of the disk (the mean of random seeks), and
    /// across all of it: the seek curve goes through these (Ruemmler and Wilkes's
    /// square-root-then-linear shape, fitted as `a + b sqrt(d) + c d`).
    pub track_to_track_ms: f64,
    pub average_seek_ms: f64,
    pub full_stroke_ms: f64,
    /// Media rate at the outer and the inner edge (zoned recording, linear in between).
    pub outer_mb_s: f64,
    pub inner_mb_s: f64,
    /// Command overhead per request.
    pub overhead_us: f64,
}

impl Default for HddParams {
    fn default() -> Self {
        HddParams {
            capacity_bytes: 1_000_000_000_000,
            rpm: 7200,
            track_to_track_ms: 0.8,
            average_seek_ms: 8.5,
            full_stroke_ms: 16.0,
            outer_mb_s: 200.0,
            inner_mb_s: 100.0,
            overhead_us: 50.0,
        }
    }
}

pub struct Hdd {
    p: HddParams,
    capacity_sectors: u64,
    /// Seek curve `a + b sqrt(d) + c d` in ms, `d` the fraction of the full stroke.
    seek: (f64, f64, f64),
    rotation_ns: f64,
    /// Where the last request ended: a request starting there streams on without a seek
    /// or a rotational delay.
    head: u64,
}

impl Hdd {
    pub fn new(p: HddParams) -> Result<Hdd, String> {
        if p.capacity_bytes < SECTOR_BYTES || p.rpm == 0 {
            return Err("an hdd needs a capacity and an rpm".into());
        }
        if !(0.0 < p.track_to_track_ms
            && p.track_to_track_ms < p.average_seek_ms
            && p.average_seek_ms < p.full_stroke_ms)
        {
            return Err("seek times must rise: track_to_track < average < full_stroke".into());
        }
        if !(p.inner_mb_s > 0.0 && p.outer_mb_s >= p.inner_mb_s) {
            return Err("media rates must be positive, outer at least inner".into());
        }
        check_us("full_stroke_ms", p.full_stroke_ms * 1e3)?;
        check_us("overhead_us", p.overhead_us)?;
        check_mb_s("inner_mb_s", p.inner_mb_s)?;
        check_mb_s("outer_mb_s", p.outer_mb_s)?;
        // Through (0, t2t), (1/3, average), (1, full).
        let a = p.track_to_track_ms;
        let third = 1.0_f64 / 3.0;
        let b = ((p.average_seek_ms - a) - (p.full_stroke_ms - a) * third) / (third.sqrt() - third);
        let c = p.full_stroke_ms - a - b;
        Ok(Hdd {
            capacity_sectors: p.capacity_bytes / SECTOR_BYTES,
            seek: (a, b, c),
            rotation_ns: 60.0 * SECOND as f64 / f64::from(p.rpm),
            head: 0,
            p,
        })
    }

    /// Seek time in ns from the head's sector to `to`.
    pub fn seek_ns(&self, from: u64, to: u64) -> f64 {
        if from == to {
            return 0.0;
        }
        let d = from.abs_diff(to) as f64 / self.capacity_sectors as f64;
        let (a, b, c) = self.seek;
        (a + b * d.sqrt() + c * d) * MILLISECOND as f64
    }

    /// Media transfer time of `sectors` at `sector` (zoned: faster at the outer edge).
    pub fn transfer_ns(&self, sector: u64, sectors: u64) -> f64 {
        let x = sector as f64 / self.capacity_sectors as f64;
        let mb_s = self.p.outer_mb_s - (self.p.outer_mb_s - self.p.inner_mb_s) * x;
        (sectors * SECTOR_BYTES) as f64 / (mb_s * 1e6) * SECOND as f64
    }
}

impl Device for Hdd {
    fn parallelism(&self) -> u32 {
        1
    }

    fn start(&mut self, now: Nanos, req: &Request, rng: &mut Stream) -> Nanos {
        // This model has no volatile write cache: a flush has nothing to wait for.
        if req.flush {
            return now;
        }
        let mut t = self.p.overhead_us * 1e3;
        if req.sector != self.head {
            t += self.seek_ns(self.head, req.sector);
            // The wanted sector is anywhere on the track when the seek ends.
            t += rng.random::<f64>() * self.rotation_ns;
        }
        t += self.transfer_ns(req.sector, req.sectors);
        self.head = req.end();
        now + t.round() as Nanos
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
}

/// A flash SSD: a fixed latency per request, `channels` requests in their latency phase at
/// once, and one shared transfer path at the device's bandwidth. Small random requests
/// then scale with queue depth up to `channels / latency`, large ones reach the bandwidth.
/// One request alone moves its data no faster than one channel does
/// (`request_read_mb_s`, `request_write_mb_s`): a single large read takes longer than
/// its bytes at the bandwidth, which only several requests in flight reach together.
///
/// A translation map (an FTL's cached mapping table, as DFTL models it, or a virtual
/// disk's map on its host): the device keeps the mapping of the last
/// `map_cache_bytes / map_region_bytes` regions it touched; a request into any other
/// region first looks it up, one lookup at a time, `map_miss_us` each. Random requests
/// over a span larger than the cache then pay for a lookup most times, requests sorted
/// by sector once per region: scattered writes get slower as their span grows.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsdParams {
    pub capacity_bytes: u64,
    pub read_latency_us: f64,
    pub write_latency_us: f64,
    pub read_mb_s: f64,
    pub write_mb_s: f64,
    pub channels: u32,
    /// A cache flush: the volatile write cache's contents reach stable media.
    #[serde(default)]
    pub flush_latency_us: f64,
    /// One request's own transfer rate; 0 is the device's bandwidth.
    #[serde(default)]
    pub request_read_mb_s: f64,
    #[serde(default)]
    pub request_write_mb_s: f64,
    /// The translation map: bytes one cached entry maps (0: no map is modelled), bytes
    /// all cached entries map, and one lookup's time.
    #[serde(default)]
    pub map_region_bytes: u64,
    #[serde(default)]
    pub map_cache_bytes: u64,
    #[serde(default)]
    pub map_miss_us: f64,
}

impl Default for SsdParams {
    fn default() -> Self {
        SsdParams {
            capacity_bytes: 500_000_000_000,
            read_latency_us: 80.0,
            write_latency_us: 25.0,
            read_mb_s: 520.0,
            write_mb_s: 480.0,
            channels: 8,
            flush_latency_us: 0.0,
            request_read_mb_s: 0.0,
            request_write_mb_s: 0.0,
            map_region_bytes: 0,
            map_cache_bytes: 0,
            map_miss_us: 0.0,
        }
    }
}

/// Most regions a translation map may cache (at 4 KiB regions, 64 GiB mapped).
pub const MAP_REGIONS_MAX: u64 = 1 << 24;

pub struct Ssd {
    p: SsdParams,
    /// When the shared transfer path is next free, and how long it has been busy.
    bus_free: Nanos,
    bus_busy: Nanos,
    /// The regions the translation map holds, least recently used first; when its
    /// lookups are next free, and how long they have been busy.
    mapped: hashlink::LruCache<u64, ()>,
    map_sectors: u64,
    map_free: Nanos,
    map_busy: Nanos,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Result<Ssd, String> {
        if p.capacity_bytes < SECTOR_BYTES || p.channels == 0 {
            return Err("an ssd needs a capacity and at least one channel".into());
        }
        check_mb_s("read_mb_s", p.read_mb_s)?;
        check_mb_s("write_mb_s", p.write_mb_s)?;
        for (name, rate) in [
            ("request_read_mb_s", p.request_read_mb_s),
            ("request_write_mb_s", p.request_write_mb_s),
        ] {
            // 0: the bandwidth.
            if rate != 0.0 {
                check_mb_s(name, rate)?;
            }
        }
        check_us("read_latency_us", p.read_latency_us)?;
        check_us("write_latency_us", p.write_latency_us)?;
        check_us("flush_latency_us", p.flush_latency_us)?;
        check_us("map_miss_us", p.map_miss_us)?;
        let regions = if p.map_region_bytes == 0 {
            0
        } else {
            if !p.map_region_bytes.is_multiple_of(SECTOR_BYTES) {
                return Err("map_region_bytes must be a whole number of 512-byte sectors".into());
            }
            let regions = p.map_cache_bytes / p.map_region_bytes;
            if regions > MAP_REGIONS_MAX {
                return Err(format!(
                    "the translation map would cache {regions} regions; at most {MAP_REGIONS_MAX}"
                ));
            }
            regions
        };
        Ok(Ssd {
            mapped: hashlink::LruCache::new(regions.max(1) as usize),
            map_sectors: p.map_region_bytes / SECTOR_BYTES,
            map_free: 0,
            map_busy: 0,
            p,
            bus_free: 0,
            bus_busy: 0,
        })
    }

    /// When `req`'s regions are all mapped, having come in at `now`: each region the map
    /// does not hold waits for the lookups before it.
    fn mapped_at(&mut self, now: Nanos, req: &Request) -> Nanos {
        if self.map_sectors == 0 || req.sectors == 0 {
            return now;
        }
        let miss = (self.p.map_miss_us * 1e3).round() as Nanos;
        let cached = self.p.map_cache_bytes >= self.p.map_region_bytes;
        let mut at = now;
        for region in req.sector / self.map_sectors..=(req.end() - 1) / self.map_sectors {
            if cached && self.mapped.get(&region).is_some() {
                continue;
            }
            at = at.max(self.map_free) + miss;
            self.map_free = at;
            self.map_busy += miss;
            if cached {
                self.mapped.insert(region, ());
            }
        }
        at
    }
}

impl Device for Ssd {
    fn parallelism(&self) -> u32 {
        self.p.channels
    }

    fn start(&mut self, now: Nanos, req: &Request, _rng: &mut Stream) -> Nanos {
        if req.flush {
            // Waits for the transfers already started, then for the media.
            return now.max(self.bus_free) + (self.p.flush_latency_us * 1e3).round() as Nanos;
        }
        let (latency_us, mb_s, request_mb_s) = match req.op {
            Op::Read => (
                self.p.read_latency_us,
                self.p.read_mb_s,
                self.p.request_read_mb_s,
            ),
            Op::Write => (
                self.p.write_latency_us,
                self.p.write_mb_s,
                self.p.request_write_mb_s,
            ),
        };
        let ns = |rate: f64| (req.bytes() as f64 / (rate * 1e6) * SECOND as f64).round() as Nanos;
        let ready = self.mapped_at(now, req) + (latency_us * 1e3).round() as Nanos;
        let begin = ready.max(self.bus_free);
        self.bus_free = begin + ns(mb_s);
        self.bus_busy += ns(mb_s);
        // Its own channel's pace, or the shared path's when that is the slower.
        let own = if request_mb_s > 0.0 {
            ready + ns(request_mb_s)
        } else {
            ready
        };
        own.max(self.bus_free)
    }

    fn capacity_sectors(&self) -> u64 {
        self.p.capacity_bytes / SECTOR_BYTES
    }

    /// The busier of its two shared paths: the transfer and the map's lookups.
    fn shared_busy_ns(&self) -> Nanos {
        self.bus_busy.max(self.map_busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: Op, sector: u64, sectors: u64) -> Request {
        Request::new(0, op, sector, sectors, 0)
    }

    #[test]
    fn the_seek_curve_goes_through_its_three_points_and_rises() {
        let d = Hdd::new(HddParams::default()).unwrap();
        let cap = d.capacity_sectors();
        let ms = |to: u64| d.seek_ns(0, to) / 1e6;
        assert!((ms(1) - 0.8).abs() < 0.01);
        assert!((ms(cap / 3) - 8.5).abs() < 0.01, "{}", ms(cap / 3));
        assert!((ms(cap) - 16.0).abs() < 0.01);
        let mut last = 0.0;
        for i in 1..=100 {
            let t = ms(cap / 100 * i);
            assert!(t > last, "monotonic");
            last = t;
        }
        assert_eq!(d.seek_ns(42, 42), 0.0);
    }

    #[test]
    fn sequential_requests_stream_at_the_media_rate_random_ones_pay_seek_and_rotation() {
        let mut d = Hdd::new(HddParams::default()).unwrap();
        let mut rng = des::stream(1, 0);
        // 100 MiB in 1 MiB requests from the outer edge: about 200 MB/s.
        let mut now = 0;
        for i in 0..100u64 {
            now = d.start(now, &req(Op::Read, i * 2048, 2048), &mut rng);
        }
        let mb_s = 100.0 * 1048576.0 / (now as f64 / 1e9) / 1e6;
        // The first request seeks from sector 0 to 0 (no seek): all streaming.
        assert!((mb_s - 199.0).abs() < 3.0, "{mb_s}");
        // Random 4 KiB reads over the whole disk: seek (8.5 ms mean) plus half a rotation
        // (4.17 ms) plus overhead: about 79 per second.
        let mut d = Hdd::new(HddParams::default()).unwrap();
        let cap = d.capacity_sectors();
        let mut now = 0;
        use rand::RngExt;
        let n = 20_000;
        for _ in 0..n {
            let s = rng.random_range(0..cap - 8);
            now = d.start(now, &req(Op::Read, s, 8), &mut rng);
        }
        let iops = n as f64 / (now as f64 / 1e9);
        assert!((70.0..90.0).contains(&iops), "{iops} IOPS");
    }

    #[test]
    fn ssd_small_reads_scale_with_depth_and_large_ones_hit_the_bandwidth() {
        let mut rng = des::stream(1, 0);
        // Queue depth 1: one 4 KiB read every latency + transfer.
        let mut s = Ssd::new(SsdParams::default()).unwrap();
        let t = s.start(0, &req(Op::Read, 0, 8), &mut rng);
        assert_eq!(t, 80_000 + 7_877);
        // Eight at once: they overlap their latencies and queue on the transfer path.
        let mut s = Ssd::new(SsdParams::default()).unwrap();
        let ends: Vec<Nanos> = (0..8)
            .map(|i| s.start(0, &req(Op::Read, i * 8, 8), &mut rng))
            .collect();
        assert_eq!(ends[7], 80_000 + 8 * 7_877);
        // 1 GB in 1 MiB writes back to back: the write bandwidth.
        let mut s = Ssd::new(SsdParams::default()).unwrap();
        let mut now = 0;
        for i in 0..954u64 {
            now = s.start(now, &req(Op::Write, i * 2048, 2048), &mut rng);
        }
        let mb_s = 954.0 * 1048576.0 / (now as f64 / 1e9) / 1e6;
        assert!(mb_s < 480.0 && mb_s > 440.0, "{mb_s}");
    }

    #[test]
    fn one_request_moves_at_its_channel_s_rate_several_share_the_bandwidth() {
        let mut rng = des::stream(1, 0);
        let p = SsdParams {
            read_latency_us: 50.0,
            read_mb_s: 3000.0,
            request_read_mb_s: 1000.0,
            ..SsdParams::default()
        };
        // 1,024,000 bytes alone: its latency and 1.024 ms at the channel's 1000 MB/s.
        let mut s = Ssd::new(p.clone()).unwrap();
        let mb = 2000;
        assert_eq!(
            s.start(0, &req(Op::Read, 0, mb), &mut rng),
            50_000 + 1_024_000
        );
        // Six at once: each channel needs 1.024 ms, the shared path a third of that each: the last
        // ends when the path has moved them all, at the device's bandwidth.
        let mut s = Ssd::new(p).unwrap();
        let ends: Vec<Nanos> = (0..6)
            .map(|i| s.start(0, &req(Op::Read, i * mb, mb), &mut rng))
            .collect();
        assert_eq!(ends[0], 50_000 + 1_024_000);
        assert_eq!(ends[5], 50_000 + 6 * 341_333);
        assert!(ends.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_translation_map_charges_lookups_for_regions_it_does_not_hold() {
        use rand::RngExt;
        let mut rng = des::stream(1, 0);
        let p = SsdParams {
            write_latency_us: 10.0,
            channels: 1,
            map_region_bytes: 2 << 20,
            map_cache_bytes: 64 << 20,
            map_miss_us: 20.0,
            ..SsdParams::default()
        };
        let region = (2 << 20) / SECTOR_BYTES;
        // Random 4 KiB writes one after another: `span` bytes, 4000 of them, after 4000
        // that warm the map up. The time per write beyond the no-lookup one is the
        // lookups' share.
        let lookups_per_write = |span: u64, rng: &mut Stream| {
            let mut s = Ssd::new(p.clone()).unwrap();
            let sectors = span / SECTOR_BYTES - 8;
            let mut now = 0;
            for _ in 0..4000 {
                now = s.start(now, &req(Op::Write, rng.random_range(0..sectors), 8), rng);
            }
            let (from, busy) = (now, s.map_busy);
            for _ in 0..4000 {
                now = s.start(now, &req(Op::Write, rng.random_range(0..sectors), 8), rng);
            }
            let per_write = (now - from) as f64 / 4000.0 - 10_000.0 - 8_533.0;
            assert!((per_write - (s.map_busy - busy) as f64 / 4000.0).abs() < 1.0);
            per_write / 20_000.0
        };
        // Within the cache: no lookups once warm. Sixteen times the cache: all but a
        // sixteenth miss (LRU under uniform random access).
        assert!(lookups_per_write(32 << 20, &mut rng) < 0.001);
        let far = lookups_per_write(1 << 30, &mut rng);
        assert!((far - 15.0 / 16.0).abs() < 0.02, "{far}");
        // Writes sorted by sector 512 KiB apart over 1 GiB: one lookup per region, a
        // quarter of the writes.
        let mut s = Ssd::new(p.clone()).unwrap();
        let mut now = 0;
        for i in 0..2048u64 {
            now = s.start(now, &req(Op::Write, i * 1024, 16), &mut rng);
        }
        assert_eq!(s.map_busy, 512 * 20_000);
        // A request across a region boundary looks both regions up.
        let mut s = Ssd::new(p.clone()).unwrap();
        assert_eq!(
            s.start(0, &req(Op::Write, region - 8, 16), &mut rng),
            2 * 20_000 + 10_000 + 17_067
        );
        // No map, no lookups.
        let mut s = Ssd::new(SsdParams {
            map_region_bytes: 0,
            ..p
        })
        .unwrap();
        assert_eq!(s.start(0, &req(Op::Write, 0, 8), &mut rng), 10_000 + 8_533);
    }

    #[test]
    fn nonsense_parameters_are_refused() {
        let bad = HddParams {
            average_seek_ms: 20.0,
            ..HddParams::default()
        };
        assert!(Hdd::new(bad).is_err());
        assert!(
            Hdd::new(HddParams {
                rpm: 0,
                ..HddParams::default()
            })
            .is_err()
        );
        assert!(
            Ssd::new(SsdParams {
                channels: 0,
                ..SsdParams::default()
            })
            .is_err()
        );
        assert!(
            Ssd::new(SsdParams {
                read_mb_s: 0.0,
                ..SsdParams::default()
            })
            .is_err()
        );
        for bad in [
            SsdParams {
                read_latency_us: f64::NAN,
                ..SsdParams::default()
            },
            SsdParams {
                flush_latency_us: 1e300,
                ..SsdParams::default()
            },
            SsdParams {
                request_write_mb_s: -1.0,
                ..SsdParams::default()
            },
            SsdParams {
                write_mb_s: f64::INFINITY,
                ..SsdParams::default()
            },
        ] {
            assert!(Ssd::new(bad).is_err());
        }
        for (region, cache) in [(1000, 1 << 20), (4096, 1 << 40)] {
            let bad = SsdParams {
                map_region_bytes: region,
                map_cache_bytes: cache,
                map_miss_us: 10.0,
                ..SsdParams::default()
            };
            assert!(Ssd::new(bad).is_err(), "{region} {cache}");
        }
    }
}
