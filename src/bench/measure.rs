//! The bench's measuring and reporting: samples to a median and spread,
//! a report line with its ratio and target, a least-squares fit, a
//! process's time and peak RSS, and the plots docs/performance.md shows.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Median and spread of some samples, in milliseconds.
pub(super) struct Stats {
    pub(super) median: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) n: usize,
}

pub(super) fn stats(mut ms: Vec<f64>) -> Stats {
    ms.sort_by(|a, b| a.total_cmp(b));
    let n = ms.len();
    Stats {
        median: if n == 0 { 0.0 } else { ms[n / 2] },
        min: ms.first().copied().unwrap_or(0.0),
        max: ms.last().copied().unwrap_or(0.0),
        n,
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One printed line of the report.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) value: String,
    pub(super) baseline: String,
    pub(super) ratio: Option<f64>,
    pub(super) target: String,
    pub(super) ok: bool,
}

pub(super) fn line(
    name: &str,
    s: &Stats,
    base: Option<&Stats>,
    ratio_max: Option<f64>,
    abs_max_ms: Option<f64>,
) -> Line {
    let ratio = base.map(|b| s.median / b.median);
    let ok = ratio.zip(ratio_max).is_none_or(|(r, m)| r <= m)
        && abs_max_ms.is_none_or(|m| s.median <= m);
    let mut target = Vec::new();
    if let Some(m) = ratio_max {
        target.push(format!("≤ {m:.2}×"));
    }
    if let Some(m) = abs_max_ms {
        target.push(format!("≤ {m:.0} ms"));
    }
    Line {
        name: name.to_string(),
        value: format!(
            "{:.2} ms (min {:.2}, max {:.2}, n={})",
            s.median, s.min, s.max, s.n
        ),
        baseline: base
            .map(|b| format!("{:.2} ms (min {:.2}, max {:.2})", b.median, b.min, b.max))
            .unwrap_or_else(|| "-".into()),
        ratio,
        target: target.join(", "),
        ok,
    }
}

/// Least squares of `points`: the slope and r².
pub(super) fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let slope = sxy / sxx;
    let resid: f64 = points
        .iter()
        .map(|(x, y)| (y - (my + slope * (x - mx))).powi(2))
        .sum();
    let total: f64 = points.iter().map(|(_, y)| (y - my).powi(2)).sum();
    (slope, 1.0 - resid / total)
}

/// One chart of the bench: a title, the x axis's words, a series of
/// medians, and a second series (a baseline measured beside it) or a
/// horizontal line (one measured once), each labelled.
pub(super) struct Plot<'a> {
    pub(super) title: &'a str,
    pub(super) x_label: &'a str,
    pub(super) points: &'a [(f64, f64)],
    /// A second series, drawn dashed, with its label.
    pub(super) beside: Option<(&'a str, &'a [(f64, f64)])>,
    /// A horizontal line, with its label.
    pub(super) level: Option<(String, f64)>,
}

