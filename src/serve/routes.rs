//! The workbench's routes: who is asking (bearer token, session cookie,
//! trusted proxy headers, or `--insecure-local`), what they may see and do,
//! and the handlers that read and act through `data` and `actions`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Form, Path, Query, Request, State};
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, REFERRER_POLICY,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{Next, from_fn_with_state, map_response};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::access::{
    EMAIL_HEADER, GROUPS_HEADER, Grant, Permission, Principal, USER_HEADER, token_hash,
};
use super::data::{Filter, ListQuery, detail, load_exception, load_list, shown_record_key};
use super::pages::{
    Allowed, Viewer, WORKBENCH_STYLE, backlog_page, detail_page, layout, list_page, login_page,
    problem_page,
};
use super::session::{
    LOGIN_COOKIE, SESSION_COOKIE, SESSION_LIFETIME, cookie, random_bytes, set_cookie,
};
use super::{App, CONTENT_SECURITY_POLICY as POLICY, actions};
use crate::error::{Error, ErrorClass};
use crate::exceptions::ExceptionEvent;
use crate::exceptions::close::Decision;
use crate::report::escape::escape;
use crate::report::gather::{Gather, gather_where};
use crate::report::html::STYLE;

type Shared = Arc<App>;

/// The router: pages behind authentication, the login form and the style sheet outside it.
pub(super) fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/exceptions") }))
        .route("/exceptions", get(list_handler))
        .route("/exceptions/{id}", get(detail_handler))
        .route("/exceptions/{id}/ignore", post(ignore_handler))
        .route("/exceptions/{id}/accept", post(accept_handler))
        .route("/exceptions/{id}/correct", post(correct_handler))
        .route("/contributors/{contributor}/replay", post(replay_handler))
        .route("/backlog", get(backlog_handler))
        .route("/logout", post(logout_handler))
        .route_layer(from_fn_with_state(app.clone(), authenticate))
        .route("/login", get(login_form).post(login_handler))
        .route("/style.css", get(style_sheet))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .layer(map_response(security_headers))
        .with_state(app)
}

/// Who is asking, and what their forms' CSRF tokens are bound to.
#[derive(Debug, Clone)]
struct Caller {
    principal: Principal,
    binding: String,
    session: Option<String>,
}

/// Why a request is refused or failed; rendered as a page with its status.
#[derive(Debug)]
enum Refusal {
    Unauthorized,
    Forbidden(String),
    NotFound(String),
    BadRequest(String),
    Failed(Error),
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Refusal::Failed(error)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, title, message) = match self {
            Refusal::Unauthorized => {
                let page = layout(
                    "Log in",
                    None,
                    "<h2>Log in</h2><p class=\"problem\">Log in first.</p><p><a href=\"/login\">Log in with a token</a></p>",
                );
                return (StatusCode::UNAUTHORIZED, Html(page)).into_response();
            }
            Refusal::Forbidden(why) => (StatusCode::FORBIDDEN, "Not allowed", why),
            Refusal::NotFound(what) => (StatusCode::NOT_FOUND, "Not found", what),
            Refusal::BadRequest(why) => (StatusCode::BAD_REQUEST, "Not done", why),
            Refusal::Failed(error) => {
                tracing::warn!(error = %error, "workbench request failed");
                let status = match error.class() {
                    ErrorClass::Config => StatusCode::BAD_REQUEST,
                    ErrorClass::Data => StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorClass::Infra | ErrorClass::NotArrived => StatusCode::SERVICE_UNAVAILABLE,
                };
                (
                    status,
                    "Not done",
                    crate::error::printable(&error.to_string()),
                )
            }
        };
        (status, Html(problem_page(None, title, &message))).into_response()
    }
}

/// Every response: a strict CSP, no caching, no sniffing, no framing.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (CONTENT_SECURITY_POLICY, POLICY),
        (CACHE_CONTROL, "no-store"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn style_sheet() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/css; charset=utf-8")],
        format!("{STYLE}{WORKBENCH_STYLE}"),
    )
}

/// Finds who is asking and puts them in the request, or refuses (401, or 403
/// for a proxy identity with no grant).
async fn authenticate(
    State(app): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    match caller_of(&app, request.headers(), peer) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => refusal.into_response(),
    }
}

