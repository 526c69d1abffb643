//! Distinct keys, numbered: the hash index behind the LAG's entities, the
//! history read's "still wanted" test and the reference semi-join.
//!
//! A key is one or more columns compared as text (null equals null). The
//! index keeps the key columns it was given (shared, not copied) and, per
//! distinct key, where it was first seen and its hash, in one part of the
//! hash space per core; each part's hash table holds only positions in the
//! part, so indexing a million keys makes no allocation per key.
//!
//! [`Buckets`] splits rows by the same key hash, with fixed seeds.

use std::hash::{BuildHasher, Hasher};
use std::ops::Range;

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use hashbrown::HashTable;

use crate::core::parallel::{each_mut_in_lanes, lanes, over_row_ranges};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Distinct keys, each numbered from 0 in the order first seen.
///
/// The keys are split by hash into one part per core, each with its own
/// table, so that a large insert fills the parts a core each; the numbers
/// follow the order the keys were first seen, across parts.
pub(crate) struct KeyIndex {
    /// The key columns (as text) of every batch inserted.
    batches: Vec<Vec<StringArray>>,
    /// The keys, one part of the hash space per core ([`part_of`]).
    parts: Vec<KeyPart>,
    /// How many distinct keys are indexed.
    len: usize,
    hasher: ahash::RandomState,
    stage: Stage,
}

/// The keys of one part of the hash space ([`part_of`]).
#[derive(Default)]
struct KeyPart {
    /// Per key of the part: the batch and row it was first seen at, and
    /// its hash.
    keys: Vec<(u32, u32, u64)>,
    /// The index's number of each key of the part.
    numbers: Vec<u32>,
    /// Positions in `keys`, by hash.
    table: HashTable<u32>,
}

/// The part of `parts` a key of hash `hash` is in: bits the tables do not
/// take their slots from (the low ones) or their tags (the top seven).
fn part_of(hash: u64, parts: usize) -> usize {
    (hash >> 32) as usize % parts
}

impl KeyPart {
    /// The position in this part of the key of each row of batch `batch`
    /// (of `batches`) whose hash falls in part `part` of `parts`, in row
    /// order; the keys new to the part are added after the known ones, in
    /// the order first seen. The caller made sure positions fit in `u32`
    /// (no index holds 4 billion keys).
    fn insert(
        &mut self,
        (batches, batch): (&[Vec<StringArray>], u32),
        (hashes, part, parts): (&[u64], usize, usize),
    ) -> Vec<u32> {
        let inserted = &batches[batch as usize];
        let (keys, table) = (&mut self.keys, &mut self.table);
        let expected = hashes.len() / parts + 1;
        table.reserve(expected, |at| keys[*at as usize].2);
        let mut positions = Vec::with_capacity(expected);
        let rows = hashes.iter().enumerate();
        for (row, hash) in rows.filter(|(_, h)| part_of(**h, parts) == part) {
            let same = |at: &u32| {
                let (b, r, _) = keys[*at as usize];
                same_key(&batches[b as usize], r as usize, inserted, row)
            };
            let at = match table.find(*hash, same) {
                Some(at) => *at,
                None => {
                    let at = keys.len() as u32;
                    keys.push((batch, row as u32, *hash));
                    table.insert_unique(*hash, at, |at| keys[*at as usize].2);
                    at
                }
            };
            positions.push(at);
        }
        positions
    }

    /// The index's number of the key of row `row` of `columns` (of hash
    /// `hash`), if the part holds it.
    fn find(
        &self,
        batches: &[Vec<StringArray>],
        (hash, columns, row): (u64, &[StringArray], usize),
    ) -> Option<u32> {
        let same = |at: &u32| {
            let (b, r, _) = self.keys[*at as usize];
            same_key(&batches[b as usize], r as usize, columns, row)
        };
        let at = self.table.find(hash, same)?;
        self.numbers.get(*at as usize).copied()
    }
}

/// An index past 4 billion `what`: a bug, named by `stage`.
fn too_many(stage: Stage, what: &str) -> Error {
    Error::Internal(format!("{stage}: more than 4 billion {what}"))
}

impl KeyIndex {
    /// An empty index; `stage` names its errors.
    pub(crate) fn new(stage: Stage) -> KeyIndex {
        KeyIndex {
            batches: Vec::new(),
            parts: (0..lanes()).map(|_| KeyPart::default()).collect(),
            len: 0,
            hasher: ahash::RandomState::new(),
            stage,
        }
    }

