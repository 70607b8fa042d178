//! An SVG chart of hand-over gap distributions (cumulative, log time axis).

use std::fmt::Write;
use std::time::Duration;

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

pub fn cdf_svg(title: &str, series: &[(String, Vec<Duration>)]) -> String {
    let (width, height, left, right, top, bottom) = (760.0, 420.0, 70.0, 20.0, 40.0, 60.0);
    let (min_log, max_log) = (1.0f64, 6.0f64); // 10 µs .. 1 s, in log10(µs)
    let x = |d: Duration| {
        let us = (d.as_secs_f64() * 1e6).max(10.0);
        left + (us.log10().clamp(min_log, max_log) - min_log) / (max_log - min_log)
            * (width - left - right)
    };
    let y = |fraction: f64| top + (1.0 - fraction) * (height - top - bottom);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="22" font-size="14">{title}</text>"#
    );
    for (i, label) in ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
        .iter()
        .enumerate()
    {
        let gx = left + i as f64 / 5.0 * (width - left - right);
        let _ = writeln!(
            svg,
            r##"<line x1="{gx}" y1="{top}" x2="{gx}" y2="{}" stroke="#ddd"/><text x="{gx}" y="{}" text-anchor="middle">{label}</text>"##,
            height - bottom,
            height - bottom + 18.0
        );
    }
    for fraction in [0.0, 0.5, 0.9, 0.99, 1.0] {
        let gy = y(fraction);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{gy}" x2="{}" y2="{gy}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}%</text>"##,
            width - right,
            left - 6.0,
            gy + 4.0,
            fraction * 100.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">hand-over gap (release returned → next acquire returned), log scale</text>"#,
        (left + width - right) / 2.0,
        height - 18.0
    );
    for (i, (label, gaps)) in series.iter().enumerate() {
        let mut gaps = gaps.clone();
        gaps.sort_unstable();
        if gaps.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        let mut points = String::new();
        for (n, gap) in gaps.iter().enumerate() {
            let _ = write!(
                points,
                "{:.1},{:.1} ",
                x(*gap),
                y((n + 1) as f64 / gaps.len() as f64)
            );
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>"#
        );
        let ly = top + 16.0 + i as f64 * 16.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{}" y="{}" width="12" height="3" fill="{color}"/><text x="{}" y="{}">{label}</text>"#,
            width - right - 240.0,
            ly - 4.0,
            width - right - 222.0,
            ly
        );
    }
    svg.push_str("</svg>\n");
    svg
}