fn caller_of(app: &App, headers: &HeaderMap, peer: SocketAddr) -> Result<Caller, Refusal> {
    let access = app.access.as_ref();
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer {
        let principal = access
            .and_then(|a| a.by_token(token.trim()))
            .ok_or(Refusal::Unauthorized)?;
        return Ok(Caller {
            principal,
            binding: format!("token:{}", token_hash(token.trim())),
            session: None,
        });
    }
    if let Some(id) = cookie(headers, SESSION_COOKIE)
        && let Some(principal) = app.sessions.find(id)
    {
        return Ok(Caller {
            principal,
            binding: format!("session:{id}"),
            session: Some(id.to_string()),
        });
    }
    if let Some(access) = access.filter(|a| a.trusts(peer.ip())) {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
        };
        let (user, email) = (header(USER_HEADER), header(EMAIL_HEADER));
        if user.is_some() || email.is_some() {
            let groups: Vec<&str> = header(GROUPS_HEADER)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let principal = access.by_proxy(user, email, &groups).ok_or_else(|| {
                Refusal::Forbidden("no grant names you or your groups".to_string())
            })?;
            return Ok(Caller {
                binding: format!("proxy:{}", principal.name),
                principal,
                session: None,
            });
        }
    }
    // A page of another site that rebinds its name to 127.0.0.1 reaches the
    // workbench under that name: anonymous access answers loopback names only.
    if app.insecure_local && loopback_host(headers) {
        return Ok(Caller {
            principal: Principal {
                name: "local".to_string(),
                grants: vec![Grant::everything()],
            },
            binding: "local".to_string(),
            session: None,
        });
    }
    Err(Refusal::Unauthorized)
}

/// Whether the browser reached the workbench over HTTPS, as a trusted
/// proxy says (`X-Forwarded-Proto: https`): its cookies are then `Secure`.
fn over_https(app: &App, headers: &HeaderMap, peer: SocketAddr) -> bool {
    let trusted = app.access.as_ref().is_some_and(|a| a.trusts(peer.ip()));
    trusted
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// Whether the request names the workbench by a loopback name
/// (`127.0.0.1`, `[::1]`, `localhost`, with or without a port).
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Caller {
    fn viewer(&self, app: &App) -> Viewer {
        Viewer {
            name: self.principal.name.clone(),
            role: match self.principal.role() {
                super::access::Role::Viewer => "viewer",
                super::access::Role::Operator => "operator",
            },
            csrf: app.sessions.csrf_token(&self.binding),
        }
    }

    fn require(&self, permission: Permission, contributor: &str) -> Result<(), Refusal> {
        if self.principal.may(permission, contributor) {
            return Ok(());
        }
        let what = match permission {
            Permission::View => "see",
            Permission::Act => "act on",
            Permission::SeePii => "see the personal data of",
        };
        Err(Refusal::Forbidden(format!(
            "you may not {what} the exceptions of contributor {}",
            crate::error::printable(contributor)
        )))
    }

    fn check_csrf(&self, app: &App, token: Option<&str>) -> Result<(), Refusal> {
        if app.sessions.csrf_ok(&self.binding, token) {
            Ok(())
        } else {
            Err(Refusal::Forbidden(
                "the form's CSRF token is missing or wrong: reload the page and try again"
                    .to_string(),
            ))
        }
    }
}

async fn list_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Query(query): Query<ListQuery>,
) -> Result<Html<String>, Refusal> {
    let filter = Filter::from_query(&query).map_err(Refusal::BadRequest)?;
    if let Some(contributor) = &filter.contributor {
        caller.require(Permission::View, contributor)?;
    }
    let who = (&caller.principal, &filter);
    let listing = load_list(&app.plan, &app.memory, who, chrono::Utc::now()).await?;
    let replayable: Vec<String> = listing
        .contributors
        .iter()
        .filter(|c| filter.contributor.as_ref().is_none_or(|f| f == *c))
        .filter(|c| caller.principal.may(Permission::Act, c))
        .cloned()
        .collect();
    Ok(Html(list_page(
        &caller.viewer(&app),
        &listing,
        &filter,
        &replayable,
    )))
}

/// The latest event of exception `id` and all its events, oldest first,
/// after checking the caller may do `permission` there.
async fn exception_for(
    app: &App,
    caller: &Caller,
    id: &str,
    permission: Permission,
) -> Result<(ExceptionEvent, Vec<ExceptionEvent>), Refusal> {
    let events = load_exception(&app.plan, id).await?;
    let latest = events.last().cloned().ok_or_else(|| {
        Refusal::NotFound(format!(
            "no exception has id {}",
            crate::error::printable(id)
        ))
    })?;
    // Refused without naming whose it is: the id alone must not tell.
    caller
        .require(permission, &latest.contributor)
        .map_err(|_| {
            Refusal::Forbidden(format!(
                "you may not see or act on exception {}",
                crate::error::printable(id)
            ))
        })?;
    Ok((latest, events))
}

