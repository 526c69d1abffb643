//! The checks of a configuration: [`Plan::from_config`] turns the raw TOML
//! into a [`Plan`] and collects *every* problem it finds, each naming the
//! setting or rule at fault, so one `check-config` shows them all.

use std::collections::BTreeSet;
use std::path::Path;

use crate::config::alerts::AlertSettings;
use crate::config::contract::{Column, ColumnType, Contract};
use crate::config::engine::{NOT_NULL_RULE, engine_rules, name_clash};
use crate::config::lineage::LineageTarget;
use crate::config::locations::{catalog_spec, resolve_location};
use crate::config::metrics_push::MetricsPush;
use crate::config::plan::{
    ContributorTypes, ExceptionsSpec, PartitionTransform, Plan, Reference, ReferenceFormat,
    S3Settings, StorageSpec, TableSpec,
};
use crate::config::raw::{AggregatesConfig, ContributorsConfig, MetricConfig, SilverlineConfig};
use crate::config::rules::{
    Completeness, Escalation, ExprChecker, MISSING_ENTITIES_METRIC, Metric, Reads, Rule, Scope,
    Severity, aggregate_fields, drop_only_metric_hint, metric_fields, row_fields,
};
use crate::config::sources::{RuleDraft, read_rule_file};
use crate::transient::PREV_PREFIX;

impl Plan {
    /// Validates `raw`, read from `source`; relative paths resolve against the file's folder.
    pub fn from_config(raw: SilverlineConfig, source: &Path) -> Result<Plan, Vec<String>> {
        let base = source.parent().unwrap_or(Path::new("."));
        let mut problems = Vec::new();
        let contract = check_contract(&raw, &mut problems);
        let table = check_table(&raw, &contract, &mut problems);
        let contributors = check_contributors(&raw.contributors, &mut problems);
        let references = check_references(&raw, &contract, base, &mut problems);
        check_aggregates(&raw.aggregates, &mut problems);
        let metrics_push = MetricsPush::check(&raw.metrics_push, &mut problems);
        let alerts =
            AlertSettings::check(&raw.alerts, raw.exceptions.stale_after_days, &mut problems);
        let lineage = LineageTarget::check(&raw.lineage, base, &mut problems);
        let resources = crate::config::resources::check(&raw.resources, base, &mut problems);
        let reference_names: Vec<String> = references.iter().map(|r| r.name.clone()).collect();
        let completeness = check_completeness(&raw, &contract, &mut problems);
        let row_checker = ExprChecker::new(row_fields(&contract, &reference_names));
        let (metrics, rules) = match row_checker {
            Ok(rows) => {
                let mut metrics = check_metrics(&raw, &contract, &mut problems);
                add_completeness_metric(completeness.as_ref(), &mut metrics, &mut problems);
                match ExprChecker::new(aggregate_fields(&metrics)) {
                    Ok(aggregates) => {
                        let context = RuleContext {
                            contract: &contract,
                            metrics: &metrics,
                            known_types: contributors.known_types(),
                            rows,
                            aggregates,
                        };
                        let rules = check_rules(&raw, base, source, &context, &mut problems);
                        (metrics, rules)
                    }
                    Err(e) => {
                        problems.push(format!("metrics: {e}"));
                        (metrics, Vec::new())
                    }
                }
            }
            Err(e) => {
                problems.push(format!("dataset: cannot build the rule schema: {e}"));
                (Vec::new(), Vec::new())
            }
        };
        let plan = Plan {
            source: source.to_path_buf(),
            contract,
            table,
            lookback_months: raw.baseline.lookback_months,
            storage: StorageSpec {
                bronze: resolve_location(&raw.storage.bronze, base),
                dq_error: resolve_location(&raw.storage.dq_error, base),
                s3: S3Settings {
                    endpoint: raw.storage.endpoint.clone(),
                    region: raw.storage.region.clone(),
                    path_style: raw.storage.path_style,
                },
            },
            catalog: catalog_spec(&raw.catalog, base),
            contributors,
            rules,
            metrics,
            average_periods: raw.aggregates.average_periods,
            completeness,
            references,
            commit_attempts: raw.commit.attempts.max(1),
            lineage,
            metrics_push,
            mask_sensitive: raw.quarantine.mask_sensitive,
            exceptions: ExceptionsSpec {
                namespace: raw.table.namespace.clone(),
                name: raw
                    .exceptions
                    .table
                    .clone()
                    .unwrap_or_else(|| format!("{}_exceptions", raw.table.name)),
                stale_after_days: raw.exceptions.stale_after_days,
            },
            alerts,
            resources,
        };
        if problems.is_empty() {
            Ok(plan)
        } else {
            Err(problems)
        }
    }
}

