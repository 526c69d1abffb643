//! Work spread over threads of its own, joined as one result.

use std::ops::Range;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::{Error, Result};
use crate::stage::Stage;

/// How many threads work is split over: one per core (asked once).
pub(crate) fn lanes() -> usize {
    static LANES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LANES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Below this many rows, work over rows stays on the calling thread: a
/// thread costs more to start than it saves.
const PARALLEL_ROWS: usize = 32_768;

/// The size of each core's contiguous share of `items` items, when there
/// is more than one share (`None`: all of them on the calling thread).
fn share_size(items: usize) -> Option<usize> {
    let share = items.div_ceil(lanes()).max(1);
    (items > share).then_some(share)
}

/// [`share_size`] of `items` items, for work over `rows` rows: `None`
/// (the calling thread) under [`PARALLEL_ROWS`].
fn share_over_rows(rows: usize, items: usize) -> Option<usize> {
    match rows < PARALLEL_ROWS {
        true => None,
        false => share_size(items),
    }
}

/// `work` applied to each of `items`, the items split into one contiguous
/// share per core, each share on a thread of its own (all on the calling
/// thread when there is one share); the results in the items' order.
fn each_in_lanes<T: Sync, R: Send>(
    what: &str,
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let Some(share) = share_size(items.len()) else {
        return items.iter().map(&work).collect();
    };
    let shares: Vec<&[T]> = items.chunks(share).collect();
    let done = in_parallel(what, shares, |share| {
        share.iter().map(&work).collect::<Result<Vec<R>>>()
    })?;
    Ok(done.into_iter().flatten().collect())
}

/// `work` over the rows `0..rows`, split into one contiguous range per core
/// when there are at least [`PARALLEL_ROWS`]; its results (one per row, or
/// any number per range) concatenated in row order.
pub(crate) fn over_row_ranges<R: Send>(
    what: &str,
    rows: usize,
    work: impl Fn(Range<usize>) -> Result<Vec<R>> + Sync,
) -> Result<Vec<R>> {
    let Some(size) = share_over_rows(rows, rows) else {
        return work(0..rows);
    };
    let ranges: Vec<Range<usize>> = (0..rows)
        .step_by(size)
        .map(|start| start..(start + size).min(rows))
        .collect();
    let done = each_in_lanes(what, &ranges, |range| work(range.clone()))?;
    Ok(done.into_iter().flatten().collect())
}

/// `work` over slices of `batch`'s rows: one contiguous share per core,
/// each on a thread of its own named `stage`'s `what`, when there are at
/// least [`PARALLEL_ROWS`] (else the whole batch on the calling thread);
/// the results in row order.
pub(crate) fn over_row_slices<R: Send>(
    (stage, what): (Stage, &str),
    batch: &RecordBatch,
    work: impl Fn(&RecordBatch) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let what = format!("{stage}: {what}");
    over_row_ranges(&what, batch.num_rows(), |range| {
        Ok(vec![work(&batch.slice(range.start, range.len()))?])
    })
}

/// `work` applied to each of `items` with its position, the items split
/// into one contiguous share per core, each share on a thread of its own
/// named `stage`'s `what`, when the work is over at least
/// [`PARALLEL_ROWS`] `rows` (else, or with one share, all on the calling
/// thread). Every share is worked through; the first error is the result.
pub(crate) fn each_mut_in_lanes<T: Send>(
    (stage, what): (Stage, &str),
    rows: usize,
    items: &mut [T],
    work: impl Fn(usize, &mut T) -> Result<()> + Sync,
) -> Result<()> {
    let Some(share) = share_over_rows(rows, items.len()) else {
        let mut items = items.iter_mut().enumerate();
        return items.try_for_each(|(i, item)| work(i, item));
    };
    let shares: Vec<(usize, &mut [T])> = items
        .chunks_mut(share)
        .enumerate()
        .map(|(s, items)| (s * share, items))
        .collect();
    in_parallel(&format!("{stage}: {what}"), shares, |(first, share)| {
        let mut items = share.iter_mut().enumerate();
        items.try_for_each(|(i, item)| work(first + i, item))
    })?;
    Ok(())
}

/// `batches` (each of `schema`) as one batch, as arrow's `concat_batches`
/// makes it, with the columns shared out over one thread per core
/// ([`shares_by_size`]) once the batches hold at least [`PARALLEL_ROWS`]
/// rows: a million rows' columns are a copy of hundreds of megabytes.
/// `stage` names an error.
pub(crate) fn concat_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    stage: Stage,
) -> Result<RecordBatch> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let columns = schema.fields().len();
    if batches.len() < 2 || rows < PARALLEL_ROWS || columns < 2 || lanes() < 2 {
        return arrow::compute::concat_batches(schema, batches).map_err(Error::arrow(stage));
    }
    let concat = |column: usize| -> Result<(usize, ArrayRef)> {
        let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(column).as_ref()).collect();
        let whole = arrow::compute::concat(&parts).map_err(Error::arrow(stage))?;
        Ok((column, whole))
    };
    let what = format!("{stage}: a column concatenating thread");
    let shares = shares_by_size(batches, columns);
    let done = in_parallel(&what, shares, |share| {
        share.into_iter().map(concat).collect::<Result<Vec<_>>>()
    })?;
    let mut arrays: Vec<Option<ArrayRef>> = vec![None; columns];
    for (column, array) in done.into_iter().flatten() {
        arrays[column] = Some(array);
    }
    let arrays = arrays
        .into_iter()
        .enumerate()
        .map(|(column, array)| {
            array.ok_or_else(|| {
                Error::Internal(format!("{stage}: column {column} was not concatenated"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), arrays, &options).map_err(Error::arrow(stage))
}

/// The positions of the `columns` columns of `batches`, shared out over
/// one share per core (at most one per column) by their size in bytes:
/// largest first, each to the share that holds the fewest bytes so far.
fn shares_by_size(batches: &[RecordBatch], columns: usize) -> Vec<Vec<usize>> {
    let size = |column: usize| -> usize {
        let sizes = batches
            .iter()
            .map(|b| b.column(column).get_array_memory_size());
        sizes.sum()
    };
    let mut by_size: Vec<(usize, usize)> = (0..columns).map(|c| (size(c), c)).collect();
    by_size.sort_unstable_by(|a, b| b.cmp(a));
    let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); lanes().min(columns)];
    for (bytes, column) in by_size {
        if let Some(least) = shares.iter_mut().min_by_key(|(load, _)| *load) {
            least.0 += bytes;
            least.1.push(column);
        }
    }
    shares.into_iter().map(|(_, share)| share).collect()
}

/// `work` applied to each of `items`, each on a thread of its own, the
/// results in the items' order; `what` names the threads in errors ("read:
/// a parsing thread"). A thread that cannot start or that panics
/// is an error, once every thread is joined.
pub(crate) fn in_parallel<T: Send, R: Send>(
    what: &str,
    items: Vec<T>,
    work: impl Fn(T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| {
                std::thread::Builder::new()
                    .name(what.to_string())
                    .spawn_scoped(scope, move || work(item))
            })
            .collect();
        let joined: Vec<Result<R>> = handles
            .into_iter()
            .map(|handle| match handle {
                Ok(handle) => handle.join().unwrap_or_else(|panic| {
                    Err(Error::Internal(format!(
                        "{what} panicked: {}",
                        panic_message(panic.as_ref())
                    )))
                }),
                Err(source) => Err(Error::Internal(format!("{what} could not start: {source}"))),
            })
            .collect();
        joined.into_iter().collect()
    })
}

