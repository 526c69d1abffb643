//! The engine's own key rules, added to every dataset with no line of user
//! config (like `not_null`): a record key at most once per drop
//! (`unique_key`), never a key already in Silver (`resubmission`), never a row
//! of another contributor (`contributor`). They read transient columns the
//! baseline always computes (`_key_occurrences`, `_key_committed`,
//! `_drop_contributor`). Their severity can be changed in `[engine_rules]`;
//! they cannot be turned off.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::config::contract::Contract;
use crate::config::rules::{Rule, Scope, Severity};
use crate::transient::{DROP_CONTRIBUTOR, KEY_COMMITTED, KEY_OCCURRENCES};

/// Name of the engine rule: a record key occurs at most once in a drop.
pub const UNIQUE_KEY_RULE: &str = "unique_key";
/// Name of the engine rule: a record key is not already in Silver.
pub const RESUBMISSION_RULE: &str = "resubmission";
/// Name of the engine rule: the contributor column equals the drop's contributor.
pub const CONTRIBUTOR_RULE: &str = "contributor";

/// The engine rules' names, in the order they run.
pub const ENGINE_RULES: [&str; 3] = [UNIQUE_KEY_RULE, RESUBMISSION_RULE, CONTRIBUTOR_RULE];

/// Name of the built-in rule that enforces the contract's not-null columns.
pub const NOT_NULL_RULE: &str = "not_null";

/// Whether `name` is a rule the engine adds (`not_null` and the key
/// invariants): a row it sets aside would break Silver's contract or keys,
/// so nobody can accept it into Silver.
pub fn is_engine_rule(name: &str) -> bool {
    name == NOT_NULL_RULE || ENGINE_RULES.contains(&name)
}

/// `[engine_rules]` as written: a severity per engine rule. Default: `quarantine` for each.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineRulesConfig {
    /// Severity of `unique_key` (a record key at most once per drop).
    #[serde(default)]
    pub unique_key: Option<EngineSeverity>,
    /// Severity of `resubmission` (a record key never already in Silver).
    #[serde(default)]
    pub resubmission: Option<EngineSeverity>,
    /// Severity of `contributor` (the contributor column equals the drop's contributor).
    #[serde(default)]
    pub contributor: Option<EngineSeverity>,
}

/// A severity as written: text, or a boolean (refused: the rules cannot be turned off).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EngineSeverity {
    /// `warn`, `drop`, `quarantine` or `fail` (or their synonyms).
    Text(String),
    /// `true` / `false`: not a severity.
    Flag(bool),
}

/// The engine rules for `contract`, with the severities of `config`; every
/// refused setting is recorded in `problems` (the rule then keeps its default).
pub fn engine_rules(
    config: &EngineRulesConfig,
    contract: &Contract,
    problems: &mut Vec<String>,
) -> Vec<Rule> {
    let key = contract.record_key().join(", ");
    let contributor = &contract.contributor_column;
    [
        (
            UNIQUE_KEY_RULE,
            &config.unique_key,
            format!("{KEY_OCCURRENCES} = 1"),
            format!(
                "the record key ({key}) occurs once in the drop (every copy of a repeated key is set aside)"
            ),
        ),
        (
            RESUBMISSION_RULE,
            &config.resubmission,
            format!("{KEY_COMMITTED} = 0"),
            format!(
                "the record key ({key}) is not already in Silver (a resubmission of a committed statement is set aside)"
            ),
        ),
        (
            CONTRIBUTOR_RULE,
            &config.contributor,
            format!("\"{contributor}\" = {DROP_CONTRIBUTOR}"),
            format!("{contributor} equals the drop's contributor"),
        ),
    ]
    .into_iter()
    .map(|(name, written, expression, message)| {
        let (severity, origin) = match written {
            None => (
                Severity::Quarantine,
                "the engine (every dataset; severity settable in [engine_rules])".to_string(),
            ),
            Some(written) => (
                severity_of(name, written, problems).unwrap_or(Severity::Quarantine),
                format!("the engine, severity from [engine_rules] {name}"),
            ),
        };
        Rule {
            name: name.to_string(),
            expression,
            scope: Scope::Row,
            severity,
            contributor_types: vec!["*".to_string()],
            message,
            filter: None,
            escalation: None,
            origin,
            prev_columns: BTreeSet::new(),
            references: BTreeSet::new(),
            column: None,
        }
    })
    .collect()
}

fn severity_of(
    name: &str,
    written: &EngineSeverity,
    problems: &mut Vec<String>,
) -> Option<Severity> {
    let off = |shown: &str| {
        format!(
            "engine_rules.{name} = {shown}: the engine rule '{name}' cannot be turned off; \
             set its severity to warn, drop, quarantine or fail instead"
        )
    };
    let text = match written {
        EngineSeverity::Flag(false) => {
            problems.push(off("false"));
            return None;
        }
        EngineSeverity::Flag(true) => {
            problems.push(format!(
                "engine_rules.{name} = true: expected a severity (warn, drop, quarantine or fail)"
            ));
            return None;
        }
        EngineSeverity::Text(text) => text,
    };
    let lowered = text.trim().to_ascii_lowercase();
    if ["off", "none", "disabled", "disable", "ignore", "false", ""].contains(&lowered.as_str()) {
        problems.push(off(&format!("'{text}'")));
        return None;
    }
    match Severity::parse(text) {
        Some(Severity::Pending) => {
            problems.push(format!(
                "engine_rules.{name} = '{text}': severity 'pending' is for reference rules only \
                 (expected warn, drop, quarantine or fail)"
            ));
            None
        }
        Some(severity) => Some(severity),
        None => {
            problems.push(format!(
                "engine_rules.{name} = '{text}': unknown severity (expected warn, drop, quarantine or fail)"
            ));
            None
        }
    }
}

/// The problem with a user rule that takes an engine rule's name, if it does.
pub fn name_clash(origin: &str, name: &str) -> Option<String> {
    ENGINE_RULES.contains(&name).then(|| {
        format!(
            "{origin}: rule '{name}': '{name}' is an engine rule, enforced on every dataset; \
             remove it from the rules and set its severity in [engine_rules] \
             (e.g. {name} = \"warn\") if it must differ"
        )
    })
}
