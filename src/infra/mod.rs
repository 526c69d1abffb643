//! Infrastructure: object storage ([`storage`]), AWS credentials ([`aws`]), the Iceberg
//! catalog ([`catalog`]) and the DataFusion session ([`query`]).

pub mod aws;
pub mod catalog;
pub mod query;
pub mod storage;
