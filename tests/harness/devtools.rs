//! Headless Chromium for the tests, driven over the DevTools protocol.
//!
//! Console errors are read through `--remote-debugging-pipe` (JSON messages
//! ending in a NUL byte, commands on fd 3, answers on fd 4): uncaught
//! exceptions (`Runtime.exceptionThrown`), `console.error`/`console.assert`
//! calls (`Runtime.consoleAPICalled`) and browser-side errors such as a
//! resource that failed to load (`Log.entryAdded` at level `error`).
//! `tests/report_browser.rs` holds the negative controls that prove the
//! detector sees a page that throws.
//!
//! Chromium is `$SILVERLINE_CHROMIUM`, else `chromium` on PATH (Debian's
//! package, installed by `localstack/install-chromium.sh`).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any one browser launch (or wait for a page) may take before the test gives up.
pub const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

pub fn chromium() -> String {
    std::env::var("SILVERLINE_CHROMIUM")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "chromium".to_string())
}

/// The flags of every launch: headless, no sandbox (we run as root), no GPU,
/// and a throwaway profile.
pub fn headless_flags(profile: &Path) -> Vec<String> {
    vec![
        "--headless".to_string(),
        "--no-sandbox".to_string(),
        "--disable-gpu".to_string(),
        "--no-first-run".to_string(),
        "--no-default-browser-check".to_string(),
        format!("--user-data-dir={}", profile.display()),
    ]
}

pub fn file_url(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("absolute path")
        .to_string()
}

/// Runs a command to the end, reading its output as it comes (a DOM can be
/// larger than a pipe holds); kills it after [`BROWSER_TIMEOUT`].
pub fn run(mut command: Command) -> Output {
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

/// A browser driven over the DevTools protocol on a pipe. The launcher
/// (Debian's `chromium` is a shell script) gets our stdin as fd 3 and our
/// stdout as fd 4, which is where `--remote-debugging-pipe` talks.
pub struct DevTools {
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
    pub fn launch() -> DevTools {
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
    pub fn call(&mut self, method: &str, params: Value) -> Value {
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
    pub fn open_page(&mut self) {
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
    pub fn navigate(&mut self, url: &str) {
        let before = self.loads();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for_load(before);
    }

    /// Clicks the element `selector` names (a link or a submit button, as a
    /// person would) and waits for the page it leads to.
    pub fn click(&mut self, selector: &str) {
        let before = self.loads();
        let found = self.evaluate(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.click(); return true; }})()",
            json!(selector)
        ));
        assert_eq!(found, json!(true), "nothing to click at {selector}");
        self.wait_for_load(before);
    }

    /// Types `value` into the field `selector` names (or picks it in a select).
    pub fn fill(&mut self, selector: &str, value: &str) {
        let done = self.evaluate(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.value = {}; return e.value === {}; }})()",
            json!(selector),
            json!(value),
            json!(value)
        ));
        assert_eq!(done, json!(true), "cannot fill {selector} with {value}");
    }

    /// The text of the element `selector` names (None when there is none).
    pub fn text(&mut self, selector: &str) -> Option<String> {
        let value = self.evaluate(&format!(
            "(() => {{ const e = document.querySelector({}); return e ? e.textContent : null; }})()",
            json!(selector)
        ));
        value.as_str().map(str::to_string)
    }

    /// How many pages have finished loading so far.
    fn loads(&self) -> usize {
        self.events
            .iter()
            .filter(|e| e["method"] == "Page.loadEventFired")
            .count()
    }

    /// Waits until more than `before` pages have loaded, then for quiet.
    fn wait_for_load(&mut self, before: usize) {
        let deadline = Instant::now() + BROWSER_TIMEOUT;
        while self.loads() <= before {
            let event = self.next_message(deadline).expect("page loads");
            self.events.push(event);
        }
        while let Some(event) = self.next_message(Instant::now() + Duration::from_millis(500)) {
            self.events.push(event);
        }
    }

    /// Evaluates a script in the page and returns its value.
    pub fn evaluate(&mut self, expression: &str) -> Value {
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
    pub fn console_errors(&self) -> Vec<String> {
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
pub fn console_errors_of(page: &Path) -> Vec<String> {
    let mut browser = DevTools::launch();
    browser.open_page();
    browser.navigate(&file_url(page));
    browser.console_errors()
}
