//! The workbench's pages, rendered on the server from what `data` read:
//! every value escaped, the style sheet served from the workbench itself
//! (`/style.css`), no script. Forms post with a CSRF token.

use super::data::{Detail, Filter, Listing, PAGE_SIZE};
use super::session::CSRF_FIELD;
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::report::escape::escape;
use crate::report::html::{alerts, section_html};
use crate::report::model::ReportData;

/// The workbench's own style, after the report's.
pub const WORKBENCH_STYLE: &str = r#"
header nav.top { display: flex; gap: 16px; align-items: center; }
header nav.top .who { margin-left: auto; color: var(--muted); }
header nav.top form { display: inline; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: end; margin: 12px 0; }
form.filters label, form.action label { display: flex; flex-direction: column; font-size: 0.85rem; color: var(--muted); }
input, select, textarea, button { font: inherit; padding: 4px 8px; }
textarea { width: 100%; min-height: 3em; }
form.action { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; margin: 12px 0; background: var(--panel); }
form.action table { width: 100%; }
.notice { border: 1px solid #1a7f37; background: #dafbe1; padding: 8px 12px; border-radius: 6px; }
.problem { border: 1px solid #cf222e; background: #ffebe9; padding: 8px 12px; border-radius: 6px; }
.masked { color: var(--muted); font-style: italic; }
pre.raw { background: var(--panel); padding: 8px; overflow-x: auto; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.pages a, .pages span { margin-right: 12px; }
"#;

/// Who is looking, as the page header shows them.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// Their name.
    pub name: String,
    /// Their highest role, as text.
    pub role: &'static str,
    /// The CSRF token their forms carry.
    pub csrf: String,
}

/// A whole page around `body`.
pub fn layout(title: &str, viewer: Option<&Viewer>, body: &str) -> String {
    let nav = viewer.map_or_else(String::new, |v| {
        format!(
            "<nav class=\"top\"><a href=\"/exceptions\">Exceptions</a><a href=\"/backlog\">Backlog</a>\
             <span class=\"who\">{} ({})</span><form method=\"post\" action=\"/logout\">{}<button type=\"submit\">Log out</button></form></nav>",
            escape(&v.name),
            v.role,
            csrf_input(&v.csrf)
        )
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · silverline workbench</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n</head>\n\
         <body>\n<header>\n<h1>silverline workbench</h1>\n{nav}\n</header>\n<main>\n{body}\n</main>\n</body>\n</html>\n",
        escape(title)
    )
}

fn csrf_input(token: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{CSRF_FIELD}\" value=\"{}\">",
        escape(token)
    )
}

/// The login form.
pub fn login_page(csrf: &str, problem: Option<&str>) -> String {
    let problem = problem.map_or_else(String::new, |p| {
        format!("<p class=\"problem\">{}</p>", escape(p))
    });
    let body = format!(
        "<h2>Log in</h2>{problem}<form class=\"action\" method=\"post\" action=\"/login\">{}\
         <label for=\"token\">Access token</label> <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required>\
         <button type=\"submit\">Log in</button></form>",
        csrf_input(csrf)
    );
    layout("Log in", None, &body)
}

/// A page saying what went wrong.
pub fn problem_page(viewer: Option<&Viewer>, title: &str, message: &str) -> String {
    layout(
        title,
        viewer,
        &format!(
            "<h2>{}</h2><p class=\"problem\">{}</p><p><a href=\"/exceptions\">Back to the exceptions</a></p>",
            escape(title),
            escape(message)
        ),
    )
}

/// The list of exceptions: filters, a page of rows, paging, and the replay
/// buttons of the contributors the viewer may act for.
pub fn list_page(
    viewer: &Viewer,
    listing: &Listing,
    filter: &Filter,
    replayable: &[String],
) -> String {
    let mut body = String::from("<h2>Exceptions</h2>\n");
    body.push_str(&filter_form(listing, filter));
    body.push_str(&format!(
        "<p class=\"meta\" id=\"matching\" data-matching=\"{0}\">{0} exception(s) match.</p>\n",
        listing.matching
    ));
    body.push_str(&list_table(listing));
    body.push_str(&paging(listing, filter));
    for contributor in replayable {
        body.push_str(&format!(
            "<form class=\"action\" method=\"post\" action=\"/contributors/{0}/replay\">{1}\
             <button type=\"submit\">Replay the pending rows of {2}</button></form>\n",
            escape(&url_part(contributor)),
            csrf_input(&viewer.csrf),
            escape(contributor)
        ));
    }
    layout("Exceptions", Some(viewer), &body)
}

fn url_part(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn select(name: &str, label: &str, options: &[(String, String)], chosen: &str) -> String {
    let mut out = format!("<label>{label}<select name=\"{name}\" id=\"filter-{name}\">");
    for (value, text) in options {
        let selected = if value == chosen { " selected" } else { "" };
        out.push_str(&format!(
            "<option value=\"{}\"{selected}>{}</option>",
            escape(value),
            escape(text)
        ));
    }
    out.push_str("</select></label>");
    out
}

fn filter_form(listing: &Listing, filter: &Filter) -> String {
    let any = || (String::new(), "any".to_string());
    let contributors: Vec<(String, String)> = std::iter::once(any())
        .chain(listing.contributors.iter().map(|c| (c.clone(), c.clone())))
        .collect();
    let rules: Vec<(String, String)> = std::iter::once(any())
        .chain(listing.rules.iter().map(|r| (r.clone(), r.clone())))
        .collect();
    let statuses: Vec<(String, String)> = [
        "open",
        "pending",
        "quarantined",
        "missing",
        "resolved",
        "ignored",
        "accepted",
        "all",
    ]
    .iter()
    .map(|s| (s.to_string(), s.to_string()))
    .collect();
    let age = |name: &str, label: &str, value: Option<u64>| {
        format!(
            "<label>{label}<input type=\"number\" min=\"0\" name=\"{name}\" id=\"filter-{name}\" value=\"{}\"></label>",
            value.map(|v| v.to_string()).unwrap_or_default()
        )
    };
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/exceptions\">{}{}{}{}{}<button type=\"submit\" id=\"apply-filters\">Filter</button></form>\n",
        select(
            "contributor",
            "Contributor",
            &contributors,
            filter.contributor.as_deref().unwrap_or_default()
        ),
        select(
            "rule",
            "Rule",
            &rules,
            filter.rule.as_deref().unwrap_or_default()
        ),
        select("status", "Status", &statuses, filter.status.as_str()),
        age("min_age", "Age at least (days)", filter.min_age),
        age("max_age", "Age at most (days)", filter.max_age),
    )
}

fn list_table(listing: &Listing) -> String {
    if listing.rows.is_empty() {
        return "<p class=\"empty\">No exception matches.</p>\n".to_string();
    }
    let mut out = String::from(
        "<div class=\"table-scroll\"><table class=\"exceptions\">\n<thead><tr><th>Exception</th><th>Contributor</th><th>Drop</th>\
         <th>Rule</th><th>Status</th><th class=\"num\">Age (days)</th><th>Source</th></tr></thead>\n<tbody>\n",
    );
    for row in &listing.rows {
        let e = &row.latest;
        out.push_str(&format!(
            "<tr data-exception=\"{0}\"><td><a href=\"/exceptions/{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td class=\"num\">{5}</td><td>{6}</td></tr>\n",
            escape(&e.exception_id),
            escape(&e.contributor),
            escape(&e.drop_id),
            escape(&e.rule),
            e.status.as_str(),
            row.age_days,
            escape(&source_of(e))
        ));
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

fn source_of(e: &ExceptionEvent) -> String {
    match (&e.source_file, e.source_line) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.clone(),
        _ => String::new(),
    }
}

fn paging(listing: &Listing, filter: &Filter) -> String {
    let pages = listing.matching.div_ceil(PAGE_SIZE).max(1);
    let mut out = format!(
        "<p class=\"pages\"><span>Page {} of {pages}</span>",
        filter.page
    );
    if filter.page > 1 {
        out.push_str(&format!(
            "<a href=\"/exceptions?{}\">Previous</a>",
            escape(&filter.query_string(filter.page - 1))
        ));
    }
    if filter.page < pages {
        out.push_str(&format!(
            "<a href=\"/exceptions?{}\">Next</a>",
            escape(&filter.query_string(filter.page + 1))
        ));
    }
    out.push_str("</p>\n");
    out
}

/// What the viewer may do on a detail page.
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    /// Act on this exception's contributor.
    pub act: bool,
}

/// One exception: facts, reasons, row, raw record, history and the actions.
pub fn detail_page(
    viewer: &Viewer,
    detail: &Detail,
    record_key: &str,
    allowed: Allowed,
    notice: &[String],
) -> String {
    let e = &detail.latest;
    let mut body = format!("<h2>Exception {}</h2>\n", escape(&e.exception_id));
    if !notice.is_empty() {
        body.push_str("<div class=\"notice\" id=\"notice\">");
        for line in notice {
            body.push_str(&format!("<p>{}</p>", escape(line)));
        }
        body.push_str("</div>\n");
    }
    body.push_str(&facts(detail, record_key));
    body.push_str(&reasons(detail));
    body.push_str(&row_table(detail));
    body.push_str(&previous(detail));
    body.push_str(&history(&detail.history));
    if allowed.act && e.status.is_open() {
        body.push_str(&actions(viewer, detail));
    }
    layout(
        &format!("Exception {}", e.exception_id),
        Some(viewer),
        &body,
    )
}

fn facts(detail: &Detail, record_key: &str) -> String {
    let e = &detail.latest;
    let at =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let rows = [
        ("Status", e.status.as_str().to_string(), "status"),
        ("Contributor", e.contributor.clone(), "contributor"),
        ("Drop", e.drop_id.clone(), "drop"),
        ("Rule", e.rule.clone(), "rule"),
        ("Severity", e.severity.clone(), "severity"),
        ("Record key", record_key.to_string(), "record_key"),
        ("Source file and line", source_of(e), "source"),
        (
            "dq_error file",
            e.dq_file.clone().unwrap_or_default(),
            "dq_file",
        ),
        ("Entered", at(e.entered_at), "entered"),
        ("Age (days)", detail.age_days.to_string(), "age"),
    ];
    let mut out = String::from("<dl class=\"facts\">\n");
    for (label, value, key) in rows {
        out.push_str(&format!(
            "<dt>{label}</dt><dd data-fact=\"{key}\">{}</dd>\n",
            escape(&value)
        ));
    }
    out.push_str("</dl>\n");
    out
}

fn reasons(detail: &Detail) -> String {
    let mut out = String::from("<h3>Why it was set aside</h3>\n");
    if detail.reasons.is_empty() {
        out.push_str("<p class=\"empty\">No reason recorded.</p>\n");
        return out;
    }
    out.push_str("<table class=\"reasons\"><thead><tr><th>Rule</th><th>Severity</th><th>Message</th><th>Rule description</th></tr></thead><tbody>\n");
    for r in &detail.reasons {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.rule),
            escape(&r.severity),
            escape(&r.message),
            escape(&r.description)
        ));
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The previous state a trend rule compared the row with, and what it is.
fn previous(detail: &Detail) -> String {
    let Some((note, cells)) = &detail.previous else {
        return String::new();
    };
    let mut out = format!(
        "<h3>Previous state (trend rules)</h3>\n<p class=\"meta\" id=\"previous-note\">{}</p>\n",
        escape(note)
    );
    if !cells.is_empty() {
        out.push_str(&cells_table("previous", cells));
    }
    out
}

/// A table of a row's columns, masked cells marked.
fn cells_table(class: &str, cells: &[super::data::Cell]) -> String {
    let mut out = format!(
        "<table class=\"{class}\"><thead><tr><th>Column</th><th>Value</th></tr></thead><tbody>\n"
    );
    for cell in cells {
        let masked = if cell.masked { " class=\"masked\"" } else { "" };
        out.push_str(&format!(
            "<tr><td>{}</td><td{masked} data-column=\"{}\">{}</td></tr>\n",
            escape(&cell.column),
            escape(&cell.column),
            escape(&cell.value)
        ));
    }
    out.push_str("</tbody></table>\n");
    out
}

fn row_table(detail: &Detail) -> String {
    let mut out = format!(
        "<h3>The row</h3>\n<p class=\"meta\">{}</p>\n",
        escape(&detail.row_note)
    );
    if !detail.row.is_empty() {
        out.push_str(&cells_table("row", &detail.row));
    }
    if let Some(raw) = &detail.raw_record {
        out.push_str(&format!(
            "<h3>Raw record</h3>\n<pre class=\"raw\">{}</pre>\n",
            escape(raw)
        ));
    }
    out
}

fn history(events: &[ExceptionEvent]) -> String {
    let mut out = String::from(
        "<h3>History</h3>\n<table class=\"history\"><thead><tr><th>Time</th><th>Status</th><th>Run</th><th>By</th><th>Note</th></tr></thead><tbody>\n",
    );
    for e in events {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            e.event_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            e.status.as_str(),
            escape(&e.run_id),
            escape(e.actor.as_deref().unwrap_or_default()),
            escape(e.note.as_deref().unwrap_or_default())
        ));
    }
    out.push_str("</tbody></table>\n");
    out
}

