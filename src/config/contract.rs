//! The dataset contract: typed columns, keys and the order column, with their
//! Arrow and Iceberg forms. Everything the engine knows about a dataset comes
//! from here; it hard-codes no column name (DESIGN.md invariant 6).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use iceberg::spec::{NestedField, PrimitiveType, Type};

/// The type of one contract column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// UTF-8 text.
    String,
    /// Calendar date, `YYYY-MM-DD`.
    Date,
    /// 32-bit integer.
    Int,
    /// 64-bit integer.
    Long,
    /// 64-bit float.
    Double,
    /// true / false.
    Boolean,
    /// An instant, UTC, to the microsecond (Iceberg `timestamptz`).
    Timestamp,
    /// Fixed-point decimal.
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
}

impl ColumnType {
    /// Parses `string`, `date`, `timestamp`, `int`, `long`, `double`, `boolean` or `decimal(P,S)`.
    pub fn parse(text: &str) -> Option<ColumnType> {
        let text = text.trim().to_ascii_lowercase();
        let simple = match text.as_str() {
            "string" => Some(ColumnType::String),
            "date" => Some(ColumnType::Date),
            "timestamp" => Some(ColumnType::Timestamp),
            "int" => Some(ColumnType::Int),
            "long" => Some(ColumnType::Long),
            "double" => Some(ColumnType::Double),
            "boolean" => Some(ColumnType::Boolean),
            _ => None,
        };
        simple.or_else(|| parse_decimal(&text))
    }

    /// The Arrow type rows carry in memory.
    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::String => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(
                arrow::datatypes::TimeUnit::Microsecond,
                Some(iceberg::arrow::UTC_TIME_ZONE.into()),
            ),
            ColumnType::Int => DataType::Int32,
            ColumnType::Long => DataType::Int64,
            ColumnType::Double => DataType::Float64,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Decimal { precision, scale } => DataType::Decimal128(precision, scale),
        }
    }

    /// The Iceberg type of the Silver column.
    pub fn iceberg_type(self) -> PrimitiveType {
        match self {
            ColumnType::String => PrimitiveType::String,
            ColumnType::Date => PrimitiveType::Date,
            ColumnType::Timestamp => PrimitiveType::Timestamptz,
            ColumnType::Int => PrimitiveType::Int,
            ColumnType::Long => PrimitiveType::Long,
            ColumnType::Double => PrimitiveType::Double,
            ColumnType::Boolean => PrimitiveType::Boolean,
            ColumnType::Decimal { precision, scale } => PrimitiveType::Decimal {
                precision: u32::from(precision),
                scale: scale.unsigned_abs().into(),
            },
        }
    }
}

fn parse_decimal(text: &str) -> Option<ColumnType> {
    let inner = text.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (precision, scale) = inner.split_once(',')?;
    let precision: u8 = precision.trim().parse().ok()?;
    let scale: i8 = scale.trim().parse().ok()?;
    ColumnType::decimal(precision, scale)
}

impl ColumnType {
    /// `decimal(precision, scale)`, if valid: 1 to 38 digits, of which 0 to all after the point.
    pub fn decimal(precision: u8, scale: i8) -> Option<ColumnType> {
        let valid =
            (1..=38).contains(&precision) && scale >= 0 && scale.unsigned_abs() <= precision;
        valid.then_some(ColumnType::Decimal { precision, scale })
    }
}

/// The type as the configuration writes it (`string`, `decimal(18,2)`...): what [`ColumnType::parse`] reads.
impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnType::String => f.write_str("string"),
            ColumnType::Date => f.write_str("date"),
            ColumnType::Timestamp => f.write_str("timestamp"),
            ColumnType::Int => f.write_str("int"),
            ColumnType::Long => f.write_str("long"),
            ColumnType::Double => f.write_str("double"),
            ColumnType::Boolean => f.write_str("boolean"),
            ColumnType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
        }
    }
}

/// One contract column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Name in files and in Silver.
    pub name: String,
    /// Type.
    pub column_type: ColumnType,
    /// Whether nulls are allowed in Silver.
    pub nullable: bool,
    /// Holds personal data: never logged, masked in dq_error files on request.
    pub sensitive: bool,
}

/// The validated dataset contract.
#[derive(Debug, Clone)]
pub struct Contract {
    /// Dataset name.
    pub name: String,
    /// Columns in Silver order.
    pub columns: Vec<Column>,
    /// Columns identifying an entity across periods.
    pub entity_key: Vec<String>,
    /// The date column that orders an entity's states.
    pub order_column: String,
    /// The column that must equal the drop's contributor.
    pub contributor_column: String,
    /// How drop files are read.
    pub input: InputOptions,
}

