//! Backfill: several drops of one contributor, in order. Drops already
//! committed are skipped; the first failure stops the backfill and says where
//! to resume. Each drop is an ordinary run (one claim, one commit), so a
//! backfill that is stopped and restarted never commits a drop twice. The
//! drops run in one process and hand on what a month can reuse of the one
//! before ([`Carry`]).

use crate::config::Plan;
use crate::core::drop::DropRef;
use crate::error::{Error, Result};
use crate::infra::storage::Stores;
use crate::pipeline::summary::{RunStatus, Summary};
use crate::pipeline::{Carry, RunOptions, run_carrying};

/// What happened to each drop of a backfill.
#[derive(Debug)]
pub struct BackfillReport {
    /// Drops run (or skipped), in order, with their summaries.
    pub runs: Vec<Summary>,
    /// The drop that failed, and why; the backfill stopped there.
    pub stopped_at: Option<(String, Error)>,
}

/// The drop ids of `contributor` under the bronze root, sorted.
pub async fn list_drops(plan: &Plan, contributor: &str) -> Result<Vec<String>> {
    DropRef::new(contributor, "probe")?;
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let mut drops: Vec<String> = bronze
        .list(contributor)
        .await?
        .iter()
        .filter_map(|o| {
            o.relative
                .strip_prefix(contributor)?
                .trim_start_matches('/')
                .split('/')
                .next()
                .map(str::to_string)
        })
        .filter(|d| !d.is_empty())
        .collect();
    drops.sort();
    drops.dedup();
    Ok(drops)
}

/// Checks a bound of the range (`--from`, `--to`) like a drop id: a usage
/// error naming `arg` if it is not one.
fn check_bound(arg: &str, drop_id: &str) -> Result<()> {
    match DropRef::new("backfill", drop_id) {
        Ok(_) => Ok(()),
        Err(Error::Usage { reason, .. }) => Err(Error::Usage {
            arg: arg.to_string(),
            reason,
        }),
        Err(other) => Err(other),
    }
}

/// Runs the drops of `contributor` from `from` to `to` (inclusive, in sorted order).
pub async fn run_backfill(
    plan: &Plan,
    contributor: &str,
    from: &str,
    to: &str,
    options: &RunOptions,
) -> Result<BackfillReport> {
    check_bound("--from", from)?;
    check_bound("--to", to)?;
    let drops: Vec<String> = list_drops(plan, contributor)
        .await?
        .into_iter()
        .filter(|d| d.as_str() >= from && d.as_str() <= to)
        .collect();
    if drops.is_empty() {
        return Err(Error::BadDrop {
            location: format!("{}/{contributor}", plan.storage.bronze),
            reason: format!("no drop between {from} and {to}"),
        });
    }
    let mut report = BackfillReport {
        runs: Vec::new(),
        stopped_at: None,
    };
    let mut carry = Carry::default();
    for (index, drop_id) in drops.iter().enumerate() {
        let drop = DropRef::new(contributor, drop_id)?;
        // An id unsafe in paths is not fetched ahead: its own turn fails.
        let next = drops.get(index + 1);
        carry.fetch_ahead(next.and_then(|next| DropRef::new(contributor, next).ok()));
        match run_carrying(plan, &drop, options, &mut carry).await {
            Ok(outcome) => {
                if outcome.summary.status == RunStatus::AlreadyCommitted {
                    tracing::info!(drop_id = %drop_id, "already committed: skipped");
                }
                report.runs.push(outcome.summary);
            }
            Err(error) => {
                report.stopped_at = Some((drop_id.clone(), error));
                break;
            }
        }
    }
    Ok(report)
}
