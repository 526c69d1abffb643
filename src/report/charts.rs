//! The report's charts, drawn here as inline SVG text: axes, tick labels,
//! legends and hover titles included, so a person can read them with no
//! script, font or image from anywhere else.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};

use super::escape::escape;
use super::model::RunPoint;
use crate::exceptions::figures::{AGE_BUCKETS, RuleBacklog, WeekFlow};

/// Width of every chart, in SVG user units (the page scales it down).
const WIDTH: f64 = 900.0;
/// Above this many runs the rate chart draws one point per day.
pub(crate) const MAX_RUN_POINTS: usize = 400;
/// The backlog chart draws at most this many rules (the table lists all).
pub(crate) const MAX_CHART_RULES: usize = 25;
/// Fill colours of the age buckets, youngest first (older is darker).
const BUCKET_COLOURS: [&str; 4] = ["#fdd49e", "#fc8d59", "#d7301f", "#7f0000"];
const ENTERED_COLOUR: &str = "#e6550d";
const EXITED_COLOUR: &str = "#3182bd";
const REJECTION_COLOUR: &str = "#c0392b";
const WARNING_COLOUR: &str = "#b7791f";
/// Draw a dot (with a hover title) on each point when there are this few.
const MAX_DOTS: usize = 60;

/// Space around the plot area, in SVG user units.
struct Margins {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// A value axis from zero to a round maximum, with evenly spaced ticks.
struct Scale {
    top: f64,
    step: f64,
}

impl Scale {
    /// A scale from 0 covering `max`, with about `ticks` round steps; counts
    /// never step by less than 1.
    fn new(max: f64, ticks: f64, counts: bool) -> Scale {
        let max = if max > 0.0 && max.is_finite() {
            max
        } else if counts {
            1.0
        } else {
            0.01
        };
        let raw = max / ticks;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * magnitude);
        let step = if counts { step.max(1.0) } else { step };
        let top = (max / step - 1e-9).ceil().max(1.0) * step;
        Scale { top, step }
    }

    /// The tick values, 0 to `top` inclusive.
    fn ticks(&self) -> Vec<f64> {
        let n = (self.top / self.step).round() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }

    /// Decimals needed to tell ticks apart when shown multiplied by `factor`.
    fn decimals(&self, factor: f64) -> usize {
        let step = self.step * factor;
        if step >= 1.0 {
            0
        } else {
            ((-step.log10()).ceil() as usize).min(4)
        }
    }
}

/// Opening tag of a chart, with its accessible name.
fn svg_open(height: f64, label: &str) -> String {
    format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"{}\">",
        escape(label)
    )
}

/// A row of coloured swatches with their labels, from `x` along the top.
fn legend(x: f64, entries: &[(&str, &str)]) -> String {
    let mut out = String::from("<g class=\"legend\">");
    let mut at = x;
    for (label, colour) in entries {
        out.push_str(&format!(
            "<rect x=\"{at:.1}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"18\">{}</text>",
            at + 16.0,
            escape(label)
        ));
        at += 16.0 + 7.5 * label.chars().count() as f64 + 22.0;
    }
    out.push_str("</g>");
    out
}

/// The backlog by rule as stacked horizontal bars, one segment per age bucket;
/// the rules with the most open exceptions first. Empty when nothing is open.
pub(crate) fn backlog_chart(rules: &[RuleBacklog]) -> String {
    let mut shown: Vec<&RuleBacklog> = rules.iter().filter(|r| r.total > 0).collect();
    shown.sort_by_key(|r| std::cmp::Reverse(r.total));
    shown.truncate(MAX_CHART_RULES);
    if shown.is_empty() {
        return String::new();
    }
    let m = Margins {
        left: 190.0,
        right: 60.0,
        top: 34.0,
        bottom: 40.0,
    };
    let row = 26.0;
    let height = m.top + row * shown.len() as f64 + m.bottom;
    let plot_w = WIDTH - m.left - m.right;
    let max = shown.iter().map(|r| r.total).max().unwrap_or(0) as f64;
    let scale = Scale::new(max, 6.0, true);
    let x = |v: f64| m.left + v / scale.top * plot_w;

    let mut out = svg_open(height, "Open exceptions by rule and age");
    let entries: Vec<(&str, &str)> = AGE_BUCKETS
        .iter()
        .zip(BUCKET_COLOURS)
        .map(|((label, _), colour)| (*label, colour))
        .collect();
    out.push_str(&legend(m.left, &entries));
    let plot_bottom = height - m.bottom;
    out.push_str(&x_value_axis(&scale, m.top, plot_bottom, x));
    for (i, rule) in shown.iter().enumerate() {
        let y = m.top + row * i as f64;
        out.push_str(&backlog_row(rule, y, row, &m, x));
    }
    out.push_str(&format!(
        "<text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">open exceptions</text>",
        m.left + plot_w / 2.0,
        height - 6.0
    ));
    out.push_str("</svg>");
    out
}

