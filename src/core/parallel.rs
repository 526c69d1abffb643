//! Work spread over threads of its own, joined as one result.

use crate::error::{Error, Result};

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
}