fn reason_field(id: &str) -> String {
    format!(
        "<label for=\"{id}\">Reason (kept in the audit trail)</label><textarea id=\"{id}\" name=\"reason\" required maxlength=\"500\"></textarea>"
    )
}

fn actions(viewer: &Viewer, detail: &Detail) -> String {
    let e = &detail.latest;
    let id = escape(&e.exception_id);
    let csrf = csrf_input(&viewer.csrf);
    let mut out = String::from("<h3>Act</h3>\n");
    if e.status == ExceptionStatus::Quarantined && !detail.row.is_empty() {
        out.push_str(&format!(
            "<form class=\"action\" id=\"correct\" method=\"post\" action=\"/exceptions/{id}/correct\">{csrf}\
             <p>Correct the row: it is replayed through the same baseline and rules, with the contributor's other corrections and pending rows.</p>\
             <table><tbody>\n"
        ));
        for cell in &detail.row {
            let name = escape(&cell.column);
            let input = if cell.masked {
                format!(
                    "<span class=\"masked\">{} (masked: kept as it is)</span>",
                    escape(&cell.value)
                )
            } else {
                format!(
                    "<input name=\"col.{name}\" id=\"col-{name}\" value=\"{}\">",
                    escape(&cell.value)
                )
            };
            out.push_str(&format!(
                "<tr><td><label for=\"col-{name}\">{name}</label></td><td>{input}</td></tr>\n"
            ));
        }
        out.push_str(&format!(
            "</tbody></table>{}<button type=\"submit\">Correct and replay</button></form>\n",
            reason_field("correct-reason")
        ));
    }
    if e.status != ExceptionStatus::Missing {
        out.push_str(&format!(
            "<form class=\"action\" id=\"accept\" method=\"post\" action=\"/exceptions/{id}/accept\">{csrf}\
             <p>Accept as is: the row is committed to Silver as judged (the engine's key rules still apply).</p>{}\
             <button type=\"submit\">Accept as is</button></form>\n",
            reason_field("accept-reason")
        ));
    }
    out.push_str(&format!(
        "<form class=\"action\" id=\"ignore\" method=\"post\" action=\"/exceptions/{id}/ignore\">{csrf}\
         <p>Ignore: close the exception for good; the row never reaches Silver.</p>{}\
         <button type=\"submit\">Ignore</button></form>\n",
        reason_field("ignore-reason")
    ));
    out
}

