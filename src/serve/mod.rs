//! `silverline serve`: the workbench, a small web application over the
//! exception store, the dq_error files and the run summaries, where people
//! see the exceptions they may see and act on them.
//!
//! ```text
//!  browser ──► security headers ──► who is it? ──► page or action ──► exception store, dq_error
//!              (CSP, no-store)      token | session      │              (read live on every request)
//!                                   | proxy headers      └─► ignore / accept / correct + replay
//!                                   | --insecure-local        (the command line's own paths)
//! ```
//!
//! Nobody is let in anonymously unless the workbench is started with
//! `--insecure-local` on a loopback address ([`check_listen`]). Every
//! response carries a strict Content-Security-Policy (nothing but the
//! workbench's own style sheet loads; no script runs), and every form a CSRF
//! token.

pub mod access;
pub mod actions;
pub mod data;
pub mod pages;
pub mod previous;
mod routes;
pub mod session;

use std::net::SocketAddr;
use std::sync::Arc;

use access::Access;

use crate::config::Plan;
use crate::core::sql::QueryMemory;
use crate::error::{Error, Result};

/// The Content-Security-Policy of every response: nothing but the
/// workbench's own style sheet, no script, forms only to the workbench.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Who may come in; None only with `insecure_local`.
    pub access: Option<Access>,
    /// Let anyone on this machine in as an operator who sees personal data
    /// (only on a loopback address).
    pub insecure_local: bool,
}

/// What every request handler shares.
#[derive(Debug)]
struct App {
    plan: Plan,
    /// The memory pool every view's queries share (`[resources]`).
    memory: QueryMemory,
    access: Option<Access>,
    insecure_local: bool,
    sessions: session::Sessions,
}

/// Refuses a way of serving that would let strangers in: anonymous access
/// (`--insecure-local`) on an address other than loopback, or no way to
/// authenticate at all (a usage error, exit 2).
pub fn check_listen(options: &ServeOptions) -> Result<()> {
    if options.insecure_local && !options.listen.ip().is_loopback() {
        return Err(Error::Usage {
            arg: "--insecure-local".to_string(),
            reason: format!(
                "anonymous access is only for a loopback address (127.0.0.1 or ::1), not {}: listen on 127.0.0.1, or give an access file (--access) instead",
                options.listen
            ),
        });
    }
    if !options.insecure_local && options.access.is_none() {
        return Err(Error::Usage {
            arg: "--access".to_string(),
            reason: format!(
                "nobody could log in: give an access file (--access, or its text in {}) or, on this machine only, --insecure-local with --listen 127.0.0.1:<port>",
                access::ACCESS_ENV
            ),
        });
    }
    Ok(())
}

/// An address this host does not have, or a port it may not open, is the
/// user's to change (exit 2); one in use may be free on a retry (exit 3).
fn bind_error(options: &ServeOptions, source: std::io::Error) -> Error {
    use std::io::ErrorKind;
    match source.kind() {
        ErrorKind::AddrNotAvailable | ErrorKind::PermissionDenied => Error::Usage {
            arg: "--listen".to_string(),
            reason: format!("cannot listen on {}: {source}", options.listen),
        },
        _ => Error::Io {
            path: format!("listen address {}", options.listen).into(),
            source,
        },
    }
}

/// Serves the workbench until the process is stopped.
pub async fn serve(plan: Plan, options: ServeOptions) -> Result<()> {
    check_listen(&options)?;
    let memory = plan.query_memory()?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| bind_error(&options, source))?;
    let app = Arc::new(App {
        memory,
        plan,
        access: options.access,
        insecure_local: options.insecure_local,
        sessions: session::Sessions::default(),
    });
    let router = routes::router(app);
    println!("workbench listening on http://{}", options.listen);
    tracing::info!(listen = %options.listen, "workbench serving");
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .map_err(|source| Error::Io {
        path: format!("listen address {}", options.listen).into(),
        source,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_address_this_host_lacks_is_a_usage_error_one_in_use_is_retryable() {
        let options = ServeOptions {
            listen: "192.0.2.1:8080".parse().unwrap(),
            access: None,
            insecure_local: false,
        };
        let missing = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
        assert_eq!(
            bind_error(&options, missing).class(),
            crate::error::ErrorClass::Config
        );
        let busy = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        assert_eq!(
            bind_error(&options, busy).class(),
            crate::error::ErrorClass::Infra
        );
    }

    use super::*;

    fn options(listen: &str, insecure_local: bool, access: bool) -> ServeOptions {
        ServeOptions {
            listen: listen.parse().unwrap(),
            access: access.then(Access::default),
            insecure_local,
        }
    }

    #[test]
    fn anonymous_access_only_on_loopback_and_some_way_in_is_needed() {
        assert!(check_listen(&options("127.0.0.1:8080", true, false)).is_ok());
        assert!(check_listen(&options("[::1]:8080", true, false)).is_ok());
        assert!(check_listen(&options("0.0.0.0:8080", false, true)).is_ok());
        let open = check_listen(&options("0.0.0.0:8080", true, true)).unwrap_err();
        assert!(open.to_string().contains("--insecure-local"), "{open}");
        assert_eq!(open.class().exit_code(), 2);
        let nobody = check_listen(&options("127.0.0.1:8080", false, false)).unwrap_err();
        assert!(nobody.to_string().contains("--access"), "{nobody}");
    }
}
