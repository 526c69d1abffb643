//! The exception report in a real browser: headless Chromium (Debian's
//! `chromium` package, installed by `localstack/install-chromium.sh`) opens the
//! page written by `write_report` straight from disk, and we check what a
//! person would see: every figure in the DOM, a screenshot, no console error,
//! and the section picker working.
//!
//! The browser is driven through `harness/devtools.rs` (the DevTools
//! protocol over `--remote-debugging-pipe`), whose console-error detector the
//! negative controls here prove: it sees a page that throws, a
//! `console.error` and a file that failed to load.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::devtools::{DevTools, chromium, console_errors_of, file_url, headless_flags, run};
use serde_json::json;
use silverline::core::counts::Counts;
use silverline::exceptions::figures::{BacklogFigures, RuleBacklog, WeekFlow};
use silverline::report::html::write_report;
use silverline::report::model::{ReportData, RunPoint, Section};

// ---------------------------------------------------------------- the report

const CONTRIBUTORS: [&str; 2] = ["bureau-north", "bureau-south"];
const RULES: [&str; 3] = ["BAL_NEGATIVE", "REF_ACCOUNT_MISSING", "DATE_IN_FUTURE"];

/// Figures that differ in every section and every field, so a figure shown in
/// the wrong place cannot pass.
fn figures(seed: u64) -> BacklogFigures {
    BacklogFigures {
        open: 100 + seed,
        pending: 40 + seed,
        quarantined: 60,
        missing: 23 + seed,
        stale: 11 + seed,
        oldest_age_days: Some(120 + seed),
        entered_7d: 13 + seed,
        exited_7d: 7 + seed,
        entered_30d: 52 + seed,
        exited_30d: 38 + seed,
        accepted: 21 + seed,
        ignored: 5 + seed,
    }
}

fn rules(seed: u64) -> Vec<RuleBacklog> {
    RULES
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let by_age = [5 + seed + i as u64, 4, 3 * i as u64, 1 + seed];
            RuleBacklog {
                rule: rule.to_string(),
                by_age,
                total: by_age.iter().sum(),
            }
        })
        .collect()
}

fn weeks(seed: u64) -> Vec<WeekFlow> {
    (0..10u64)
        .map(|w| WeekFlow {
            week: format!(
                "2025-{:02}-{:02}",
                1 + (6 + 7 * w) / 31,
                1 + (6 + 7 * w) % 31
            ),
            entered: 5 + (w * 7 + seed) % 11,
            exited: 3 + (w * 5 + seed) % 9,
        })
        .collect()
}

fn runs(contributor: &str, offset: u32) -> Vec<RunPoint> {
    (0..25u32)
        .map(|n| RunPoint {
            at: format!("2025-03-{:02}T{:02}:15:00Z", 1 + n, 6 + offset),
            contributor: contributor.to_string(),
            drop_id: format!("{contributor}-drop-{n:03}"),
            status: if n % 9 == 8 { "failed" } else { "committed" }.to_string(),
            counts: Counts {
                received: 10_000,
                committed: 9_500 - 10 * u64::from(n),
                warned: 120 + 3 * u64::from(n),
                quarantined: 300 + 10 * u64::from(n),
                dropped: 150,
                pending: 50,
            },
            summary: format!("file:///var/silverline/summaries/{contributor}/{n:03}.json"),
        })
        .collect()
}

fn section(name: &str, seed: u64, runs: Vec<RunPoint>) -> Section {
    Section {
        name: name.to_string(),
        backlog: figures(seed),
        open_by_rule: rules(seed),
        weekly_flow: weeks(seed),
        runs,
    }
}

/// Two contributors and the overall section, with ~50 runs in all.
fn crafted_report() -> ReportData {
    let north = runs(CONTRIBUTORS[0], 0);
    let south = runs(CONTRIBUTORS[1], 1);
    let mut all: Vec<RunPoint> = north.iter().chain(&south).cloned().collect();
    all.sort_by(|a, b| a.at.cmp(&b.at));
    ReportData {
        dataset: "credit_accounts".to_string(),
        generated_at: "2025-03-26T08:00:00Z".to_string(),
        stale_after_days: 30,
        overall: section("All contributors", 0, all),
        contributors: vec![
            section(CONTRIBUTORS[0], 1, north),
            section(CONTRIBUTORS[1], 2, south),
        ],
        alerts: Vec::new(),
    }
}

