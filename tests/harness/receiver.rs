//! A real HTTP/1.1 receiver on loopback for the tests of what the binary
//! sends out (OpenLineage events, webhooks): it records every request's
//! method, path, headers and body, answers `200 OK` (or `500` to the first N
//! requests, to test retries), and lives until the test process ends.
//!
//! ```ignore
//! let (url, receiver) = receiver::start();
//! receiver.fail_first(1);
//! // ... run the binary with `url` ...
//! assert_eq!(receiver.delivered().len(), 1);
//! ```

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One request the receiver got, with the status it answered.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent (path and query).
    pub path: String,
    /// Header names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status code the receiver answered (200, or 500 while failing).
    pub status: u16,
}

impl Request {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (panics when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body of {} {} is not JSON: {e}", self.method, self.path))
    }
}

/// The handle of a running receiver.
#[derive(Clone, Default)]
pub struct Receiver {
    requests: Arc<Mutex<Vec<Request>>>,
    failures_left: Arc<AtomicUsize>,
}

impl Receiver {
    /// Answers `500 Internal Server Error` to the next `n` requests.
    pub fn fail_first(&self, n: usize) {
        self.failures_left.store(n, Ordering::SeqCst);
    }

    /// Every request received so far, in arrival order (failed ones too).
    pub fn received(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests answered with a 2xx status.
    pub fn delivered(&self) -> Vec<Request> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.status))
            .collect()
    }

    /// The status for the next request: 500 while failures are left, else 200.
    fn next_status(&self) -> u16 {
        let failing = self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing { 500 } else { 200 }
    }
}

/// Starts a receiver on `127.0.0.1` (a free port); returns its base URL
/// (`http://127.0.0.1:PORT`, no trailing slash) and its handle.
pub fn start() -> (String, Receiver) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Receiver::default();
    let accepting = receiver.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let connection = accepting.clone();
            std::thread::spawn(move || serve(stream, &connection));
        }
    });
    (url, receiver)
}

/// Answers the requests of one (keep-alive) connection until it closes.
fn serve(stream: TcpStream, receiver: &Receiver) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    while let Some(mut request) = read_request(&mut reader) {
        request.status = receiver.next_status();
        let reason = if request.status == 200 {
            "OK"
        } else {
            "Internal Server Error"
        };
        receiver.requests.lock().unwrap().push(request.clone());
        let answer = format!(
            "HTTP/1.1 {} {reason}\r\ncontent-length: 0\r\n\r\n",
            request.status
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The next request on the connection, or None at its end.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let find = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(reader)?
    } else {
        let length = find("content-length").map_or(0, |v| v.parse().unwrap_or(0));
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        body
    };
    Some(Request {
        method,
        path,
        headers,
        body,
        status: 0,
    })
}

/// A chunked body (trailers skipped).
fn read_chunked(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        if size == 0 {
            let mut trailer = String::new();
            while reader.read_line(&mut trailer).ok()? > 2 {
                trailer.clear();
            }
            return Some(body);
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        body.extend_from_slice(&chunk[..size]);
    }
}
