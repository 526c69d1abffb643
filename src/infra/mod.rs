//! Infrastructure: object storage ([`storage`]) and the Iceberg catalog ([`catalog`]).

pub mod catalog;
pub mod query;
pub mod storage;
