//! pyiceberg, another engine, reading (or maintaining) our tables: on the
//! local stack through the REST catalog, or from a metadata file.

use silverline::demo::Workspace;

/// Runs `script` with the stack's pyiceberg: `catalog` is loaded and `table`
/// is Silver; `extra` arguments follow the namespace and table name in
/// `sys.argv`. Returns what the script printed, as JSON.
pub fn run(ws: &Workspace, script: &str, extra: &[&str]) -> serde_json::Value {
    let preamble = r#"
from pyiceberg.catalog import load_catalog
e = os.environ
catalog = load_catalog("t", type="rest", uri=e["SILVERLINE_REST_URI"], warehouse=e["SILVERLINE_WAREHOUSE"],
    credential=e["SILVERLINE_REST_CREDENTIAL"], **{"s3.endpoint": e["SILVERLINE_S3_ENDPOINT"],
    "s3.access-key-id": e["AWS_ACCESS_KEY_ID"], "s3.secret-access-key": e["AWS_SECRET_ACCESS_KEY"],
    "s3.region": "us-east-1", "s3.path-style-access": "true"})
table = catalog.load_table((sys.argv[1], sys.argv[2]))
"#;
    let mut args = vec![
        ws.plan.table.namespace.as_str(),
        ws.plan.table.name.as_str(),
    ];
    args.extend(extra);
    python(&format!("{preamble}{script}"), &args)
}

/// Runs `script` with pyiceberg's python (`SILVERLINE_PYTHON`), after
/// `import json, os, sys`, with `args` in `sys.argv`. Returns what the script
/// printed, as JSON.
pub fn python(script: &str, args: &[&str]) -> serde_json::Value {
    let python = std::env::var("SILVERLINE_PYTHON").expect(
        "SILVERLINE_PYTHON (a python with pyiceberg) is not set: run bash localstack/test.sh",
    );
    let output = std::process::Command::new(python)
        .args(["-c", &format!("import json, os, sys\n{script}")])
        .args(args)
        .output()
        .expect("pyiceberg's python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the script prints JSON")
}

/// Silver's rows and distinct record keys, as pyiceberg counts them.
pub fn rows_and_keys(ws: &Workspace) -> (u64, u64) {
    let seen = run(
        ws,
        r#"
keys = table.scan(selected_fields=("contributor_id", "account_id", "statement_date")).to_arrow()
distinct = keys.group_by(["contributor_id", "account_id", "statement_date"]).aggregate([]).num_rows
print(json.dumps([keys.num_rows, distinct]))
"#,
        &[],
    );
    (
        seen[0].as_u64().unwrap_or_default(),
        seen[1].as_u64().unwrap_or_default(),
    )
}
