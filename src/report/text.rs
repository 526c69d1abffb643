//! `silverline backlog` as text: one line of figures per contributor (closed
//! exceptions a person accepted or ignored counted apart), then the open
//! exceptions by rule and age; the open alerts first, when there are any.

use std::fmt::Write;

use super::model::{ReportData, Section};
use crate::exceptions::alerts::alert_lines;
use crate::exceptions::figures::AGE_BUCKETS;

/// The backlog of `data` as aligned text tables.
pub fn backlog_text(data: &ReportData) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "exception backlog of {} at {} (stale after {} days)\n",
        data.dataset, data.generated_at, data.stale_after_days
    );
    if !data.alerts.is_empty() {
        let _ = writeln!(out, "ALERTS ({}):", data.alerts.len());
        for line in alert_lines(&data.alerts) {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "{:<20} {:>7} {:>8} {:>11} {:>7} {:>6} {:>12} {:>6} {:>7} {:>7} {:>8} {:>9} {:>8}",
        "contributor",
        "open",
        "pending",
        "quarantined",
        "missing",
        "stale",
        "oldest days",
        "in 7d",
        "out 7d",
        "in 30d",
        "out 30d",
        "accepted",
        "ignored"
    );
    for section in data.contributors.iter().chain([&data.overall]) {
        let b = &section.backlog;
        let oldest = b
            .oldest_age_days
            .map_or_else(|| "-".to_string(), |d| d.to_string());
        let _ = writeln!(
            out,
            "{:<20} {:>7} {:>8} {:>11} {:>7} {:>6} {:>12} {:>6} {:>7} {:>7} {:>8} {:>9} {:>8}",
            section.name,
            b.open,
            b.pending,
            b.quarantined,
            b.missing,
            b.stale,
            oldest,
            b.entered_7d,
            b.exited_7d,
            b.entered_30d,
            b.exited_30d,
            b.accepted,
            b.ignored
        );
    }
    let _ = writeln!(out, "\nopen exceptions by rule and age:");
    let _ = write!(out, "{:<20} {:<20}", "contributor", "rule");
    for (label, _) in AGE_BUCKETS {
        let _ = write!(out, " {label:>12}");
    }
    let _ = writeln!(out, " {:>7}", "total");
    for section in &data.contributors {
        rule_lines(&mut out, section);
    }
    out
}

fn rule_lines(out: &mut String, section: &Section) {
    for row in &section.open_by_rule {
        let _ = write!(out, "{:<20} {:<20}", section.name, row.rule);
        for count in row.by_age {
            let _ = write!(out, " {count:>12}");
        }
        let _ = writeln!(out, " {:>7}", row.total);
    }
}
