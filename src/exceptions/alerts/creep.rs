//! The creep alert: a rule's failure rate rising run after run, or jumping
//! above what the runs before it make usual.

use std::collections::BTreeMap;

use super::{Alert, AlertFigures, CreepFigures, RunFailures, RunRate, SigmaFigures, percent};
use crate::config::alerts::{Creep, Sigma};

/// The creep alerts of `contributor`'s `runs` (any order): one per rule of
/// the latest run whose rate fails a test of `creep`.
pub fn creep_alerts(creep: &Creep, contributor: &str, runs: &[&RunFailures]) -> Vec<Alert> {
    let runs = in_order(runs);
    let Some(latest) = runs.last() else {
        return Vec::new();
    };
    latest
        .failed
        .keys()
        .filter_map(|rule| {
            let series = rates(&runs, rule);
            let figures = test(creep, &series)?;
            let message = message(contributor, rule, &figures);
            Some(Alert::new(
                contributor,
                Some(rule),
                AlertFigures::Creep(figures),
                message,
            ))
        })
        .collect()
}

/// The runs that received rows, oldest first, each run once.
fn in_order<'a>(runs: &[&'a RunFailures]) -> Vec<&'a RunFailures> {
    let by_id: BTreeMap<&str, &RunFailures> =
        runs.iter().map(|r| (r.run_id.as_str(), *r)).collect();
    let mut ordered: Vec<&RunFailures> = by_id.into_values().filter(|r| r.received > 0).collect();
    ordered.sort_by(|a, b| (&a.at, &a.drop_id).cmp(&(&b.at, &b.drop_id)));
    ordered
}

/// `rule`'s rate in each run that judged it.
fn rates(runs: &[&RunFailures], rule: &str) -> Vec<RunRate> {
    runs.iter()
        .filter_map(|run| {
            let failed = *run.failed.get(rule)?;
            Some(RunRate {
                drop_id: run.drop_id.clone(),
                failed,
                received: run.received,
                rate: failed as f64 / run.received as f64,
            })
        })
        .collect()
}

/// The figures of `series` when it fails a test of `creep`.
fn test(creep: &Creep, series: &[RunRate]) -> Option<CreepFigures> {
    let rises = creep
        .rises_in_a_row
        .map(|wanted| (wanted, rises_up_to_latest(series)))
        .filter(|(wanted, rises)| rises >= wanted)
        .map(|(_, rises)| rises);
    let sigma = creep.sigma.and_then(|sigma| above_sigma(sigma, series));
    if rises.is_none() && sigma.is_none() {
        return None;
    }
    let shown = [
        rises.map_or(0, |r| r as usize + 1),
        sigma.as_ref().map_or(0, |s| s.window as usize + 1),
    ]
    .into_iter()
    .max()
    .unwrap_or_default();
    Some(CreepFigures {
        runs: series[series.len().saturating_sub(shown)..].to_vec(),
        rises_in_a_row: rises,
        sigma,
    })
}

/// How many runs in a row, up to the latest, each had a higher rate than the one before.
fn rises_up_to_latest(series: &[RunRate]) -> u32 {
    let rises = series
        .windows(2)
        .rev()
        .take_while(|pair| pair[1].rate > pair[0].rate)
        .count();
    u32::try_from(rises).unwrap_or(u32::MAX)
}

/// The mean and deviation of the `window` runs before the latest, when the
/// latest rate is above the mean plus k deviations (None too with fewer runs).
fn above_sigma(sigma: Sigma, series: &[RunRate]) -> Option<SigmaFigures> {
    let window = sigma.window as usize;
    let (latest, before) = series.split_last()?;
    let before = before.get(before.len().checked_sub(window)?..)?;
    let n = window as f64;
    let mean = before.iter().map(|r| r.rate).sum::<f64>() / n;
    let variance = before.iter().map(|r| (r.rate - mean).powi(2)).sum::<f64>() / n;
    let std_dev = variance.sqrt();
    let threshold = mean + sigma.k * std_dev;
    (latest.rate > threshold).then_some(SigmaFigures {
        mean,
        std_dev,
        k: sigma.k,
        threshold,
        window: sigma.window,
    })
}