fn check_contract(raw: &SilverlineConfig, problems: &mut Vec<String>) -> Contract {
    let dataset = &raw.dataset;
    let mut seen = BTreeSet::new();
    let mut columns = Vec::new();
    for column in &dataset.columns {
        if !seen.insert(column.name.as_str()) {
            problems.push(format!(
                "dataset.columns: column '{}' is declared twice",
                column.name
            ));
        }
        match ColumnType::parse(&column.data_type) {
            Some(column_type) => columns.push(Column {
                name: column.name.clone(),
                column_type,
                nullable: column.nullable,
                sensitive: column.sensitive,
            }),
            None => problems.push(format!(
                "dataset.columns: column '{}' has unknown type '{}' (expected string, date, timestamp, int, long, double, boolean or decimal(P,S))",
                column.name, column.data_type
            )),
        }
    }
    if columns.is_empty() {
        problems.push("dataset.columns: no columns declared".to_string());
    }
    let contract = Contract {
        name: dataset.name.clone(),
        columns,
        entity_key: dataset.entity_key.clone(),
        order_column: dataset.order_column.clone(),
        contributor_column: dataset.contributor_column.clone(),
        input: crate::config::contract::InputOptions {
            delimiter: check_delimiter(dataset.delimiter.as_deref(), problems),
            header_case: dataset.header_case,
            on_extra_columns: dataset.on_extra_columns,
        },
    };
    check_key_columns(&contract, problems);
    contract
}

/// One ASCII character other than a quote or a line end; `,` when unset.
fn check_delimiter(delimiter: Option<&str>, problems: &mut Vec<String>) -> u8 {
    let Some(text) = delimiter else {
        return b',';
    };
    match text.as_bytes() {
        [byte] if byte.is_ascii() && !matches!(byte, b'"' | b'\n' | b'\r') => *byte,
        _ => {
            problems.push(format!(
                "dataset.delimiter: '{}' is not one ASCII character other than a quote or a line end (e.g. \";\" or \"\\t\")",
                text.escape_debug()
            ));
            b','
        }
    }
}

fn check_key_columns(contract: &Contract, problems: &mut Vec<String>) {
    if contract.entity_key.is_empty() {
        problems.push("dataset.entity_key: at least one column is needed".to_string());
    }
    for key in &contract.entity_key {
        if contract.column(key).is_none() {
            problems.push(format!("dataset.entity_key: unknown column '{key}'"));
        }
    }
    match contract.column(&contract.order_column) {
        Some(c) if c.column_type == ColumnType::Date => {}
        Some(_) => problems.push(format!(
            "dataset.order_column: column '{}' must be of type date",
            contract.order_column
        )),
        None => problems.push(format!(
            "dataset.order_column: unknown column '{}'",
            contract.order_column
        )),
    }
    if contract.column(&contract.contributor_column).is_none() {
        problems.push(format!(
            "dataset.contributor_column: unknown column '{}'",
            contract.contributor_column
        ));
    }
}

fn check_table(
    raw: &SilverlineConfig,
    contract: &Contract,
    problems: &mut Vec<String>,
) -> TableSpec {
    let mut partition = Vec::new();
    for field in &raw.table.partition {
        let transform = match field.transform.to_ascii_lowercase().as_str() {
            "identity" => Some(PartitionTransform::Identity),
            "year" => Some(PartitionTransform::Year),
            "month" => Some(PartitionTransform::Month),
            "day" => Some(PartitionTransform::Day),
            _ => None,
        };
        let Some(transform) = transform else {
            problems.push(format!(
                "table.partition: unknown transform '{}' on column '{}' (expected identity, year, month or day)",
                field.transform, field.column
            ));
            continue;
        };
        match contract.column(&field.column) {
            None => problems.push(format!(
                "table.partition: unknown column '{}'",
                field.column
            )),
            Some(c) if c.sensitive => problems.push(format!(
                "table.partition: column '{}' is marked sensitive, and partition values are written in data file paths and manifests: partition by another column",
                field.column
            )),
            Some(c)
                if transform != PartitionTransform::Identity
                    && c.column_type != ColumnType::Date =>
            {
                problems.push(format!(
                    "table.partition: transform '{}' needs a date column, '{}' is not one",
                    field.transform, field.column
                ))
            }
            Some(_) => partition.push((field.column.clone(), transform)),
        }
    }
    TableSpec {
        namespace: raw.table.namespace.clone(),
        name: raw.table.name.clone(),
        partition,
    }
}

