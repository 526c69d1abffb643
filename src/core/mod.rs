//! The ground floor: words every layer shares (a drop's identity, where rows
//! set aside go, where a run lives, record keys) and the SQL toolbox. It
//! imports nothing of silverline but [`crate::error`].

pub mod counts;
pub mod digest;
pub(crate) mod distinct;
pub mod drop;
pub mod keys;
pub(crate) mod merge;
pub(crate) mod parallel;
pub mod place;
pub(crate) mod pool;
pub mod set_aside;
pub(crate) mod spill;
pub mod sql;