/// The backlog figures and charts of the report, one section at a time,
/// with links to the others.
pub fn backlog_page(viewer: &Viewer, data: &ReportData, chosen: Option<&str>) -> String {
    let sections: Vec<&crate::report::model::Section> = std::iter::once(&data.overall)
        .chain(&data.contributors)
        .collect();
    let mut body = String::from("<h2>Backlog</h2>\n");
    body.push_str(&alerts(&data.alerts));
    body.push_str("<nav class=\"sections\">");
    for section in &sections {
        let link = if section.name == data.overall.name {
            "/backlog".to_string()
        } else {
            format!("/backlog?contributor={}", url_part(&section.name))
        };
        body.push_str(&format!(
            "<a href=\"{}\">{}</a> ",
            escape(&link),
            escape(&section.name)
        ));
    }
    body.push_str("</nav>\n");
    let shown = sections
        .iter()
        .enumerate()
        .find(|(_, s)| chosen.is_some_and(|c| c == s.name))
        .unwrap_or((0, &sections[0]));
    body.push_str(&section_html(shown.0, shown.1, data.stale_after_days));
    layout("Backlog", Some(viewer), &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exceptions::ExceptionEvent;
    use crate::serve::data::Listed;

    fn viewer() -> Viewer {
        Viewer {
            name: "<b>ann</b>".to_string(),
            role: "operator",
            csrf: "tok\"en".to_string(),
        }
    }

    #[test]
    fn every_value_of_the_list_is_escaped_and_the_page_runs_no_script() {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let hostile = "<script>alert(1)</script>";
        let latest = ExceptionEvent {
            exception_id: "e1\"><img src=x>".to_string(),
            contributor: hostile.to_string(),
            drop_id: hostile.to_string(),
            run_id: "r".to_string(),
            status: ExceptionStatus::Quarantined,
            rule: hostile.to_string(),
            rules: hostile.to_string(),
            severity: "quarantine".to_string(),
            reasons: "[]".to_string(),
            record_key: None,
            source_file: Some(hostile.to_string()),
            source_line: Some(2),
            dq_file: None,
            entered_at: at,
            event_at: at,
            actor: None,
            note: None,
        };
        let listing = Listing {
            rows: vec![Listed {
                latest,
                age_days: 3,
            }],
            matching: 1,
            contributors: vec![hostile.to_string()],
            rules: vec![hostile.to_string()],
        };
        let filter = Filter {
            rule: Some(hostile.to_string()),
            page: 1,
            ..Filter::default()
        };
        let page = list_page(&viewer(), &listing, &filter, &[hostile.to_string()]);
        assert!(
            !page.contains("<script") && !page.contains("<img") && !page.contains("<b>"),
            "{page}"
        );
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(
            page.contains("value=\"tok&quot;en\""),
            "the CSRF token is an escaped attribute"
        );
        assert!(page.contains("/contributors/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/replay"));
        assert!(page.contains("<link rel=\"stylesheet\" href=\"/style.css\">"));
    }
}