async fn render_detail(
    app: &App,
    caller: &Caller,
    id: &str,
    notice: &[String],
) -> Result<Html<String>, Refusal> {
    let (latest, events) = exception_for(app, caller, id, Permission::View).await?;
    let pii = caller
        .principal
        .may(Permission::SeePii, &latest.contributor);
    let detail = detail(&app.plan, events, pii, chrono::Utc::now())
        .await?
        .ok_or_else(|| {
            Refusal::NotFound(format!(
                "no exception has id {}",
                crate::error::printable(id)
            ))
        })?;
    let record_key = shown_record_key(&app.plan, latest.record_key.as_deref(), pii);
    let allowed = Allowed {
        act: caller.principal.may(Permission::Act, &latest.contributor),
    };
    Ok(Html(detail_page(
        &caller.viewer(app),
        &detail,
        &record_key,
        allowed,
        notice,
    )))
}

async fn detail_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Html<String>, Refusal> {
    render_detail(&app, &caller, &id, &[]).await
}

/// A form with a reason: ignore, accept.
#[derive(Debug, Deserialize)]
struct ReasonForm {
    csrf: Option<String>,
    #[serde(default)]
    reason: String,
}

/// Checks the form and the caller's right to act on exception `id`; returns
/// its latest event and the decision.
async fn prepare_action(
    app: &App,
    caller: &Caller,
    id: &str,
    (csrf, reason): (Option<&str>, &str),
) -> Result<(ExceptionEvent, Decision), Refusal> {
    caller.check_csrf(app, csrf)?;
    let (latest, _) = exception_for(app, caller, id, Permission::Act).await?;
    let decision = Decision::new(&caller.principal.name, reason)
        .map_err(|e| Refusal::BadRequest(e.to_string()))?;
    Ok((latest, decision))
}

async fn ignore_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Result<Html<String>, Refusal> {
    let (latest, decision) =
        prepare_action(&app, &caller, &id, (form.csrf.as_deref(), &form.reason)).await?;
    let notice = actions::ignore_one(&app.plan, &latest.exception_id, &decision).await?;
    render_detail(&app, &caller, &id, &notice).await
}

async fn accept_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Result<Html<String>, Refusal> {
    let (latest, decision) =
        prepare_action(&app, &caller, &id, (form.csrf.as_deref(), &form.reason)).await?;
    let notice = actions::accept_one(&app.plan, &latest, decision).await?;
    render_detail(&app, &caller, &id, &notice).await
}

/// The correct form: `csrf`, `reason` and `col.<column>` per editable column.
async fn correct_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Html<String>, Refusal> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let (latest, decision) = prepare_action(
        &app,
        &caller,
        &id,
        (field("csrf"), field("reason").unwrap_or_default()),
    )
    .await?;
    let row = corrected_row(&app, &caller, &latest, &fields).await?;
    let notice = actions::correct(&app.plan, &latest, &row, &decision).await?;
    render_detail(&app, &caller, &id, &notice).await
}

/// The row as stored, with the form's values over the columns the caller may
/// edit (a sensitive column without `pii` keeps its stored value).
async fn corrected_row(
    app: &App,
    caller: &Caller,
    latest: &ExceptionEvent,
    fields: &[(String, String)],
) -> Result<HashMap<String, String>, Refusal> {
    let events = load_exception(&app.plan, &latest.exception_id).await?;
    let stored = detail(&app.plan, events, true, chrono::Utc::now())
        .await?
        .filter(|d| !d.row.is_empty())
        .ok_or_else(|| Refusal::BadRequest("the exception has no row to correct".to_string()))?;
    let pii = caller
        .principal
        .may(Permission::SeePii, &latest.contributor);
    let stored: HashMap<String, String> = stored
        .row
        .into_iter()
        .map(|c| (c.column, c.value))
        .collect();
    let mut row = stored.clone();
    for (name, value) in fields {
        let Some(column) = name.strip_prefix("col.") else {
            continue;
        };
        let editable = app
            .plan
            .contract
            .column(column)
            .is_some_and(|c| pii || !c.sensitive);
        if editable {
            row.insert(column.to_string(), value.clone());
        }
    }
    refuse_masked_values(app, &stored, &row)?;
    Ok(row)
}

/// With `quarantine.mask_sensitive` the dq_error files hold sensitive
/// columns masked: a correction must give their real values, or the masked
/// text would be replayed into Silver.
fn refuse_masked_values(
    app: &App,
    stored: &HashMap<String, String>,
    row: &HashMap<String, String>,
) -> Result<(), Refusal> {
    if !app.plan.mask_sensitive {
        return Ok(());
    }
    let masked: Vec<&str> = app
        .plan
        .contract
        .columns
        .iter()
        .filter(|c| c.sensitive)
        .map(|c| c.name.as_str())
        .filter(|c| {
            row.get(*c)
                .is_some_and(|v| !v.is_empty() && stored.get(*c) == Some(v))
        })
        .collect();
    if masked.is_empty() {
        return Ok(());
    }
    Err(Refusal::BadRequest(format!(
        "quarantine.mask_sensitive is on, so the dq_error file holds {} masked: type the real values (a person with pii may), or the masked text would reach Silver",
        masked.join(", ")
    )))
}

