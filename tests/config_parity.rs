//! `check-config` refuses exactly the configurations a run would refuse.
//! Over a corpus of broken (and a few tricky but valid) configurations, each
//! edited into the shipped one: `check-config` exits 2 exactly when `run`
//! does, and a run of a clean drop never blames the drop (exit 1) or the
//! infrastructure (exit 3) for its configuration.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use harness::{month, output, project, put_drop, run_args, silverline};
use silverline::demo::generate::Portfolio;

/// One configuration of the corpus: a name, the edit that makes it, and
/// whether it is refused.
struct Case {
    name: &'static str,
    from: &'static str,
    to: &'static str,
    refused: bool,
}

/// A configuration both `check-config` and `run` must refuse.
const fn case(name: &'static str, from: &'static str, to: &'static str) -> Case {
    Case {
        name,
        from,
        to,
        refused: true,
    }
}

/// A configuration that looks suspicious but runs.
const fn valid(name: &'static str, from: &'static str, to: &'static str) -> Case {
    Case {
        name,
        from,
        to,
        refused: false,
    }
}

const ARREARS_METRIC: &str = "expression = \"sum(amount_in_arrears)\"";
const STALE_RULE: &str = "unchanged_share IS NULL OR unchanged_share < 0.95";
const CONSISTENCY: &str = "credit_limit = product_limit + temporary_limit,critical";

const CORPUS: &[Case] = &[
    valid("shipped", "", ""),
    case(
        "metric reads a reference flag",
        ARREARS_METRIC,
        "expression = \"count(*) FILTER (WHERE _ref_holders)\"",
    ),
    case(
        "metric reads an engine column",
        ARREARS_METRIC,
        "expression = \"sum(_key_occurrences)\"",
    ),
    case(
        "metric sums text",
        ARREARS_METRIC,
        "expression = \"sum(account_id)\"",
    ),
    case(
        "metric is not an aggregate",
        ARREARS_METRIC,
        "expression = \"amount_in_arrears\"",
    ),
    case(
        "metric nests aggregates",
        ARREARS_METRIC,
        "expression = \"sum(count(*))\"",
    ),
    case(
        "metric calls an unknown function",
        ARREARS_METRIC,
        "expression = \"frobnicate(amount_in_arrears)\"",
    ),
    case(
        "metric over trend columns with its own trend",
        STALE_RULE,
        "unchanged_share < prev_unchanged_share",
    ),
    case(
        "metric over trend columns averaged",
        STALE_RULE,
        "unchanged_share < avg_unchanged_share",
    ),
    case(
        "aggregate rule reads a row column",
        STALE_RULE,
        "credit_limit > 0",
    ),
    valid(
        "aggregate rule compares a metric with text",
        STALE_RULE,
        "accounts > 'many'",
    ),
    valid(
        "row rule compares text with a number",
        CONSISTENCY,
        "account_id > 5,critical",
    ),
    case(
        "row rule calls an unknown function",
        CONSISTENCY,
        "frobnicate(credit_limit),critical",
    ),
    case(
        "row rule is an aggregate",
        CONSISTENCY,
        "sum(credit_limit) > 0,critical",
    ),
    valid(
        "row rule is a window",
        CONSISTENCY,
        "row_number() OVER () > 0,critical",
    ),
    case(
        "row rule holds a subquery",
        CONSISTENCY,
        "account_id IN (SELECT 'x'),critical",
    ),
    case(
        "row rule is not boolean",
        CONSISTENCY,
        "credit_limit + 1,critical",
    ),
    case(
        "row rule with a bad regular expression",
        CONSISTENCY,
        "regexp_like(account_id, '['),critical",
    ),
    case(
        "no average periods",
        "average_periods = 3",
        "average_periods = 0",
    ),
    case(
        "no lookback while looking for missing entities",
        "lookback_months = 3",
        "lookback_months = 0",
    ),
    case(
        "Pushgateway URL without a scheme",
        "[aggregates]",
        "[metrics_push]\nurl = \"127.0.0.1:9091\"\n\n[aggregates]",
    ),
    valid(
        "Pushgateway that nobody runs",
        "[aggregates]",
        "[metrics_push]\nurl = \"http://127.0.0.1:9\"\ntimeout_seconds = 1\n\n[aggregates]",
    ),
    case(
        "creep alert with neither test",
        "[aggregates]",
        "[alerts.creep]\nwindow = 4\n\n[aggregates]",
    ),
    valid(
        "alert webhook that nobody runs",
        "[aggregates]",
        "[alerts]\nno_exit_days = 7\n[alerts.creep]\nsigma = 3.0\n[alerts.webhook]\nurl = \"http://127.0.0.1:9\"\ntimeout_seconds = 1\n\n[aggregates]",
    ),
];

#[test]
fn check_config_exits_2_exactly_when_a_run_would() {
    let mut mismatches = Vec::new();
    for case in CORPUS {
        let (tmp, config) = project(|text| text.replace(case.from, case.to));
        let mut bank = Portfolio::new("BANK_P", 20, false, 5);
        for m in 1..=2 {
            put_drop(
                tmp.path(),
                "BANK_P",
                &format!("2026-0{m}"),
                &bank.statements(month(2026, m), false),
            );
        }
        let config = config.to_str().unwrap();
        let check = silverline(&["check-config", "--config", config]);
        let checked = check.get_output().status.code();
        let mut runs = Vec::new();
        for drop_id in ["2026-01", "2026-02"] {
            let run = silverline(&run_args(config, "BANK_P", drop_id));
            let code = run.get_output().status.code();
            runs.push((code, output(&run)));
            if code != Some(0) {
                break;
            }
        }
        let run_refused = runs.iter().any(|(code, _)| *code == Some(2));
        // The drops are clean: a run ends committed or refuses the configuration.
        let misclassed = runs.iter().any(|(code, _)| !matches!(code, Some(0 | 2)));
        if (checked == Some(2)) != run_refused || misclassed || run_refused != case.refused {
            mismatches.push(format!(
                "{}: check-config {checked:?} ({}), runs {:?}: {}",
                case.name,
                output(&check).lines().last().unwrap_or_default(),
                runs.iter().map(|(code, _)| *code).collect::<Vec<_>>(),
                runs.last()
                    .map(|(_, text)| text.lines().last().unwrap_or_default())
                    .unwrap_or_default(),
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
