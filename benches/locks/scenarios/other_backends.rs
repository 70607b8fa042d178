//! What S9, S11 and S12 share: 32 workers over two processes on one backend's lock, and
//! the hand-over between the processes.

use super::s2::{burst, fresh_name};
use super::*;

/// Workers in the two-process scenarios.
pub(super) const WORKERS: usize = 32;

/// Holds of one name by [`WORKERS`] workers over two processes (contender `kind` at `url`):
/// the hand-over to the other process, a burst and steady contention, reported under
/// `label`.
pub(super) async fn two_processes(
    url: &str,
    kind: &str,
    label: &str,
    floor: Duration,
    scale: Scale,
    report: &mut Report,
) {
    let name = fresh_name(kind);
    let mut spans = burst(url, kind, &name, WORKERS, 2, None).await;
    let burst_stats = hold_stats(&mut spans, WORKERS);
    assert_eq!(burst_stats.violations, 0, "two holders at once");
    let across = across_processes(&spans);
    let name = fresh_name(kind);
    let mut spans = burst(url, kind, &name, WORKERS, 2, Some(scale.steady)).await;
    let stats = hold_stats(&mut spans, WORKERS);
    assert_eq!(stats.violations, 0, "two holders at once");
    let scenario = format!("{label} W={WORKERS} 2p");
    report.add(
        &scenario,
        "hand-over to the other process (its release sent → next holder) p50 ÷ floor",
        format!("{} = {:.2} ×", us(across), ratio(across, floor)),
        ratio(across, floor),
    );
    report.add(
        &scenario,
        "burst efficiency / steady efficiency (2 ms holds, 5 ms think) / max÷min per worker",
        format!(
            "{:.2} / {:.2} / {:.2}",
            burst_stats.efficiency, stats.efficiency, stats.fairness
        ),
        stats.efficiency,
    );
}

/// The p50 time from a release being sent to the next holder, for holders of the other
/// process than the releaser's (workers below half are this process's).
pub(super) fn across_processes(spans: &[Span]) -> Duration {
    let mut sorted: Vec<Span> = spans.to_vec();
    sorted.sort_by_key(|span| span.acquired);
    let mut gaps: Vec<Duration> = sorted
        .windows(2)
        .filter(|pair| (pair[0].worker < WORKERS / 2) != (pair[1].worker < WORKERS / 2))
        .map(|pair| Duration::from_nanos(pair[1].acquired.saturating_sub(pair[0].releasing) as u64))
        .collect();
    percentile(&mut gaps, 50.0)
}