/// A chart as a small SVG written by hand (a plotting crate for two charts
/// would outweigh it).
pub(super) fn plot_svg(p: &Plot) -> String {
    let (w, h, left, bottom, top, right) = (640.0, 400.0, 70.0, 50.0, 30.0, 40.0);
    let all = p
        .points
        .iter()
        .chain(p.beside.iter().flat_map(|b| b.1.iter()));
    let max_x = all.clone().map(|q| q.0).fold(1.0, f64::max);
    let max_y = all
        .map(|q| q.1)
        .chain(p.level.iter().map(|l| l.1))
        .fold(1.0, f64::max)
        * 1.1;
    let x = |v: f64| left + v / max_x * (w - left - right);
    let y = |v: f64| h - bottom - v / max_y * (h - bottom - top);
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{cx}" y="18" text-anchor="middle" font-size="14">{title}</text>
<line x1="{left}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/>
<line x1="{left}" y1="{top}" x2="{left}" y2="{b}" stroke="black"/>
<text x="{cx}" y="{xl}" text-anchor="middle">{x_label}</text>
<text x="16" y="{cy}" text-anchor="middle" transform="rotate(-90 16 {cy})">milliseconds (median)</text>
"##,
        title = p.title,
        x_label = p.x_label,
        cx = (left + w - right) / 2.0,
        cy = (top + h - bottom) / 2.0,
        b = h - bottom,
        r = w - right,
        xl = h - 12.0,
    );
    for i in 0..=5 {
        let v = max_x * f64::from(i) / 5.0;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x(v),
            h - bottom + 16.0,
            v.round()
        ));
        let t = max_y * f64::from(i) / 5.0;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}</text>\n",
            left - 6.0,
            y(t) + 4.0,
            t
        ));
    }
    if let Some((label, level)) = &p.level {
        svg.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{fy:.1}\" x2=\"{r}\" y2=\"{fy:.1}\" stroke=\"#b33\" stroke-dasharray=\"6 4\"/>\n<text x=\"{r}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"#b33\">{label}</text>\n",
            fy = y(*level),
            ty = y(*level) - 6.0,
            r = w - right,
        ));
    }
    let polyline = |points: &[(f64, f64)], colour: &str, dash: &str| {
        let path: Vec<String> = points
            .iter()
            .map(|(n, t)| format!("{:.1},{:.1}", x(*n), y(*t)))
            .collect();
        format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>\n",
            path.join(" ")
        )
    };
    if let Some((label, beside)) = &p.beside {
        svg.push_str(&polyline(beside, "#b33", " stroke-dasharray=\"6 4\""));
        if let Some((n, t)) = beside.last() {
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#b33\">{label}</text>\n",
                x(*n) - 6.0,
                y(*t) - 8.0
            ));
        }
    }
    svg.push_str(&polyline(p.points, "#246", ""));
    // A label only where it clears the last one; each on the left of its
    // point, but the first.
    let mut labelled = f64::NEG_INFINITY;
    for (i, (n, t)) in p.points.iter().enumerate() {
        let (px, py) = (x(*n), y(*t));
        svg.push_str(&format!(
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"#246\"/>\n"
        ));
        if px - labelled >= 45.0 {
            labelled = px;
            let (lx, anchor) = if i == 0 {
                (px + 6.0, "start")
            } else {
                (px - 6.0, "end")
            };
            svg.push_str(&format!(
                "<text x=\"{lx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"#246\">{t:.0} ms</text>\n",
                py - 8.0
            ));
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Writes `svg` to `docs/<name>` in the source tree, and says so.
pub(super) fn write_plot(name: &str, svg: &str) {
    let plot = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    match std::fs::write(&plot, svg) {
        Ok(()) => eprintln!("plot written: {}", plot.display()),
        Err(e) => eprintln!("plot not written ({}): {e}", plot.display()),
    }
}

pub(super) fn time_process(bin: &Path, args: &[&str], samples: usize) -> Result<Stats, String> {
    let mut out = Vec::new();
    for i in 0..=samples {
        let t = Instant::now();
        let status = Command::new(bin)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if !matches!(status.code(), Some(0) | Some(1)) {
            return Err(format!("{} {args:?} exited {status}", bin.display()));
        }
        if i > 0 {
            out.push(ms(t.elapsed()));
        }
    }
    Ok(stats(out))
}

/// Peak RSS (KiB) of `run` over `ticks` ticks: its own VmHWM, sampled from
/// /proc while it runs. (wait4's ru_maxrss would do, but Linux carries the
/// parent's high-water mark into a child across a vfork+exec, so it reports
/// this bench's own size.)
pub(super) fn peak_rss(bin: &Path, cfg: &Path, ticks: u32) -> Result<(u64, Duration), String> {
    let t = Instant::now();
    let log = cfg.with_extension("log");
    let stderr = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut child = Command::new(bin)
        .args(["retention", "run", "--config"])
        .arg(cfg)
        .args(["--ticks", &ticks.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| e.to_string())?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_path) {
            if let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            // A run that did not tick measured nothing: say why, rather
            // than report its few kilobytes as a pass.
            if !status.success() || peak == 0 {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                return Err(format!(
                    "crewlet retention run --ticks {ticks} ended {status}: {tail}"
                ));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((peak, t.elapsed()))
}

/// A peak RSS line: `kib` at its highest over `took`, against `max_mb`.
pub(super) fn rss_line(name: &str, kib: u64, took: Duration, max_mb: f64) -> Line {
    let mb = kib as f64 / 1024.0;
    Line {
        name: name.into(),
        value: format!("{mb:.1} MB ({:.1} s)", took.as_secs_f64()),
        baseline: "-".into(),
        ratio: None,
        target: format!("≤ {max_mb:.0} MB"),
        ok: mb <= max_mb,
    }
}
