//! The previous state a trend rule compared a row with. Neither the dq_error
//! files nor the exception store keep a row's `prev_*` values, so the
//! workbench reads the entity's latest statement in Silver before the row's
//! date, as the baseline did (a commit since then may have added one in
//! between; a statement older than the lookback was not compared: the rule
//! was skipped).

use std::collections::HashMap;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use iceberg::expr::{Predicate, Reference};
use iceberg::spec::Datum;

use crate::config::Plan;
use crate::config::contract::ColumnType;
use crate::error::{Error, Result};
use crate::infra::catalog::{connect, load_silver};
use crate::infra::evolve::scan_current;
use crate::infra::storage::Stores;
use crate::stage::Stage;

/// The entity's latest state in Silver before `row`'s order date (its
/// columns as text), or None when Silver holds none.
pub async fn previous_state(
    plan: &Plan,
    row: &HashMap<String, String>,
) -> Result<Option<HashMap<String, String>>> {
    let contract = &plan.contract;
    let mut key: Vec<&str> = contract.entity_key.iter().map(String::as_str).collect();
    key.push(&contract.contributor_column);
    key.dedup();
    let value = |column: &str| row.get(column).map_or("", String::as_str);
    let order = value(&contract.order_column);
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let table = load_silver(catalog.as_ref(), plan).await?;
    let batches = scan_current(&table, pushed_down(plan, &key, row)).await?;
    let mut latest: Option<HashMap<String, String>> = None;
    for batch in &batches {
        for state in as_text(batch)? {
            let same_entity = key
                .iter()
                .all(|c| state.get(*c).map(String::as_str) == Some(value(c)));
            let state_order = state
                .get(&contract.order_column)
                .cloned()
                .unwrap_or_default();
            let newer = latest.as_ref().is_none_or(|l| {
                l.get(&contract.order_column)
                    .is_none_or(|o| *o < state_order)
            });
            if same_entity && state_order.as_str() < order && newer {
                latest = Some(state);
            }
        }
    }
    Ok(latest)
}

/// A filter on the key columns whose type a datum reads (the rest is
/// compared in memory), and on the order date.
fn pushed_down(plan: &Plan, key: &[&str], row: &HashMap<String, String>) -> Option<Predicate> {
    let contract = &plan.contract;
    let datum = |column: &str| {
        let text = row.get(column)?;
        match contract.column(column)?.column_type {
            ColumnType::String => Some(Datum::string(text)),
            ColumnType::Int => text.parse::<i32>().ok().map(Datum::int),
            ColumnType::Long => text.parse::<i64>().ok().map(Datum::long),
            ColumnType::Date => Datum::date_from_str(text).ok(),
            _ => None,
        }
    };
    let equal = key
        .iter()
        .filter_map(|c| datum(c).map(|d| Reference::new(*c).equal_to(d)));
    let before = datum(&contract.order_column)
        .map(|d| Reference::new(contract.order_column.as_str()).less_than(d));
    equal.chain(before).reduce(Predicate::and)
}

/// Every row of `batch` as column -> text.
fn as_text(batch: &RecordBatch) -> Result<Vec<HashMap<String, String>>> {
    let schema = batch.schema();
    let columns = batch
        .columns()
        .iter()
        .map(|c| cast(c, &DataType::Utf8).map_err(Error::arrow(Stage::Exceptions)))
        .collect::<Result<Vec<_>>>()?;
    Ok((0..batch.num_rows())
        .map(|row| {
            schema
                .fields()
                .iter()
                .zip(&columns)
                .map(|(field, column)| {
                    let text = column.as_string::<i32>();
                    let value = if text.is_valid(row) {
                        text.value(row).to_string()
                    } else {
                        String::new()
                    };
                    (field.name().clone(), value)
                })
                .collect()
        })
        .collect())
}
