//! A drop not in bronze yet is its own outcome (exit 5, retried later by a
//! scheduler), apart from a drop that is there but empty (exit 1, a data
//! failure); `run --wait-for-drop` waits for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::time::{Duration, Instant};

use harness::{month, output, project, put_drop, run_args, silverline};
use silverline::demo::generate::Portfolio;

#[test]
fn an_empty_drop_folder_or_one_of_markers_only_has_arrived_and_exits_1() {
    let (tmp, config) = project(|t| t);
    let folder = tmp.path().join("data/bronze/BANK_C/2026-01");
    std::fs::create_dir_all(&folder).unwrap();
    let args = run_args(config.to_str().unwrap(), "BANK_C", "2026-01");
    let empty = output(&silverline(&args).code(1));
    assert!(
        empty.contains("BANK_C/2026-01") && empty.contains("folder is empty"),
        "{empty}"
    );
    // It has arrived: a run told to wait for it does not wait (an hour), it
    // is refused at once.
    let mut waiting = args.to_vec();
    waiting.extend(["--wait-for-drop".to_string(), "1h".to_string()]);
    let started = Instant::now();
    let refused = output(&silverline(&waiting).code(1));
    assert!(started.elapsed() < Duration::from_secs(60), "{refused}");
    assert!(refused.contains("folder is empty"), "{refused}");
    std::fs::write(folder.join("_SUCCESS"), b"").unwrap();
    let markers = output(&silverline(&args).code(1));
    assert!(markers.contains("only marker files"), "{markers}");
    assert!(!markers.contains("not arrived"), "{markers}");
}

#[test]
fn waiting_for_a_drop_that_never_comes_exits_5_once_the_wait_is_over() {
    let (_tmp, config) = project(|t| t);
    let mut args = run_args(config.to_str().unwrap(), "BANK_C", "2030-01").to_vec();
    args.extend(["--wait-for-drop".to_string(), "2s".to_string()]);
    let started = Instant::now();
    let text = output(&silverline(&args).code(5));
    assert!(started.elapsed() >= Duration::from_secs(2), "{text}");
    assert!(
        text.contains("waiting for the drop") && text.contains("drop not arrived yet"),
        "{text}"
    );
}

#[test]
fn a_drop_that_arrives_while_the_run_waits_is_committed() {
    let (tmp, config) = project(|t| t);
    let rows = Portfolio::new("BANK_C", 6, false, 3).statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_C", "2026-01", &rows);
    // Delivered whole, the way a contributor's upload should land: moved in.
    let folder = tmp.path().join("data/bronze/BANK_C/2026-01");
    let staged = tmp.path().join("staged-2026-01");
    std::fs::rename(&folder, &staged).unwrap();
    let mut args = run_args(config.to_str().unwrap(), "BANK_C", "2026-01").to_vec();
    args.extend(["--wait-for-drop".to_string(), "60s".to_string()]);
    let waiting = std::process::Command::new(env!("CARGO_BIN_EXE_silverline"))
        .args(["--log-format", "text"])
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::rename(&staged, &folder).unwrap();
    let done = waiting.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(done.status.code(), Some(0), "{text}");
    assert!(
        text.contains("waiting for the drop") && text.contains("committed 6 rows"),
        "{text}"
    );
}

#[test]
fn a_wait_that_is_not_a_duration_exits_2_naming_the_flag() {
    let (_tmp, config) = project(|t| t);
    let mut args = run_args(config.to_str().unwrap(), "BANK_C", "2026-01").to_vec();
    args.extend(["--wait-for-drop".to_string(), "soon".to_string()]);
    let text = output(&silverline(&args).code(2));
    assert!(text.contains("--wait-for-drop"), "{text}");
}
