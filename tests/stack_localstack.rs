//! The LocalStack lane: the whole shared suite of `common/suite.rs` (bronze
//! reads, dq_error writes, Iceberg data files through the SQL catalog on an S3
//! warehouse) against LocalStack's S3, started on the host by
//! `localstack/localstack-up.sh`.
//! `#[ignore]`d like every stack test; `bash localstack/test.sh` runs them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

// `localstack_` in every test's name: `bash localstack/test.sh` skips them
// with `--skip localstack_` when LocalStack is not started.
suite_tests!(
    localstack_s3,
    localstack_workspace,
    #[ignore = "needs LocalStack: bash localstack/test.sh"]
);

/// `silverline doctor` on LocalStack's S3 with the SQL catalog: every check
/// passes, then a dq_error bucket that does not exist fails its lines.
/// (LocalStack accepts any key pair: wrong credentials are the weed lane's.)
#[tokio::test]
#[ignore = "needs LocalStack: bash localstack/test.sh"]
async fn localstack_doctor_passes_then_names_a_missing_bucket() {
    let tw = common::localstack_workspace().await;
    let text = common::doctor::passes(&tw.ws);
    assert!(
        common::doctor::line(&text, "catalog").contains("sql catalog"),
        "{text}"
    );
    let (text, bucket) =
        common::doctor::fails_a_missing_bucket(&tw.ws, "SILVERLINE__STORAGE__DQ_ERROR", "dq_error");
    let versioning = text
        .lines()
        .find(|l| l.contains(&format!("versioning s3://{bucket}")))
        .unwrap_or_else(|| panic!("no versioning line for {bucket}: {text}"));
    assert!(
        versioning.starts_with("FAIL") && versioning.contains("does not exist"),
        "{text}"
    );
    assert!(
        common::doctor::line(&text, "bronze").starts_with("ok"),
        "{text}"
    );
}