/// Runs `produce` on a thread of its own (named `what`, in the caller's
/// tracing span), handing each item it gives to `consume` on the calling
/// thread: the producer works on the next item while the caller consumes
/// one, and waits for the caller before handing it over, so at most one
/// item is ever waiting. `produce` gives an item by calling the function
/// it is passed, which returns false once the caller has stopped (at an
/// error of `consume`): it should then stop too. The caller's error comes
/// first, then the producer's; a producer that cannot start or panics is
/// an error.
pub(crate) fn one_ahead<T: Send>(
    what: &str,
    produce: impl FnOnce(&mut dyn FnMut(T) -> bool) -> Result<()> + Send,
    mut consume: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        let (send, receive) = std::sync::mpsc::sync_channel::<T>(0);
        let producer = std::thread::Builder::new()
            .name(what.to_string())
            .spawn_scoped(scope, move || {
                let _entered = span.enter();
                produce(&mut |item| send.send(item).is_ok())
            })
            .map_err(|source| Error::Internal(format!("{what} could not start: {source}")))?;
        let consumed = receive.iter().try_for_each(&mut consume);
        // A producer still giving learns the caller has stopped.
        drop(receive);
        let produced = producer.join().unwrap_or_else(|panic| {
            Err(Error::Internal(format!(
                "{what} panicked: {}",
                panic_message(panic.as_ref())
            )))
        });
        consumed.and(produced)
    })
}