/// How drop files are read: CSV delimiter, header matching, schema drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputOptions {
    /// The CSV field delimiter (one ASCII byte). Default: `,`.
    pub delimiter: u8,
    /// How header names are matched to contract columns.
    pub header_case: HeaderCase,
    /// What a file's columns that are not in the contract do.
    pub on_extra_columns: ExtraColumns,
}

impl Default for InputOptions {
    fn default() -> Self {
        InputOptions {
            delimiter: b',',
            header_case: HeaderCase::Exact,
            on_extra_columns: ExtraColumns::Warn,
        }
    }
}

/// How header names are matched to contract columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderCase {
    /// Exactly (surrounding spaces aside).
    #[default]
    Exact,
    /// Ignoring ASCII case.
    Insensitive,
}

/// What a file's columns that are not in the contract do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtraColumns {
    /// Not read, not reported.
    Ignore,
    /// Not read; listed in the log and the summary (`schema_drift`).
    #[default]
    Warn,
    /// The drop is refused, naming the file and the columns.
    Fail,
}

impl Contract {
    /// The positions, in the entity key, of the parts a drop's rows are
    /// split into buckets by: every part but the contributor column, so
    /// that rows of one entity share a bucket whatever contributor they
    /// name (a run measures one contributor's), or the whole key when the
    /// contributor column is all it holds.
    pub fn bucket_key_parts(&self) -> Vec<usize> {
        let parts: Vec<usize> = (0..self.entity_key.len())
            .filter(|&i| self.entity_key[i] != self.contributor_column)
            .collect();
        match parts.is_empty() {
            true => (0..self.entity_key.len()).collect(),
            false => parts,
        }
    }

    /// The column called `name`, if any.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Column names in order.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|c| c.name.as_str())
    }

    /// The record key: entity key plus the order column.
    pub fn record_key(&self) -> Vec<String> {
        let mut key = self.entity_key.clone();
        key.push(self.order_column.clone());
        key
    }

    /// Arrow fields of rows in flight: every column nullable, since a null in a
    /// required column is a rule failure to report, not a crash.
    pub fn arrow_fields(&self) -> Vec<Field> {
        self.columns
            .iter()
            .map(|c| Field::new(&c.name, c.column_type.arrow_type(), true))
            .collect()
    }

    /// [`Contract::arrow_fields`] as a schema.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.arrow_fields()))
    }

    /// Iceberg schema of the Silver table, with field ids 1..=n.
    pub fn iceberg_schema(&self) -> iceberg::Result<iceberg::spec::Schema> {
        let fields = self
            .columns
            .iter()
            .zip(1..)
            .map(|(c, id)| {
                let ty = Type::Primitive(c.column_type.iceberg_type());
                let field = if c.nullable {
                    NestedField::optional(id, &c.name, ty)
                } else {
                    NestedField::required(id, &c.name, ty)
                };
                Arc::new(field)
            })
            .collect::<Vec<_>>();
        iceberg::spec::Schema::builder().with_fields(fields).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_parse_with_and_without_decimal_arguments() {
        let cases = [
            ("string", Some(ColumnType::String)),
            ("DATE", Some(ColumnType::Date)),
            ("timestamp", Some(ColumnType::Timestamp)),
            (
                "decimal(18,2)",
                Some(ColumnType::Decimal {
                    precision: 18,
                    scale: 2,
                }),
            ),
            (
                "decimal( 10 , 0 )",
                Some(ColumnType::Decimal {
                    precision: 10,
                    scale: 0,
                }),
            ),
            ("decimal(2,3)", None),
            ("decimal(40,2)", None),
            ("varchar", None),
        ];
        for (text, expected) in cases {
            assert_eq!(ColumnType::parse(text), expected, "{text}");
        }
    }

    #[test]
    fn column_types_are_written_as_they_are_read() {
        let decimal = ColumnType::decimal(12, 3).unwrap();
        for column_type in [
            ColumnType::String,
            ColumnType::Date,
            ColumnType::Timestamp,
            ColumnType::Int,
            ColumnType::Long,
            ColumnType::Double,
            ColumnType::Boolean,
            decimal,
        ] {
            let text = column_type.to_string();
            assert_eq!(ColumnType::parse(&text), Some(column_type), "{text}");
        }
        assert_eq!(decimal.to_string(), "decimal(12,3)");
        assert_eq!(ColumnType::decimal(2, 3), None);
        assert_eq!(ColumnType::decimal(0, 0), None);
    }
}
