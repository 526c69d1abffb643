//! Distinct keys, numbered: the hash index behind the LAG's entities, the
//! history read's "still wanted" test and the reference semi-join.
//!
//! Keys of one or more columns are encoded with Arrow's row format (equal
//! keys are equal bytes, whatever the column types) and kept in one buffer;
//! the hash table holds only their numbers, so indexing a million keys makes
//! no allocation per key.

use arrow::array::{Array, ArrayRef};
use arrow::row::{RowConverter, Rows, SortField};
use hashbrown::HashTable;

use crate::error::{Error, Result};

/// Distinct keys, each numbered from 0 in the order first seen.
pub struct KeyIndex {
    converter: RowConverter,
    keys: Rows,
    table: HashTable<u32>,
    hasher: ahash::RandomState,
    stage: &'static str,
}

impl KeyIndex {
    /// An empty index of keys made of columns of `types`; `stage` names errors.
    pub fn new(types: &[arrow::datatypes::DataType], stage: &'static str) -> Result<KeyIndex> {
        let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())
            .map_err(Error::arrow(stage))?;
        let keys = converter.empty_rows(0, 0);
        Ok(KeyIndex {
            converter,
            keys,
            table: HashTable::new(),
            hasher: ahash::RandomState::new(),
            stage,
        })
    }

    /// How many distinct keys are indexed.
    pub fn len(&self) -> usize {
        self.keys.num_rows()
    }

    /// Whether no key is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of each row's key (rows by position in `columns`), indexing
    /// the keys not seen before.
    pub fn insert(&mut self, columns: &[ArrayRef]) -> Result<Vec<u32>> {
        let encoded = self.encode(columns)?;
        let (keys, hasher) = (&self.keys, &self.hasher);
        self.table.reserve(encoded.num_rows(), |id| {
            hasher.hash_one(keys.row(*id as usize).data())
        });
        (0..encoded.num_rows())
            .map(|row| {
                let key = encoded.row(row);
                let hash = self.hasher.hash_one(key.data());
                let keys = &self.keys;
                if let Some(id) = self
                    .table
                    .find(hash, |id| keys.row(*id as usize).data() == key.data())
                {
                    return Ok(*id);
                }
                let id = u32::try_from(self.keys.num_rows()).map_err(|_| {
                    Error::Internal(format!("{}: more than 4 billion keys", self.stage))
                })?;
                self.keys.push(key);
                let (keys, hasher) = (&self.keys, &self.hasher);
                self.table.insert_unique(hash, id, |id| {
                    hasher.hash_one(keys.row(*id as usize).data())
                });
                Ok(id)
            })
            .collect()
    }

    /// The number of each row's key, `None` where it is not indexed.
    pub fn find(&self, columns: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let encoded = self.encode(columns)?;
        Ok((0..encoded.num_rows())
            .map(|row| {
                let key = encoded.row(row);
                let hash = self.hasher.hash_one(key.data());
                self.table
                    .find(hash, |id| self.keys.row(*id as usize).data() == key.data())
                    .copied()
            })
            .collect())
    }

    fn encode(&self, columns: &[ArrayRef]) -> Result<Rows> {
        if columns.iter().any(|c| c.is_empty()) {
            return Ok(self.converter.empty_rows(0, 0));
        }
        self.converter
            .convert_columns(columns)
            .map_err(Error::arrow(self.stage))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::DataType;

    use super::*;

    #[test]
    fn equal_keys_share_a_number_and_unknown_keys_are_not_found() {
        let mut index = KeyIndex::new(&[DataType::Utf8, DataType::Int64], "test").unwrap();
        let columns = |names: Vec<Option<&str>>, numbers: Vec<Option<i64>>| -> Vec<ArrayRef> {
            vec![
                Arc::new(StringArray::from(names)),
                Arc::new(Int64Array::from(numbers)),
            ]
        };
        let ids = index
            .insert(&columns(
                vec![Some("a"), Some("b"), Some("a"), None, None],
                vec![Some(1), Some(1), Some(1), Some(1), Some(1)],
            ))
            .unwrap();
        assert_eq!(ids, vec![0, 1, 0, 2, 2]);
        assert_eq!(index.len(), 3);
        let found = index
            .find(&columns(
                vec![Some("b"), Some("a"), None, Some("ab")],
                vec![Some(1), Some(2), Some(1), None],
            ))
            .unwrap();
        assert_eq!(found, vec![Some(1), None, Some(2), None]);
    }
}