/// The figures every section must show, as (section, figure) -> text.
fn expected_figures(data: &ReportData) -> BTreeMap<(String, String), String> {
    let mut want = BTreeMap::new();
    for s in std::iter::once(&data.overall).chain(&data.contributors) {
        let b = &s.backlog;
        let oldest = b
            .oldest_age_days
            .map_or("none".to_string(), |d| d.to_string());
        for (key, value) in [
            ("open", b.open.to_string()),
            ("pending", b.pending.to_string()),
            ("quarantined", b.quarantined.to_string()),
            ("missing", b.missing.to_string()),
            ("stale", b.stale.to_string()),
            ("oldest_age_days", oldest),
            ("entered_7d", b.entered_7d.to_string()),
            ("exited_7d", b.exited_7d.to_string()),
            ("entered_30d", b.entered_30d.to_string()),
            ("exited_30d", b.exited_30d.to_string()),
            ("accepted", b.accepted.to_string()),
            ("ignored", b.ignored.to_string()),
        ] {
            want.insert((s.name.clone(), key.to_string()), value);
        }
    }
    want
}

/// The DOM after the page's script has run (`--dump-dom`).
fn dump_dom(page: &Path) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut command = Command::new(chromium());
    command
        .args(headless_flags(profile.path()))
        .arg("--virtual-time-budget=2000")
        .arg("--dump-dom")
        .arg(file_url(page));
    let out = run(command);
    assert!(
        out.status.success(),
        "dump-dom failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("DOM is UTF-8")
}

/// A screenshot of the page at 1400x2000, as PNG bytes.
fn screenshot(page: &Path, png: &Path) -> Vec<u8> {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut command = Command::new(chromium());
    command
        .args(headless_flags(profile.path()))
        .arg("--hide-scrollbars")
        .arg("--window-size=1400,2000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(file_url(page));
    let out = run(command);
    assert!(
        out.status.success(),
        "screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(png).expect("screenshot written")
}

// ---------------------------------------------------------------- reading the DOM

/// Every `data-figure` element's text, by (section, figure), scanning the DOM
/// text section by section.
fn figures_in_dom(dom: &str) -> BTreeMap<(String, String), String> {
    let mut found = BTreeMap::new();
    for part in dom.split("<section ").skip(1) {
        let Some(name) = attribute(part, "data-section") else {
            continue;
        };
        let body = part.split("</section>").next().unwrap_or(part);
        for piece in body.split("data-figure=\"").skip(1) {
            let Some((key, rest)) = piece.split_once('"') else {
                continue;
            };
            let text = rest
                .split_once('>')
                .and_then(|(_, after)| after.split_once('<'))
                .map(|(text, _)| text.to_string());
            if let Some(text) = text {
                found.insert((name.clone(), key.to_string()), text);
            }
        }
    }
    found
}

/// The value of `name="..."` in the start of a tag.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let open = tag.split('>').next()?;
    let (_, rest) = open.split_once(&format!("{name}=\""))?;
    rest.split_once('"').map(|(value, _)| value.to_string())
}

fn written_report(dir: &Path) -> (ReportData, PathBuf) {
    let data = crafted_report();
    let page = write_report(&data, &dir.join("report")).expect("report written");
    (data, page)
}

// ---------------------------------------------------------------- the tests

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn dom_shows_every_figure_of_every_section_and_every_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, page) = written_report(dir.path());
    let dom = dump_dom(&page);

    assert_eq!(figures_in_dom(&dom), expected_figures(&data));
    for rule in RULES {
        assert!(dom.contains(rule), "rule {rule} missing from the DOM");
    }
    for (index, name) in CONTRIBUTORS.iter().enumerate() {
        let option = format!("<option value=\"s{}\">{name}</option>", index + 1);
        assert!(dom.contains(&option), "no picker option {option}");
    }
    assert!(
        dom.contains("<nav id=\"section-nav\">"),
        "the script should have shown the section picker"
    );
    assert_eq!(
        dom.matches("<svg class=\"chart\"").count(),
        3 * 3,
        "three charts per section"
    );
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn screenshot_is_a_png_with_something_drawn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, page) = written_report(dir.path());
    let png = screenshot(&page, &dir.path().join("report.png"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 20_000, "screenshot only {} bytes", png.len());
    if let Ok(keep) = std::env::var("SILVERLINE_REPORT_SCREENSHOT") {
        std::fs::write(keep, &png).expect("keep screenshot");
    }
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn console_error_detector_reports_a_page_that_throws() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("boom.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>fine so far</p>\
         <script>console.log(\"not an error\"); throw new Error(\"boom\");</script></body></html>",
    )
    .expect("write page");
    let errors = console_errors_of(&page);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("boom"), "{errors:?}");
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn console_error_detector_reports_console_error_and_missing_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("noisy.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><img src=\"missing.png\" alt=\"\">\
         <script>console.warn(\"only a warning\"); console.error(\"bad\", 42);</script></body></html>",
    )
    .expect("write page");
    let errors = console_errors_of(&page);
    assert!(
        errors.iter().any(|e| e == "console.error: bad 42"),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("missing.png")),
        "{errors:?}"
    );
    assert!(!errors.iter().any(|e| e.contains("warning")), "{errors:?}");
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn report_page_has_no_console_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, page) = written_report(dir.path());
    assert_eq!(console_errors_of(&page), Vec::<String>::new());
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn picking_a_contributor_shows_only_that_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, page) = written_report(dir.path());
    let mut browser = DevTools::launch();
    browser.open_page();
    browser.navigate(&file_url(&page));
    let visible = "JSON.stringify(Array.from(document.querySelectorAll('section.report-section'))\
                   .filter(s => !s.hidden).map(s => s.dataset.section))";
    assert_eq!(browser.evaluate(visible), json!("[\"All contributors\"]"));

    browser.evaluate(
        "const p = document.getElementById('section-picker'); p.value = 's2'; \
         p.dispatchEvent(new Event('change')); true",
    );
    assert_eq!(browser.evaluate(visible), json!("[\"bureau-south\"]"));

    browser.evaluate(
        "const q = document.getElementById('section-picker'); q.value = 'every'; \
         q.dispatchEvent(new Event('change')); true",
    );
    assert_eq!(
        browser.evaluate(visible),
        json!("[\"All contributors\",\"bureau-north\",\"bureau-south\"]")
    );
    assert_eq!(browser.console_errors(), Vec::<String>::new());
}

