//! A spinner on a terminal that names the stage a run is in (reading,
//! judging, writing, committing) and how long it has taken. Off unless the
//! CLI asks for it (stderr is a terminal); logs stay the record.

use crate::stage::Stage;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// The run's progress display, or nothing.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
}

impl Progress {
    /// A spinner labelled `label` (e.g. `BANK_A/2026-11`) when `enabled`, else nothing.
    pub fn new(enabled: bool, label: &str) -> Progress {
        let bar = enabled.then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress::with_bar(bar, label)
    }

    fn with_bar(bar: Option<ProgressBar>, label: &str) -> Progress {
        Progress {
            bar,
            label: label.to_string(),
        }
    }

    /// Shows that the run entered `stage`.
    pub fn stage(&self, stage: Stage) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{}: {}", self.label, stage.doing()));
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_names_the_drop_and_the_stage() {
        let progress = Progress::with_bar(Some(ProgressBar::hidden()), "BANK_A/2026-11");
        progress.stage(Stage::Write);
        assert_eq!(
            progress.bar.as_ref().map(|b| b.message()),
            Some("BANK_A/2026-11: writing".to_string())
        );
    }

    #[test]
    fn a_disabled_progress_shows_nothing() {
        let progress = Progress::new(false, "BANK_A/2026-11");
        progress.stage(Stage::Read);
        assert!(progress.bar.is_none());
    }
}
