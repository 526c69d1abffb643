//! The exception report in a real browser: headless Chromium (Debian's
//! `chromium` package, installed by `localstack/install-chromium.sh`) opens the
//! page written by `write_report` straight from disk, and we check what a
//! person would see: every figure in the DOM, a screenshot, no console error,
//! and the section picker working.
//!
//! Console errors are read through the DevTools protocol over
//! `--remote-debugging-pipe` (JSON messages ending in a NUL byte, commands on
//! fd 3, answers on fd 4): uncaught exceptions (`Runtime.exceptionThrown`),
//! `console.error`/`console.assert` calls (`Runtime.consoleAPICalled`) and
//! browser-side errors such as a resource that failed to load
//! (`Log.entryAdded` at level `error`). A negative control proves the
//! detector sees a page that throws.
//!
//! Chromium is `$SILVERLINE_CHROMIUM`, else `chromium` on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use silverline::core::counts::Counts;
use silverline::exceptions::figures::{BacklogFigures, RuleBacklog, WeekFlow};
use silverline::report::html::write_report;
use silverline::report::model::{ReportData, RunPoint, Section};

/// How long any one browser launch may take before the test gives up.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

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

// ---------------------------------------------------------------- the browser

fn chromium() -> String {
    std::env::var("SILVERLINE_CHROMIUM")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "chromium".to_string())
}

/// The flags of every launch: headless, no sandbox (we run as root), no GPU,
/// and a throwaway profile.
fn headless_flags(profile: &Path) -> Vec<String> {
    vec![
        "--headless".to_string(),
        "--no-sandbox".to_string(),
        "--disable-gpu".to_string(),
        "--no-first-run".to_string(),
        "--no-default-browser-check".to_string(),
        format!("--user-data-dir={}", profile.display()),
    ]
}

fn file_url(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("absolute path")
        .to_string()
}

/// Runs a command to the end, reading its output as it comes (a DOM can be
/// larger than a pipe holds); kills it after [`BROWSER_TIMEOUT`].
fn run(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e} (set SILVERLINE_CHROMIUM)", chromium()));
    let stdout = drain_in_background(child.stdout.take().expect("stdout"));
    let stderr = drain_in_background(child.stderr.take().expect("stderr"));
    let status = wait_or_kill(&mut child, BROWSER_TIMEOUT);
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain_in_background(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn wait_or_kill(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish within {limit:?}", chromium());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// A browser driven over the DevTools protocol on a pipe. The launcher
/// (Debian's `chromium` is a shell script) gets our stdin as fd 3 and our
/// stdout as fd 4, which is where `--remote-debugging-pipe` talks.
struct DevTools {
    child: Child,
    commands: ChildStdin,
    messages: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    /// Every event received so far, in order.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl DevTools {
    fn launch() -> DevTools {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(chromium())
            .args(headless_flags(profile.path()))
            .arg("--remote-debugging-pipe")
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium()));
        let commands = child.stdin.take().expect("stdin");
        let messages = read_messages(child.stdout.take().expect("stdout"));
        DevTools {
            child,
            commands,
            messages,
            next_id: 0,
            session: None,
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command (to the attached page once there is one) and returns
    /// its result, keeping the events that arrive meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("json");
        bytes.push(0);
        self.commands.write_all(&bytes).expect("send to browser");
        self.commands.flush().expect("flush");
        let deadline = Instant::now() + BROWSER_TIMEOUT;
        loop {
            let reply = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("no answer to {method}"));
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method} failed: {reply}");
                return reply["result"].clone();
            }
            self.events.push(reply);
        }
    }

    fn next_message(&self, deadline: Instant) -> Option<Value> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.messages.recv_timeout(wait).ok()
    }

    /// Opens a fresh page and attaches to it, with the runtime, log and page
    /// domains on, so that console messages and exceptions are reported.
    fn open_page(&mut self) {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = attached["sessionId"].as_str().map(str::to_string);
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            self.call(domain, json!({}));
        }
    }

    /// Loads `url`, waits for its load event, then for the page to go quiet
    /// (no event for half a second) so late errors are caught too.
    fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + BROWSER_TIMEOUT;
        while !self
            .events
            .iter()
            .any(|e| e["method"] == "Page.loadEventFired")
        {
            let event = self.next_message(deadline).expect("page loads");
            self.events.push(event);
        }
        while let Some(event) = self.next_message(Instant::now() + Duration::from_millis(500)) {
            self.events.push(event);
        }
    }

    /// Evaluates a script in the page and returns its value.
    fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// The errors a developer would see in the console, one line each.
    fn console_errors(&self) -> Vec<String> {
        self.events.iter().filter_map(console_error).collect()
    }
}

impl Drop for DevTools {
    fn drop(&mut self) {
        let _ = self
            .commands
            .write_all(b"{\"id\":0,\"method\":\"Browser.close\"}\0");
        let _ = self.commands.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Splits the browser's output into JSON messages (each ends with a NUL).
fn read_messages(mut pipe: impl Read + Send + 'static) -> Receiver<Value> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut pending = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            pending.extend_from_slice(&chunk[..n]);
            while let Some(end) = pending.iter().position(|b| *b == 0) {
                let message: Vec<u8> = pending.drain(..=end).collect();
                if let Ok(value) = serde_json::from_slice(&message[..end])
                    && sender.send(value).is_err()
                {
                    return;
                }
            }
        }
    });
    receiver
}

/// The console line of an event, if the event is an error.
fn console_error(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.exceptionThrown" => {
            let details = &params["exceptionDetails"];
            let what = details["exception"]["description"]
                .as_str()
                .or(details["text"].as_str())
                .unwrap_or("exception");
            Some(format!("uncaught: {what}"))
        }
        "Runtime.consoleAPICalled"
            if matches!(params["type"].as_str(), Some("error" | "assert")) =>
        {
            let args: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(console_argument)
                .collect();
            Some(format!(
                "console.{}: {}",
                params["type"].as_str()?,
                args.join(" ")
            ))
        }
        "Log.entryAdded" if params["entry"]["level"] == "error" => Some(format!(
            "{}: {} {}",
            params["entry"]["source"].as_str().unwrap_or("log"),
            params["entry"]["text"].as_str().unwrap_or(""),
            params["entry"]["url"].as_str().unwrap_or("")
        )),
        _ => None,
    }
}

/// One argument of a console call as the console prints it.
fn console_argument(argument: &Value) -> String {
    argument["value"]
        .as_str()
        .or(argument["description"].as_str())
        .map_or_else(|| argument["value"].to_string(), str::to_string)
}

/// Loads a page and returns its console errors.
fn console_errors_of(page: &Path) -> Vec<String> {
    let mut browser = DevTools::launch();
    browser.open_page();
    browser.navigate(&file_url(page));
    browser.console_errors()
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
