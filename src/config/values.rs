//! How a text value reads as a contract type ([`ColumnType`]): the one
//! definition the drop reader types values with and `silverline init` infers
//! a sample's types with, so a type inferred from a sample reads that sample.
//!
//! The contract is stricter than Arrow's casts (which read `2026-10-3x` as the
//! 3rd and round a decimal with too many places): dates must be `YYYY-MM-DD`,
//! integers an optional sign and plain digits, decimals at most `scale`
//! places and `precision` digits. A Parquet column is read as its text
//! ([`to_text`]), so it meets the same checks.

use arrow::array::{Array, StringArray};
use arrow::compute::cast;
use arrow::compute::kernels::cast_utils::Parser;
use arrow::datatypes::{DataType, Float64Type};
use chrono::{NaiveDate, NaiveDateTime};

use crate::config::contract::ColumnType;

/// Days from 0001-01-01 (chrono's day count) to 1970-01-01 (Arrow's Date32).
pub(crate) const UNIX_EPOCH_FROM_CE: i32 = 719_163;

/// Whether `text` reads as a value of `column_type`.
pub fn reads_as(column_type: ColumnType, text: &str) -> bool {
    match column_type {
        ColumnType::String => true,
        ColumnType::Date => parse_date(text).is_some(),
        ColumnType::Timestamp => parse_timestamp(text).is_some(),
        ColumnType::Int => parse_integer::<i32>(text).is_some(),
        ColumnType::Long => parse_integer::<i64>(text).is_some(),
        ColumnType::Double => parse_double(text).is_some(),
        ColumnType::Boolean => parse_boolean(text).is_some(),
        ColumnType::Decimal { precision, scale } => parse_decimal(text, precision, scale).is_some(),
    }
}

/// `YYYY-MM-DD`, a real calendar day from 0001-01-01 to 9999-12-31 (the
/// range every Iceberg and Parquet reader takes), as days since 1970-01-01.
pub fn parse_date(text: &str) -> Option<i32> {
    let bytes = text.as_bytes();
    let canonical = bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !canonical {
        return None;
    }
    let number = |range: std::ops::Range<usize>| {
        bytes[range]
            .iter()
            .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'))
    };
    let year = i32::try_from(number(0..4)).ok().filter(|y| *y >= 1)?;
    let date = NaiveDate::from_ymd_opt(year, number(5..7), number(8..10))?;
    Some(chrono::Datelike::num_days_from_ce(&date) - UNIX_EPOCH_FROM_CE)
}

/// An instant as microseconds since 1970-01-01T00:00:00Z: RFC 3339 (with
/// `Z` or an offset, brought to UTC), or `YYYY-MM-DD HH:MM:SS` / with a `T`
/// and no offset, read as UTC; at most microsecond fractions, years 0001 to
/// 9999.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    // Year, month and day must be written out in full, as for a date.
    if bytes.len() < 19 || parse_date(text.get(..10)?).is_none() {
        return None;
    }
    let utc = match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(instant) => instant.naive_utc(),
        Err(_) => {
            let naive = |format: &str| NaiveDateTime::parse_from_str(text, format).ok();
            naive("%Y-%m-%d %H:%M:%S%.f").or_else(|| naive("%Y-%m-%dT%H:%M:%S%.f"))?
        }
    };
    let year = chrono::Datelike::year(&utc);
    let whole_micros = chrono::Timelike::nanosecond(&utc) % 1_000 == 0;
    ((1..=9999).contains(&year) && whole_micros).then(|| utc.and_utc().timestamp_micros())
}

/// An optional sign and plain digits, within the type's range.
pub fn parse_integer<T: std::str::FromStr>(text: &str) -> Option<T> {
    // `str::parse` for integers accepts exactly `[+-]?[0-9]+`.
    text.parse().ok()
}

/// `true`/`false` and the spellings Arrow's cast accepts, in any case.
pub fn parse_boolean(text: &str) -> Option<bool> {
    let is = |spellings: &[&str]| spellings.iter().any(|s| s.eq_ignore_ascii_case(text));
    if is(&["t", "true", "y", "yes", "on", "1"]) {
        Some(true)
    } else if is(&["f", "false", "n", "no", "off", "0"]) {
        Some(false)
    } else {
        None
    }
}

/// An optional sign, digits, and at most `scale` digits after a point, with
/// at most `precision` digits in all; unscaled.
pub fn parse_decimal(text: &str, precision: u8, scale: i8) -> Option<i128> {
    let scale = usize::try_from(scale).ok()?;
    let bytes = text.as_bytes();
    let (negative, number) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let (whole, fraction) = match number.iter().position(|b| *b == b'.') {
        Some(point) if point + 1 < number.len() => (&number[..point], &number[point + 1..]),
        Some(_) => return None,
        None => (number, &number[number.len()..]),
    };
    if whole.is_empty() || fraction.len() > scale {
        return None;
    }
    let value = match whole.len() + scale {
        // At most 19 digits once scaled: the value fits in a u64 exactly.
        ..=19 => {
            let unscaled = digits_u64(whole)? * POW10[fraction.len()] + digits_u64(fraction)?;
            i128::from(unscaled * POW10[scale - fraction.len()])
        }
        _ => {
            let mut value: i128 = 0;
            for b in whole.iter().chain(fraction) {
                let digit = b.wrapping_sub(b'0');
                if digit > 9 {
                    return None;
                }
                value = value.checked_mul(10)?.checked_add(i128::from(digit))?;
            }
            for _ in fraction.len()..scale {
                value = value.checked_mul(10)?;
            }
            value
        }
    };
    let limit = 10i128.checked_pow(u32::from(precision))?;
    if value >= limit {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// Powers of ten that fit in a u64.
const POW10: [u64; 20] = {
    let mut powers = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        powers[i] = powers[i - 1] * 10;
        i += 1;
    }
    powers
};

/// The value of at most 19 ASCII digits; `None` if any byte is not one.
fn digits_u64(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |value, b| {
        let digit = b.wrapping_sub(b'0');
        (digit <= 9).then(|| value * 10 + u64::from(digit))
    })
}

