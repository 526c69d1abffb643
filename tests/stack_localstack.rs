//! The LocalStack lane: the storage suite (bronze reads, dq_error writes,
//! Iceberg data files through the SQL catalog on an S3 warehouse) against
//! LocalStack's S3, started on the host by `localstack/localstack-up.sh`.
//! `#[ignore]`d like every stack test; `bash localstack/test.sh` runs them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{localstack_workspace, suite};

#[tokio::test]
#[ignore = "needs LocalStack: bash localstack/test.sh"]
async fn localstack_malformed_records_are_quarantined() {
    suite::malformed_records_are_quarantined(&localstack_workspace().await.ws).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: bash localstack/test.sh"]
async fn localstack_a_backfill_baselines_each_month_on_the_one_before() {
    suite::backfill_baselines_each_month_on_the_previous(&localstack_workspace().await.ws).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: bash localstack/test.sh"]
async fn localstack_a_rerun_adds_no_row_and_no_snapshot() {
    suite::rerun_adds_nothing(&localstack_workspace().await.ws).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: bash localstack/test.sh"]
async fn localstack_silver_schema_is_exactly_the_contract() {
    suite::silver_schema_is_the_contract(&localstack_workspace().await.ws).await;
}
