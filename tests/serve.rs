//! The workbench (`silverline serve`) through the binary, on the embedded
//! default, with a real HTTP client: who gets in (401 without credentials, a
//! login that sets a strict session cookie, proxy headers only from trusted
//! addresses), what they see (another contributor's exceptions are 403 in
//! the list, the detail and the actions; sensitive values absent without
//! `pii`; hostile values rendered as text), what they may do (a viewer
//! cannot act; a form without its CSRF token is 403), and the actions
//! (ignore, correct and replay) recorded with who and why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod harness;

use common::{TestWorkspace, exception_events, workspace};
use harness::month;
use harness::workbench::{
    TokenGrant, Workbench, csrf_of, fact_of, page_text, serve_command, write_access,
};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use silverline::demo::generate::{Portfolio, Statement};
use silverline::exceptions::ExceptionStatus;
use silverline::exceptions::backlog::states;
use silverline::pipeline::RunOptions;

const OPERATOR_A: &str = "operator-a-token";
const VIEWER_A: &str = "viewer-a-token";
const OPERATOR_B: &str = "operator-b-token";
const HOSTILE: &str = "<script>alert('x')</script>";

/// Two contributors with quarantined rows (negative balances, `amounts`),
/// one of BANK_A's with a hostile holder id and one out of `mia_range`, and a workbench with three tokens:
/// an operator of BANK_A who sees personal data, a viewer of BANK_A who
/// does not, and an operator of BANK_B.
struct Fixture {
    tw: TestWorkspace,
    server: Workbench,
    /// BANK_A's drop, as sent.
    rows_a: Vec<Statement>,
}

impl Fixture {
    async fn new() -> Fixture {
        let tw = workspace().await;
        let mut rows_a = Portfolio::new("BANK_A", 20, false, 5).statements(month(2026, 5), false);
        rows_a[0].balance = -100;
        rows_a[1].balance = -200;
        rows_a[2].balance = -300;
        rows_a[2].holder = HOSTILE.to_string();
        rows_a[3].months_in_arrears = 99;
        let mut rows_b = Portfolio::new("BANK_B", 20, false, 6).statements(month(2026, 5), false);
        rows_b[0].balance = -100;
        for rows in [&rows_a, &rows_b] {
            let contributor = &rows[0].contributor;
            tw.ws.put_drop(contributor, "2026-05", rows).await.unwrap();
            tw.ws
                .run_drop(contributor, "2026-05", &RunOptions::default())
                .await
                .unwrap();
        }
        let grant = |token, name, role, pii, contributors| TokenGrant {
            token,
            name,
            role,
            pii,
            contributors,
        };
        let access = write_access(
            tw.tmp.path(),
            "",
            &[
                grant(OPERATOR_A, "ann", "operator", true, &["BANK_A"]),
                grant(VIEWER_A, "vic", "viewer", false, &["BANK_A"]),
                grant(OPERATOR_B, "bob", "operator", true, &["BANK_B"]),
            ],
        );
        let server = Workbench::start(&tw.ws.dir.join("config/credit_statements.toml"), &access);
        Fixture { tw, server, rows_a }
    }

    /// The open exceptions of `contributor`, by id, with the account of each.
    async fn open_ids(&self, contributor: &str) -> Vec<String> {
        let events = exception_events(&self.tw.ws).await;
        states(&events)
            .into_iter()
            .filter(|s| s.is_open() && s.latest.contributor == contributor)
            .map(|s| s.latest.exception_id.clone())
            .collect()
    }

    /// The exception of BANK_A's row `index`.
    async fn id_of_row(&self, index: usize) -> String {
        let line = index as i64 + 2;
        let events = exception_events(&self.tw.ws).await;
        events
            .iter()
            .find(|e| e.contributor == "BANK_A" && e.source_line == Some(line))
            .map(|e| e.exception_id.clone())
            .unwrap_or_else(|| panic!("no exception at line {line}"))
    }

    async fn status_of(&self, id: &str) -> ExceptionStatus {
        let events = exception_events(&self.tw.ws).await;
        let latest = states(&events)
            .into_iter()
            .find(|s| s.latest.exception_id == id)
            .unwrap();
        latest.latest.status
    }