fn check_contributors(raw: &ContributorsConfig, problems: &mut Vec<String>) -> ContributorTypes {
    let prefixes: Vec<(String, String)> = raw
        .types
        .iter()
        .flat_map(|t| t.prefixes.iter().map(|p| (p.clone(), t.name.clone())))
        .collect();
    let types = ContributorTypes {
        default_type: raw.default_type.clone(),
        prefixes,
        assign: raw
            .assign
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let known = types.known_types();
    for (contributor, ty) in &raw.assign {
        if !known.contains(ty.as_str()) {
            problems.push(format!(
                "contributors.assign: contributor '{contributor}' is given unknown type '{ty}'"
            ));
        }
    }
    types
}

fn check_rules(
    raw: &SilverlineConfig,
    base: &Path,
    source: &Path,
    context: &RuleContext,
    problems: &mut Vec<String>,
) -> Vec<Rule> {
    let mut rules: Vec<Rule> = not_null_rule(context.contract).into_iter().collect();
    for draft in rule_drafts(raw, base, source, problems) {
        if let Some(problem) = name_clash(&draft.origin, &draft.config.name) {
            problems.push(problem);
            continue;
        }
        let Some(candidate) = check_rule(&draft, context, problems) else {
            continue;
        };
        if rules
            .iter()
            .any(|r| r.name == candidate.name && r.overlaps(&candidate))
        {
            problems.push(format!(
                "{}: rule '{}': defined twice for overlapping contributor types {:?}",
                draft.origin, candidate.name, candidate.contributor_types
            ));
        }
        if draft.config.enabled {
            rules.push(candidate);
        }
    }
    rules.extend(engine_rules(&raw.engine_rules, context.contract, problems));
    rules
}

/// What rules are checked against.
struct RuleContext<'a> {
    contract: &'a Contract,
    metrics: &'a [Metric],
    known_types: BTreeSet<&'a str>,
    rows: ExprChecker,
    aggregates: ExprChecker,
}

/// The TOML file's own rules, then each rule file's, in order.
fn rule_drafts(
    raw: &SilverlineConfig,
    base: &Path,
    source: &Path,
    problems: &mut Vec<String>,
) -> Vec<RuleDraft> {
    let mut drafts: Vec<RuleDraft> = raw
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| RuleDraft {
            config: rule.clone(),
            origin: format!("{} [[rules]] #{}", source.display(), i + 1),
        })
        .collect();
    for file in &raw.rule_files {
        match read_rule_file(&base.join(&file.path), file) {
            Ok(more) => drafts.extend(more),
            Err(problem) => problems.push(format!("rule_files: {problem}")),
        }
    }
    drafts
}

