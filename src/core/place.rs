//! Where a run lives: its id (derived from its run key) and its run date,
//! from which every dq_error path of the run is built. A place read back from
//! storage is checked like user input before it steers a path.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};

/// Where a run's dq_error files and summary live: its id and run date.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlace {
    /// The run id: 16 hex digits derived from the run key.
    pub run_id: String,
    /// The run date, `YYYY-MM-DD`.
    pub run_date: String,
}

impl RunPlace {
    /// The dq_error file of the run's rows of one kind (contributor ids are
    /// checked to be safe in paths), relative to the dq_error root.
    pub(crate) fn dq_file(&self, kind: SetAside, contributor: &str) -> String {
        format!(
            "{}/date={}/contributor={contributor}/run={}/part-00000.csv",
            kind.kind(),
            self.run_date,
            self.run_id
        )
    }

    /// The list of the entities the run's drop leaves out (`[completeness]`),
    /// relative to the dq_error root.
    pub fn missing_file(&self, contributor: &str) -> String {
        format!(
            "missing/date={}/contributor={contributor}/run={}/part-00000.csv",
            self.run_date, self.run_id
        )
    }

    /// The run's summary, relative to the dq_error root.
    pub(crate) fn summary_path(&self, contributor: &str) -> String {
        format!(
            "summaries/date={}/contributor={contributor}/run={}.json",
            self.run_date, self.run_id
        )
    }

    /// The place of `run_key`'s run claimed on `run_date`.
    pub(crate) fn for_run(run_key: &str, run_date: chrono::NaiveDate) -> RunPlace {
        RunPlace {
            run_id: run_id_of(run_key),
            run_date: run_date.format("%Y-%m-%d").to_string(),
        }
    }

    /// Checks a place read back from storage (`source` names where) for `run_key`:
    /// the id must be the one derived from the run key and the date a real date,
    /// so that nothing read back can steer a path.
    pub(crate) fn checked(self, run_key: &str, source: &str) -> Result<RunPlace> {
        let expected = run_id_of(run_key);
        let date_ok = chrono::NaiveDate::parse_from_str(&self.run_date, "%Y-%m-%d")
            .is_ok_and(|d| d.format("%Y-%m-%d").to_string() == self.run_date);
        if self.run_id == expected && date_ok {
            return Ok(self);
        }
        Err(Error::BadRecord {
            location: source.to_string(),
            reason: format!(
                "it names run id '{}' and run date '{}', but run key {} has run id {expected} and a run date is YYYY-MM-DD",
                self.run_id, self.run_date, run_key
            ),
        })
    }
}

/// The stable run id of a run key: 16 hex digits of its SHA-256.
pub(crate) fn run_id_of(run_key: &str) -> String {
    hex::encode(Sha256::digest(run_key.as_bytes()))[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_read_back_must_be_the_run_keys_own() {
        let key = "BANK_A/2026-11/abc";
        let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap_or_default();
        let good = RunPlace::for_run(key, date);
        assert_eq!(good.clone().checked(key, "here").ok(), Some(good.clone()));
        let escapes = [
            ("../../../../tmp/x", good.run_date.as_str()),
            (good.run_id.as_str(), "../../x"),
            (good.run_id.as_str(), "2026-13-01"),
            (good.run_id.as_str(), "2026-1-01"),
            ("0000000000000000", good.run_date.as_str()),
        ];
        for (run_id, run_date) in escapes {
            let place = RunPlace {
                run_id: run_id.to_string(),
                run_date: run_date.to_string(),
            };
            let error = place.checked(key, "marker m.json").err();
            let text = error.map(|e| e.to_string()).unwrap_or_default();
            assert!(
                text.contains("marker m.json"),
                "{run_id} {run_date}: {text}"
            );
        }
    }
}