/// Items handed to a thread of its own, which works on them while the
/// caller goes on (a copy written to disk while the caller fingerprints
/// it): at most `depth` items wait between the two. The thread's error, or
/// its panic, is the caller's at its next [`Beside::give`] or at
/// [`Beside::finish`]; dropped unfinished (the caller failed), the thread
/// works through what it was given and is joined.
pub(crate) struct Beside<T, R> {
    what: String,
    send: Option<std::sync::mpsc::SyncSender<T>>,
    thread: Option<std::thread::JoinHandle<Result<R>>>,
}

impl<T: Send + 'static, R: Send + 'static> Beside<T, R> {
    /// Starts `work` on a thread named `what`; it takes the items given,
    /// in order, from its receiver and returns once the caller finishes.
    pub(crate) fn start(
        what: &str,
        depth: usize,
        work: impl FnOnce(std::sync::mpsc::Receiver<T>) -> Result<R> + Send + 'static,
    ) -> Result<Beside<T, R>> {
        let (send, receive) = std::sync::mpsc::sync_channel(depth);
        let thread = std::thread::Builder::new()
            .name(what.to_string())
            .spawn(move || work(receive))
            .map_err(|source| Error::Internal(format!("{what} could not start: {source}")))?;
        Ok(Beside {
            what: what.to_string(),
            send: Some(send),
            thread: Some(thread),
        })
    }

    /// Hands `item` over, waiting while `depth` items already wait; a
    /// thread that stopped early says why.
    pub(crate) fn give(&mut self, item: T) -> Result<()> {
        let given = self.send.as_ref().map(|send| send.send(item).is_ok());
        match given {
            Some(true) => Ok(()),
            _ => Err(self.join().err().unwrap_or_else(|| {
                Error::Internal(format!("{} stopped before its work was done", self.what))
            })),
        }
    }

    /// Waits for the thread to work through every item given; its result.
    pub(crate) fn finish(mut self) -> Result<R> {
        self.join()
    }

    fn join(&mut self) -> Result<R> {
        self.send = None;
        let what = &self.what;
        let thread = self
            .thread
            .take()
            .ok_or_else(|| Error::Internal(format!("{what} was already joined")))?;
        thread.join().unwrap_or_else(|panic| {
            Err(Error::Internal(format!(
                "{what} panicked: {}",
                panic_message(panic.as_ref())
            )))
        })
    }
}

