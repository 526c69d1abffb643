//! Distinct keys, numbered: the hash index behind the LAG's entities, the
//! history read's "still wanted" test and the reference semi-join.
//!
//! A key is one or more columns compared as text (null equals null). The
//! index keeps the key columns it was given (shared, not copied) and, per
//! distinct key, where it was first seen and its hash; the hash table holds
//! only key numbers, so indexing a million keys makes no allocation per key.

use std::hash::{BuildHasher, Hasher};

use arrow::array::{Array, ArrayRef, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use hashbrown::HashTable;

use crate::error::{Error, Result};
use crate::stage::Stage;

/// Distinct keys, each numbered from 0 in the order first seen.
pub(crate) struct KeyIndex {
    /// The key columns (as text) of every batch inserted.
    batches: Vec<Vec<StringArray>>,
    /// Per key: the batch and row it was first seen at, and its hash.
    keys: Vec<(u32, u32, u64)>,
    table: HashTable<u32>,
    hasher: ahash::RandomState,
    stage: Stage,
}

impl KeyIndex {
    /// An empty index; `stage` names its errors.
    pub(crate) fn new(stage: Stage) -> KeyIndex {
        KeyIndex {
            batches: Vec::new(),
            keys: Vec::new(),
            table: HashTable::new(),
            hasher: ahash::RandomState::new(),
            stage,
        }
    }

    /// How many distinct keys are indexed.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The number of each row's key (rows by position in `columns`), indexing
    /// the keys not seen before.
    pub(crate) fn insert(&mut self, columns: &[ArrayRef]) -> Result<Vec<u32>> {
        let text = self.as_text(columns)?;
        let hashes = self.row_hashes(&text);
        let stage = self.stage;
        let too_many = |what: &str| Error::Internal(format!("{stage}: more than 4 billion {what}"));
        let batch = u32::try_from(self.batches.len()).map_err(|_| too_many("batches"))?;
        self.batches.push(text);
        let (batches, keys, table) = (&self.batches, &mut self.keys, &mut self.table);
        let inserted = &batches[batch as usize];
        table.reserve(hashes.len(), |id| keys[*id as usize].2);
        let mut ids = Vec::with_capacity(hashes.len());
        for (row, hash) in hashes.into_iter().enumerate() {
            let same = |id: &u32| {
                let (b, r, _) = keys[*id as usize];
                same_key(&batches[b as usize], r as usize, inserted, row)
            };
            let id = match table.find(hash, same) {
                Some(id) => *id,
                None => {
                    let id = u32::try_from(keys.len()).map_err(|_| too_many("keys"))?;
                    keys.push((batch, row as u32, hash));
                    table.insert_unique(hash, id, |id| keys[*id as usize].2);
                    id
                }
            };
            ids.push(id);
        }
        Ok(ids)
    }

    /// The number of each row's key, `None` where it is not indexed.
    pub(crate) fn find(&self, columns: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let text = self.as_text(columns)?;
        let hashes = self.row_hashes(&text);
        Ok(hashes
            .into_iter()
            .enumerate()
            .map(|(row, hash)| {
                let same = |id: &u32| {
                    let (b, r, _) = self.keys[*id as usize];
                    same_key(&self.batches[b as usize], r as usize, &text, row)
                };
                self.table.find(hash, same).copied()
            })
            .collect())
    }

    fn as_text(&self, columns: &[ArrayRef]) -> Result<Vec<StringArray>> {
        if let Some(width) = self.batches.first().map(Vec::len)
            && width != columns.len()
        {
            return Err(Error::Internal(format!(
                "{}: a key of {} columns compared with one of {width}",
                self.stage,
                columns.len()
            )));
        }
        columns
            .iter()
            .map(|column| {
                let text = cast(column, &DataType::Utf8).map_err(Error::arrow(self.stage))?;
                text.as_any()
                    .downcast_ref::<StringArray>()
                    .cloned()
                    .ok_or_else(|| Error::Internal(format!("{}: a key is not text", self.stage)))
            })
            .collect()
    }

    /// Each row's hash over its key's parts (length-prefixed, null marked).
    fn row_hashes(&self, columns: &[StringArray]) -> Vec<u64> {
        let rows = columns.first().map_or(0, Array::len);
        (0..rows)
            .map(|row| {
                let mut hasher = self.hasher.build_hasher();
                for column in columns {
                    if column.is_null(row) {
                        hasher.write_u8(0);
                    } else {
                        let value = column.value(row);
                        hasher.write_u8(1);
                        hasher.write_usize(value.len());
                        hasher.write(value.as_bytes());
                    }
                }
                hasher.finish()
            })
            .collect()
    }
}

/// Whether row `a` of `left` and row `b` of `right` hold the same key.
fn same_key(left: &[StringArray], a: usize, right: &[StringArray], b: usize) -> bool {
    left.iter()
        .zip(right)
        .all(|(l, r)| match (l.is_null(a), r.is_null(b)) {
            (true, true) => true,
            (false, false) => l.value(a) == r.value(b),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;

    use super::*;

    fn columns(names: Vec<Option<&str>>, numbers: Vec<Option<i64>>) -> Vec<ArrayRef> {
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Int64Array::from(numbers)),
        ]
    }

    #[test]
    fn equal_keys_share_a_number_and_unknown_keys_are_not_found() {
        let mut index = KeyIndex::new(Stage::Baseline);
        let ids = index
            .insert(&columns(
                vec![Some("a"), Some("b"), Some("a"), None, None, Some("1")],
                vec![Some(1), Some(1), Some(1), Some(1), Some(1), None],
            ))
            .unwrap();
        assert_eq!(ids, vec![0, 1, 0, 2, 2, 3]);
        let more = index
            .insert(&columns(vec![Some("b"), Some("c")], vec![Some(1), Some(1)]))
            .unwrap();
        assert_eq!(more, vec![1, 4]);
        assert_eq!(index.len(), 5);
        let found = index
            .find(&columns(
                vec![Some("b"), Some("a"), None, Some("ab"), Some("c"), Some("1")],
                vec![Some(1), Some(2), Some(1), None, Some(1), None],
            ))
            .unwrap();
        assert_eq!(found, vec![Some(1), None, Some(2), None, Some(4), Some(3)]);
    }

    #[test]
    fn parts_do_not_run_into_each_other() {
        let mut index = KeyIndex::new(Stage::Baseline);
        let two = |a: &str, b: &str| -> Vec<ArrayRef> {
            vec![
                Arc::new(StringArray::from(vec![a])),
                Arc::new(StringArray::from(vec![b])),
            ]
        };
        index.insert(&two("ab", "c")).unwrap();
        assert_eq!(index.find(&two("a", "bc")).unwrap(), vec![None]);
        assert_eq!(index.find(&two("ab", "c")).unwrap(), vec![Some(0)]);
    }

    #[test]
    fn keys_survive_the_table_growing() {
        let mut index = KeyIndex::new(Stage::Baseline);
        let names: Vec<String> = (0..100_000).map(|i| format!("k{i}")).collect();
        let column: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(&names))];
        let ids = index.insert(&column).unwrap();
        assert_eq!(ids, (0..100_000).collect::<Vec<u32>>());
        let found = index.find(&column).unwrap();
        assert!(
            found
                .iter()
                .enumerate()
                .all(|(i, id)| *id == Some(i as u32))
        );
    }
}