#[test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
fn hostile_names_stay_text_in_the_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut data = crafted_report();
    data.contributors[0].name = "<img src=x onerror=\"throw new Error('img')\">".to_string();
    data.contributors[1].open_by_rule[0].rule =
        "<script>throw new Error(\"injected\")</script>".to_string();
    let page = write_report(&data, dir.path()).expect("report written");

    let mut browser = DevTools::launch();
    browser.open_page();
    browser.navigate(&file_url(&page));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    assert_eq!(browser.evaluate("document.scripts.length"), json!(1));
    assert_eq!(browser.evaluate("document.images.length"), json!(0));
    let names = browser.evaluate(
        "Array.from(document.querySelectorAll('section.report-section')).map(s => s.dataset.section)",
    );
    assert_eq!(names[1], json!(data.contributors[0].name));
}

/// The report of real runs, written by the binary from the exception store and
/// the summaries of the embedded default, shows their backlog in the browser.
#[tokio::test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
async fn the_report_of_real_runs_shows_their_backlog() {
    use silverline::demo::Workspace;
    use silverline::demo::generate::Portfolio;
    use silverline::pipeline::RunOptions;

    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::create(&dir.path().join("ws")).await.unwrap();
    let month = chrono::NaiveDate::from_ymd_opt(2026, 5, 1).unwrap();
    let mut rows = Portfolio::new("BANK_W", 25, false, 3).statements(month, false);
    rows[0].balance = -100;
    rows[1].balance = -100;
    let late: Vec<&str> = rows[2..5].iter().map(|r| r.holder.as_str()).collect();
    let pending = rows
        .iter()
        .filter(|r| late.contains(&r.holder.as_str()))
        .count();
    ws.put_drop_holding_back("BANK_W", "2026-05", &rows, &late)
        .await
        .unwrap();
    ws.run_drop("BANK_W", "2026-05", &RunOptions::default())
        .await
        .unwrap();

    let out = dir.path().join("report");
    let config = ws.dir.join("config/credit_statements.toml");
    let printed = Command::new(env!("CARGO_BIN_EXE_silverline"))
        .args(["--log-format", "text", "report", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let page = out.join("index.html");
    let figures = figures_in_dom(&dump_dom(&page));
    for section in ["All contributors", "BANK_W"] {
        let figure = |name: &str| figures[&(section.to_string(), name.to_string())].clone();
        assert_eq!(figure("open"), (pending + 2).to_string(), "{section}");
        assert_eq!(figure("pending"), pending.to_string(), "{section}");
        assert_eq!(figure("quarantined"), "2", "{section}");
        assert_eq!(figure("entered_7d"), (pending + 2).to_string(), "{section}");
        assert_eq!(figure("stale"), "0", "{section}");
    }
    assert_eq!(console_errors_of(&page), Vec::<String>::new());
    let png = screenshot(&page, &dir.path().join("real.png"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}
