//! The text `silverline init` writes: the TOML configuration (with REVIEW
//! comments on every guess) and the starter control CSV. Names are written
//! as TOML strings and SQL identifiers quoted where needed, so any header
//! makes a file `check-config` reads; no row value is written.

use crate::config::contract::ColumnType;
use crate::config::sources::CONTROL_CSV_COLUMNS;
use crate::config::starter::guess::Roles;
use crate::config::starter::sample::{Sample, SampleColumn};
use crate::core::sql::quote;

/// Name parts of columns that usually hold personal data.
const SENSITIVE_HINTS: [&str; 11] = [
    "tax", "national", "ssn", "passport", "_ic", "email", "phone", "birth", "address", "name",
    "iban",
];

/// Words DataFusion's SQL reads as more than a column name.
const SQL_WORDS: [&str; 24] = [
    "all", "and", "as", "between", "by", "case", "date", "day", "end", "false", "from", "group",
    "in", "interval", "is", "key", "month", "not", "null", "or", "order", "time", "true", "year",
];

/// A TOML string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// `name` as an SQL identifier: bare when it is a plain lowercase word, else quoted.
fn sql_name(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && !SQL_WORDS.contains(&name) {
        name.to_string()
    } else {
        quote(name)
    }
}

/// Whether `column` is named like personal data; never a partition column
/// (the contributor and order columns), whose values name data files.
fn is_sensitive(column: &SampleColumn, roles: &Roles) -> bool {
    let name = column.name.to_ascii_lowercase();
    let partitioned = [&roles.contributor.column, &roles.order.column].contains(&&column.name);
    !partitioned && SENSITIVE_HINTS.iter().any(|h| name.contains(h))
}

/// One `columns` entry, with a REVIEW comment when it is guessed sensitive.
fn column_line(column: &SampleColumn, roles: &Roles) -> String {
    let mut entry = format!(
        "  {{ name = {}, type = {}",
        toml_string(&column.name),
        toml_string(&column.column_type.to_string())
    );
    if !column.blanks || roles.is_key_part(&column.name) {
        entry.push_str(", nullable = false");
    }
    if is_sensitive(column, roles) {
        entry.push_str(", sensitive = true },  # REVIEW: sensitive, guessed from the name");
    } else {
        entry.push_str(" },");
    }
    entry
}

/// The configuration file.
pub fn config_toml(name: &str, sample: &Sample, roles: &Roles, rules_path: &str) -> String {
    let mut out = format!(
        "# silverline configuration of the dataset {name}, written by `silverline init` from\n\
         # {file} ({rows} rows). Lines marked REVIEW are guesses from the sample: check\n\
         # them, then run `silverline check-config --config <this file>`. Relative paths\n\
         # resolve against this file's folder (README: configuration reference).\n\n\
         # Rules live in a control CSV; every expression describes a VALID row. The engine\n\
         # adds its own: not_null (columns with nullable = false), unique_key (the record\n\
         # key once per drop), resubmission (never a key already in Silver) and contributor.\n\
         rule_files = [{{ path = {rules} }}]\n\n",
        file = sample.file.escape_debug(),
        rows = sample.rows,
        rules = toml_string(rules_path),
    );
    out.push_str(&dataset_section(name, sample, roles));
    out.push_str(&table_section(name, roles));
    out.push_str(&format!(
        "\n# Months of Silver history that trend rules (reading prev_<column>) look back.\n\
         [baseline]\nlookback_months = 3\n\n\
         # Drops are read from <bronze>/<contributor>/<drop id>/ (CSV or Parquet files);\n\
         # rows set aside and run summaries are written under dq_error.\n\
         [storage]\nbronze = \"data/bronze\"\ndq_error = \"data/dq_error\"\n\n\
         # The embedded catalog: SQLite and a local warehouse (a REST catalog and S3 work too).\n\
         [catalog]\ntype = \"sql\"\nuri = \"sqlite://data/catalog.db\"\nwarehouse = \"data/warehouse\"\n\n\
         # Aggregate rules read metrics per contributor and month as <name>, prev_<name>\n\
         # and avg_<name>; for example (and the volume rule in {rules_path}):\n\
         # [[metrics]]\n# name = \"rows\"\n# expression = \"count(*)\"\n"
    ));
    out
}

fn dataset_section(name: &str, sample: &Sample, roles: &Roles) -> String {
    let key: Vec<String> = roles.entity_key().iter().map(|k| toml_string(k)).collect();
    let mut out = format!(
        "[dataset]\nname = {name}\n\
         # entity_key + order_column is the record key (once per drop, never twice in Silver);\n\
         # a row whose contributor_column is not the drop's contributor is set aside.\n\
         # REVIEW entity_key, guessed: {key_column}, {key_why}\n\
         entity_key = [{key}]\n\
         # REVIEW order_column, guessed: {order_why}\n\
         order_column = {order}\n\
         # REVIEW contributor_column, guessed: {contributor_why}\n\
         contributor_column = {contributor}\n",
        name = toml_string(name),
        key_column = roles.key.column.escape_debug(),
        key_why = roles.key.why.escape_debug(),
        key = key.join(", "),
        order_why = roles.order.why.escape_debug(),
        order = toml_string(&roles.order.column),
        contributor_why = roles.contributor.why.escape_debug(),
        contributor = toml_string(&roles.contributor.column),
    );
    if sample.delimiter != b',' {
        let delimiter = char::from(sample.delimiter).to_string();
        out.push_str(&format!("delimiter = {}\n", toml_string(&delimiter)));
    }
    out.push_str(
        "# Types inferred from every value of the sample; nullable = false where no row was\n\
         # blank (and for the key columns). sensitive = true keeps a column's values out of\n\
         # logs and summaries.\ncolumns = [\n",
    );
    for column in &sample.columns {
        out.push_str(&column_line(column, roles));
        out.push('\n');
    }
    out.push_str("]\n");
    for (column, why) in &sample.left_out {
        out.push_str(&format!(
            "# Not in the contract: {} ({why}; flatten it to bring it in).\n",
            column.escape_debug()
        ));
    }
    out
}

