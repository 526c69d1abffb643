//! How a run is asked for ([`RunOptions`]) and what it reports
//! ([`RunOutcome`]), and the rules that judge it.

use super::summary::Summary;
use crate::config::Plan;
use crate::config::engine::is_engine_rule;
use crate::config::rules::{Rule, Scope};
use crate::core::drop::DropRef;
use crate::error::Result;
use crate::exceptions::close::{Acceptance, Closing};

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Do everything but the commit.
    pub dry_run: bool,
    /// Show a spinner naming the stage (the CLI sets it when stderr is a terminal).
    pub progress: bool,
    /// The drop replays exceptions: aggregate rules, which judge a whole
    /// period, are not run on its few rows (they judged the period already).
    pub replay: bool,
    /// The drop commits rows a person accepted as judged (`silverline
    /// accept`): only the engine's rules judge it again (a key already in
    /// Silver or twice in the drop, a row of another contributor, a missing
    /// required value is still set aside), its snapshot records the
    /// acceptance and its exceptions close as accepted.
    pub accept: Option<Acceptance>,
    /// Faults a test injects (only with the `test-hooks` feature).
    #[cfg(feature = "test-hooks")]
    pub hooks: super::hooks::TestHooks,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run summary.
    pub summary: Summary,
    /// Where the summary was written, if anywhere.
    pub summary_url: Option<String>,
}

impl RunOptions {
    /// How the exceptions the drop carries close when their rows reach Silver.
    pub(super) fn closing(&self) -> Closing {
        match &self.accept {
            Some(acceptance) => Closing::Accepted(acceptance.decision.clone()),
            None => Closing::Resolved,
        }
    }
}

/// The contributor's type and the rules that judge this run of its drop.
pub(super) fn rules_of<'p>(
    plan: &'p Plan,
    drop: &DropRef,
    options: &RunOptions,
) -> Result<(&'p str, Vec<&'p Rule>)> {
    let (contributor_type, mut rules) = plan.rules_for(&drop.contributor)?;
    if options.replay {
        rules.retain(|r| r.scope != Scope::Aggregate);
    }
    if options.accept.is_some() {
        rules.retain(|r| is_engine_rule(&r.name));
    }
    Ok((contributor_type, rules))
}