/// Vertical grid lines and count labels along the bottom of a horizontal chart.
fn x_value_axis(scale: &Scale, top: f64, bottom: f64, x: impl Fn(f64) -> f64) -> String {
    let mut out = String::from("<g class=\"axis\">");
    for tick in scale.ticks() {
        let at = x(tick);
        out.push_str(&format!(
            "<line class=\"grid\" x1=\"{at:.1}\" y1=\"{top:.1}\" x2=\"{at:.1}\" y2=\"{bottom:.1}\"/>\
             <text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 16.0,
            format_tick(tick, scale.decimals(1.0))
        ));
    }
    out.push_str("</g>");
    out
}

/// One rule's label, stacked segments and total.
fn backlog_row(
    rule: &RuleBacklog,
    y: f64,
    row: f64,
    m: &Margins,
    x: impl Fn(f64) -> f64,
) -> String {
    let mid = y + row / 2.0;
    let mut out = format!(
        "<g class=\"bar\"><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>",
        m.left - 8.0,
        mid + 4.0,
        escape(&rule.rule),
        escape(&shorten(&rule.rule, 24))
    );
    let mut start = 0u64;
    for ((count, (bucket, _)), colour) in rule.by_age.iter().zip(AGE_BUCKETS).zip(BUCKET_COLOURS) {
        if *count == 0 {
            continue;
        }
        let (x0, x1) = (x(start as f64), x((start + count) as f64));
        out.push_str(&format!(
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
             <title>{}, {bucket}: {count}</title></rect>",
            y + 4.0,
            (x1 - x0).max(0.5),
            row - 8.0,
            escape(&rule.rule)
        ));
        start += count;
    }
    out.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
        x(start as f64) + 6.0,
        mid + 4.0,
        rule.total
    ));
    out
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// A tick value with `decimals` decimals, without trailing zeros.
fn format_tick(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Horizontal grid lines and labels along the left of a vertical chart;
/// `factor` and `unit` turn a value into its label (100 and "%" for rates).
fn y_value_axis(
    scale: &Scale,
    m: &Margins,
    bottom: f64,
    y: impl Fn(f64) -> f64,
    unit: (f64, &str),
) -> String {
    let (factor, suffix) = unit;
    let mut out = String::from("<g class=\"axis\">");
    for tick in scale.ticks() {
        let at = y(tick);
        out.push_str(&format!(
            "<line class=\"grid\" x1=\"{:.1}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}{suffix}</text>",
            m.left,
            WIDTH - m.right,
            m.left - 6.0,
            at + 4.0,
            format_tick(tick * factor, scale.decimals(factor))
        ));
    }
    out.push_str(&format!(
        "<line class=\"baseline\" x1=\"{:.1}\" y1=\"{bottom:.1}\" x2=\"{:.1}\" y2=\"{bottom:.1}\"/></g>",
        m.left,
        WIDTH - m.right
    ));
    out
}

/// Which of `n` evenly spaced labels to show so that they stay `min_gap` apart
/// over `width`: every k-th, starting with the first.
fn label_every(n: usize, width: f64, min_gap: f64) -> usize {
    let fit = ((width / min_gap).floor() as usize).max(1);
    n.div_ceil(fit).max(1)
}

/// Entries and exits per week as pairs of bars, with week labels thinned so
/// that they never overlap. Empty when there are no weeks.
pub(crate) fn flow_chart(weeks: &[WeekFlow]) -> String {
    if weeks.is_empty() {
        return String::new();
    }
    let m = Margins {
        left: 60.0,
        right: 20.0,
        top: 34.0,
        bottom: 44.0,
    };
    let height = 300.0;
    let plot_w = WIDTH - m.left - m.right;
    let bottom = height - m.bottom;
    let max = weeks
        .iter()
        .map(|w| w.entered.max(w.exited))
        .max()
        .unwrap_or(0) as f64;
    let scale = Scale::new(max, 5.0, true);
    let y = |v: f64| bottom - v / scale.top * (bottom - m.top);
    let group = plot_w / weeks.len() as f64;
    let longest = weeks
        .iter()
        .map(|w| w.week.chars().count())
        .max()
        .unwrap_or(0);
    let every = label_every(weeks.len(), plot_w, 7.0 * longest as f64 + 20.0);

    let mut out = svg_open(height, "Exceptions entered and exited per week");
    out.push_str(&legend(
        m.left,
        &[("entered", ENTERED_COLOUR), ("exited", EXITED_COLOUR)],
    ));
    out.push_str(&y_value_axis(&scale, &m, bottom, y, (1.0, "")));
    for (i, week) in weeks.iter().enumerate() {
        let x0 = m.left + group * i as f64;
        out.push_str(&week_bars(week, x0, group, y, bottom));
        if i % every == 0 {
            out.push_str(&format!(
                "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x0 + group / 2.0,
                bottom + 16.0,
                escape(&week.week)
            ));
        }
    }
    out.push_str(&format!(
        "<text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">week starting (Monday)</text></svg>",
        m.left + plot_w / 2.0,
        height - 6.0
    ));
    out
}

/// The two bars of one week, each with a hover title.
fn week_bars(week: &WeekFlow, x0: f64, group: f64, y: impl Fn(f64) -> f64, bottom: f64) -> String {
    let bar = (group * 0.4).max(0.5);
    let pad = group * 0.1;
    let mut out = String::new();
    for (k, (what, value, colour)) in [
        ("entered", week.entered, ENTERED_COLOUR),
        ("exited", week.exited, EXITED_COLOUR),
    ]
    .into_iter()
    .enumerate()
    {
        let top = y(value as f64);
        out.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
             <title>week of {}: {value} {what}</title></rect>",
            x0 + pad + bar * k as f64,
            bottom - top,
            escape(&week.week)
        ));
    }
    out
}