fn message(contributor: &str, rule: &str, figures: &CreepFigures) -> String {
    let mut told = Vec::new();
    let latest = figures.runs.last();
    let latest_rate = latest.map_or(0.0, |r| r.rate);
    let latest_drop = latest.map_or("", |r| r.drop_id.as_str());
    if let Some(rises) = figures.rises_in_a_row {
        let start = figures.runs.len().saturating_sub(rises as usize + 1);
        let steps: Vec<String> = figures.runs[start..]
            .iter()
            .map(|r| percent(r.rate))
            .collect();
        told.push(format!(
            "rose {rises} runs in a row ({})",
            steps.join(" -> ")
        ));
    }
    if let Some(s) = &figures.sigma {
        told.push(format!(
            "{} is above the mean {} + {} x the deviation {} = {} of the {} runs before",
            percent(latest_rate),
            percent(s.mean),
            s.k,
            percent(s.std_dev),
            percent(s.threshold),
            s.window
        ));
    }
    format!(
        "{contributor}: the failure rate of rule {rule} creeps up to {} in drop {latest_drop}: {}",
        percent(latest_rate),
        told.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of BANK_A receiving 1000 rows each, with `failed` failures of rule `r`.
    fn runs(failed: &[u64]) -> Vec<RunFailures> {
        failed
            .iter()
            .enumerate()
            .map(|(i, &f)| RunFailures {
                contributor: "BANK_A".to_string(),
                run_id: format!("run{i}"),
                drop_id: format!("2026-{:02}", i + 1),
                at: format!("2026-{:02}-05T00:00:00Z", i + 1),
                received: 1000,
                failed: BTreeMap::from([("r".to_string(), f)]),
            })
            .collect()
    }

    fn alerts(creep: Creep, failed: &[u64]) -> Vec<Alert> {
        let runs = runs(failed);
        let refs: Vec<&RunFailures> = runs.iter().rev().collect();
        creep_alerts(&creep, "BANK_A", &refs)
    }

    const THREE_RISES: Creep = Creep {
        rises_in_a_row: Some(3),
        sigma: None,
    };

    #[test]
    fn three_rises_in_a_row_alert_and_show_the_four_rates() {
        let raised = alerts(THREE_RISES, &[9, 1, 2, 3, 4]);
        assert_eq!(raised.len(), 1, "{raised:?}");
        let AlertFigures::Creep(figures) = &raised[0].figures else {
            panic!("{raised:?}");
        };
        assert_eq!(figures.rises_in_a_row, Some(3));
        let shown: Vec<u64> = figures.runs.iter().map(|r| r.failed).collect();
        assert_eq!(shown, [1, 2, 3, 4]);
        assert!(
            raised[0]
                .message
                .contains("0.10% -> 0.20% -> 0.30% -> 0.40%"),
            "{}",
            raised[0].message
        );
    }

    #[test]
    fn rises_broken_by_a_fall_or_a_flat_run_do_not_alert() {
        assert!(alerts(THREE_RISES, &[1, 2, 1, 3, 4]).is_empty());
        assert!(alerts(THREE_RISES, &[1, 2, 2, 3, 4]).is_empty());
        assert!(alerts(THREE_RISES, &[2, 3, 4]).is_empty(), "two rises only");
    }

    #[test]
    fn above_mean_plus_k_sigma_alerts_and_within_does_not() {
        let creep = Creep {
            rises_in_a_row: None,
            sigma: Some(Sigma { k: 2.0, window: 4 }),
        };
        // Before: 10, 20, 10, 20 per 1000: mean 1.5%, deviation 0.5%, threshold 2.5%.
        assert!(
            alerts(creep, &[10, 20, 10, 20, 25]).is_empty(),
            "2.5% is not above"
        );
        let raised = alerts(creep, &[10, 20, 10, 20, 26]);
        let AlertFigures::Creep(figures) = &raised[0].figures else {
            panic!("{raised:?}");
        };
        let sigma = figures.sigma.as_ref().unwrap();
        assert!((sigma.mean - 0.015).abs() < 1e-12 && (sigma.std_dev - 0.005).abs() < 1e-12);
        assert!((sigma.threshold - 0.025).abs() < 1e-12);
        assert_eq!(figures.runs.len(), 5);
        assert!(
            alerts(creep, &[10, 20, 30, 90]).is_empty(),
            "fewer runs than the window"
        );
    }
}
