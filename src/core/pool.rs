//! The run's memory pool: DataFusion's fair spilling pool, lending the
//! unclaimed half of each spilling operator's share to one that needs more.
//!
//! `FairSpillPool` caps every spilling operator at the pool divided by the
//! number registered, whether they hold anything or not. A query plans some
//! twenty of them (each aggregation twice per core, sorts, repartitions), so
//! the one grouping half a million keys per core spilled at a twentieth
//! of the pool while the pool stood nine-tenths empty, and sorting what it
//! spilled was a tenth of a backfill's CPU time. Here every spilling
//! operator is sure of half its fair share: it may always grow to that while
//! the pool has room. Past it, it borrows from what the pool has free beyond
//! the room every other spilling operator is still owed to reach half its
//! share. Nothing is granted past the pool's size.

use std::collections::HashMap;
use std::sync::Mutex;

use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// A fair spilling pool that lends unclaimed shares (see the module).
#[derive(Debug)]
pub(crate) struct LendingSpillPool {
    size: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// What the operators that cannot spill hold.
    unspillable: usize,
    /// What each registered spilling operator holds, by consumer id.
    spilling: HashMap<usize, usize>,
}

impl State {
    fn spillable(&self) -> usize {
        self.spilling.values().sum()
    }

    /// Each spilling operator's fair share of what the others leave.
    fn share(&self, size: usize) -> usize {
        let available = size.saturating_sub(self.unspillable);
        available
            .checked_div(self.spilling.len())
            .unwrap_or(available)
    }

    /// What the spilling operators other than `consumer` may still claim
    /// before they reach the part of their share they are sure of.
    fn owed_to_others(&self, consumer: usize, sure: usize) -> usize {
        self.spilling
            .iter()
            .filter(|(id, _)| **id != consumer)
            .map(|(_, held)| sure.saturating_sub(*held))
            .sum()
    }

    /// What the pool of `size` has free.
    fn free(&self, size: usize) -> usize {
        size.saturating_sub(self.unspillable + self.spillable())
    }
}