    /// How many distinct keys are indexed.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The number of each row's key (rows by position in `columns`), indexing
    /// the keys not seen before: the parts filled a core each. An insert
    /// that fails leaves the index as it was.
    pub(crate) fn insert(&mut self, columns: &[ArrayRef]) -> Result<Vec<u32>> {
        let text = self.as_text(columns)?;
        let hashes = self.row_hashes_in_lanes(&text)?;
        let stage = self.stage;
        let batch = u32::try_from(self.batches.len()).map_err(|_| too_many(stage, "batches"))?;
        if u32::try_from(self.len + hashes.len()).is_err() {
            return Err(too_many(stage, "keys"));
        }
        self.batches.push(text);
        let known: Vec<usize> = self.parts.iter().map(|p| p.keys.len()).collect();
        let positions = match self.fill_parts(batch, &hashes) {
            Ok(positions) => positions,
            Err(error) => {
                self.forget(&known);
                return Err(error);
            }
        };
        // Each row's number, from its part's positions in row order. A key
        // new to its part is numbered at its first row: keys new to a part
        // have the positions after the known ones in the order first seen,
        // so the numbers follow the order first seen across parts.
        let parts = self.parts.len();
        let mut next = vec![0usize; parts];
        let mut numbers = Vec::with_capacity(hashes.len());
        for hash in &hashes {
            let index = part_of(*hash, parts);
            let at = positions[index][next[index]] as usize;
            next[index] += 1;
            let part = &mut self.parts[index];
            if at == part.numbers.len() {
                part.numbers.push(self.len as u32);
                self.len += 1;
            }
            numbers.push(part.numbers[at]);
        }
        Ok(numbers)
    }

    /// Each part's positions of the keys of the rows of batch `batch` (of
    /// hashes `hashes`) it holds, in row order, the keys new to it added: a
    /// part per core.
    fn fill_parts(&mut self, batch: u32, hashes: &[u64]) -> Result<Vec<Vec<u32>>> {
        let parts = self.parts.len();
        let mut positions = vec![Vec::new(); parts];
        let mut filled: Vec<(&mut KeyPart, &mut Vec<u32>)> =
            self.parts.iter_mut().zip(positions.iter_mut()).collect();
        let (batches, stage) = (&self.batches, self.stage);
        each_mut_in_lanes(
            (stage, "a key indexing thread"),
            hashes.len(),
            &mut filled,
            |index, (part, positions)| {
                **positions = part.insert((batches, batch), (hashes, index, parts));
                Ok(())
            },
        )?;
        Ok(positions)
    }

    /// Forgets what an insert that failed added: the keys past `known` (per
    /// part) and its batch.
    fn forget(&mut self, known: &[usize]) {
        for (part, known) in self.parts.iter_mut().zip(known) {
            part.keys.truncate(*known);
            part.table.retain(|at| (*at as usize) < *known);
        }
        self.batches.pop();
    }

    /// The number of each row's key, `None` where it is not indexed (a
    /// share of the rows per core).
    pub(crate) fn find(&self, columns: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let text = self.as_text(columns)?;
        let what = format!("{}: a key lookup thread", self.stage);
        let parts = self.parts.len();
        over_row_ranges(&what, rows_of(&text), |range| {
            let text = sliced(&text, &range);
            let found = self.row_hashes(&text).into_iter().enumerate();
            Ok(found
                .map(|(row, hash)| {
                    let part = &self.parts[part_of(hash, parts)];
                    part.find(&self.batches, (hash, &text, row))
                })
                .collect())
        })
    }

    fn as_text(&self, columns: &[ArrayRef]) -> Result<Vec<StringArray>> {
        key_text(columns, self.batches.first().map(Vec::len), self.stage)
    }

    fn row_hashes(&self, columns: &[StringArray]) -> Vec<u64> {
        row_hashes(&self.hasher, columns)
    }

    /// [`Self::row_hashes`], a share of the rows per core.
    fn row_hashes_in_lanes(&self, columns: &[StringArray]) -> Result<Vec<u64>> {
        let what = format!("{}: a key hashing thread", self.stage);
        over_row_ranges(&what, rows_of(columns), |range| {
            Ok(self.row_hashes(&sliced(columns, &range)))
        })
    }
}