impl<T, R> Drop for Beside<T, R> {
    fn drop(&mut self) {
        self.send = None;
        if let Some(thread) = self.thread.take() {
            // Unfinished: the caller's error is the one reported.
            let _ = thread.join();
        }
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_lanes_and_over_row_ranges_keeps_every_item_once_in_order() {
        let items: Vec<u32> = (0..1001).collect();
        let doubled = each_in_lanes("a test thread", &items, |i| Ok(i * 2)).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let failed = each_in_lanes("a test thread", &items, |i| match i {
            700 => Err(Error::Internal("seven hundred".to_string())),
            _ => Ok(*i),
        });
        assert!(failed.unwrap_err().to_string().contains("seven hundred"));
        for rows in [
            0,
            5,
            PARALLEL_ROWS - 1,
            PARALLEL_ROWS,
            3 * PARALLEL_ROWS + 7,
        ] {
            let numbered =
                over_row_ranges("a test thread", rows, |range| Ok(range.collect())).unwrap();
            assert_eq!(numbered, (0..rows).collect::<Vec<_>>(), "{rows} rows");
        }
    }

    #[test]
    fn items_worked_on_in_lanes_each_get_their_own_position_once() {
        for (rows, count) in [
            (10, 9),
            (PARALLEL_ROWS, 1),
            (PARALLEL_ROWS, 7),
            (PARALLEL_ROWS, 256),
        ] {
            let mut items: Vec<Vec<usize>> = vec![Vec::new(); count];
            each_mut_in_lanes(
                (Stage::Read, "a test thread"),
                rows,
                &mut items,
                |i, item| {
                    item.push(i);
                    Ok(())
                },
            )
            .unwrap();
            let expected: Vec<Vec<usize>> = (0..count).map(|i| vec![i]).collect();
            assert_eq!(items, expected, "{count} items, {rows} rows");
        }
        let mut items = vec![0u32; 20];
        let failed = each_mut_in_lanes(
            (Stage::Read, "a test thread"),
            PARALLEL_ROWS,
            &mut items,
            |i, _| match i {
                17 => Err(Error::Internal("seventeen".to_string())),
                _ => Ok(()),
            },
        );
        assert!(failed.unwrap_err().to_string().contains("seventeen"));
    }

    #[test]
    fn batches_concatenated_over_threads_are_arrow_s_concatenation() {
        use arrow::array::{BooleanArray, Date32Array, Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};
        use std::sync::Arc;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Int64, true),
            Field::new("open", DataType::Boolean, true),
            Field::new("on", DataType::Date32, true),
            Field::new("note", DataType::Utf8, true),
        ]));
        let batch = |from: usize, rows: usize| {
            let range = from..from + rows;
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter_values(
                    range.clone().map(|i| format!("id-{i}")),
                )),
                Arc::new(Int64Array::from_iter(
                    range.clone().map(|i| (i % 7 != 0).then_some(i as i64)),
                )),
                Arc::new(BooleanArray::from_iter(
                    range.clone().map(|i| (i % 5 != 0).then_some(i % 2 == 0)),
                )),
                Arc::new(Date32Array::from_iter(
                    range.clone().map(|i| (i % 3 != 0).then_some(i as i32)),
                )),
                Arc::new(StringArray::from_iter(
                    range.map(|i| (i % 11 != 0).then(|| "x".repeat(i % 13))),
                )),
            ];
            RecordBatch::try_new(schema.clone(), columns).unwrap()
        };
        for sizes in [
            vec![],
            vec![10],
            vec![3, 4],
            vec![PARALLEL_ROWS, 1, 20_000, 0, 777],
        ] {
            let mut from = 0;
            let batches: Vec<RecordBatch> = sizes
                .iter()
                .map(|&rows| {
                    from += rows;
                    batch(from - rows, rows)
                })
                .collect();
            let ours = concat_batches(&schema, &batches, Stage::Read).unwrap();
            let arrows = arrow::compute::concat_batches(&schema, &batches).unwrap();
            assert_eq!(ours, arrows, "batches of {sizes:?} rows");
            assert_eq!(ours.num_rows(), sizes.iter().sum::<usize>());
            if batches.is_empty() {
                continue;
            }
            let shares = shares_by_size(&batches, 5);
            assert_eq!(shares.len(), lanes().min(5));
            let mut every: Vec<usize> = shares.concat();
            every.sort_unstable();
            assert_eq!(every, [0, 1, 2, 3, 4], "each column in one share");
        }
    }

    #[test]
    fn work_in_parallel_keeps_the_items_order_and_names_a_failure_or_a_panic() {
        let doubled = in_parallel("a test thread", (0..6).collect(), |i: i32| Ok(i * 2)).unwrap();
        assert_eq!(doubled, [0, 2, 4, 6, 8, 10]);
        let failed = in_parallel("a test thread", vec![1, 2, 3], |i: i32| match i {
            2 => Err(Error::Internal("two".to_string())),
            _ => Ok(i),
        });
        assert!(failed.unwrap_err().to_string().contains("two"));
        let panicked = in_parallel("a test thread", vec![1, 2, 3], |i: i32| match i {
            1 => Err(Error::Internal("one".to_string())),
            3 => panic!("three went wrong"),
            _ => Ok(i),
        });
        // The first failure in the items' order, every thread joined.
        assert!(panicked.unwrap_err().to_string().contains("one"));
        let panicked = in_parallel("a test thread", vec![3], |i: i32| -> Result<i32> {
            panic!("{i} went wrong")
        });
        let message = panicked.unwrap_err().to_string();
        assert!(message.contains("panicked: 3 went wrong"), "{message}");
    }

    #[test]
    fn beside_works_through_every_item_in_order_and_reports_its_failure() {
        let mut gathering =
            Beside::start("gathering", 2, |items: std::sync::mpsc::Receiver<u64>| {
                Ok(items.iter().fold(Vec::new(), |mut seen, item| {
                    seen.push(item);
                    seen
                }))
            })
            .unwrap();
        for item in 0..100 {
            gathering.give(item).unwrap();
        }
        assert_eq!(gathering.finish().unwrap(), (0..100).collect::<Vec<_>>());

        let mut failing = Beside::start("failing", 1, |items: std::sync::mpsc::Receiver<u64>| {
            for item in items {
                if item == 3 {
                    return Err(Error::Internal("three is refused".into()));
                }
            }
            Ok(())
        })
        .unwrap();
        let refused = (0..100).find_map(|item| failing.give(item).err()).unwrap();
        assert!(
            refused.to_string().contains("three is refused"),
            "{refused}"
        );

        let mut panicking =
            Beside::start("panicking", 0, |items: std::sync::mpsc::Receiver<u64>| {
                if let Some(item) = items.iter().next() {
                    panic!("item {item} panicked");
                }
                Ok(())
            })
            .unwrap();
        let given = panicking.give(7);
        let reported = given.and_then(|()| panicking.finish()).unwrap_err();
        assert!(
            reported
                .to_string()
                .contains("panicking panicked: item 7 panicked"),
            "{reported}"
        );
    }

    #[test]
    fn one_ahead_hands_every_item_over_in_order() {
        let mut seen = Vec::new();
        let produce = |give: &mut dyn FnMut(u32) -> bool| {
            for item in 0..100 {
                assert!(give(item), "the caller never stops");
            }
            Ok(())
        };
        one_ahead("test: a producer", produce, |item| {
            seen.push(item);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn one_ahead_stops_the_producer_at_the_callers_error_and_reports_it() {
        let given = std::sync::atomic::AtomicU32::new(0);
        let produce = |give: &mut dyn FnMut(u32) -> bool| {
            for item in 0.. {
                if !give(item) {
                    return Ok(());
                }
                given.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        };
        let error = one_ahead("test: a producer", produce, |item| match item {
            3 => Err(Error::Internal("item 3 is bad".into())),
            _ => Ok(()),
        })
        .unwrap_err();
        assert!(error.to_string().contains("item 3 is bad"), "{error}");
        // Items 0 to 3 were taken; the fifth could not be handed over.
        assert_eq!(given.load(std::sync::atomic::Ordering::SeqCst), 4);
    }

    #[test]
    fn one_ahead_reports_the_producers_error_and_panic() {
        let failing = |give: &mut dyn FnMut(u32) -> bool| {
            give(1);
            Err(Error::Internal("the file ended early".into()))
        };
        let error = one_ahead("test: a producer", failing, |_| Ok(())).unwrap_err();
        assert!(
            error.to_string().contains("the file ended early"),
            "{error}"
        );
        let panicking = |_: &mut dyn FnMut(u32) -> bool| -> Result<()> { panic!("no more") };
        let error = one_ahead("test: a producer", panicking, |_| Ok(())).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("test: a producer panicked: no more"),
            "{error}"
        );
    }
}