/// Validates one rule; records every problem and returns it if it can run.
fn check_rule(
    draft: &RuleDraft,
    context: &RuleContext,
    problems: &mut Vec<String>,
) -> Option<Rule> {
    let rule = &draft.config;
    let at = format!("{}: rule '{}'", draft.origin, rule.name);
    let before = problems.len();
    let scope = Scope::parse(&rule.scope);
    if scope.is_none() {
        problems.push(format!(
            "{at}: unknown scope '{}' (expected row, aggregate or reference)",
            rule.scope
        ));
    }
    let severity = Severity::parse(&rule.severity);
    match severity {
        None => problems.push(format!(
            "{at}: unknown severity '{}' (expected warn, drop, quarantine, fail or pending)",
            rule.severity
        )),
        Some(Severity::Pending) if scope != Some(Scope::Reference) => problems.push(format!(
            "{at}: severity 'pending' is for reference rules only"
        )),
        Some(_) => {}
    }
    for ty in &rule.contributor_types {
        if ty != "*" && !context.known_types.contains(ty.as_str()) {
            problems.push(format!("{at}: unknown contributor type '{ty}'"));
        }
    }
    let checker = if scope == Some(Scope::Aggregate) {
        &context.aggregates
    } else {
        &context.rows
    };
    let reads = checker
        .check_boolean(&rule.expression)
        .map_err(|e| {
            let hint = match scope {
                Some(Scope::Aggregate) => drop_only_metric_hint(&rule.expression, context.metrics),
                _ => None,
            };
            let hint = hint.map(|h| format!(" ({h})")).unwrap_or_default();
            problems.push(format!("{at}: expression `{}`: {e}{hint}", rule.expression))
        })
        .unwrap_or_default();
    check_scope_reads(scope, &reads, &at, problems);
    check_filter(rule.filter.as_deref(), scope, context, &at, problems);
    let escalation = check_escalation(
        rule.escalate_above,
        rule.escalate_to.as_deref(),
        &at,
        problems,
    );
    if problems.len() > before {
        return None;
    }
    Some(Rule {
        name: rule.name.clone(),
        expression: rule.expression.clone(),
        scope: scope?,
        severity: severity?,
        contributor_types: rule.contributor_types.clone(),
        message: rule
            .description
            .clone()
            .unwrap_or_else(|| rule.expression.clone()),
        filter: rule.filter.clone(),
        escalation,
        origin: draft.origin.clone(),
        column: (scope != Some(Scope::Aggregate))
            .then(|| reads.single_name())
            .flatten(),
        prev_columns: reads.prev,
        references: reads.references,
    })
}

fn check_scope_reads(scope: Option<Scope>, reads: &Reads, at: &str, problems: &mut Vec<String>) {
    match scope {
        Some(Scope::Row) if !reads.references.is_empty() => problems.push(format!(
            "{at}: reads a reference (_ref_*): give it scope 'reference'"
        )),
        Some(Scope::Reference) if reads.references.is_empty() => problems.push(format!(
            "{at}: scope 'reference' but reads no _ref_<name> column"
        )),
        _ => {}
    }
}

fn check_filter(
    filter: Option<&str>,
    scope: Option<Scope>,
    context: &RuleContext,
    at: &str,
    problems: &mut Vec<String>,
) {
    let Some(filter) = filter else { return };
    if scope == Some(Scope::Aggregate) {
        problems.push(format!("{at}: aggregate rules take no filter"));
        return;
    }
    if let Err(e) = context.rows.check_boolean(filter) {
        problems.push(format!("{at}: filter `{filter}`: {e}"));
    }
}

fn check_escalation(
    above: Option<f64>,
    to: Option<&str>,
    at: &str,
    problems: &mut Vec<String>,
) -> Option<Escalation> {
    let Some(above) = above else {
        if to.is_some() {
            problems.push(format!("{at}: escalate_to needs escalate_above"));
        }
        return None;
    };
    if !(0.0..1.0).contains(&above) {
        problems.push(format!(
            "{at}: escalate_above must be a share from 0 to 1, not {above}"
        ));
    }
    let to = match to.map(Severity::parse) {
        None => Some(Severity::Fail),
        Some(None) => {
            problems.push(format!(
                "{at}: unknown escalate_to severity '{}'",
                to.unwrap_or_default()
            ));
            None
        }
        Some(severity) => severity,
    };
    to.map(|to| Escalation { above, to })
}

fn check_aggregates(raw: &AggregatesConfig, problems: &mut Vec<String>) {
    if raw.average_periods == 0 {
        problems.push(
            "aggregates.average_periods: must be at least 1 (avg_<metric> averages that many previous periods)"
                .to_string(),
        );
    }
}