/// How many rows key columns hold.
fn rows_of(columns: &[StringArray]) -> usize {
    columns.first().map_or(0, Array::len)
}

/// The rows `range` of key columns (no copy).
fn sliced(columns: &[StringArray], range: &Range<usize>) -> Vec<StringArray> {
    columns
        .iter()
        .map(|c| c.slice(range.start, range.len()))
        .collect()
}

/// Distinct keys held as their 128-bit fingerprints alone (XXH3-128 over
/// the key's parts as text, each length-prefixed, a null marked), sorted:
/// a set of tens of millions of keys (a reference's) costs 16 bytes a key
/// once loaded (up to twice that while it loads), whatever the keys'
/// length, and none of their text. Two different keys share a fingerprint
/// with a chance of about one in 3 x 10^38: far below a disk's undetected
/// error rate over a bureau's whole history.
pub(crate) struct KeySet {
    /// Sorted and distinct once loaded.
    prints: Vec<u128>,
    /// Where the fingerprints of each value of their top 16 bits start
    /// (once loaded): a lookup searches a few dozen, not all.
    starts: Vec<u32>,
    /// The number of key parts, once a key is inserted.
    width: Option<usize>,
    stage: Stage,
}

impl KeySet {
    /// An empty set; `stage` names its errors.
    pub(crate) fn new(stage: Stage) -> KeySet {
        KeySet {
            prints: Vec::new(),
            starts: Vec::new(),
            width: None,
            stage,
        }
    }

    /// How many distinct keys (once loaded).
    pub(crate) fn len(&self) -> usize {
        self.prints.len()
    }

    /// Adds the key of every row of `columns` (one column per key part);
    /// a set loaded before is loaded again ([`Self::loaded`]) before a
    /// lookup.
    pub(crate) fn insert(&mut self, columns: &[ArrayRef]) -> Result<()> {
        self.starts.clear();
        self.width.get_or_insert(columns.len());
        for print in fingerprints(&self.as_text(columns)?) {
            // Full: repeated keys are dropped before the set grows, and it
            // grows when that leaves it more than half full.
            if self.prints.len() == self.prints.capacity() {
                self.compact();
                if self.prints.len() > self.prints.capacity() / 2 {
                    self.prints.reserve(self.prints.capacity().max(1024));
                }
            }
            self.prints.push(print);
        }
        Ok(())
    }

    /// Sorts and dedups every key inserted (in place).
    fn compact(&mut self) {
        self.prints.sort_unstable();
        self.prints.dedup();
        self.starts.clear();
    }

    /// Done inserting: sorts, dedups and indexes the keys, and gives back
    /// the room they no longer need.
    pub(crate) fn loaded(&mut self) -> Result<()> {
        self.compact();
        self.prints.shrink_to_fit();
        let too_many = || Error::Internal(format!("{}: more than 4 billion keys", self.stage));
        let mut starts = Vec::with_capacity(Self::PREFIXES + 1);
        let mut at = 0;
        for prefix in 0..=Self::PREFIXES {
            while at < self.prints.len() && Self::prefix(self.prints[at]) < prefix {
                at += 1;
            }
            starts.push(u32::try_from(at).map_err(|_| too_many())?);
        }
        self.starts = starts;
        Ok(())
    }

    /// How many values the top bits of a fingerprint index take.
    const PREFIXES: usize = 1 << 16;

    fn prefix(print: u128) -> usize {
        (print >> 112) as usize
    }

    /// Whether each row's key (of `columns`) is in the set, once loaded (a
    /// share of the rows per core).
    pub(crate) fn contains(&self, columns: &[ArrayRef]) -> Result<Vec<bool>> {
        if self.starts.len() != Self::PREFIXES + 1 {
            return Err(Error::Internal(format!(
                "{}: keys looked up before they were loaded",
                self.stage
            )));
        }
        let text = self.as_text(columns)?;
        let what = format!("{}: a key lookup thread", self.stage);
        over_row_ranges(&what, rows_of(&text), |range| {
            Ok(fingerprints(&sliced(&text, &range))
                .into_iter()
                .map(|print| {
                    let prefix = Self::prefix(print);
                    let range = self.starts[prefix] as usize..self.starts[prefix + 1] as usize;
                    self.prints[range].binary_search(&print).is_ok()
                })
                .collect())
        })
    }