#[derive(Debug, Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

async fn replay_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(contributor): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Html<String>, Refusal> {
    caller.check_csrf(&app, form.csrf.as_deref())?;
    caller.require(Permission::Act, &contributor)?;
    let lines = actions::replay_contributor(&app.plan, &contributor, false).await?;
    let mut body = format!(
        "<h2>Replay of {}</h2><div class=\"notice\" id=\"notice\">",
        escape(&contributor)
    );
    for line in &lines {
        body.push_str(&format!("<p>{}</p>", escape(line)));
    }
    body.push_str("</div><p><a href=\"/exceptions\">Back to the exceptions</a></p>");
    Ok(Html(layout("Replay", Some(&caller.viewer(&app)), &body)))
}

#[derive(Debug, Deserialize)]
struct BacklogQuery {
    contributor: Option<String>,
}

async fn backlog_handler(
    State(app): State<Shared>,
    axum::Extension(caller): axum::Extension<Caller>,
    Query(query): Query<BacklogQuery>,
) -> Result<Html<String>, Refusal> {
    let chosen = query.contributor.filter(|c| !c.is_empty());
    if let Some(contributor) = &chosen {
        caller.require(Permission::View, contributor)?;
    }
    let what = Gather {
        now: chrono::Utc::now(),
        with_runs: true,
        contributor: None,
    };
    let principal = caller.principal.clone();
    let keep = move |c: &str| principal.may(Permission::View, c);
    let data = gather_where(&app.plan, &what, &keep, &app.memory).await?;
    Ok(Html(backlog_page(
        &caller.viewer(&app),
        &data,
        chosen.as_deref(),
    )))
}

async fn logout_handler(
    State(app): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    axum::Extension(caller): axum::Extension<Caller>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Refusal> {
    caller.check_csrf(&app, form.csrf.as_deref())?;
    if let Some(id) = &caller.session {
        app.sessions.end(id);
    }
    let secure = over_https(&app, &headers, peer);
    let clear = set_cookie(SESSION_COOKIE, "", std::time::Duration::ZERO, secure);
    Ok(([(SET_COOKIE, clear)], Redirect::to("/login")).into_response())
}

async fn login_form(
    State(app): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let nonce = hex::encode(random_bytes());
    let csrf = app.sessions.csrf_token(&format!("login:{nonce}"));
    let secure = over_https(&app, &headers, peer);
    let cookie = set_cookie(
        LOGIN_COOKIE,
        &nonce,
        std::time::Duration::from_secs(3600),
        secure,
    );
    ([(SET_COOKIE, cookie)], Html(login_page(&csrf, None))).into_response()
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    csrf: Option<String>,
    #[serde(default)]
    token: String,
}

async fn login_handler(
    State(app): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, Refusal> {
    let nonce = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    let binding = format!("login:{nonce}");
    if nonce.is_empty() || !app.sessions.csrf_ok(&binding, form.csrf.as_deref()) {
        return Err(Refusal::Forbidden(
            "the login form's CSRF token is missing or wrong: reload the login page".to_string(),
        ));
    }
    let Some(principal) = app
        .access
        .as_ref()
        .and_then(|a| a.by_token(form.token.trim()))
    else {
        let page = login_page(
            &app.sessions.csrf_token(&binding),
            Some("That token is not known."),
        );
        return Ok((StatusCode::UNAUTHORIZED, Html(page)).into_response());
    };
    let id = app.sessions.start(principal);
    let secure = over_https(&app, &headers, peer);
    let session = set_cookie(SESSION_COOKIE, &id, SESSION_LIFETIME, secure);
    let used = set_cookie(LOGIN_COOKIE, "", std::time::Duration::ZERO, secure);
    let mut response = Redirect::to("/exceptions").into_response();
    for value in [session, used] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(SET_COOKIE, value);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_count_as_local() {
        let host = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(HOST, HeaderValue::from_str(value).unwrap());
            loopback_host(&headers)
        };
        for local in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.0.0.2",
        ] {
            assert!(host(local), "{local}");
        }
        for other in [
            "evil.example:8080",
            "10.0.0.1:8080",
            "localhost.evil.example",
            "[2001:db8::1]:80",
        ] {
            assert!(!host(other), "{other}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }
}
