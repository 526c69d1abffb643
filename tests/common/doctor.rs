//! `silverline doctor` through the binary on a stack workspace (S3 + REST on
//! SeaweedFS, S3 + SQL catalog on LocalStack): the checks both lanes share,
//! and the reader of doctor's lines that the embedded tests use too.

use silverline::demo::Workspace;

use super::{finish, stack_command};

/// The line of `check` (its second word) in doctor's output.
pub fn line<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no line for {check}: {text}"))
}

/// Doctor on `ws` with more environment: its exit code and output.
pub fn doctor(ws: &Workspace, env: &[(&str, &str)]) -> (i32, String) {
    let mut command = stack_command(ws, "doctor", &[]);
    command.envs(env.iter().copied());
    finish(command)
}

/// A sound stack workspace passes: credentials from the environment (the
/// secret never shown), bronze listed, dq_error written, the catalog and
/// the table checked, and a versioning and an encryption line for each of
/// the dq_error and warehouse buckets. Returns the output.
pub fn passes(ws: &Workspace) -> String {
    let (code, text) = doctor(ws, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        line(&text, "credentials").starts_with("ok") && text.contains("the environment"),
        "{text}"
    );
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap();
    assert!(!text.contains(&secret), "the secret leaked: {text}");
    for check in ["bronze", "dq_error", "catalog"] {
        assert!(line(&text, check).starts_with("ok"), "{check}: {text}");
    }
    for bucket in ["s3://lake", "s3://warehouse"] {
        for setting in ["versioning", "encryption"] {
            let found = text
                .lines()
                .find(|l| l.contains(&format!("{setting} {bucket}")))
                .unwrap_or_else(|| panic!("no {setting} line for {bucket}: {text}"));
            assert!(
                found.starts_with("ok") || found.starts_with("warn"),
                "{found}"
            );
        }
    }
    assert!(text.contains("0 failed"), "{text}");
    text
}

/// A bucket that does not exist (a fresh name) as the root `variable` sets
/// (`SILVERLINE__STORAGE__BRONZE`, `..._DQ_ERROR`) fails the `check` of that
/// root, naming the bucket, and the exit code. Returns the output and the bucket.
pub fn fails_a_missing_bucket(ws: &Workspace, variable: &str, check: &str) -> (String, String) {
    let bucket = format!(
        "missing-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let (code, text) = doctor(ws, &[(variable, &format!("s3://{bucket}/root"))]);
    assert_eq!(code, 1, "{text}");
    let failed = line(&text, check);
    assert!(
        failed.starts_with("FAIL") && failed.contains(&bucket),
        "{text}"
    );
    (text, bucket)
}

/// A wrong secret fails bronze and dq_error, and is never printed.
pub fn fails_wrong_credentials(ws: &Workspace) {
    let (code, text) = doctor(ws, &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")]);
    assert_eq!(code, 1, "{text}");
    for check in ["bronze", "dq_error"] {
        assert!(line(&text, check).starts_with("FAIL"), "{check}: {text}");
    }
    assert!(
        !text.contains("not-the-secret"),
        "the secret leaked: {text}"
    );
}