    fn as_text(&self, columns: &[ArrayRef]) -> Result<Vec<StringArray>> {
        key_text(columns, self.width, self.stage)
    }

    /// The keys' fingerprints, sorted and distinct once loaded: what
    /// [`KeySet::from_prints`] takes back.
    pub(crate) fn prints(&self) -> &[u128] {
        &self.prints
    }

    /// A set loaded from the fingerprints of [`KeySet::prints`], keys of
    /// `width` parts; fingerprints not strictly increasing are refused.
    pub(crate) fn from_prints(prints: Vec<u128>, width: usize, stage: Stage) -> Result<KeySet> {
        if prints.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(Error::Internal(format!(
                "{stage}: kept key fingerprints are not sorted and distinct"
            )));
        }
        let mut keys = KeySet {
            prints,
            starts: Vec::new(),
            width: Some(width),
            stage,
        };
        keys.loaded()?;
        Ok(keys)
    }
}

/// Each row's fingerprint over its key's parts (length-prefixed, null
/// marked). Reference keys kept for later runs are these fingerprints
/// (`pipeline::evaluate::kept_keys`): a change here must change the
/// scheme version there, or kept keys would match wrongly.
pub(crate) fn fingerprints(columns: &[StringArray]) -> Vec<u128> {
    let rows = rows_of(columns);
    let mut key = Vec::new();
    (0..rows)
        .map(|row| {
            key.clear();
            for column in columns {
                if column.is_null(row) {
                    key.push(0);
                } else {
                    let value = column.value(row).as_bytes();
                    key.push(1);
                    key.extend_from_slice(&(value.len() as u64).to_le_bytes());
                    key.extend_from_slice(value);
                }
            }
            twox_hash::XxHash3_128::oneshot(&key)
        })
        .collect()
}

/// A key's columns as text, once checked to be as many as the keys
/// already held (`width`): another count is a bug, named.
fn key_text(columns: &[ArrayRef], width: Option<usize>, stage: Stage) -> Result<Vec<StringArray>> {
    if let Some(width) = width
        && width != columns.len()
    {
        return Err(Error::Internal(format!(
            "{stage}: a key of {} columns compared with one of {width}",
            columns.len()
        )));
    }
    as_text(columns, stage)
}

/// Key columns as text, as keys are compared.
pub(crate) fn as_text(columns: &[ArrayRef], stage: Stage) -> Result<Vec<StringArray>> {
    columns
        .iter()
        .map(|column| {
            let text = cast(column, &DataType::Utf8).map_err(Error::arrow(stage))?;
            text.as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| Error::Internal(format!("{stage}: a key is not text")))
        })
        .collect()
}

