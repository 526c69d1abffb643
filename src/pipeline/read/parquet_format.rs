//! Parquet files: columns are matched by name and brought to the contract's
//! types through text, so a Parquet drop meets exactly the same parse checks
//! as a CSV one. Row numbers (1-based) stand in for line numbers.

use arrow::array::{Array, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::typing::TypedRows;
use super::{RawText, TypedTable, map_header};
use crate::config::contract::Contract;
use crate::config::values::to_text;
use crate::core::drop::DropFile;
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Reads one Parquet file, typing its columns as text.
pub(super) fn read(contract: &Contract, file: &DropFile) -> Result<TypedTable> {
    let bad = |reason: String| Error::BadDrop {
        location: file.name.clone(),
        reason,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.bytes.clone())
        .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
    let schema = builder.schema().clone();
    let reader = builder
        .build()
        .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("cannot decode: {e}")))?;
    let all =
        arrow::compute::concat_batches(&schema, &batches).map_err(Error::arrow(Stage::Read))?;
    let header: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let (positions, drift) = map_header(contract, (&file.name, &file.name), &header)?;
    let columns = positions
        .iter()
        .zip(&contract.columns)
        .map(|(p, column)| {
            p.map(|p| {
                to_text(all.column(p).as_ref())
                    .map_err(|reason| bad(column_problem(&column.name, &reason)))
            })
            .transpose()
        })
        .collect::<Result<Vec<Option<StringArray>>>>()?;
    let rows = all.num_rows();
    let mut typed = TypedRows::new(&contract.columns, rows);
    for row in 0..rows {
        typed.append(
            columns
                .iter()
                .map(|c| c.as_ref().filter(|c| c.is_valid(row)).map(|c| c.value(row))),
        );
    }
    let (typed_columns, problems) = typed.finish()?;
    Ok(TypedTable {
        file: file.name.clone(),
        columns: typed_columns,
        lines: (1..=rows as u64).collect(),
        problems,
        raws: RawText::Columns(columns),
        rejects: Vec::new(),
        drift,
    })
}

/// Why column `name` of a Parquet file is refused.
fn column_problem(name: &str, reason: &str) -> String {
    format!(
        "column '{name}' {reason}; the contract expects one scalar value per row: the file is refused"
    )
}

/// A Parquet row as text: its contract columns joined with commas.
pub(super) fn raw_row(columns: &[Option<StringArray>], row: usize) -> String {
    columns
        .iter()
        .map(|c| match c {
            Some(c) if c.is_valid(row) => c.value(row).to_string(),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    #[test]
    fn parquet_columns_are_matched_by_name_and_checked_like_csv() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("amount", DataType::Int64, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![5, 6])),
                Arc::new(StringArray::from(vec!["A", "B"])),
                Arc::new(StringArray::from(vec!["2026-01-31", "not a date"])),
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let read = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        assert_eq!(read.received, 2);
        assert_eq!(read.rows.num_rows(), 1);
        assert_eq!(read.rejects.len(), 1);
        assert_eq!(read.rejects[0].line, 2);
        assert_eq!(read.rejects[0].raw, "B,not a date,6,");
    }

    fn parquet_with(extra: Field, values: arrow::array::ArrayRef) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, true),
            extra,
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["A"])),
                Arc::new(StringArray::from(vec!["2026-01-31"])),
                Arc::new(Int64Array::from(vec![5])),
                values,
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    #[test]
    fn a_parquet_file_reports_its_schema_drift() {
        let bytes = parquet_with(
            Field::new("branch", DataType::Utf8, true),
            Arc::new(StringArray::from(vec!["B1"])),
        );
        let read = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        assert_eq!(read.rows.num_rows(), 1);
        assert_eq!(
            read.drift,
            vec![crate::pipeline::summary::SchemaDrift {
                file: "p.parquet".to_string(),
                extra_columns: vec!["branch".to_string()],
                missing_columns: vec!["note".to_string()],
            }]
        );
    }

    #[test]
    fn a_nested_column_where_the_contract_expects_a_value_is_refused() {
        use arrow::array::{ListBuilder, StringBuilder, StructArray};
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("ACC-1");
        list.append(true);
        let list = Arc::new(list.finish());
        let inner = Arc::new(Field::new("x", DataType::Utf8, true));
        let structure = Arc::new(StructArray::from(vec![(
            inner,
            Arc::new(StringArray::from(vec!["v"])) as arrow::array::ArrayRef,
        )]));
        for (values, kind) in [
            (list as arrow::array::ArrayRef, "list"),
            (structure as arrow::array::ArrayRef, "struct"),
        ] {
            let field = Field::new("note", values.data_type().clone(), true);
            let bytes = parquet_with(field, values);
            let err = read_drop(&contract(), &[file("n.parquet", &bytes)]).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, crate::error::Error::BadDrop { .. }), "{text}");
            assert!(
                text.contains("n.parquet") && text.contains("'note'") && text.contains(kind),
                "{text}"
            );
        }
    }
}
