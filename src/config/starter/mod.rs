//! `silverline init`: a starting configuration for a new dataset, from a
//! sample file (CSV or Parquet). In: a dataset name, the sample, a folder.
//! Out: `<folder>/<name>.toml` (the contract with the sample's columns and
//! types, the guessed entity key, order and contributor columns marked
//! REVIEW, an embedded SQL catalog and local storage under `<folder>/data/`)
//! and `<folder>/rules/<name>_rules.csv` (a starter control CSV). Both pass
//! `silverline check-config` as written, and the sample runs as a drop.
//! Existing files are never overwritten. Nothing of a row's values is
//! printed or written but the rules' thresholds (none are taken from values).

pub mod guess;
pub mod render;
pub mod sample;

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::starter::guess::{Roles, guess_roles};
use crate::config::starter::sample::read_sample;
use crate::error::{Error, Result};

/// What `silverline init` wrote.
#[derive(Debug)]
pub struct Starter {
    /// The configuration file.
    pub config: PathBuf,
    /// The starter rules CSV.
    pub rules: PathBuf,
    /// The sample's file name.
    pub sample: String,
    /// Rows and columns read from the sample.
    pub shape: (usize, usize),
    /// The guessed roles, to review.
    pub roles: Roles,
}

/// Writes the starter configuration of dataset `name` from the file `sample`
/// into `out`; refuses (exit 2, nothing written) a bad name, an existing
/// file, or a sample it cannot read or with no date column.
pub fn write_starter(name: &str, sample: &Path, out: &Path) -> Result<Starter> {
    check_name(name)?;
    let config = out.join(format!("{name}.toml"));
    let rules = out.join("rules").join(format!("{name}_rules.csv"));
    if let Some(file) = out.ancestors().find(|a| a.exists()).filter(|a| !a.is_dir()) {
        return Err(Error::Usage {
            arg: format!("--out {}", out.display()),
            reason: format!("{} is a file, not a folder", file.display()),
        });
    }
    for path in [&config, &rules] {
        if path.exists() {
            return Err(exists(path));
        }
    }
    let read = read_sample(sample)?;
    let roles = guess_roles(&read).map_err(|reason| Error::Usage {
        arg: format!("--sample {}", sample.display()),
        reason,
    })?;
    let rules_path = format!("rules/{name}_rules.csv");
    let config_text = render::config_toml(name, &read, &roles, &rules_path);
    let rules_text = render::rules_csv(name, &read, &roles);
    write_new(&config, &config_text)?;
    write_new(&rules, &rules_text)?;
    Ok(Starter {
        config,
        rules,
        sample: read.file.clone(),
        shape: (read.rows, read.columns.len()),
        roles,
    })
}

/// A dataset name: a lowercase letter, then lowercase letters, digits and `_`
/// (it names the files and the Silver table).
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && name.len() <= 64 {
        return Ok(());
    }
    Err(Error::Usage {
        arg: format!("--name {name}"),
        reason: "a dataset name is a lowercase letter followed by lowercase letters, digits \
                 or '_' (at most 64): it names the files and the Silver table"
            .to_string(),
    })
}

fn exists(path: &Path) -> Error {
    Error::Usage {
        arg: format!("--out {}", path.parent().unwrap_or(path).display()),
        reason: format!(
            "{} already exists: init never overwrites a file (choose another --out or --name)",
            path.display()
        ),
    }
}

/// Writes `text` to `path`, a file that must not exist yet.
fn write_new(path: &Path, text: &str) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(io)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => exists(path),
            _ => io(e),
        })?;
    file.write_all(text.as_bytes()).map_err(io)
}

impl fmt::Display for Starter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rows, columns) = self.shape;
        writeln!(
            f,
            "wrote {} and {} from {} ({rows} rows, {columns} columns)",
            self.config.display(),
            self.rules.display(),
            self.sample
        )?;
        writeln!(
            f,
            "review the guesses marked REVIEW in {}:",
            self.config.display()
        )?;
        let roles = &self.roles;
        let key = roles.entity_key().join(", ");
        writeln!(
            f,
            "  entity_key         = {key} ({}: {})",
            roles.key.column, roles.key.why
        )?;
        writeln!(
            f,
            "  order_column       = {} ({})",
            roles.order.column, roles.order.why
        )?;
        let contributor = &roles.contributor;
        writeln!(
            f,
            "  contributor_column = {} ({})",
            contributor.column, contributor.why
        )?;
        write!(
            f,
            "then: silverline check-config --config {}",
            self.config.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names_are_lowercase_identifiers() {
        for good in ["loans", "loan_contracts_2", "a"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Loans",
            "2loans",
            "loan-contracts",
            "../x",
            "loans.toml",
        ] {
            let err = check_name(bad).unwrap_err();
            assert_eq!(err.class(), crate::error::ErrorClass::Config, "{bad}");
        }
    }
}
