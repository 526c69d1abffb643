//! A fault-injecting TCP proxy for HTTP services (S3, the REST catalog).
//!
//! Each new connection either gets a real fault (the request is read in full,
//! then answered `503 SlowDown` and closed, as an overloaded S3 would) or is
//! forwarded byte for byte to the upstream server. The test decides how many
//! connections fail: `n` then none, or all of them. Clients keep connections
//! alive, so once one is forwarded the requests that reuse it are not faulted:
//! the proxy injects faults where a client opens connections, which is where
//! retries start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::thread;

/// Every connection fails: [`FaultProxy::set_faults`] with this value.
pub const FOREVER: i64 = -1;

/// A running proxy on a loopback port; threads end with the test process.
pub struct FaultProxy {
    port: u16,
    faults_left: Arc<AtomicI64>,
    injected: Arc<AtomicU64>,
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream` (an `http://host:port` URL) that
    /// fails the first `faults` connections ([`FOREVER`]: all of them).
    pub fn start(upstream: &str, faults: i64) -> FaultProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let faults_left = Arc::new(AtomicI64::new(faults));
        let injected = Arc::new(AtomicU64::new(0));
        let (left, count) = (faults_left.clone(), injected.clone());
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if take_fault(&left) {
                    count.fetch_add(1, Ordering::SeqCst);
                    thread::spawn(move || answer_slow_down(client));
                } else {
                    let upstream = upstream.clone();
                    thread::spawn(move || forward(client, &upstream));
                }
            }
        });
        FaultProxy {
            port,
            faults_left,
            injected,
        }
    }

    /// The proxy's URL, to use as an endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many more connections fail from now on ([`FOREVER`]: all; 0: none).
    pub fn set_faults(&self, faults: i64) {
        self.faults_left.store(faults, Ordering::SeqCst);
    }

    /// How many faults were injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }
}

/// Whether the next connection gets a fault, consuming one from the budget.
fn take_fault(left: &AtomicI64) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
        FOREVER => Some(FOREVER),
        0 => None,
        n => Some(n - 1),
    })
    .is_ok()
}

/// Reads one request (head and `Content-Length` body) and answers 503 SlowDown.
fn answer_slow_down(client: TcpStream) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut body_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            body_length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; body_length];
    let _ = reader.read_exact(&mut body);
    let payload = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>fault injected by the test proxy</Message></Error>";
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let mut client = client;
    let _ = client.write_all(response.as_bytes());
    let _ = client.shutdown(Shutdown::Both);
}

/// Copies bytes both ways between the client and the upstream server.
fn forward(client: TcpStream, upstream: &str) {
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (mut client_read, mut server_write) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    let upload = thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(Shutdown::Write);
    });
    let (mut server_read, mut client_write) = (server, client);
    let _ = std::io::copy(&mut server_read, &mut client_write);
    let _ = client_write.shutdown(Shutdown::Both);
    let _ = upload.join();
}