    async fn get(&self, token: &str, path: &str) -> (StatusCode, String) {
        let response = client()
            .get(self.server.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn post(&self, token: &str, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let response = client()
            .post(self.server.url(path))
            .bearer_auth(token)
            .form(form)
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    }

    /// The CSRF token of `token`'s forms.
    async fn csrf(&self, token: &str) -> String {
        let (status, html) = self.get(token, "/exceptions").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        csrf_of(&html)
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn without_credentials_nothing_is_shown_and_every_response_has_a_strict_csp() {
    let f = Fixture::new().await;
    let id = f.id_of_row(0).await;
    for path in ["/exceptions", &format!("/exceptions/{id}"), "/backlog"] {
        let response = client().get(f.server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let csp = response.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            csp.contains("default-src 'none'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert!(!response.text().await.unwrap().contains(&id), "{path}");
    }
    let wrong = f.get("not-a-token", "/exceptions").await;
    assert_eq!(wrong.0, StatusCode::UNAUTHORIZED);
    let posted = client()
        .post(f.server.url(&format!("/exceptions/{id}/ignore")))
        .form(&[("reason", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::UNAUTHORIZED);
    let style = client()
        .get(f.server.url("/style.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(style.status(), StatusCode::OK);
    assert!(style.headers().contains_key(CONTENT_SECURITY_POLICY));
    let page = client()
        .get(f.server.url("/exceptions"))
        .bearer_auth(OPERATOR_A)
        .send()
        .await
        .unwrap();
    assert!(
        page.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("form-action 'self'")
    );
    let html = page.text().await.unwrap();
    assert!(!html.contains("<script"), "the workbench runs no script");
    assert_eq!(f.status_of(&id).await, ExceptionStatus::Quarantined);
}

#[tokio::test]
async fn another_contributors_exception_is_forbidden_in_the_list_the_detail_and_the_actions() {
    let f = Fixture::new().await;
    let of_a = f.open_ids("BANK_A").await;
    let of_b = f.open_ids("BANK_B").await;
    assert_eq!((of_a.len(), of_b.len()), (4, 1));
    let (status, list) = f.get(OPERATOR_B, "/exceptions").await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains(&of_b[0]), "BANK_B's own exception is listed");
    assert!(
        of_a.iter().all(|id| !list.contains(id.as_str())),
        "BANK_A's exceptions are not listed to BANK_B"
    );
    assert_eq!(
        f.get(OPERATOR_B, "/exceptions?contributor=BANK_A").await.0,
        StatusCode::FORBIDDEN
    );
    let (status, page) = f.get(OPERATOR_B, &format!("/exceptions/{}", of_a[0])).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        !page.contains("BANK_A"),
        "the refusal does not say whose the exception is: {page}"
    );
    assert_eq!(
        f.get(OPERATOR_B, "/backlog?contributor=BANK_A").await.0,
        StatusCode::FORBIDDEN
    );
    let csrf = f.csrf(OPERATOR_B).await;
    let form = [("csrf", csrf.as_str()), ("reason", "not mine")];
    for action in ["ignore", "accept"] {
        let path = format!("/exceptions/{}/{action}", of_a[0]);
        assert_eq!(
            f.post(OPERATOR_B, &path, &form).await.0,
            StatusCode::FORBIDDEN,
            "{action}"
        );
    }
    assert_eq!(
        f.post(OPERATOR_B, "/contributors/BANK_A/replay", &form)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        f.status_of(&of_a[0]).await,
        ExceptionStatus::Quarantined,
        "nothing happened to it"
    );
}

#[tokio::test]
async fn a_form_without_its_csrf_token_is_refused_and_with_it_the_ignore_is_recorded() {
    let f = Fixture::new().await;
    let id = f.id_of_row(0).await;
    let path = format!("/exceptions/{id}/ignore");
    let other = f.csrf(OPERATOR_B).await;
    for form in [
        vec![("reason", "closed")],
        vec![("csrf", "0000"), ("reason", "closed")],
        vec![("csrf", other.as_str()), ("reason", "closed")],
    ] {
        assert_eq!(
            f.post(OPERATOR_A, &path, &form).await.0,
            StatusCode::FORBIDDEN,
            "{form:?}"
        );
    }
    assert_eq!(f.status_of(&id).await, ExceptionStatus::Quarantined);
    let csrf = f.csrf(OPERATOR_A).await;
    let (status, html) = f
        .post(
            OPERATOR_A,
            &path,
            &[("csrf", csrf.as_str()), ("reason", "   ")],
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a reason is required: {html}"
    );
    let (status, html) = f
        .post(
            OPERATOR_A,
            &path,
            &[
                ("csrf", csrf.as_str()),
                ("reason", "account closed at the bank"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert_eq!(fact_of(&html, "status"), "ignored");
    assert!(
        html.contains("account closed at the bank") && html.contains("<td>ann</td>"),
        "{html}"
    );
    let events = exception_events(&f.tw.ws).await;
    let ignored = events
        .iter()
        .find(|e| e.exception_id == id && e.status == ExceptionStatus::Ignored)
        .unwrap();
    assert_eq!(ignored.actor.as_deref(), Some("ann"));
    assert_eq!(ignored.note.as_deref(), Some("account closed at the bank"));
}

#[tokio::test]
async fn a_viewer_sees_but_cannot_act_and_never_sees_a_sensitive_value() {
    let f = Fixture::new().await;
    let id = f.id_of_row(1).await;
    let (status, html) = f.get(VIEWER_A, &format!("/exceptions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !html.contains("/ignore\"") && !html.contains("/correct\""),
        "no action form for a viewer"
    );
    let sensitive = harness::sensitive_values(&f.rows_a);
    assert!(!sensitive.is_empty());
    for value in &sensitive {
        assert!(
            !html.contains(value.as_str()),
            "a viewer without pii sees {value}"
        );
    }
    assert!(html.contains("class=\"masked\""));
    let (_, list) = f.get(VIEWER_A, "/exceptions").await;
    assert!(sensitive.iter().all(|v| !list.contains(v.as_str())));
    let (_, unmasked) = f.get(OPERATOR_A, &format!("/exceptions/{id}")).await;
    let row_values = harness::sensitive_values(&f.rows_a[1..2]);
    assert!(
        row_values.iter().all(|v| unmasked.contains(v.as_str())),
        "an operator with pii sees the row as sent"
    );
    let csrf = f.csrf(VIEWER_A).await;
    for action in ["ignore", "accept", "correct"] {
        let path = format!("/exceptions/{id}/{action}");
        let (status, _) = f
            .post(
                VIEWER_A,
                &path,
                &[("csrf", csrf.as_str()), ("reason", "try")],
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{action}");
    }
    assert_eq!(f.status_of(&id).await, ExceptionStatus::Quarantined);
}

#[tokio::test]
async fn hostile_values_are_rendered_as_text() {
    let f = Fixture::new().await;
    let id = f.id_of_row(2).await;
    let (status, html) = f.get(OPERATOR_A, &format!("/exceptions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !html.contains(HOSTILE),
        "the hostile holder id is not markup"
    );
    assert!(
        html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
        "{html}"
    );
    assert!(!html.contains("<script"), "{html}");
}

#[tokio::test]
async fn a_corrected_row_is_replayed_through_the_rules_and_resolved_with_who_corrected_it() {
    let f = Fixture::new().await;
    let id = f.id_of_row(0).await;
    let csrf = f.csrf(OPERATOR_A).await;
    let form = [
        ("csrf", csrf.as_str()),
        ("reason", "balance sign fixed with the bank"),
        ("col.outstanding_balance", "1.00"),
    ];
    let (status, html) = f
        .post(OPERATOR_A, &format!("/exceptions/{id}/correct"), &form)
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert_eq!(fact_of(&html, "status"), "resolved", "{html}");
    assert!(html.contains("1 resolved"), "{html}");
    let events = exception_events(&f.tw.ws).await;
    let noted = events
        .iter()
        .find(|e| e.exception_id == id && e.actor.as_deref() == Some("ann"))
        .unwrap();
    assert_eq!(
        noted.note.as_deref(),
        Some("balance sign fixed with the bank")
    );
    assert_eq!(f.status_of(&id).await, ExceptionStatus::Resolved);
    let still = f.id_of_row(1).await;
    assert_eq!(
        f.status_of(&still).await,
        ExceptionStatus::Quarantined,
        "only the corrected row left"
    );
}

#[tokio::test]
async fn logging_in_with_a_token_sets_a_strict_session_cookie() {
    let f = Fixture::new().await;
    let form = client().get(f.server.url("/login")).send().await.unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let login_cookie = form.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let csrf = csrf_of(&form.text().await.unwrap());
    let post = |token: &'static str, csrf: String, cookie: String| {
        let url = f.server.url("/login");
        async move {
            client()
                .post(url)
                .header(COOKIE, cookie)
                .form(&[("csrf", csrf.as_str()), ("token", token)])
                .send()
                .await
                .unwrap()
        }
    };
    let refused = post(OPERATOR_A, "bad".to_string(), login_cookie.clone()).await;
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "login without its CSRF token"
    );
    let unknown = post("no-such-token", csrf.clone(), login_cookie.clone()).await;
    assert_eq!(unknown.status(), StatusCode::UNAUTHORIZED);
    let logged_in = post(VIEWER_A, csrf, login_cookie).await;
    assert_eq!(logged_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(logged_in.headers()[LOCATION], "/exceptions");
    let session = logged_in
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|v| v.starts_with("silverline_session="))
        .unwrap();
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Strict"),
        "{session}"
    );
    let cookie = session.split(';').next().unwrap().to_string();
    let page = client()
        .get(f.server.url("/exceptions"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("vic (viewer)"));
}

#[tokio::test]
async fn proxy_identity_headers_are_believed_only_from_a_trusted_proxy() {
    let tw = workspace().await;
    let config = tw.ws.dir.join("config/credit_statements.toml");
    let grants = "[[grant]]\nuser = \"ann@example.com\"\nrole = \"viewer\"\n";
    let headers = [
        ("X-Forwarded-User", "ann"),
        ("X-Forwarded-Email", "ann@example.com"),
    ];
    for (trusted, expected) in [
        ("127.0.0.1", StatusCode::OK),
        ("10.9.9.9", StatusCode::UNAUTHORIZED),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let access = write_access(
            dir.path(),
            &format!("trusted_proxies = [\"{trusted}\"]\n{grants}"),
            &[],
        );
        let server = Workbench::start(&config, &access);
        let mut request = client().get(server.url("/exceptions"));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), expected, "proxy {trusted}");
        let login = client()
            .get(server.url("/login"))
            .header("X-Forwarded-Proto", "https")
            .send()
            .await
            .unwrap();
        let cookie = login.headers()[SET_COOKIE].to_str().unwrap().to_string();
        assert_eq!(
            cookie.ends_with("; Secure"),
            expected == StatusCode::OK,
            "HTTPS as a trusted proxy says: {cookie}"
        );
        if expected == StatusCode::OK {
            assert!(
                response
                    .text()
                    .await
                    .unwrap()
                    .contains("ann@example.com (viewer)")
            );
            let stranger = client()
                .get(server.url("/exceptions"))
                .header("X-Forwarded-User", "mallory")
                .send()
                .await
                .unwrap();
            assert_eq!(
                stranger.status(),
                StatusCode::FORBIDDEN,
                "a user no grant names"
            );
        }
    }
}

#[test]
fn anonymous_access_off_loopback_and_no_way_in_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = std::path::Path::new("config/credit_statements.toml");
    let open = serve_command(config, &["--insecure-local", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(open.status.code(), Some(2), "{open:?}");
    assert!(
        String::from_utf8_lossy(&open.stderr).contains("--insecure-local"),
        "{open:?}"
    );
    let nobody = serve_command(config, &["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(nobody.status.code(), Some(2), "{nobody:?}");
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("--access"),
        "{nobody:?}"
    );
    let bad = dir.path().join("access.toml");
    std::fs::write(&bad, "[[grant]]\nrole = \"admin\"\nuser = \"x\"\n").unwrap();
    let refused = serve_command(config, &["--access", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("access.toml"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn insecure_local_lets_this_machine_in_as_a_local_operator() {
    let f = Fixture::new().await;
    let config = f.tw.ws.dir.join("config/credit_statements.toml");
    let local = Workbench::start_with(&config, &["--insecure-local"]);
    let response = client()
        .get(local.url("/backlog?contributor=BANK_A"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let html = response.text().await.unwrap();
    assert!(html.contains("local (operator)"));
    let rebound = client()
        .get(local.url("/exceptions"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        rebound.status(),
        StatusCode::UNAUTHORIZED,
        "a rebound name is not local"
    );
    assert!(
        html.contains("data-figure=\"open\">4<"),
        "BANK_A's four open exceptions: {html}"
    );
}

/// A person's session in headless Chromium: log in with a token, filter to a
/// rule, open an exception, correct a field and submit, see it resolved
/// after the replay, ignore another with a reason, and see the backlog
/// figures change; a console error (a script error, a resource refused by
/// the Content-Security-Policy) fails the test.
#[tokio::test]
#[ignore = "needs chromium: bash localstack/test.sh installs it"]
async fn a_person_corrects_and_ignores_exceptions_in_the_browser() {
    use harness::devtools::DevTools;
    let f = Fixture::new().await;
    let (corrected, ignored) = (f.id_of_row(0).await, f.id_of_row(1).await);
    let mut browser = DevTools::launch();
    browser.open_page();
    browser.navigate(&f.server.url("/login"));
    browser.fill("#token", OPERATOR_A);
    browser.click("form[action='/login'] button[type=submit]");
    assert_eq!(
        browser.evaluate("location.pathname"),
        serde_json::json!("/exceptions")
    );
    assert_eq!(browser.text(".who").as_deref(), Some("ann (operator)"));
    let figure = |browser: &mut DevTools, name: &str| {
        browser.text(&format!("[data-figure='{name}']")).unwrap()
    };
    browser.navigate(&f.server.url("/backlog?contributor=BANK_A"));
    assert_eq!(
        (
            figure(&mut browser, "open"),
            figure(&mut browser, "exited_7d")
        ),
        ("4".to_string(), "0".to_string())
    );

    browser.navigate(&f.server.url("/exceptions"));
    browser.fill("#filter-rule", "amounts");
    browser.click("#apply-filters");
    let listed = browser.evaluate(
        "Array.from(document.querySelectorAll('tr[data-exception]')).map(r => r.dataset.exception)",
    );
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(3),
        "the three amounts exceptions: {listed}"
    );
    browser.click(&format!("a[href='/exceptions/{corrected}']"));
    assert_eq!(
        browser.text("[data-fact=status]").as_deref(),
        Some("quarantined")
    );
    browser.fill("#col-outstanding_balance", "1.00");
    browser.fill("#correct-reason", "balance sign fixed with the bank");
    browser.click("#correct button[type=submit]");
    assert_eq!(
        browser.text("[data-fact=status]").as_deref(),
        Some("resolved")
    );
    assert!(browser.text("#notice").unwrap().contains("1 resolved"));

    browser.navigate(&f.server.url(&format!("/exceptions/{ignored}")));
    browser.fill("#ignore-reason", "account closed at the bank");
    browser.click("#ignore button[type=submit]");
    assert_eq!(
        browser.text("[data-fact=status]").as_deref(),
        Some("ignored")
    );

    browser.navigate(&f.server.url("/backlog?contributor=BANK_A"));
    assert_eq!(figure(&mut browser, "open"), "2");
    assert_eq!(figure(&mut browser, "exited_7d"), "2");
    assert_eq!(figure(&mut browser, "ignored"), "1");
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    assert_eq!(f.status_of(&corrected).await, ExceptionStatus::Resolved);
}

/// A trend rule's exception shows the previous state the row was compared
/// with: the account's statement of the month before, read from Silver.
#[tokio::test]
async fn a_trend_exception_shows_the_previous_state_it_was_compared_with() {
    let tw = workspace().await;
    let mut bank = Portfolio::new("BANK_T", 10, false, 7);
    let april = bank.statements(month(2026, 4), false);
    let mut may = bank.statements(month(2026, 5), false);
    may[0].product_limit += 100_000;
    for (drop_id, rows) in [("2026-04", &april), ("2026-05", &may)] {
        tw.ws.put_drop("BANK_T", drop_id, rows).await.unwrap();
        tw.ws
            .run_drop("BANK_T", drop_id, &RunOptions::default())
            .await
            .unwrap();
    }
    let events = exception_events(&tw.ws).await;
    let moved = events
        .iter()
        .find(|e| e.rule == "limit_stable")
        .expect("limit_stable caught the moved limit");
    let server = Workbench::start_with(
        &tw.ws.dir.join("config/credit_statements.toml"),
        &["--insecure-local"],
    );
    let html = page_text(&server.url(&format!("/exceptions/{}", moved.exception_id))).await;
    let previous = &html[html
        .find("Previous state (trend rules)")
        .expect("a previous-state section")..];
    let date = |d: chrono::NaiveDate| format!("data-column=\"statement_date\">{d}<");
    assert!(previous.contains(&date(april[0].date)), "{previous}");
    assert!(html.contains(&date(may[0].date)), "the row itself");
    assert!(previous.contains(&format!("data-column=\"account_id\">{}<", april[0].account)));
    assert!(
        previous.contains("do not keep the prev_ values"),
        "says what is shown"
    );
}

/// With `quarantine.mask_sensitive` the dq_error files hold the sensitive
/// columns masked: a correction that leaves them as shown is refused (the
/// masked text would reach Silver); one that types the real values passes.
#[tokio::test]
async fn with_masked_dq_files_a_correction_must_give_the_real_sensitive_values() {
    let tmp = tempfile::tempdir().unwrap();
    let masked = [("quarantine.mask_sensitive".to_string(), "true".to_string())];
    let ws = silverline::demo::Workspace::create_with(
        &tmp.path().join("ws"),
        silverline::demo::DEFAULT_CONFIG,
        &masked,
    )
    .await
    .unwrap();
    let config = ws.dir.join("config/credit_statements.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("mask_sensitive = false", "mask_sensitive = true");
    std::fs::write(&config, text).unwrap();
    let mut rows = Portfolio::new("BANK_M", 10, false, 8).statements(month(2026, 5), false);
    rows[0].balance = -100;
    ws.put_drop("BANK_M", "2026-05", &rows).await.unwrap();
    ws.run_drop("BANK_M", "2026-05", &RunOptions::default())
        .await
        .unwrap();
    let id = exception_events(&ws).await[0].exception_id.clone();
    let server = Workbench::start_with(&config, &["--insecure-local"]);
    let page = page_text(&server.url("/exceptions")).await;
    let csrf = csrf_of(&page);
    let path = server.url(&format!("/exceptions/{id}/correct"));
    let mut form = vec![
        ("csrf".to_string(), csrf),
        ("reason".to_string(), "sign fixed".to_string()),
        ("col.outstanding_balance".to_string(), "1.00".to_string()),
    ];
    let refused = client().post(&path).form(&form).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(refused.text().await.unwrap().contains("mask_sensitive"));
    let (new_ic, old_ic, passport) = rows[0].identity.clone();
    for (column, value) in [
        ("new_ic", new_ic),
        ("old_ic", old_ic),
        ("passport_no", passport),
    ] {
        form.push((format!("col.{column}"), value.unwrap_or_default()));
    }
    let corrected = client().post(&path).form(&form).send().await.unwrap();
    assert_eq!(corrected.status(), StatusCode::OK);
    assert_eq!(
        fact_of(&corrected.text().await.unwrap(), "status"),
        "resolved"
    );
}

/// Accept as is commits the one row as judged and closes its exception as
/// accepted with who and why; the contributor's other exceptions stay open.
#[tokio::test]
async fn accept_as_is_commits_the_one_row_with_who_and_why() {
    let f = Fixture::new().await;
    let (accepted, other) = (f.id_of_row(0).await, f.id_of_row(1).await);
    let before = common::silver_count(&f.tw.ws).await;
    let csrf = f.csrf(OPERATOR_A).await;
    let form = [
        ("csrf", csrf.as_str()),
        ("reason", "a refund: the negative balance is real"),
    ];
    let (status, html) = f
        .post(OPERATOR_A, &format!("/exceptions/{accepted}/accept"), &form)
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert_eq!(fact_of(&html, "status"), "accepted", "{html}");
    assert_eq!(common::silver_count(&f.tw.ws).await, before + 1);
    let events = exception_events(&f.tw.ws).await;
    let closing = events
        .iter()
        .find(|e| e.exception_id == accepted && e.status == ExceptionStatus::Accepted)
        .unwrap();
    assert_eq!(
        (closing.actor.as_deref(), closing.note.as_deref()),
        (Some("ann"), Some("a refund: the negative balance is real"))
    );
    assert_eq!(f.status_of(&other).await, ExceptionStatus::Quarantined);
}

/// Replaying a contributor's pending rows once their holders arrived
/// resolves them.
#[tokio::test]
async fn replaying_a_contributors_pending_rows_resolves_them() {
    let tw = workspace().await;
    let rows = Portfolio::new("BANK_P", 10, false, 9).statements(month(2026, 5), false);
    let late: Vec<&str> = rows[..2].iter().map(|r| r.holder.as_str()).collect();
    tw.ws
        .put_drop_holding_back("BANK_P", "2026-05", &rows, &late)
        .await
        .unwrap();
    tw.ws
        .run_drop("BANK_P", "2026-05", &RunOptions::default())
        .await
        .unwrap();
    let pending: Vec<String> = exception_events(&tw.ws)
        .await
        .into_iter()
        .map(|e| e.exception_id)
        .collect();
    assert!(!pending.is_empty());
    tw.ws.register_holders("late", late).await.unwrap();
    let server = Workbench::start_with(
        &tw.ws.dir.join("config/credit_statements.toml"),
        &["--insecure-local"],
    );
    let list = page_text(&server.url("/exceptions")).await;
    assert!(
        list.contains("action=\"/contributors/BANK_P/replay\""),
        "an operator is offered the replay"
    );
    let form = [("csrf", csrf_of(&list))];
    let response = client()
        .post(server.url("/contributors/BANK_P/replay"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let html = response.text().await.unwrap();
    assert!(
        html.contains(&format!(
            "replayed {} exception(s) of BANK_P",
            pending.len()
        )),
        "{html}"
    );
    let events = exception_events(&tw.ws).await;
    for id in &pending {
        let latest = states(&events)
            .into_iter()
            .find(|s| &s.latest.exception_id == id)
            .unwrap();
        assert_eq!(latest.latest.status, ExceptionStatus::Resolved, "{id}");
    }
}

/// The backlog page highlights the open alerts above its figures, as the
/// report does: four runs of BANK_Z failing `mia_range` on 1, 2, 3 and 4 of
/// 100 rows are three rises in a row under `[alerts.creep]`.
#[tokio::test]
async fn the_backlog_page_highlights_the_open_alerts() {
    let f = Fixture::new().await;
    let config = f.tw.ws.dir.join("config/credit_statements.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[alerts.creep]\nrises_in_a_row = 3\n");
    std::fs::write(&config, text).unwrap();
    for (i, failed) in [1, 2, 3, 4].into_iter().enumerate() {
        let day = format!("2020-0{}-05", i + 1);
        let drop_id = format!("2020-0{}", i + 1);
        harness::put_summary(
            &f.tw.ws.dir,
            "BANK_Z",
            (&drop_id, &day),
            100,
            &[("mia_range", failed)],
        );
    }
    let local = Workbench::start_with(&config, &["--insecure-local"]);
    let response = client().get(local.url("/backlog")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let html = response.text().await.unwrap();
    assert!(
        html.contains("<aside class=\"alerts\" role=\"alert\" data-alerts=\"1\">"),
        "{html}"
    );
    assert!(
        html.contains("data-alert-kind=\"creep\" data-contributor=\"BANK_Z\""),
        "{html}"
    );
}