/// Each row's hash over its key's parts (length-prefixed, null marked).
fn row_hashes(hasher: &ahash::RandomState, columns: &[StringArray]) -> Vec<u64> {
    let rows = rows_of(columns);
    (0..rows)
        .map(|row| {
            let mut hasher = hasher.build_hasher();
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

/// A drop's entities split by key hash into buckets judged one after the
/// other, so that a run holds one bucket's history, LAG and verdicts at a
/// time. Every row of one entity, in the drop or in Silver, falls in the
/// same bucket.
#[derive(Debug, Clone)]
pub(crate) struct Buckets {
    count: usize,
    /// Fixed seeds: a drop's row and a Silver row of one key hash alike.
    hasher: ahash::RandomState,
    /// The positions of the key parts hashed (`None`: every part).
    parts: Option<Vec<usize>>,
}

impl Buckets {
    /// What one row of a bucket costs a run while it is judged (its history,
    /// previous values, key index, outcomes and verdicts), measured at 0.45
    /// to 0.5 KiB per row with heaptrack and rounded up.
    const BYTES_PER_ROW: u64 = 512;

    /// Buckets of `bucket_rows` rows, for a drop (or a committed month
    /// counted in parts) of `rows` rows. By
    /// default a drop that half of `memory_limit` holds is one bucket, and
    /// a larger one is judged in buckets of an eighth of it: beside a
    /// bucket, a run holds the references' keys and its queries' pool.
    pub(crate) fn for_rows(
        rows: usize,
        (memory_limit, bucket_rows): (u64, Option<u64>),
    ) -> Buckets {
        let whole = memory_limit / 2 / Self::BYTES_PER_ROW;
        let per_bucket = match bucket_rows {
            Some(bucket_rows) => bucket_rows,
            None if rows as u64 <= whole => whole,
            None => memory_limit / 8 / Self::BYTES_PER_ROW,
        }
        .max(1);
        let count = (rows as u64).div_ceil(per_bucket).clamp(1, Self::MOST);
        Buckets::new(usize::try_from(count).unwrap_or(1))
    }

    /// The most buckets: each has a spill file open while the drop is read
    /// (and one per month of history spread), within the usual limit of
    /// open files; past it buckets grow beyond their budget.
    const MOST: u64 = 256;

    /// `count` buckets (at least one).
    pub(crate) fn new(count: usize) -> Buckets {
        Buckets {
            count: count.max(1),
            hasher: ahash::RandomState::with_seeds(
                0x5EED_0001,
                0x5EED_0002,
                0x5EED_0003,
                0x5EED_0004,
            ),
            parts: None,
        }
    }

    /// The same buckets, hashing only the key parts at `parts` (positions
    /// among the key columns every caller gives).
    pub(crate) fn hashing(self, parts: Vec<usize>) -> Buckets {
        Buckets {
            parts: Some(parts),
            ..self
        }
    }

    /// How many buckets.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The bucket of each row whose key is `columns`.
    pub(crate) fn of_rows(&self, columns: &[ArrayRef], stage: Stage) -> Result<Vec<u32>> {
        let rows = columns.first().map_or(0, |c| c.len());
        if self.count == 1 {
            return Ok(vec![0; rows]);
        }
        let hashed: Vec<ArrayRef> = match &self.parts {
            None => columns.to_vec(),
            Some(parts) => parts
                .iter()
                .map(|&part| {
                    columns.get(part).cloned().ok_or_else(|| {
                        Error::Internal(format!("buckets: key part {part} is missing"))
                    })
                })
                .collect::<Result<_>>()?,
        };
        let text = as_text(&hashed, stage)?;
        let count = self.count as u64;
        Ok(row_hashes(&self.hasher, &text)
            .into_iter()
            .map(|hash| (hash % count) as u32)
            .collect())
    }

    /// Where each bucket's rows are among rows whose keys are `columns`.
    pub(crate) fn layout(&self, columns: &[ArrayRef], stage: Stage) -> Result<Layout> {
        if self.count == 1 {
            return Ok(Layout { rows: None, stage });
        }
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); self.count];
        for (row, bucket) in self.of_rows(columns, stage)?.into_iter().enumerate() {
            rows[bucket as usize].push(row as u32);
        }
        Ok(Layout {
            rows: Some(rows),
            stage,
        })
    }
}

/// Which rows of a batch each bucket holds.
pub(crate) struct Layout {
    /// Row numbers per bucket; `None`: one bucket, every row.
    rows: Option<Vec<Vec<u32>>>,
    stage: Stage,
}

impl Layout {
    /// Bucket `bucket`'s rows of `batch` (the batch the layout was made for).
    pub(crate) fn bucket(&self, batch: &RecordBatch, bucket: usize) -> Result<RecordBatch> {
        match &self.rows {
            None => Ok(batch.clone()),
            Some(rows) => {
                arrow::compute::take_record_batch(batch, &UInt32Array::from(rows[bucket].clone()))
                    .map_err(Error::arrow(self.stage))
            }
        }
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
    fn a_key_set_keeps_every_key_across_compactions_of_repeated_ones() {
        let mut set = KeySet::new(Stage::Reference);
        for batch in 0..3 {
            let keys: Vec<String> = (0..2_500)
                .map(|i| format!("k{}", (batch * 700 + i) % 3_000))
                .collect();
            set.insert(&[Arc::new(StringArray::from(keys)) as ArrayRef])
                .unwrap();
        }
        set.loaded().unwrap();
        assert_eq!(set.len(), 3_000);
        let asked: Vec<String> = (0..3_100).map(|i| format!("k{i}")).collect();
        let found = set
            .contains(&[Arc::new(StringArray::from(asked)) as ArrayRef])
            .unwrap();
        assert!(found[..3_000].iter().all(|f| *f));
        assert!(!found[3_000..].iter().any(|f| *f));
    }

    #[test]
    fn a_loaded_key_set_takes_more_keys_and_answers_once_loaded_again() {
        let text = |keys: &[&str]| [Arc::new(StringArray::from(keys.to_vec())) as ArrayRef];
        let mut set = KeySet::from_prints(Vec::new(), 1, Stage::Reference).unwrap();
        set.insert(&text(&["a", "b"])).unwrap();
        set.loaded().unwrap();
        set.insert(&text(&["c", "a"])).unwrap();
        assert!(set.contains(&text(&["a"])).is_err(), "looked up unloaded");
        set.loaded().unwrap();
        assert_eq!(set.len(), 3);
        let found = set.contains(&text(&["a", "b", "c", "d"])).unwrap();
        assert_eq!(found, [true, true, true, false]);
    }

    #[test]
    fn a_key_set_holds_each_key_once_compares_as_text_and_tells_parts_apart() {
        let mut set = KeySet::new(Stage::Reference);
        set.insert(&columns(
            vec![Some("a"), Some("a"), Some("ab"), None],
            vec![Some(1), Some(1), Some(2), Some(3)],
        ))
        .unwrap();
        set.insert(&columns(vec![Some("a")], vec![Some(1)]))
            .unwrap();
        set.loaded().unwrap();
        assert_eq!(set.len(), 3);
        let asked: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![
                Some("a"),
                Some("ab"),
                Some("a"),
                None,
                None,
                Some("b"),
            ])),
            // Text "1" is the key 1: keys are compared as text.
            Arc::new(StringArray::from(vec![
                Some("1"),
                Some("2"),
                Some("b2"),
                Some("3"),
                None,
                Some("1"),
            ])),
        ];
        assert_eq!(
            set.contains(&asked).unwrap(),
            [true, true, false, true, false, false]
        );
        let narrower = set.contains(&asked[..1]);
        assert!(narrower.is_err(), "a key of another width is a bug, named");
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

    #[test]
    fn keys_indexed_a_part_per_core_are_numbered_in_the_order_first_seen() {
        // 80,000 rows of 50,000 keys, then 40,000 rows mixing some of them
        // with new ones; numbered as one pass over the rows would.
        let first: Vec<String> = (0..80_000)
            .map(|i| format!("k{}", (i * 7) % 50_000))
            .collect();
        let second: Vec<String> = (0..40_000)
            .map(|i| format!("k{}", (i * 3) % 60_000))
            .collect();
        let mut seen = std::collections::HashMap::new();
        let numbered = |seen: &mut std::collections::HashMap<String, u32>, keys: &[String]| {
            keys.iter()
                .map(|key| {
                    let next = seen.len() as u32;
                    *seen.entry(key.clone()).or_insert(next)
                })
                .collect::<Vec<u32>>()
        };
        let expected_first = numbered(&mut seen, &first);
        let known_first = seen.len();
        let expected_second = numbered(&mut seen, &second);
        let column = |keys: &[String]| -> Vec<ArrayRef> {
            vec![Arc::new(StringArray::from_iter_values(keys))]
        };
        let mut index = KeyIndex::new(Stage::Baseline);
        assert_eq!(index.insert(&column(&first)).unwrap(), expected_first);
        assert_eq!((index.len(), known_first), (50_000, 50_000));
        assert_eq!(index.insert(&column(&second)).unwrap(), expected_second);
        assert_eq!(index.len(), seen.len());
        assert!(seen.len() > known_first);
        let found = index.find(&column(&second)).unwrap();
        let expected: Vec<Option<u32>> = expected_second.into_iter().map(Some).collect();
        assert_eq!(found, expected);
        assert_eq!(
            index.find(&column(&["k60000".to_string()])).unwrap(),
            [None]
        );
    }

    #[test]
    fn an_insert_that_fails_after_filling_its_parts_is_forgotten_whole() {
        let column =
            |keys: &[&str]| -> Vec<ArrayRef> { vec![Arc::new(StringArray::from(keys.to_vec()))] };
        let mut index = KeyIndex::new(Stage::Baseline);
        index.insert(&column(&["a", "b"])).unwrap();
        // An insert whose parts took its keys, then failed before they
        // were numbered (a part's thread that could not start, say).
        let text = index.as_text(&column(&["c", "a", "d"])).unwrap();
        let hashes = index.row_hashes(&text);
        index.batches.push(text);
        let known: Vec<usize> = index.parts.iter().map(|p| p.keys.len()).collect();
        index.fill_parts(1, &hashes).unwrap();
        index.forget(&known);
        assert_eq!(index.len(), 2);
        let found = index.find(&column(&["c", "a", "d"])).unwrap();
        assert_eq!(found, [None, Some(0), None]);
        assert_eq!(index.insert(&column(&["d", "b", "c"])).unwrap(), [2, 1, 3]);
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn lookups_of_many_rows_split_over_threads_answer_each_row_for_itself() {
        // Row i asks the key of number i / 2 when even, an unknown one when odd.
        let known: Vec<String> = (0..60_000).map(|i| format!("k{i}")).collect();
        let asked: Vec<String> = (0..120_000)
            .map(|i| match i % 2 {
                0 => format!("k{}", i / 2),
                _ => format!("x{i}"),
            })
            .collect();
        let known: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(&known))];
        let asked: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(&asked))];
        let mut index = KeyIndex::new(Stage::Baseline);
        index.insert(&known).unwrap();
        let found = index.find(&asked).unwrap();
        let expected: Vec<Option<u32>> = (0..120_000u32)
            .map(|i| (i % 2 == 0).then_some(i / 2))
            .collect();
        assert_eq!(found, expected);
        let mut set = KeySet::new(Stage::Reference);
        set.insert(&known).unwrap();
        set.loaded().unwrap();
        let contained = set.contains(&asked).unwrap();
        assert_eq!(
            contained,
            expected.iter().map(Option::is_some).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_key_falls_in_one_bucket_whatever_its_type_and_every_row_in_one() {
        let buckets = Buckets::new(7);
        let numbers: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(0..1000))];
        let text: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(
            (0..1000).map(|i| i.to_string()),
        ))];
        let of_numbers = buckets.of_rows(&numbers, Stage::Baseline).unwrap();
        assert_eq!(of_numbers, buckets.of_rows(&text, Stage::Baseline).unwrap());
        assert!((0..7).all(|b| of_numbers.contains(&b)), "{of_numbers:?}");
        let batch = RecordBatch::try_from_iter([("k", numbers[0].clone())]).unwrap();
        let layout = buckets.layout(&numbers, Stage::Baseline).unwrap();
        let parts: Vec<RecordBatch> = (0..7).map(|b| layout.bucket(&batch, b).unwrap()).collect();
        let mut seen: Vec<i64> = parts
            .iter()
            .flat_map(|p| {
                let values = p.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                values.values().to_vec()
            })
            .collect();
        seen.sort();
        assert_eq!(seen, (0..1000).collect::<Vec<i64>>());
        assert_eq!(Buckets::for_rows(1000, (1 << 30, None)).count(), 1);
        assert_eq!(Buckets::for_rows(1000, (1 << 30, Some(300))).count(), 4);
        assert_eq!(Buckets::for_rows(1_000_000, (1 << 30, None)).count(), 1);
        assert_eq!(Buckets::for_rows(3_000_000, (1 << 30, None)).count(), 12);
    }

    #[test]
    fn buckets_hashing_some_key_parts_put_rows_that_share_them_together() {
        let buckets = Buckets::new(7).hashing(vec![1]);
        // One account under two contributors, and a thousand accounts.
        let contributors: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(["A", "B"])),
            Arc::new(StringArray::from_iter_values(["acc-1", "acc-1"])),
        ];
        let of_shared = buckets.of_rows(&contributors, Stage::Read).unwrap();
        assert_eq!(of_shared[0], of_shared[1]);
        let accounts: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values((0..1000).map(|_| "A"))),
            Arc::new(StringArray::from_iter_values(
                (0..1000).map(|i| format!("acc-{i}")),
            )),
        ];
        let of_accounts = buckets.of_rows(&accounts, Stage::Read).unwrap();
        assert!((0..7).all(|b| of_accounts.contains(&b)), "{of_accounts:?}");
        // A caller that gives fewer key columns than the parts hashed.
        let error = buckets.of_rows(&accounts[..1], Stage::Read).unwrap_err();
        assert!(error.to_string().contains("key part 1"), "{error}");
    }
}
