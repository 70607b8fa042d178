//! S2b with the fair lock: 32 workers looping with think time over two processes. The fair
//! lock lets them in by arrival across both processes (max ÷ min acquisitions per worker,
//! beside the plain lock's in the same run), hands over within two EVAL round trips (the
//! release, then the head's acquisition), and its Redis commands per acquisition stay flat
//! from 8 to 128 workers.

use super::s2::measured;
use super::*;

const WORKERS: usize = 32;

/// S2b, fair lock against the plain lock (same run), then the fair lock at W = 8 and 128.
pub(super) async fn s2b_fair(
    url: &str,
    admin: &Client,
    floor: Duration,
    scale: Scale,
    report: &mut Report,
) {
    eprintln!("S2b fair lock…");
    let scenario = "S2b fair 2p";
    let (plain, _, _) = measured(url, admin, "tower", WORKERS, 2, Some(scale.steady)).await;
    let (fair, fair_per, _) = measured(url, admin, "fair", WORKERS, 2, Some(scale.steady)).await;
    report.violations(scenario, "exclusion violations", fair.violations);
    let starving = fair.min_per_worker == 0;
    report.goal(
        scenario,
        "max/min acquisitions per worker across both processes",
        format!(
            "{:.2} (plain lock, same run: {:.2})",
            fair.fairness, plain.fairness
        ),
        fair.fairness,
        "≤ 1.2, none starves",
        fair.fairness <= 1.2 && !starving,
    );
    let r = ratio(fair.gap_p50, floor);
    report.goal(
        scenario,
        "hand-over p50 ÷ EVAL floor",
        format!("{} = {r:.2} ×", us(fair.gap_p50)),
        r,
        "≤ 2 ×",
        r <= 2.0,
    );
    let seconds = fair.makespan.as_secs_f64().max(1e-9);
    let plain_seconds = plain.makespan.as_secs_f64().max(1e-9);
    report.add(
        scenario,
        "acquisitions/s, fair / plain",
        format!(
            "{:.0} / {:.0}",
            fair.acquisitions as f64 / seconds,
            plain.acquisitions as f64 / plain_seconds
        ),
        fair.acquisitions as f64 / seconds,
    );
    let mut per_at = vec![(WORKERS, fair_per)];
    for workers in [8, 128] {
        let (_, per, _) = measured(url, admin, "fair", workers, 2, Some(scale.steady)).await;
        per_at.push((workers, per));
    }
    per_at.sort_by_key(|(workers, _)| *workers);
    let shown: Vec<String> = per_at
        .iter()
        .map(|(workers, per)| format!("W={workers}: {per:.2}"))
        .collect();
    let r = per_at[2].1 / per_at[0].1.max(1e-9);
    report.goal(
        scenario,
        "commands / acquisition, W=128 ÷ W=8",
        format!("{r:.2} ({})", shown.join(", ")),
        r,
        "≤ 1.5",
        r <= 1.5,
    );
}