impl LendingSpillPool {
    /// A pool of `size` bytes.
    pub(crate) fn new(size: usize) -> LendingSpillPool {
        LendingSpillPool {
            size,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while the lock was held leaves plain counters.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MemoryPool for LendingSpillPool {
    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spilling.entry(consumer.id()).or_insert(0);
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spilling.remove(&consumer.id());
        }
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        let consumer = reservation.consumer();
        let mut state = self.state();
        match consumer.can_spill() {
            true => *state.spilling.entry(consumer.id()).or_insert(0) += additional,
            false => state.unspillable += additional,
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        let consumer = reservation.consumer();
        let mut state = self.state();
        match consumer.can_spill() {
            true => {
                if let Some(held) = state.spilling.get_mut(&consumer.id()) {
                    *held = held.saturating_sub(shrink);
                }
            }
            false => state.unspillable = state.unspillable.saturating_sub(shrink),
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> DfResult<()> {
        let consumer = reservation.consumer();
        let mut state = self.state();
        let free = state.free(self.size);
        if !consumer.can_spill() {
            if additional > free {
                return Err(refused(consumer, (additional, free), &state));
            }
            state.unspillable += additional;
            return Ok(());
        }
        let sure = state.share(self.size) / 2;
        let held = state.spilling.get(&consumer.id()).copied().unwrap_or(0);
        let wanted = held + additional;
        let available = match wanted <= sure {
            true => free,
            false => free.saturating_sub(state.owed_to_others(consumer.id(), sure)),
        };
        if additional > available {
            return Err(refused(consumer, (additional, available), &state));
        }
        state.spilling.insert(consumer.id(), wanted);
        Ok(())
    }

    fn reserved(&self) -> usize {
        let state = self.state();
        state.unspillable + state.spillable()
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.size)
    }
}

/// DataFusion's "resources exhausted", which a spilling operator answers by
/// spilling; logged (debug) with what the pool held then, which says whether
/// a larger `memory_limit` would have spared the spill.
fn refused(
    consumer: &MemoryConsumer,
    (additional, available): (usize, usize),
    state: &State,
) -> DataFusionError {
    tracing::debug!(
        operator = consumer.name(),
        wanted = additional,
        available,
        held = state.spilling.get(&consumer.id()).copied().unwrap_or(0),
        spilling_operators = state.spilling.len(),
        held_by_spilling = state.spillable(),
        held_by_others = state.unspillable,
        "the memory pool refused a reservation"
    );
    DataFusionError::ResourcesExhausted(format!(
        "failed to reserve {additional} more bytes for {}: {available} bytes available to it",
        consumer.name()
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const MIB: usize = 1024 * 1024;

    fn pool(size: usize) -> Arc<dyn MemoryPool> {
        Arc::new(LendingSpillPool::new(size))
    }

    fn spilling(pool: &Arc<dyn MemoryPool>, name: &str) -> MemoryReservation {
        MemoryConsumer::new(name)
            .with_can_spill(true)
            .register(pool)
    }

    #[test]
    fn a_spilling_operator_borrows_half_of_each_idle_share() {
        let pool = pool(100 * MIB);
        let busy = spilling(&pool, "grouping");
        let idle: Vec<_> = (0..9)
            .map(|i| spilling(&pool, &format!("idle {i}")))
            .collect();
        // Shares of 10 MiB: the nine idle operators are owed 5 MiB each, so
        // the busy one may hold 55 MiB, far past its share, and no more.
        busy.try_grow(55 * MIB).unwrap();
        assert!(busy.try_grow(1).is_err());
        // Each idle one still reaches the half of its share it is owed.
        for other in &idle {
            other.try_grow(5 * MIB).unwrap();
        }
        assert_eq!(pool.reserved(), 100 * MIB);
        assert!(idle[0].try_grow(1).is_err());
        drop(idle);
        // Alone, it may hold the whole pool.
        busy.try_grow(45 * MIB).unwrap();
        assert!(busy.try_grow(1).is_err());
    }

    #[test]
    fn nothing_is_granted_past_the_pool() {
        let pool = pool(100 * MIB);
        let borrower = spilling(&pool, "borrower");
        let other = spilling(&pool, "other");
        // Shares of 50 MiB, 25 sure: the borrower takes 75 MiB, and the
        // other, owed 25, may not go past them however far its share is.
        borrower.try_grow(75 * MIB).unwrap();
        assert!(borrower.try_grow(1).is_err());
        other.try_grow(25 * MIB).unwrap();
        assert!(other.try_grow(1).is_err());
        assert_eq!(pool.reserved(), 100 * MIB);
        // Once the borrower frees some, the other grows into it.
        borrower.shrink(30 * MIB);
        other.try_grow(30 * MIB).unwrap();
        assert_eq!(pool.reserved(), 100 * MIB);
    }

    #[test]
    fn operators_that_cannot_spill_take_only_what_is_free() {
        let pool = pool(100 * MIB);
        let join = MemoryConsumer::new("join").register(&pool);
        let grouping = spilling(&pool, "grouping");
        join.try_grow(30 * MIB).unwrap();
        // Alone, the spilling operator may hold what the join leaves.
        grouping.try_grow(70 * MIB).unwrap();
        assert!(grouping.try_grow(1).is_err());
        assert!(join.try_grow(1).is_err());
        grouping.shrink(20 * MIB);
        join.try_grow(20 * MIB).unwrap();
        assert_eq!(pool.reserved(), 100 * MIB);
        // Split reservations of one operator count as one: the part holds
        // its bytes against the same full pool, and frees them when dropped.
        let part = grouping.split(10 * MIB);
        assert_eq!(pool.reserved(), 100 * MIB);
        assert!(part.try_grow(1).is_err());
        drop(part);
        assert_eq!(pool.reserved(), 90 * MIB);
    }
}
