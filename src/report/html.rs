//! The exception report as one static HTML page: inline CSS, inline SVG charts
//! (see `charts`) and a few lines of inline script to show one contributor at
//! a time. Nothing is loaded from anywhere, so the page opens from disk.
//!
//! Every headline figure carries `data-section` (on its section) and
//! `data-figure` (on the element holding just the number), so tests and
//! scrapers can read the figures without parsing the layout.

use std::path::{Path, PathBuf};

use super::charts;
use super::escape::escape;
use super::model::{ReportData, RunPoint, Section};
use crate::error::Error;
use crate::exceptions::alerts::Alert;
use crate::exceptions::figures::{AGE_BUCKETS, BacklogFigures, RuleBacklog, WeekFlow};

/// The runs table lists at most this many of a section's latest runs.
pub const MAX_LATEST_RUNS: usize = 25;

/// The page's style sheet (the workbench serves it too).
pub const STYLE: &str = r#"
:root { --ink: #1f2328; --muted: #57606a; --line: #d0d7de; --panel: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink); background: #fff; line-height: 1.4; }
header, main { max-width: 1200px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; padding-bottom: 8px; border-bottom: 1px solid var(--line); }
h1 { font-size: 1.6rem; margin: 0 0 4px; }
h2 { font-size: 1.35rem; margin: 28px 0 12px; }
h3 { font-size: 1.05rem; margin: 24px 0 8px; }
.meta { color: var(--muted); margin: 0 0 8px; }
nav { margin: 8px 0; }
nav select { font: inherit; padding: 4px 8px; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; margin: 0; }
.figure { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.figure dt { color: var(--muted); font-size: 0.85rem; }
.figure dd { margin: 2px 0 0; font-size: 1.5rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.figure dd .unit { font-size: 0.9rem; font-weight: 400; color: var(--muted); }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.9rem; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
thead th { background: var(--panel); }
tfoot th, tfoot td { font-weight: 600; background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fbfcfd; }
table.runs { width: 100%; }
table.runs td.status { white-space: nowrap; }
table.runs td.path { overflow-wrap: anywhere; min-width: 160px; }
.status-ok { color: #1a7f37; font-weight: 600; }
.status-bad { color: #cf222e; font-weight: 600; }
.table-scroll { overflow-x: auto; }
figure { margin: 12px 0; }
figcaption { color: var(--muted); font-size: 0.85rem; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg.chart text { font-size: 12px; fill: var(--ink); }
svg.chart .axis-title { fill: var(--muted); }
svg.chart line.grid { stroke: #e6e9ec; }
svg.chart line.baseline { stroke: #8c959f; }
.empty { color: var(--muted); font-style: italic; }
section.report-section { border-bottom: 1px solid var(--line); padding-bottom: 16px; }
aside.alerts { margin: 16px 0; padding: 8px 16px; border: 2px solid #cf222e; border-radius: 6px; background: #fff1f0; }
aside.alerts h2 { margin: 4px 0 8px; color: #a40e26; }
aside.alerts li { margin: 4px 0; }
aside.alerts .kind { font-weight: 600; text-transform: uppercase; font-size: 0.8rem; color: #a40e26; margin-right: 6px; }
"#;

/// Shows the section picked in the `<select>` and hides the others; keeps the
/// choice in the address (`#s2`) so a contributor's part can be linked to.
/// Without script every section shows, one after another.
const SCRIPT: &str = r##"
(function () {
  var nav = document.getElementById("section-nav");
  var picker = document.getElementById("section-picker");
  if (!nav || !picker) { return; }
  var sections = document.querySelectorAll("section.report-section");
  function show(id) {
    for (var i = 0; i < sections.length; i++) {
      sections[i].hidden = !(id === "every" || sections[i].id === id);
    }
  }
  var wanted = window.location.hash.slice(1);
  for (var i = 0; i < picker.options.length; i++) {
    if (picker.options[i].value === wanted) { picker.value = wanted; }
  }
  picker.addEventListener("change", function () {
    show(picker.value);
    try { history.replaceState(null, "", "#" + picker.value); } catch (e) { /* file: pages may refuse */ }
  });
  nav.hidden = false;
  show(picker.value);
})();
"##;

/// The report as one self-contained HTML5 page: the overall section first,
/// then one per contributor.
pub fn render(data: &ReportData) -> String {
    let mut page = String::with_capacity(64 * 1024);
    page.push_str(&head(data));
    page.push_str("<body>\n");
    page.push_str(&header(data));
    page.push_str("<main>\n");
    page.push_str(&alerts(&data.alerts));
    for (index, section) in sections(data).enumerate() {
        page.push_str(&section_html(index, section, data.stale_after_days));
    }
    page.push_str("</main>\n<script>");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body>\n</html>\n");
    page
}

/// Renders the report and writes it as `index.html` in `out_dir` (created if
/// missing); returns the file's path.
pub fn write_report(data: &ReportData, out_dir: &Path) -> crate::Result<PathBuf> {
    std::fs::create_dir_all(out_dir).map_err(|source| Error::Io {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let path = out_dir.join("index.html");
    std::fs::write(&path, render(data)).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Checks, before anything is read, that `out_dir` is a folder or can become
/// one: the first part of it that exists must be a folder (usage error, naming
/// `--out`, otherwise).
pub fn check_out_dir(out_dir: &Path) -> crate::Result<()> {
    let existing = out_dir.ancestors().find(|a| a.exists());
    match existing {
        Some(found) if !found.is_dir() => Err(Error::Usage {
            arg: "--out".to_string(),
            reason: format!(
                "{} is a file, not a folder: give a folder for the report (index.html is written in it)",
                crate::error::printable(&found.display().to_string())
            ),
        }),
        _ => Ok(()),
    }
}

/// The overall section, then the contributors'.
fn sections(data: &ReportData) -> impl Iterator<Item = &Section> {
    std::iter::once(&data.overall).chain(data.contributors.iter())
}

/// Doctype, `<head>` with the title and the style sheet.
fn head(data: &ReportData) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Exception report: {}</title>\n<style>{STYLE}</style>\n</head>\n",
        escape(&data.dataset)
    )
}

/// Title, when the report was made, and the section picker (hidden until the
/// script shows it, as it does nothing without the script).
fn header(data: &ReportData) -> String {
    let mut out = format!(
        "<header>\n<h1>Exception report: {}</h1>\n\
         <p class=\"meta\">Generated {} · exceptions open longer than {} days are stale</p>\n",
        escape(&data.dataset),
        escape(&data.generated_at),
        data.stale_after_days
    );
    out.push_str(
        "<nav id=\"section-nav\" hidden><label for=\"section-picker\">Show </label>\
         <select id=\"section-picker\">",
    );
    for (index, section) in sections(data).enumerate() {
        out.push_str(&format!(
            "<option value=\"s{index}\">{}</option>",
            escape(&section.name)
        ));
    }
    out.push_str("<option value=\"every\">Every section, one after another</option></select></nav>\n</header>\n");
    out
}

/// The open alerts, highlighted above every section (nothing when none).
pub fn alerts(alerts: &[Alert]) -> String {
    if alerts.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<aside class=\"alerts\" role=\"alert\" data-alerts=\"{}\">\n<h2>Alerts ({})</h2>\n<ul>\n",
        alerts.len(),
        alerts.len()
    );
    for alert in alerts {
        out.push_str(&format!(
            "<li data-alert-kind=\"{}\" data-contributor=\"{}\"><span class=\"kind\">{}</span>{}</li>\n",
            alert.kind.as_str(),
            escape(&alert.contributor),
            alert.kind.as_str().replace('_', " "),
            escape(&alert.message)
        ));
    }
    out.push_str("</ul>\n</aside>\n");
    out
}

/// One section: figures, backlog, weekly flow, rates and latest runs (the
/// workbench shows one at a time).
pub fn section_html(index: usize, section: &Section, stale_after_days: u32) -> String {
    let mut out = format!(
        "<section class=\"report-section\" id=\"s{index}\" data-section=\"{}\">\n<h2>{}</h2>\n",
        escape(&section.name),
        escape(&section.name)
    );
    out.push_str(&figures(&section.backlog, stale_after_days));
    out.push_str(&backlog(&section.open_by_rule));
    out.push_str(&flow(&section.weekly_flow));
    out.push_str(&rates(&section.runs));
    out.push_str(&latest_runs(&section.runs));
    out.push_str("</section>\n");
    out
}

/// One headline figure: a label and an element holding exactly the value.
fn figure(key: &str, label: &str, value: &str, unit: &str) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" <span class=\"unit\">{unit}</span>")
    };
    format!(
        "<div class=\"figure\"><dt>{label}</dt><dd><span data-figure=\"{key}\">{}</span>{unit}</dd></div>\n",
        escape(value)
    )
}

/// The headline backlog figures.
fn figures(b: &BacklogFigures, stale_after_days: u32) -> String {
    let (oldest, oldest_unit) = match b.oldest_age_days {
        Some(days) => (days.to_string(), "days"),
        None => ("none".to_string(), ""),
    };
    let stale_label = format!("Stale (open over {stale_after_days} days)");
    let rows = [
        ("open", "Open", b.open.to_string(), ""),
        ("pending", "Pending", b.pending.to_string(), ""),
        ("quarantined", "Quarantined", b.quarantined.to_string(), ""),
        ("missing", "Missing entities", b.missing.to_string(), ""),
        ("stale", stale_label.as_str(), b.stale.to_string(), ""),
        ("oldest_age_days", "Oldest open", oldest, oldest_unit),
        (
            "entered_7d",
            "Entered, last 7 days",
            b.entered_7d.to_string(),
            "",
        ),
        (
            "exited_7d",
            "Exited, last 7 days",
            b.exited_7d.to_string(),
            "",
        ),
        (
            "entered_30d",
            "Entered, last 30 days",
            b.entered_30d.to_string(),
            "",
        ),
        (
            "exited_30d",
            "Exited, last 30 days",
            b.exited_30d.to_string(),
            "",
        ),
        (
            "accepted",
            "Accepted (committed as judged)",
            b.accepted.to_string(),
            "",
        ),
        ("ignored", "Ignored by a person", b.ignored.to_string(), ""),
    ];
    let mut out = String::from("<h3>Backlog</h3>\n<dl class=\"figures\">\n");
    for (key, label, value, unit) in &rows {
        out.push_str(&figure(key, label, value, unit));
    }
    out.push_str("</dl>\n");
    out
}

/// Open exceptions by rule and age: a chart, then the same as a table.
fn backlog(rules: &[RuleBacklog]) -> String {
    let mut out = String::from("<h3>Open exceptions by rule and age</h3>\n");
    if rules.iter().all(|r| r.total == 0) {
        out.push_str("<p class=\"empty\">Nothing open.</p>\n");
        return out;
    }
    let drawn = rules.iter().filter(|r| r.total > 0).count();
    let caption = if drawn > charts::MAX_CHART_RULES {
        format!(
            "The {} rules with the most open exceptions, of {drawn}; the table lists all.",
            charts::MAX_CHART_RULES
        )
    } else {
        "Open exceptions per rule, split by age.".to_string()
    };
    out.push_str(&format!(
        "<figure>{}<figcaption>{caption}</figcaption></figure>\n",
        charts::backlog_chart(rules)
    ));
    out.push_str(&backlog_table(rules));
    out
}

/// The backlog table: a row per rule, a column per age bucket, and totals.
fn backlog_table(rules: &[RuleBacklog]) -> String {
    let mut out = String::from(
        "<div class=\"table-scroll\"><table class=\"backlog\">\n<thead><tr><th>Rule</th>",
    );
    for (label, _) in AGE_BUCKETS {
        out.push_str(&format!("<th class=\"num\">{label}</th>"));
    }
    out.push_str("<th class=\"num\">Total</th></tr></thead>\n<tbody>\n");
    let mut sums = [0u64; 4];
    for rule in rules {
        out.push_str(&format!("<tr><td>{}</td>", escape(&rule.rule)));
        for (sum, count) in sums.iter_mut().zip(rule.by_age) {
            *sum += count;
            out.push_str(&format!("<td class=\"num\">{count}</td>"));
        }
        out.push_str(&format!("<td class=\"num\">{}</td></tr>\n", rule.total));
    }
    out.push_str("</tbody>\n<tfoot><tr><th>All rules</th>");
    for sum in sums {
        out.push_str(&format!("<td class=\"num\">{sum}</td>"));
    }
    let total: u64 = rules.iter().map(|r| r.total).sum();
    out.push_str(&format!(
        "<td class=\"num\">{total}</td></tr></tfoot>\n</table></div>\n"
    ));
    out
}

/// Entries and exits per week.
fn flow(weeks: &[WeekFlow]) -> String {
    let mut out = String::from("<h3>Entered and exited per week</h3>\n");
    if weeks.is_empty() {
        out.push_str("<p class=\"empty\">No exceptions have entered or left yet.</p>\n");
        return out;
    }
    let (entered, exited) = weeks
        .iter()
        .fold((0u64, 0u64), |(n, x), w| (n + w.entered, x + w.exited));
    out.push_str(&format!(
        "<figure>{}<figcaption>{} weeks from {} to {}: {entered} entered, {exited} exited.</figcaption></figure>\n",
        charts::flow_chart(weeks),
        weeks.len(),
        escape(&weeks[0].week),
        escape(&weeks[weeks.len() - 1].week)
    ));
    out
}

/// Rejection and warning rates of the runs over time.
fn rates(runs: &[RunPoint]) -> String {
    let mut out = String::from("<h3>Rejection and warning rate per run</h3>\n");
    let (chart, caption) = charts::rates_chart(runs);
    if chart.is_empty() {
        out.push_str("<p class=\"empty\">No runs yet.</p>\n");
    } else {
        out.push_str(&format!(
            "<figure>{chart}<figcaption>Rejected = quarantined + dropped + pending, over received. {}</figcaption></figure>\n",
            escape(&caption)
        ));
    }
    out
}

/// The latest runs, newest first, at most [`MAX_LATEST_RUNS`].
fn latest_runs(runs: &[RunPoint]) -> String {
    let mut out = String::from("<h3>Latest runs</h3>\n");
    if runs.is_empty() {
        out.push_str("<p class=\"empty\">No runs yet.</p>\n");
        return out;
    }
    let shown = runs.len().min(MAX_LATEST_RUNS);
    out.push_str(&format!(
        "<p class=\"meta\">The {shown} latest of {} runs, newest first.</p>\n",
        runs.len()
    ));
    out.push_str(
        "<div class=\"table-scroll\"><table class=\"runs\">\n<thead><tr><th>Time</th><th>Contributor</th>\
         <th>Drop</th><th>Status</th><th class=\"num\">Received</th><th class=\"num\">Committed</th>\
         <th class=\"num\">Warned</th><th class=\"num\">Quarantined</th><th class=\"num\">Dropped</th>\
         <th class=\"num\">Pending</th><th>Summary</th></tr></thead>\n<tbody>\n",
    );
    for run in runs.iter().rev().take(MAX_LATEST_RUNS) {
        out.push_str(&run_row(run));
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// One row of the runs table.
fn run_row(run: &RunPoint) -> String {
    let mut out = format!(
        "<tr><td class=\"time\"><time datetime=\"{}\">{}</time></td><td>{}</td><td>{}</td><td class=\"status {}\">{}</td>",
        escape(&run.at),
        escape(&run.at.replacen('T', " ", 1)),
        escape(&run.contributor),
        escape(&run.drop_id),
        status_class(&run.status),
        escape(&run.status)
    );
    for n in [
        run.counts.received,
        run.counts.committed,
        run.counts.warned,
        run.counts.quarantined,
        run.counts.dropped,
        run.counts.pending,
    ] {
        out.push_str(&format!("<td class=\"num\">{n}</td>"));
    }
    out.push_str(&format!(
        "<td class=\"path\">{}</td></tr>\n",
        summary_link(&run.summary)
    ));
    out
}

/// The CSS class colouring a run status.
fn status_class(status: &str) -> &'static str {
    match status {
        "committed" | "nothing_to_do" => "status-ok",
        "failed" => "status-bad",
        _ => "status-other",
    }
}

/// A summary path: a link when it is a `file://` URL, plain text otherwise.
fn summary_link(summary: &str) -> String {
    let text = escape(summary);
    if summary.starts_with("file://") {
        format!("<a href=\"{text}\">{text}</a>")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::counts::Counts;

    fn run(n: usize, contributor: &str) -> RunPoint {
        RunPoint {
            at: format!("2025-03-{:02}T{:02}:00:00Z", 1 + n / 24 % 28, n % 24),
            contributor: contributor.to_string(),
            drop_id: format!("drop-{n:05}"),
            status: "committed".to_string(),
            counts: Counts {
                received: 1000,
                committed: 950,
                warned: 20,
                quarantined: 30,
                dropped: 15,
                pending: 5,
            },
            summary: format!("file:///data/summaries/run-{n:05}.json"),
        }
    }

    fn section(name: &str, runs: usize) -> Section {
        Section {
            name: name.to_string(),
            backlog: BacklogFigures {
                open: 42,
                pending: 12,
                quarantined: 30,
                missing: 0,
                stale: 7,
                oldest_age_days: Some(95),
                entered_7d: 9,
                exited_7d: 4,
                entered_30d: 31,
                exited_30d: 22,
                accepted: 17,
                ignored: 3,
            },
            open_by_rule: vec![
                RuleBacklog {
                    rule: "BAL_NEGATIVE".to_string(),
                    by_age: [10, 8, 5, 2],
                    total: 25,
                },
                RuleBacklog {
                    rule: "REF_MISSING".to_string(),
                    by_age: [12, 5, 0, 0],
                    total: 17,
                },
            ],
            weekly_flow: (0..8)
                .map(|w| WeekFlow {
                    week: format!("2025-01-{:02}", 6 + 7 * (w % 4)),
                    entered: 3 + w,
                    exited: 2 * w,
                })
                .collect(),
            runs: (0..runs).map(|n| run(n, name)).collect(),
        }
    }

    fn report(contributors: Vec<Section>) -> ReportData {
        ReportData {
            dataset: "credit_accounts".to_string(),
            generated_at: "2025-03-30T12:00:00Z".to_string(),
            stale_after_days: 30,
            overall: section("All contributors", 10),
            contributors,
            alerts: Vec::new(),
        }
    }

    /// The part of the page inside the section named `name`.
    fn section_text<'a>(page: &'a str, name: &str) -> &'a str {
        let start = page
            .find(&format!("data-section=\"{name}\""))
            .unwrap_or_else(|| panic!("no section {name}"));
        let rest = &page[start..];
        let end = rest.find("</section>").expect("section closes");
        &rest[..end]
    }

    fn figure_text<'a>(section: &'a str, key: &str) -> &'a str {
        let marker = format!("data-figure=\"{key}\">");
        let start = section
            .find(&marker)
            .unwrap_or_else(|| panic!("no figure {key}"))
            + marker.len();
        let end = section[start..].find('<').expect("figure closes");
        &section[start..start + end]
    }

    #[test]
    fn hostile_contributor_and_rule_names_are_escaped() {
        let mut hostile = section("<script>alert('x')</script>", 3);
        hostile.open_by_rule[0].rule = "<script>steal()</script>&\"".to_string();
        hostile.runs[0].summary = "file:///x\"><script>bad()</script>".to_string();
        let page = render(&report(vec![hostile]));
        assert!(!page.contains("<script>alert"), "contributor id unescaped");
        assert!(!page.contains("<script>steal"), "rule name unescaped");
        assert!(!page.contains("<script>bad"), "summary path unescaped");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(page.contains("&lt;script&gt;steal()&lt;/script&gt;&amp;&quot;"));
        assert_eq!(
            page.matches("<script>").count(),
            1,
            "only the page's own script"
        );
    }

    #[test]
    fn every_figure_is_present_with_its_number_in_every_section() {
        let mut empty = section("bureau-b", 0);
        empty.backlog = BacklogFigures::default();
        let page = render(&report(vec![section("bureau-a", 4), empty]));
        let expected = [
            ("open", "42"),
            ("pending", "12"),
            ("quarantined", "30"),
            ("stale", "7"),
            ("oldest_age_days", "95"),
            ("entered_7d", "9"),
            ("exited_7d", "4"),
            ("entered_30d", "31"),
            ("exited_30d", "22"),
            ("accepted", "17"),
            ("ignored", "3"),
        ];
        for name in ["All contributors", "bureau-a"] {
            let text = section_text(&page, name);
            for (key, value) in expected {
                assert_eq!(figure_text(text, key), value, "{name} {key}");
            }
        }
        let b = section_text(&page, "bureau-b");
        assert_eq!(figure_text(b, "open"), "0");
        assert_eq!(figure_text(b, "oldest_age_days"), "none");
        assert!(page.contains("Stale (open over 30 days)"));
    }

    #[test]
    fn backlog_table_and_chart_show_every_rule_and_bucket() {
        let page = render(&report(vec![]));
        for (label, _) in AGE_BUCKETS {
            assert!(
                page.contains(&format!("<th class=\"num\">{label}</th>")),
                "{label}"
            );
        }
        assert!(page.contains("<tr><td>BAL_NEGATIVE</td><td class=\"num\">10</td>"));
        assert!(page.contains("<title>BAL_NEGATIVE, over 90 days: 2</title>"));
        assert!(page.contains("<th>All rules</th><td class=\"num\">22</td>"));
    }

    #[test]
    fn runs_table_lists_the_25_newest_runs_newest_first() {
        let page = render(&report(vec![section("bureau-a", 60)]));
        let text = section_text(&page, "bureau-a");
        let table = &text[text.find("<table class=\"runs\">").expect("runs table")..];
        let drops: Vec<&str> = table
            .match_indices("<td>drop-")
            .map(|(i, _)| &table[i + 4..i + 14])
            .collect();
        let want: Vec<String> = (35..60).rev().map(|n| format!("drop-{n:05}")).collect();
        assert_eq!(drops, want);
        assert!(text.contains("The 25 latest of 60 runs, newest first."));
        assert!(table.contains("<a href=\"file:///data/summaries/run-00059.json\">"));
    }

    #[test]
    fn alerts_are_highlighted_above_the_sections_as_text() {
        use crate::exceptions::alerts::{AgeFigures, AlertFigures, AlertKind};
        let mut data = report(vec![section("bureau-a", 1)]);
        data.alerts = vec![Alert {
            kind: AlertKind::Age,
            contributor: "<b>x</b>".to_string(),
            rule: None,
            figures: AlertFigures::Age(AgeFigures {
                stale: 2,
                oldest_age_days: 40,
                stale_after_days: 30,
            }),
            message: "<script>alert(1)</script> 2 open".to_string(),
        }];
        let page = render(&data);
        let aside = &page[page.find("<aside class=\"alerts\"").expect("alert box")..];
        assert!(
            aside.find("</aside>") < aside.find("<section"),
            "above the sections"
        );
        assert!(aside.contains("<h2>Alerts (1)</h2>"));
        assert!(
            aside.contains("data-alert-kind=\"age\" data-contributor=\"&lt;b&gt;x&lt;/b&gt;\"")
        );
        assert!(aside.contains("&lt;script&gt;alert(1)&lt;/script&gt; 2 open"));
        assert!(!page.contains("<script>alert(1)"));
    }

    #[test]
    fn summary_paths_that_are_not_file_urls_are_plain_text() {
        assert_eq!(summary_link("s3://bucket/run.json"), "s3://bucket/run.json");
        assert!(summary_link("file:///tmp/a.json").starts_with("<a href="));
    }

    #[test]
    fn empty_report_renders_and_says_nothing_is_open() {
        let data = ReportData {
            dataset: "credit_accounts".to_string(),
            generated_at: "2025-03-30T12:00:00Z".to_string(),
            stale_after_days: 30,
            overall: Section {
                name: "All contributors".to_string(),
                backlog: BacklogFigures::default(),
                open_by_rule: vec![],
                weekly_flow: vec![],
                runs: vec![],
            },
            contributors: vec![],
            alerts: vec![],
        };
        let page = render(&data);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.contains("<aside"), "no alerts, no alert box");
        assert!(page.contains("Nothing open."));
        assert!(page.contains("No runs yet."));
        assert_eq!(figure_text(&page, "oldest_age_days"), "none");
        assert!(!page.contains("<svg"), "no chart of nothing");
    }

    #[test]
    fn five_thousand_runs_make_a_small_page_with_daily_points() {
        let mut big = section("bureau-a", 0);
        big.runs = (0..5000)
            .map(|n| {
                let mut r = run(n, "bureau-a");
                r.at = format!(
                    "2024-{:02}-{:02}T{:02}:{:02}:00Z",
                    1 + n / 500,
                    1 + n / 20 % 25,
                    n % 20,
                    n % 60
                );
                r
            })
            .collect();
        let mut data = report(vec![big.clone()]);
        data.overall.runs = big.runs.clone();
        let page = render(&data);
        assert!(page.len() < 1_500_000, "page is {} bytes", page.len());
        assert!(page.contains("5000 runs: each point is the mean rate of one day&#39;s runs"));
    }

    #[test]
    fn page_loads_nothing_from_elsewhere() {
        let page = render(&report(vec![section("bureau-a", 5)]));
        for needle in [
            "<script src",
            "<link",
            "<img",
            "@import",
            "url(",
            "http://",
            "https://",
        ] {
            assert!(!page.contains(needle), "page contains {needle}");
        }
    }

    #[test]
    fn write_report_creates_the_directory_and_index_html() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("nested/report");
        let path = write_report(&report(vec![]), &out).expect("written");
        assert_eq!(path, out.join("index.html"));
        let text = std::fs::read_to_string(&path).expect("readable");
        assert!(text.contains("data-section=\"All contributors\""));
    }

    #[test]
    fn an_out_dir_that_is_or_lies_under_a_file_is_a_usage_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("write");
        for out in [file.clone(), file.join("sub")] {
            let err = check_out_dir(&out).expect_err("a file");
            assert!(
                matches!(&err, Error::Usage { arg, .. } if arg == "--out"),
                "{err}"
            );
        }
        assert!(check_out_dir(&dir.path().join("new/report")).is_ok());
    }

    #[test]
    fn write_report_names_the_path_it_could_not_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "not a dir").expect("write");
        let err = write_report(&report(vec![]), &blocker).expect_err("cannot write under a file");
        assert!(
            matches!(&err, Error::Io { path, .. } if path == &blocker),
            "{err}"
        );
    }
}
