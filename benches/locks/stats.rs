//! Percentiles, spans of lock holds, and the figures derived from them.

use std::time::Duration;

/// The p-th percentile (0..=100) of `values` (sorted here).
pub fn percentile(values: &mut [Duration], p: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

/// One hold of the lock: times in nanoseconds on a clock shared by all processes.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub worker: usize,
    pub asked: u128,
    pub acquired: u128,
    /// When the release was sent (the hold ends; nobody may have acquired before).
    pub releasing: u128,
    /// When the release returned.
    pub released: u128,
}

impl Span {
    pub fn to_line(self) -> String {
        format!(
            "span {} {} {} {} {}",
            self.worker, self.asked, self.acquired, self.releasing, self.released
        )
    }

    pub fn from_line(line: &str) -> Option<Span> {
        let mut parts = line
            .strip_prefix("span ")?
            .split(' ')
            .map(|p| p.parse::<u128>());
        Some(Span {
            worker: parts.next()?.ok()? as usize,
            asked: parts.next()?.ok()?,
            acquired: parts.next()?.ok()?,
            releasing: parts.next()?.ok()?,
            released: parts.next()?.ok()?,
        })
    }
}

/// What a set of holds of one lock shows.
#[derive(Clone, Debug, Default)]
pub struct HoldStats {
    pub acquisitions: usize,
    pub makespan: Duration,
    pub efficiency: f64,
    pub gaps: Vec<Duration>,
    pub gap_p50: Duration,
    pub gap_p99: Duration,
    /// Mean hold (acquire returned → release called).
    pub hold_mean: Duration,
    /// Release latency, p50 (release called → returned).
    pub release_p50: Duration,
    /// Time the lock was idle between consecutive holds, p50 (release called → next
    /// acquire returned): what efficiency loses per hand-over.
    pub idle_p50: Duration,
    pub gap_max: Duration,
    pub max_wait: Duration,
    pub violations: usize,
    /// Most / fewest acquisitions of one worker.
    pub fairness: f64,
    pub min_per_worker: usize,
}

fn ns(d: u128) -> Duration {
    Duration::from_nanos(d.min(u64::MAX as u128) as u64)
}

pub fn hold_stats(spans: &mut [Span], workers: usize) -> HoldStats {
    spans.sort_by_key(|s| s.acquired);
    let mut stats = HoldStats {
        acquisitions: spans.len(),
        ..Default::default()
    };
    if spans.is_empty() {
        return stats;
    }
    let start = spans.iter().map(|s| s.asked).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.released).max().unwrap_or(0);
    stats.makespan = ns(end - start);
    let held: u128 = spans.iter().map(|s| s.releasing - s.acquired).sum();
    stats.efficiency = held as f64 / (end - start).max(1) as f64;
    stats.hold_mean = ns(held / spans.len() as u128);
    let mut releases: Vec<Duration> = spans.iter().map(|s| ns(s.released - s.releasing)).collect();
    stats.release_p50 = percentile(&mut releases, 50.0);
    let mut idle: Vec<Duration> = spans
        .windows(2)
        .map(|pair| ns(pair[1].acquired.saturating_sub(pair[0].releasing)))
        .collect();
    stats.idle_p50 = percentile(&mut idle, 50.0);
    for pair in spans.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if next.acquired < prev.releasing {
            stats.violations += 1;
        } else {
            // Across processes the next holder may return before the release reply
            // reaches the previous one: that gap is zero.
            stats
                .gaps
                .push(ns(next.acquired.saturating_sub(prev.released)));
        }
    }
    stats.max_wait = spans
        .iter()
        .map(|s| ns(s.acquired - s.asked))
        .max()
        .unwrap_or_default();
    let mut gaps = stats.gaps.clone();
    stats.gap_p50 = percentile(&mut gaps, 50.0);
    stats.gap_p99 = percentile(&mut gaps, 99.0);
    stats.gap_max = gaps.last().copied().unwrap_or_default();
    let mut per_worker = vec![0usize; workers];
    for span in spans.iter() {
        if let Some(count) = per_worker.get_mut(span.worker) {
            *count += 1;
        }
    }
    let (most, fewest) = (
        per_worker.iter().copied().max().unwrap_or(0),
        per_worker.iter().copied().min().unwrap_or(0),
    );
    stats.min_per_worker = fewest;
    stats.fairness = if fewest == 0 {
        f64::INFINITY
    } else {
        most as f64 / fewest as f64
    };
    stats
}

/// Microseconds with one decimal (nanoseconds under 1 µs), for tables.
pub fn us(d: Duration) -> String {
    if d < Duration::from_micros(1) {
        format!("{} ns", d.as_nanos())
    } else {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
