//! S2 and S2b: bursts of duplicates and steady contention, against the polling baselines.

use super::*;

/// Runs `workload` split over `processes` (1 or 2) and returns every hold.
pub(super) async fn burst(
    url: &str,
    kind: &str,
    name: &str,
    workers: usize,
    processes: usize,
    steady: Option<Duration>,
) -> Vec<Span> {
    let start_ns = now_ns() + Duration::from_millis(400).as_nanos();
    let local_workers = workers / processes;
    let mut child = None;
    if processes == 2 {
        let exe = std::env::current_exe().expect("own executable");
        let process = Command::new(exe)
            .args([
                "--worker",
                kind,
                url,
                name,
                &(workers - local_workers).to_string(),
                &local_workers.to_string(),
                &HOLD.as_micros().to_string(),
                &THINK.as_micros().to_string(),
                &steady.map_or(0, |d| d.as_millis()).to_string(),
                &start_ns.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the second process");
        child = Some(process);
    }
    let contender = crate::contender(kind, url).await;
    let workload = Workload {
        workers: local_workers,
        first_worker: 0,
        hold: HOLD,
        steady: steady.map(|d| (THINK, d)),
        start_ns,
    };
    let mut spans = contenders::run(&contender, name, workload).await;
    if let Some(child) = child {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .expect("second process output");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("done"), "the second process failed: {text}");
        spans.extend(text.lines().filter_map(Span::from_line));
    }
    spans
}

static RUN: AtomicU64 = AtomicU64::new(0);

pub(super) fn fresh_name(label: &str) -> String {
    format!(
        "bench:{label}:{}:{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

pub(super) async fn measured(
    url: &str,
    admin: &Client,
    kind: &str,
    workers: usize,
    processes: usize,
    steady: Option<Duration>,
) -> (HoldStats, f64, Vec<Span>) {
    let before = client_commands(admin, kind).await;
    let mut spans = burst(url, kind, &fresh_name(kind), workers, processes, steady).await;
    let commands = client_commands(admin, kind).await - before;
    let stats = hold_stats(&mut spans, workers);
    let per = commands as f64 / stats.acquisitions.max(1) as f64;
    (stats, per, spans)
}

/// S2: bursts of W duplicates; tower-lock against the polling baselines.
pub(super) async fn s2(
    url: &str,
    admin: &Client,
    floor: Duration,
    report: &mut Report,
) -> Vec<(String, Vec<Duration>)> {
    eprintln!("S2 bursts…");
    let mut chart = Vec::new();
    let mut commands_at = std::collections::HashMap::new();
    for workers in [8, 32, 128] {
        for processes in [1, 2] {
            let scenario = format!("S2 W={workers} {processes}p");
            let mut makespans = Vec::new();
            for kind in ["tower", "poll100", "poll10"] {
                let (stats, per, _) = measured(url, admin, kind, workers, processes, None).await;
                assert_eq!(
                    stats.acquisitions, workers,
                    "{kind}: every worker acquires once"
                );
                makespans.push((kind, stats.makespan));
                if kind == "tower" {
                    commands_at.insert((workers, processes), per);
                    let eff_goal = workers == 32 && processes == 2;
                    if eff_goal {
                        report.goal(
                            &scenario,
                            "tower efficiency",
                            format!("{:.2}", stats.efficiency),
                            stats.efficiency,
                            "≥ 0.90",
                            stats.efficiency >= 0.90,
                        );
                        let r = ratio(stats.gap_p50, floor);
                        report.goal(
                            &scenario,
                            "tower hand-over p50 ÷ EVAL floor",
                            format!("{} = {r:.2} ×", us(stats.gap_p50)),
                            r,
                            "≤ 1.5 ×",
                            r <= 1.5,
                        );
                        chart.push(("tower-lock".to_owned(), stats.gaps.clone()));
                        // The same run without hand-overs: what they are worth here.
                        let (free, _, _) =
                            measured(url, admin, "tower-free", workers, processes, None).await;
                        report.add(
                            &scenario,
                            "tower efficiency without hand-over (limit 0) / idle between holds p50",
                            format!("{:.2} / {}", free.efficiency, us(free.idle_p50)),
                            free.efficiency,
                        );
                    } else {
                        report.add(
                            &scenario,
                            "tower efficiency",
                            format!("{:.2}", stats.efficiency),
                            stats.efficiency,
                        );
                        report.add(
                            &scenario,
                            "tower hand-over p50",
                            us(stats.gap_p50),
                            stats.gap_p50.as_secs_f64(),
                        );
                    }
                    report.add(
                        &scenario,
                        "tower hand-over p99 / max",
                        format!("{} / {}", us(stats.gap_p99), us(stats.gap_max)),
                        stats.gap_p99.as_secs_f64(),
                    );
                    report.add(
                        &scenario,
                        "tower mean hold / release p50 / idle between holds p50",
                        format!(
                            "{} / {} / {}",
                            us(stats.hold_mean),
                            us(stats.release_p50),
                            us(stats.idle_p50)
                        ),
                        stats.idle_p50.as_secs_f64(),
                    );
                    report.add(
                        &scenario,
                        "tower makespan / max wait",
                        format!("{} / {}", ms(stats.makespan), ms(stats.max_wait)),
                        stats.makespan.as_secs_f64(),
                    );
                    report.violations(&scenario, "tower exclusion violations", stats.violations);
                    report.add(
                        &scenario,
                        "tower commands / acquisition",
                        format!("{per:.2}"),
                        per,
                    );
                } else {
                    if workers == 32 && processes == 2 {
                        chart.push((
                            format!("polling every {} ms", kind.trim_start_matches("poll")),
                            stats.gaps.clone(),
                        ));
                    }
                    report.add(
                        &scenario,
                        &format!("{kind} efficiency / hand-over p50"),
                        format!("{:.2} / {}", stats.efficiency, us(stats.gap_p50)),
                        stats.efficiency,
                    );
                    report.add(
                        &scenario,
                        &format!("{kind} commands / acquisition"),
                        format!("{per:.2}"),
                        per,
                    );
                    report.violations(
                        &scenario,
                        &format!("{kind} exclusion violations"),
                        stats.violations,
                    );
                }
            }
            let tower = makespans[0].1;
            for (kind, makespan) in &makespans[1..] {
                let r = ratio(tower, *makespan);
                report.add(
                    &scenario,
                    &format!("makespan tower ÷ {kind}"),
                    format!("{r:.2}"),
                    r,
                );
            }
        }
    }
    for processes in [1, 2] {
        let r = commands_at[&(128, processes)] / commands_at[&(8, processes)];
        report.goal(
            &format!("S2 {processes}p"),
            "tower commands/acq W=128 ÷ W=8",
            format!("{r:.2}"),
            r,
            "≤ 1.5",
            r <= 1.5,
        );
    }
    chart
}

/// S2b's workers in all; with two processes, each runs half of them.
const STEADY_WORKERS: usize = 32;
const HALF: usize = STEADY_WORKERS / 2;

/// S2b: steady contention, 32 workers looping.
pub(super) async fn s2b(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S2b steady contention…");
    // Across two processes, with and without runs of hand-overs within a process (same
    // run): what fairness between processes costs.
    let mut across = Vec::new();
    for (kind, processes) in [("tower", 1), ("tower", 2), ("tower-free", 2), ("memory", 1)] {
        let scenario = format!("S2b {kind} {processes}p");
        let (stats, per, spans) = measured(
            url,
            admin,
            kind,
            STEADY_WORKERS,
            processes,
            Some(scale.steady),
        )
        .await;
        let seconds = stats.makespan.as_secs_f64();
        let rate = stats.acquisitions as f64 / seconds.max(1e-9);
        report.add(&scenario, "acquisitions/s", format!("{rate:.0}"), rate);
        report.add(
            &scenario,
            "hand-over p50 / p99",
            format!("{} / {}", us(stats.gap_p50), us(stats.gap_p99)),
            stats.gap_p50.as_secs_f64(),
        );
        report.violations(&scenario, "exclusion violations", stats.violations);
        let within = if processes == 1 {
            stats.fairness
        } else {
            // Fairness within each process (FIFO is local).
            let mut worst: f64 = 1.0;
            for range in [0..HALF, HALF..STEADY_WORKERS] {
                let mut local: Vec<Span> = spans
                    .iter()
                    .copied()
                    .filter(|s| range.contains(&s.worker))
                    .map(|mut s| {
                        s.worker -= range.start;
                        s
                    })
                    .collect();
                worst = worst.max(hold_stats(&mut local, HALF).fairness);
            }
            worst
        };
        let starving = stats.min_per_worker == 0;
        if kind == "memory" {
            report.add(
                &scenario,
                "max/min acquisitions per worker",
                format!("{within:.2}"),
                within,
            );
        } else {
            report.goal(
                &scenario,
                "max/min acquisitions per worker (within a process)",
                format!("{within:.2}"),
                within,
                "≤ 2, none starves",
                within <= 2.0 && !starving,
            );
            report.add(
                &scenario,
                "commands / acquisition",
                format!("{per:.2}"),
                per,
            );
        }
        if processes == 2 {
            report.goal(
                &scenario,
                "max/min acquisitions per worker across both processes",
                format!("{:.2}", stats.fairness),
                stats.fairness,
                "≤ 2, none starves",
                stats.fairness <= 2.0 && !starving,
            );
            let first = spans.iter().filter(|s| s.worker < HALF).count();
            let second = spans.len() - first;
            report.add(
                &scenario,
                "acquisitions, process 1 / process 2",
                format!("{first} / {second}"),
                first as f64 / second.max(1) as f64,
            );
            report.add(
                &scenario,
                "efficiency (W × mean hold ÷ span of the run)",
                format!("{:.2}", stats.efficiency),
                stats.efficiency,
            );
            across.push((stats.fairness, stats.efficiency));
        }
    }
    if let [(chains, chains_efficiency), (free, free_efficiency)] = across[..] {
        report.add(
            "S2b 2p",
            "max/min per worker across processes, hand-over runs / limit 0 (efficiency)",
            format!("{chains:.2} ({chains_efficiency:.2}) / {free:.2} ({free_efficiency:.2})"),
            chains,
        );
    }
}