/// A 64-bit float as Arrow's cast reads one (`1.5`, `-2e3`).
pub fn parse_double(text: &str) -> Option<f64> {
    Float64Type::parse(text)
}

/// A column's values as text, as a drop's Parquet columns are typed: why not, for a column holding nested values
/// (a list, struct or map is never flattened into a scalar column: its text
/// would be committed as if it were one value) or a type with no text form.
pub fn to_text(array: &dyn Array) -> std::result::Result<StringArray, String> {
    let data_type = array.data_type();
    if let Some(kind) = nested_kind(data_type) {
        return Err(format!("holds {kind} values"));
    }
    let unreadable = || format!("holds {data_type} values, which do not read as text");
    let text = cast(array, &DataType::Utf8).map_err(|_| unreadable())?;
    text.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(unreadable)
}

/// `list`, `struct`, `map` or `union` for a nested type.
pub fn nested_kind(data_type: &DataType) -> Option<&'static str> {
    match data_type {
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::ListView(_)
        | DataType::LargeListView(_) => Some("list"),
        DataType::Struct(_) => Some("struct"),
        DataType::Map(..) => Some("map"),
        DataType::Union(..) => Some("union"),
        DataType::Dictionary(_, values) => nested_kind(values),
        DataType::RunEndEncoded(_, values) => nested_kind(values.data_type()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_canonical_calendar_days() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("0001-01-01"), Some(1 - UNIX_EPOCH_FROM_CE));
        assert!(parse_date("9999-12-31").is_some());
        for bad in [
            "2026-02-30",
            "2026-03-3x",
            "2026-3-31",
            "20260331",
            "0000-01-01",
            "0000-12-31",
            "",
            " 2026-03-31",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_read_rfc3339_and_plain_utc() {
        let noon = 1_769_860_800_000_000; // 2026-01-31T12:00:00Z
        for text in [
            "2026-01-31T12:00:00Z",
            "2026-01-31T14:00:00+02:00",
            "2026-01-31 12:00:00",
            "2026-01-31T12:00:00",
            "2026-01-31 12:00:00.000000",
        ] {
            assert_eq!(parse_timestamp(text), Some(noon), "{text}");
        }
        assert_eq!(
            parse_timestamp("2026-01-31 12:00:00.25"),
            Some(noon + 250_000)
        );
        for bad in [
            "2026-01-31",
            "2026-02-30 12:00:00",
            "2026-1-31 12:00:00",
            "2026-01-31 24:00:00",
            "2026-01-31 12:00:00.0000001",
            "0000-01-01 00:00:00",
            "2026-01-31 12:00",
            " 2026-01-31 12:00:00",
            "2026-01-31 12:00:00 UTC",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimals_keep_scale_and_precision() {
        assert_eq!(parse_decimal("1.50", 18, 2), Some(150));
        assert_eq!(parse_decimal("-2", 18, 2), Some(-200));
        assert_eq!(parse_decimal("+0.5", 18, 2), Some(50));
        assert_eq!(
            parse_decimal("9999999999999999.99", 18, 2),
            Some(999_999_999_999_999_999)
        );
        // Up to 19 digits once scaled are read in 64 bits, more in 128: the
        // same values either way, at the edge and past it.
        assert_eq!(parse_decimal("12.3", 10, 4), Some(123_000));
        assert_eq!(parse_decimal("12.3", 38, 20), Some(123 * 10i128.pow(19)));
        assert_eq!(
            parse_decimal("-99999999999999999.99", 38, 2),
            Some(-9_999_999_999_999_999_999)
        );
        assert_eq!(
            parse_decimal("999999999999999999.9", 38, 2),
            Some(99_999_999_999_999_999_990)
        );
        assert_eq!(parse_decimal("1.2.3", 38, 4), None);
        assert_eq!(parse_decimal("1x.5", 38, 30), None);
        assert_eq!(parse_decimal("99999999999999999.99", 18, 2), None);
        for bad in [
            "1.005",
            "x1",
            "1.",
            ".5",
            "1e3",
            "",
            "-",
            "10000000000000000",
            "1,5",
        ] {
            assert_eq!(parse_decimal(bad, 18, 2), None, "{bad}");
        }
    }

    #[test]
    fn integers_take_a_sign_and_digits_only() {
        assert_eq!(parse_integer::<i32>("+7"), Some(7));
        assert_eq!(parse_integer::<i32>("-007"), Some(-7));
        for bad in ["1.0", " 1", "1e2", "", "2147483648"] {
            assert_eq!(parse_integer::<i32>(bad), None, "{bad}");
        }
        assert_eq!(parse_integer::<i64>("2147483648"), Some(2_147_483_648));
    }

    #[test]
    fn booleans_read_in_any_case() {
        assert_eq!(parse_boolean("TRUE"), Some(true));
        assert_eq!(parse_boolean("no"), Some(false));
        assert_eq!(parse_boolean("maybe"), None);
    }
}
