//! Browser sessions and CSRF tokens.
//!
//! Logging in with a token sets an `HttpOnly`, `SameSite=Strict` cookie
//! holding a random session id; the server keeps the session (who, since
//! when) in memory, so a restart logs everyone out. Every form carries a CSRF
//! token derived from a secret drawn at start and what the request is bound
//! to (the session, the bearer token, the proxy identity): a POST without
//! the right one is refused (403).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::access::Principal;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "silverline_session";
/// The cookie binding the login form's CSRF token before there is a session.
pub const LOGIN_COOKIE: &str = "silverline_login";
/// How long a session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The name of the CSRF field of every form.
pub const CSRF_FIELD: &str = "csrf";

/// A logged-in browser.
#[derive(Debug, Clone)]
struct Session {
    principal: Principal,
    started: Instant,
}

/// The live sessions, and the secret CSRF tokens are derived from.
#[derive(Debug)]
pub struct Sessions {
    live: Mutex<HashMap<String, Session>>,
    secret: [u8; 32],
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            live: Mutex::new(HashMap::new()),
            secret: random_bytes(),
        }
    }
}

impl Sessions {
    /// Starts a session for `principal`; returns its id.
    pub fn start(&self, principal: Principal) -> String {
        let id = hex::encode(random_bytes());
        let session = Session {
            principal,
            started: Instant::now(),
        };
        if let Ok(mut live) = self.live.lock() {
            live.retain(|_, s| s.started.elapsed() < SESSION_LIFETIME);
            live.insert(id.clone(), session);
        }
        id
    }

    /// The person of a live session.
    pub fn find(&self, id: &str) -> Option<Principal> {
        let live = self.live.lock().ok()?;
        live.get(id)
            .filter(|s| s.started.elapsed() < SESSION_LIFETIME)
            .map(|s| s.principal.clone())
    }

    /// Ends a session.
    pub fn end(&self, id: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
    }

    /// The CSRF token of forms sent to a request bound to `binding`.
    pub fn csrf_token(&self, binding: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(self.secret);
        hash.update(b"csrf\0");
        hash.update(binding.as_bytes());
        hex::encode(hash.finalize())
    }

    /// Whether `token` is the CSRF token for `binding`.
    pub fn csrf_ok(&self, binding: &str, token: Option<&str>) -> bool {
        token.is_some_and(|token| {
            let expected = self.csrf_token(binding);
            token.len() == expected.len()
                && token
                    .bytes()
                    .zip(expected.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }
}

/// 32 random bytes from the operating system's generator.
pub fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, for the whole site,
/// and `Secure` when the browser reached the workbench over HTTPS;
/// `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        max_age.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::access::Grant;

    #[test]
    fn csrf_tokens_are_bound_to_what_the_request_is() {
        let sessions = Sessions::default();
        let token = sessions.csrf_token("session:a");
        assert!(sessions.csrf_ok("session:a", Some(&token)));
        assert!(!sessions.csrf_ok("session:b", Some(&token)));
        assert!(!sessions.csrf_ok("session:a", None));
        assert!(!sessions.csrf_ok("session:a", Some("")));
        assert_ne!(token, Sessions::default().csrf_token("session:a"));
    }

    #[test]
    fn a_session_finds_its_person_until_it_ends() {
        let sessions = Sessions::default();
        let principal = Principal {
            name: "ops".to_string(),
            grants: vec![Grant::everything()],
        };
        let id = sessions.start(principal.clone());
        assert_eq!(sessions.find(&id), Some(principal));
        sessions.end(&id);
        assert_eq!(sessions.find(&id), None);
    }

    #[test]
    fn cookies_are_read_from_every_cookie_header() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, "a=1; silverline_session=abc".parse().unwrap());
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "b"), None);
        let set = set_cookie(SESSION_COOKIE, "abc", SESSION_LIFETIME, false);
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
        assert!(!set.contains("Secure"));
        assert!(set_cookie(SESSION_COOKIE, "abc", SESSION_LIFETIME, true).ends_with("; Secure"));
    }
}
