//! The workbench as the tests meet it: `silverline serve` started on a free
//! loopback port, an access file of bearer tokens, and readers of its pages.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use silverline::serve::access::token_hash;

/// How long the workbench may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `silverline serve`, stopped when dropped.
pub struct Workbench {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The `silverline serve` command for `config`, with `extra` arguments.
pub fn serve_command(config: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_silverline"));
    command
        .args(["--log-format", "text", "serve", "--config"])
        .arg(config)
        .args(extra)
        .env_remove("SILVERLINE_SERVE_ACCESS")
        .env_remove("SILVERLINE_SERVE_ACCESS_FILE");
    command
}

impl Workbench {
    /// Starts the workbench on `config` with the access file `access` and
    /// waits until it listens.
    pub fn start(config: &Path, access: &Path) -> Workbench {
        let access = access.display().to_string();
        Workbench::start_with(config, &["--access", &access])
    }

    /// Starts the workbench on `config` with `extra` arguments (besides `--listen`).
    pub fn start_with(config: &Path, extra: &[&str]) -> Workbench {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["--listen", listen.as_str()];
        args.extend_from_slice(extra);
        Workbench::launch(serve_command(config, &args), port)
    }

    /// Starts `command` (a `silverline serve` listening on 127.0.0.1:`port`)
    /// and waits until it listens.
    pub fn launch(mut command: Command, port: u16) -> Workbench {
        let listen = format!("127.0.0.1:{port}");
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut workbench = Workbench {
            child,
            base: format!("http://{listen}"),
        };
        workbench.wait_until_listening();
        workbench
    }

    /// Waits for the line `silverline serve` prints once its socket is
    /// bound. (A connection that succeeds is no proof: before the server
    /// binds, a loopback connect may meet itself or another test's server
    /// on the same port.)
    fn wait_until_listening(&mut self) {
        let stdout = self.child.stdout.take().expect("stdout is piped");
        let (said, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let listening = lines
                .by_ref()
                .any(|line| line.is_ok_and(|l| l.starts_with("workbench listening on ")));
            let _ = said.send(listening);
            // Drained to the end: the server never blocks on a full pipe.
            lines.for_each(drop);
        });
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match heard.recv_timeout(Duration::from_millis(100)) {
                Ok(true) => return,
                Ok(false) | Err(RecvTimeoutError::Disconnected) => self.exited(),
                Err(RecvTimeoutError::Timeout) => {
                    if self.child.try_wait().unwrap().is_some() {
                        self.exited();
                    }
                    assert!(
                        Instant::now() < deadline,
                        "silverline serve did not listen within {START_TIMEOUT:?}"
                    );
                }
            }
        }
    }

    /// Fails the test with how `silverline serve` exited and what it said.
    fn exited(&mut self) -> ! {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        panic!("silverline serve exited with {status}: {stderr}");
    }

    /// The URL of `path` (starting with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Workbench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `[[grant]]` of an access file, for a bearer token.
pub struct TokenGrant<'a> {
    /// The token (the file holds its SHA-256).
    pub token: &'a str,
    /// The actor's name.
    pub name: &'a str,
    /// `viewer` or `operator`.
    pub role: &'a str,
    /// Sees sensitive columns.
    pub pii: bool,
    /// Contributors covered; empty: every one.
    pub contributors: &'a [&'a str],
}

/// Writes an access file of `grants` (and `extra` lines first) to `dir/access.toml`.
pub fn write_access(dir: &Path, extra: &str, grants: &[TokenGrant<'_>]) -> PathBuf {
    let mut text = format!("{extra}\n");
    for grant in grants {
        text.push_str(&format!(
            "[[grant]]\ntoken_sha256 = \"{}\"\nname = \"{}\"\nrole = \"{}\"\npii = {}\n",
            token_hash(grant.token),
            grant.name,
            grant.role,
            grant.pii
        ));
        if !grant.contributors.is_empty() {
            let list: Vec<String> = grant
                .contributors
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect();
            text.push_str(&format!("contributors = [{}]\n", list.join(", ")));
        }
    }
    let path = dir.join("access.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The CSRF token in the first form of a page.
pub fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("no CSRF field in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// The text of the element carrying `data-fact="<fact>"` on a detail page.
pub fn fact_of(html: &str, fact: &str) -> String {
    let marker = format!("data-fact=\"{fact}\">");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no fact {fact}"))
        + marker.len();
    html[start..].split('<').next().unwrap().to_string()
}

/// The body of a GET of `url` (anonymous: `--insecure-local`), whatever its status.
pub async fn page_text(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}