fn table_section(name: &str, roles: &Roles) -> String {
    format!(
        "\n[table]\nnamespace = \"silver\"\nname = {}\npartition = [\n  \
         {{ column = {} }},\n  {{ column = {}, transform = \"month\" }},\n]\n",
        toml_string(name),
        toml_string(&roles.contributor.column),
        toml_string(&roles.order.column),
    )
}

/// One control CSV record as text (quoted as needed), without its line end.
fn csv_record(fields: [&str; 7]) -> String {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    // Writing to memory cannot fail; an empty line would only drop the record.
    let written = writer
        .write_record(fields)
        .ok()
        .and_then(|()| writer.into_inner().ok());
    String::from_utf8_lossy(&written.unwrap_or_default())
        .trim_end()
        .to_string()
}

/// `<column>_not_negative` with every character but a letter, digit or `_`
/// made `_`; numbered when another column already gave the same id.
fn rule_id(column: &str, taken: &mut std::collections::BTreeSet<String>) -> String {
    let plain: String = column
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = format!("{plain}_not_negative");
    let mut id = base.clone();
    for n in 2.. {
        if !taken.contains(&id) {
            break;
        }
        id = format!("{base}_{n}");
    }
    taken.insert(id.clone());
    id
}

/// Whether no value of `column` in the sample's first rows is negative.
fn never_negative(column: &SampleColumn) -> bool {
    let numeric = matches!(
        column.column_type,
        ColumnType::Int | ColumnType::Long | ColumnType::Double | ColumnType::Decimal { .. }
    );
    numeric && column.values.iter().flatten().all(|v| !v.starts_with('-'))
}

/// The starter control CSV: a `warn` rule per numeric column that is never
/// negative in the sample, and commented examples of a trend and an aggregate rule.
pub fn rules_csv(name: &str, sample: &Sample, roles: &Roles) -> String {
    let mut out = format!(
        "# Rules of the dataset {}, written by `silverline init`: one row per rule and\n\
         # contributor type (* for all). Every expression describes a VALID row: true passes,\n\
         # false or NULL fails. Severities: warn (kept, counted), drop, quarantine, fail,\n\
         # pending (reference rules). Lines starting with # are comments; drop the # to use one.\n",
        name.escape_debug()
    );
    out.push_str(&csv_record(CONTROL_CSV_COLUMNS));
    out.push('\n');
    let numeric: Vec<&SampleColumn> = sample
        .columns
        .iter()
        .filter(|c| never_negative(c) && !roles.is_key_part(&c.name))
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for column in &numeric {
        let rule = rule_id(&column.name, &mut ids);
        let column_sql = sql_name(&column.name);
        let expression = if column.blanks {
            format!("{column_sql} IS NULL OR {column_sql} >= 0")
        } else {
            format!("{column_sql} >= 0")
        };
        let description = format!("{} is not negative (none is in the sample)", column.name);
        let fields: [&str; 7] = [&rule, "*", "row", &expression, "warn", &description, "true"];
        out.push_str(&csv_record(fields));
        out.push('\n');
    }
    out.push_str(&examples(numeric.first().copied()));
    out
}

/// Commented examples: a trend rule over `column` (when there is one) and an aggregate rule.
fn examples(column: Option<&SampleColumn>) -> String {
    let mut out = String::new();
    if let Some(column) = column {
        let now = sql_name(&column.name);
        let before = sql_name(&format!("prev_{}", column.name));
        let expression = format!("{now} BETWEEN 0.5 * {before} AND 2 * {before}");
        let description = format!(
            "{} at most doubled or halved since the entity's previous state (a trend rule)",
            column.name
        );
        let fields: [&str; 7] = [
            "trend_example",
            "*",
            "row",
            &expression,
            "warn",
            &description,
            "true",
        ];
        out.push_str(&format!("# {}\n", csv_record(fields)));
    }
    let fields = [
        "volume",
        "*",
        "aggregate",
        "rows >= 0.8 * prev_rows",
        "quarantine",
        "the month has at least 80% of the previous month's rows (needs the metric rows)",
        "true",
    ];
    out.push_str(&format!("# {}\n", csv_record(fields)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_names_are_bare_only_when_plain_and_not_a_keyword() {
        assert_eq!(sql_name("amount"), "amount");
        assert_eq!(sql_name("prev_amount"), "prev_amount");
        assert_eq!(sql_name("Amount"), "\"Amount\"");
        assert_eq!(sql_name("date"), "\"date\"");
        assert_eq!(sql_name("net amount"), "\"net amount\"");
        assert_eq!(sql_name("1st"), "\"1st\"");
    }

    #[test]
    fn a_csv_record_quotes_what_needs_it() {
        let line = csv_record(["a", "*", "row", "\"x\" >= 0, y", "warn", "d", "true"]);
        assert_eq!(line, "a,*,row,\"\"\"x\"\" >= 0, y\",warn,d,true");
    }
}
