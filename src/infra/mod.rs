//! Infrastructure: object storage ([`storage`]), AWS credentials ([`aws`]), S3 bucket
//! settings ([`buckets`]), the Iceberg
//! catalog ([`catalog`], with commits pinned to a checked state: [`pinned`]), Silver's
//! schema evolution ([`evolve`]) and the DataFusion session ([`query`]).

pub mod append;
pub mod aws;
pub mod buckets;
pub mod catalog;
pub mod datafile;
pub mod evolve;
pub mod http;
pub mod ledger;
pub mod pinned;
pub mod storage;