/// One point of the rate chart: a run, or the mean of a day's runs.
struct RatePoint {
    at: DateTime<Utc>,
    rejection: f64,
    warning: f64,
    runs: usize,
}

/// The points to draw: one per run, or when there are more than
/// [`MAX_RUN_POINTS`] runs, one per day (mean of its runs' rates). Runs whose
/// time cannot be read are left out; the second value counts them.
fn rate_points(runs: &[RunPoint]) -> (Vec<RatePoint>, usize) {
    let timed: Vec<(DateTime<Utc>, &RunPoint)> = runs
        .iter()
        .filter_map(|r| {
            DateTime::parse_from_rfc3339(&r.at)
                .ok()
                .map(|t| (t.with_timezone(&Utc), r))
        })
        .collect();
    let unreadable = runs.len() - timed.len();
    let mut points: Vec<RatePoint> = if timed.len() > MAX_RUN_POINTS {
        daily_means(&timed)
    } else {
        timed
            .iter()
            .map(|(at, r)| RatePoint {
                at: *at,
                rejection: r.rejection_rate(),
                warning: r.warning_rate(),
                runs: 1,
            })
            .collect()
    };
    points.sort_by_key(|p| p.at);
    (points, unreadable)
}

/// The mean rejection and warning rates of each day's runs (UTC days).
fn daily_means(timed: &[(DateTime<Utc>, &RunPoint)]) -> Vec<RatePoint> {
    let mut days: BTreeMap<NaiveDate, (f64, f64, usize)> = BTreeMap::new();
    for (at, run) in timed {
        let day = days.entry(at.date_naive()).or_insert((0.0, 0.0, 0));
        day.0 += run.rejection_rate();
        day.1 += run.warning_rate();
        day.2 += 1;
    }
    days.into_iter()
        .map(|(date, (rejection, warning, n))| RatePoint {
            at: date.and_time(chrono::NaiveTime::MIN).and_utc(),
            rejection: rejection / n as f64,
            warning: warning / n as f64,
            runs: n,
        })
        .collect()
}

/// Rejection and warning rates over time as two lines, with a caption saying
/// whether points are runs or daily means. Empty when no run has a readable time.
pub(crate) fn rates_chart(runs: &[RunPoint]) -> (String, String) {
    let (points, unreadable) = rate_points(runs);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return (String::new(), String::new());
    };
    let m = Margins {
        left: 60.0,
        right: 20.0,
        top: 34.0,
        bottom: 44.0,
    };
    let height = 300.0;
    let bottom = height - m.bottom;
    let plot_w = WIDTH - m.left - m.right;
    let max = points
        .iter()
        .map(|p| p.rejection.max(p.warning))
        .fold(0.0, f64::max);
    let scale = Scale::new(max, 5.0, false);
    let y = |v: f64| bottom - v / scale.top * (bottom - m.top);
    let (t0, t1) = (first.at.timestamp() as f64, last.at.timestamp() as f64);
    let x = |t: DateTime<Utc>| {
        if t1 > t0 {
            m.left + (t.timestamp() as f64 - t0) / (t1 - t0) * plot_w
        } else {
            m.left + plot_w / 2.0
        }
    };

    let mut out = svg_open(height, "Rejection and warning rate per run over time");
    out.push_str(&legend(
        m.left,
        &[
            ("rejection rate", REJECTION_COLOUR),
            ("warning rate", WARNING_COLOUR),
        ],
    ));
    out.push_str(&y_value_axis(&scale, &m, bottom, y, (100.0, "%")));
    out.push_str(&time_axis(first.at, last.at, bottom, &m, x));
    out.push_str(&rate_line(&points, |p| p.rejection, REJECTION_COLOUR, x, y));
    out.push_str(&rate_line(&points, |p| p.warning, WARNING_COLOUR, x, y));
    if points.len() <= MAX_DOTS {
        out.push_str(&rate_dots(&points, x, y));
    }
    out.push_str("</svg>");
    (out, rates_caption(runs.len(), points.len(), unreadable))
}