fn check_metrics(
    raw: &SilverlineConfig,
    contract: &Contract,
    problems: &mut Vec<String>,
) -> Vec<Metric> {
    let checker = match ExprChecker::new(metric_fields(contract)) {
        Ok(checker) => checker,
        Err(e) => {
            problems.push(format!("metrics: cannot build their schema: {e}"));
            return Vec::new();
        }
    };
    let bucket_key: Vec<String> = contract
        .bucket_key_parts()
        .into_iter()
        .map(|part| contract.entity_key[part].clone())
        .collect();
    let mut seen = BTreeSet::new();
    let mut metrics = Vec::new();
    for metric in &raw.metrics {
        let at = format!("metrics '{}'", metric.name);
        if !seen.insert(metric.name.as_str()) {
            problems.push(format!("{at}: defined twice"));
        }
        match checker.check_aggregate(&metric.expression) {
            Ok(expr) => metrics.push(metric_reading(metric, &expr, &bucket_key)),
            Err(e) => problems.push(format!(
                "{at}: expression `{}`: {e} (metrics read contract columns and their prev_<column> twins)",
                metric.expression
            )),
        }
    }
    metrics
}

/// `[completeness] closed_when`: a boolean over contract columns (no
/// `prev_*`, no aggregate), and the columns it reads.
fn check_completeness(
    raw: &SilverlineConfig,
    contract: &Contract,
    problems: &mut Vec<String>,
) -> Option<Completeness> {
    let closed_when = &raw.completeness.as_ref()?.closed_when;
    if raw.baseline.lookback_months == 0 {
        problems.push(
            "completeness: needs baseline.lookback_months of at least 1 (the month before the drop is where the expected entities are found)"
                .to_string(),
        );
    }
    let masked_keys: Vec<&str> = contract
        .columns
        .iter()
        .filter(|c| c.sensitive && contract.entity_key.contains(&c.name))
        .map(|c| c.name.as_str())
        .collect();
    if raw.quarantine.mask_sensitive && !masked_keys.is_empty() {
        problems.push(format!(
            "completeness: the entity key column(s) {} are sensitive and quarantine.mask_sensitive is on, so the missing list could not name the entities left out, nor could a later drop resolve them: turn one of the two off",
            masked_keys.join(", ")
        ));
    }
    let checked = ExprChecker::new(contract.arrow_fields()).and_then(|checker| {
        checker.check_boolean(closed_when)?;
        checker.parse(closed_when)
    });
    match checked {
        Ok(expr) => Some(Completeness {
            closed_when: closed_when.clone(),
            columns: expr.column_refs().iter().map(|c| c.name.clone()).collect(),
        }),
        Err(e) => {
            problems.push(format!(
                "completeness.closed_when: `{closed_when}`: {e} (a boolean over the contract's columns)"
            ));
            None
        }
    }
}

/// With `[completeness]`, the built-in `missing_entities` metric joins the
/// metrics (a metric of that name is refused).
fn add_completeness_metric(
    completeness: Option<&Completeness>,
    metrics: &mut Vec<Metric>,
    problems: &mut Vec<String>,
) {
    let Some(completeness) = completeness else {
        return;
    };
    if metrics.iter().any(|m| m.name == MISSING_ENTITIES_METRIC) {
        problems.push(format!(
            "metrics '{MISSING_ENTITIES_METRIC}': the name is the built-in metric of [completeness]"
        ));
        return;
    }
    metrics.push(completeness.metric());
}

/// The checked metric: the contract columns it reads, now and before, and
/// whether it counts entities of the `bucket_key` columns.
fn metric_reading(
    metric: &MetricConfig,
    expr: &datafusion::prelude::Expr,
    bucket_key: &[String],
) -> Metric {
    let (prev, now): (BTreeSet<String>, BTreeSet<String>) = expr
        .column_refs()
        .iter()
        .map(|c| c.name.clone())
        .partition(|name| name.starts_with(PREV_PREFIX));
    Metric {
        name: metric.name.clone(),
        expression: metric.expression.clone(),
        columns: now,
        prev_columns: prev
            .iter()
            .filter_map(|name| name.strip_prefix(PREV_PREFIX).map(str::to_string))
            .collect(),
        counts_entities: counts_entities(expr, bucket_key),
    }
}

/// Whether `expr` is `count(DISTINCT ...)` (no filter) of plain columns
/// among which is every column of `bucket_key` (the entity key parts rows
/// are split into buckets by): one value then never counts in two buckets.
fn counts_entities(expr: &datafusion::prelude::Expr, bucket_key: &[String]) -> bool {
    let datafusion::prelude::Expr::AggregateFunction(function) = expr else {
        return false;
    };
    let params = &function.params;
    if function.func.name() != "count" || !params.distinct || params.filter.is_some() {
        return false;
    }
    let columns: Option<BTreeSet<&str>> = params
        .args
        .iter()
        .map(|arg| match arg {
            datafusion::prelude::Expr::Column(column) => Some(column.name.as_str()),
            _ => None,
        })
        .collect();
    columns.is_some_and(|columns| bucket_key.iter().all(|k| columns.contains(k.as_str())))
}

