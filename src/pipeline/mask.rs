//! Masking of personal data in the rows set aside, when the config asks for
//! it (`quarantine.mask_sensitive`).
//!
//! Columns marked `sensitive` in the contract keep only their last two
//! characters (`***89`), enough to tell two values apart when fixing a file,
//! never the value itself; a sensitive column of another type is left empty.
//! The raw text of an unparseable record is withheld: it cannot be split into
//! columns reliably, so its sensitive parts cannot be found. Its file and line
//! still point at the source.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray};
use arrow::record_batch::RecordBatch;

use crate::config::contract::Contract;
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::transient::RAW_RECORD;

/// What replaces the raw text of an unparseable record when masking.
pub const WITHHELD_RAW_RECORD: &str =
    "[withheld: sensitive columns are masked; see the source file and line]";

/// How a sensitive value is shown: `***` and, for values longer than four
/// characters, their last two characters.
pub fn mask_value(value: &str) -> String {
    let length = value.chars().count();
    if length <= 4 {
        return "***".to_string();
    }
    let tail: String = value.chars().skip(length - 2).collect();
    format!("***{tail}")
}

/// `batch` (in the dq_error shape) with its sensitive columns masked and raw
/// records withheld.
pub fn mask_set_aside(contract: &Contract, batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            let sensitive = contract.column(field.name()).is_some_and(|c| c.sensitive);
            if sensitive {
                masked_column(column)
            } else if field.name() == RAW_RECORD {
                withheld_column(column)
            } else {
                Ok(column.clone())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema, columns).map_err(Error::arrow(Stage::Mask))
}

fn masked_column(column: &ArrayRef) -> Result<ArrayRef> {
    let Some(text) = column.as_any().downcast_ref::<StringArray>() else {
        return Ok(arrow::array::new_null_array(
            column.data_type(),
            column.len(),
        ));
    };
    Ok(Arc::new(
        text.iter()
            .map(|v| v.map(mask_value))
            .collect::<StringArray>(),
    ))
}

fn withheld_column(column: &ArrayRef) -> Result<ArrayRef> {
    let text = column
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::Internal(format!("mask: {RAW_RECORD} is not text")))?;
    Ok(Arc::new(
        text.iter()
            .map(|v| v.map(|_| WITHHELD_RAW_RECORD))
            .collect::<StringArray>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_values_keep_only_a_short_tail() {
        assert_eq!(mask_value("900101145678"), "***78");
        assert_eq!(mask_value("A123"), "***");
        assert_eq!(mask_value(""), "***");
        assert_eq!(mask_value("ÉÉÉÉÉé"), "***Éé");
    }
}