/// What the rate chart's points are.
fn rates_caption(runs: usize, points: usize, unreadable: usize) -> String {
    let mut caption = if runs - unreadable > MAX_RUN_POINTS {
        format!(
            "{} runs: each point is the mean rate of one day's runs ({points} days).",
            runs - unreadable
        )
    } else {
        format!("{points} runs, one point each.")
    };
    if unreadable > 0 {
        caption.push_str(&format!(
            " {unreadable} run(s) without a readable time are not drawn."
        ));
    }
    caption
}

/// Date (or date and time, for a short span) labels under a time axis.
fn time_axis(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    bottom: f64,
    m: &Margins,
    x: impl Fn(DateTime<Utc>) -> f64,
) -> String {
    let span = to - from;
    let format = if span < chrono::Duration::days(3) {
        "%m-%d %H:%M"
    } else {
        "%Y-%m-%d"
    };
    let plot_w = WIDTH - m.left - m.right;
    let n = if span.num_seconds() == 0 {
        1
    } else {
        (plot_w / 130.0).floor() as i32 + 1
    };
    let mut out = String::from("<g class=\"axis\">");
    for i in 0..n {
        let at = if n > 1 {
            from + span * i / (n - 1)
        } else {
            from
        };
        let anchor = match i {
            0 if n > 1 => "start",
            i if i == n - 1 && n > 1 => "end",
            _ => "middle",
        };
        out.push_str(&format!(
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            x(at),
            bottom + 16.0,
            at.format(format)
        ));
    }
    out.push_str(&format!(
        "<text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">run time (UTC)</text></g>",
        m.left + plot_w / 2.0,
        bottom + 38.0
    ));
    out
}

/// One rate as a polyline through every point.
fn rate_line(
    points: &[RatePoint],
    value: impl Fn(&RatePoint) -> f64,
    colour: &str,
    x: impl Fn(DateTime<Utc>) -> f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let coordinates: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.at), y(value(p))))
        .collect();
    format!(
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
        coordinates.join(" ")
    )
}

/// A dot per point of both lines, with the values in a hover title.
fn rate_dots(
    points: &[RatePoint],
    x: impl Fn(DateTime<Utc>) -> f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let mut out = String::new();
    for p in points {
        let title = format!(
            "{}: rejection {:.1}%, warning {:.1}%{}",
            p.at.format("%Y-%m-%d %H:%M"),
            p.rejection * 100.0,
            p.warning * 100.0,
            if p.runs > 1 {
                format!(" (mean of {} runs)", p.runs)
            } else {
                String::new()
            }
        );
        for (value, colour) in [(p.rejection, REJECTION_COLOUR), (p.warning, WARNING_COLOUR)] {
            out.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{title}</title></circle>",
                x(p.at),
                y(value)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_steps_are_round_and_cover_the_maximum() {
        let s = Scale::new(37.0, 5.0, true);
        assert_eq!((s.step, s.top), (10.0, 40.0));
        let s = Scale::new(0.0, 5.0, true);
        assert_eq!(s.ticks(), vec![0.0, 1.0]);
        let s = Scale::new(0.034, 5.0, false);
        assert!(s.top >= 0.034 && s.top <= 0.05, "{}", s.top);
    }

    #[test]
    fn week_labels_are_thinned_to_fit() {
        assert_eq!(label_every(5, 820.0, 90.0), 1);
        assert_eq!(label_every(104, 820.0, 90.0), 12);
    }

    #[test]
    fn long_rule_names_are_shortened_on_char_boundaries() {
        assert_eq!(shorten("ééééé", 3), "éé…");
        assert_eq!(shorten("short", 24), "short");
    }
}