fn check_references(
    raw: &SilverlineConfig,
    contract: &Contract,
    base: &Path,
    problems: &mut Vec<String>,
) -> Vec<Reference> {
    let mut references = Vec::new();
    for reference in &raw.references {
        let at = format!("references '{}'", reference.name);
        let format = match reference.format.to_ascii_lowercase().as_str() {
            "csv" => ReferenceFormat::Csv,
            "parquet" => ReferenceFormat::Parquet,
            "iceberg" => ReferenceFormat::Iceberg,
            other => {
                problems.push(format!(
                    "{at}: unknown format '{other}' (expected csv, parquet or iceberg)"
                ));
                continue;
            }
        };
        if format == ReferenceFormat::Iceberg && !reference.location.contains('.') {
            problems.push(format!(
                "{at}: an iceberg reference's location is <namespace>.<table>, not '{}'",
                reference.location
            ));
        }
        if reference.keys.is_empty() {
            problems.push(format!("{at}: keys are needed"));
        }
        for column in reference.keys.keys() {
            if contract.column(column).is_none() {
                problems.push(format!(
                    "{at}: key column '{column}' is not in the contract"
                ));
            }
        }
        if references
            .iter()
            .any(|r: &Reference| r.name == reference.name)
        {
            problems.push(format!("{at}: defined twice"));
        }
        references.push(Reference {
            name: reference.name.clone(),
            location: match format {
                ReferenceFormat::Iceberg => reference.location.clone(),
                _ => resolve_location(&reference.location, base),
            },
            format,
            keys: reference
                .keys
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        });
    }
    references
}

/// The contract's own rule: every column declared not null is present, so a
/// row that would break Silver's required columns is quarantined, never written.
fn not_null_rule(contract: &Contract) -> Option<Rule> {
    let required: Vec<&str> = contract
        .columns
        .iter()
        .filter(|c| !c.nullable)
        .map(|c| c.name.as_str())
        .collect();
    if required.is_empty() {
        return None;
    }
    Some(Rule {
        name: NOT_NULL_RULE.to_string(),
        expression: required
            .iter()
            .map(|c| format!("\"{c}\" IS NOT NULL"))
            .collect::<Vec<_>>()
            .join(" AND "),
        scope: Scope::Row,
        severity: Severity::Quarantine,
        contributor_types: vec!["*".to_string()],
        filter: None,
        escalation: None,
        origin: "the contract (dataset.columns with nullable = false)".to_string(),
        references: BTreeSet::new(),
        message: format!(
            "columns the contract declares not null are present: {}",
            required.join(", ")
        ),
        prev_columns: BTreeSet::new(),
        column: match required.as_slice() {
            [one] => Some(one.to_string()),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field};

    use super::*;

    #[test]
    fn only_a_distinct_count_of_columns_holding_the_entity_key_counts_entities() {
        let checker = ExprChecker::new(vec![
            Field::new("account_id", DataType::Utf8, true),
            Field::new("branch", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
        ])
        .unwrap();
        let counts = |sql: &str, key: &[&str]| {
            let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
            counts_entities(&checker.check_aggregate(sql).unwrap(), &key)
        };
        assert!(counts("count(DISTINCT account_id)", &["account_id"]));
        assert!(counts("COUNT(distinct account_id)", &["account_id"]));
        // Another entity's accounts may read as the same value once changed.
        assert!(!counts(
            "count(DISTINCT lower(account_id))",
            &["account_id"]
        ));
        assert!(!counts("count(DISTINCT branch)", &["account_id"]));
        assert!(!counts(
            "count(DISTINCT account_id)",
            &["account_id", "branch"]
        ));
        assert!(!counts("count(account_id)", &["account_id"]));
        assert!(!counts("count(DISTINCT account_id) + 1", &["account_id"]));
        assert!(!counts(
            "count(DISTINCT account_id) FILTER (WHERE amount > 0)",
            &["account_id"]
        ));
        assert!(!counts("sum(amount)", &["account_id"]));
    }
}
