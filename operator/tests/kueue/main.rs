//! The differential suite: every scenario runs under Kueue's own manager (built by tests/kueue/build) and under
//! Sluice (operator and webhook), each on a local control plane of its own with a fake kubelet (kept for later
//! scenarios and wiped back to its start, `pool`), and after each step, once both are quiet, the Workloads, Jobs and
//! queues of the two are compared field by field.
//!
//! `tests/kueue/differential [--seeds N]` runs it; in `cargo test` it runs the hand-written scenarios
//! (tests/kueue/scenarios, or SLUICE_DIFF_DIR) and SLUICE_DIFF_SEEDS generated ones (default 20) from seed
//! SLUICE_DIFF_FIRST_SEED (default 0); SLUICE_DIFF_ONLY=a,b runs only those. Without Kueue or the control plane
//! built the test says it is skipped, unless SLUICE_E2E=require.

// Shares the cluster suite's control plane, processes and fake kubelet; not every helper is used here.
#![allow(dead_code)]

#[path = "../cluster/kubelet.rs"]
mod kubelet;
#[path = "../cluster/lws.rs"]
mod lws;
#[path = "../cluster/plane.rs"]
mod plane;
#[path = "../cluster/sluice.rs"]
mod sluice;
#[path = "../cluster/support.rs"]
mod support;

mod bench;
mod compare;
mod generate;
mod kueue;
mod pool;
mod run;
mod scenario;
mod sim;
mod system;

use std::path::PathBuf;

use plane::repo_root;
use scenario::Scenario;

fn required() -> bool {
    std::env::var("SLUICE_E2E").is_ok_and(|v| v == "require")
}

/// The scenarios this run compares: hand-written ones, then seeds.
fn scenarios() -> Vec<Scenario> {
    let dir: PathBuf = std::env::var_os("SLUICE_DIFF_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/kueue/scenarios"));
    let mut all = Scenario::load_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let seeds: u64 = std::env::var("SLUICE_DIFF_SEEDS")
        .ok()
        .map(|s| s.parse().expect("SLUICE_DIFF_SEEDS is a number"))
        .unwrap_or(20);
    let first: u64 = std::env::var("SLUICE_DIFF_FIRST_SEED")
        .ok()
        .map(|s| s.parse().expect("SLUICE_DIFF_FIRST_SEED is a number"))
        .unwrap_or(0);
    all.extend((first..first + seeds).map(generate::generate));
    if let Ok(only) = std::env::var("SLUICE_DIFF_ONLY") {
        let only: Vec<&str> = only.split(',').map(str::trim).collect();
        all.retain(|s| only.contains(&s.name.as_str()));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kueue_and_sluice_agree() {
    let Some(version) = kueue::kueue_version() else {
        let msg = format!(
            "Kueue is not built in {}: run tests/kueue/build first",
            kueue::kueue_dir().display()
        );
        assert!(!required(), "{msg}");
        eprintln!("skipped: {msg}");
        return;
    };
    let scenarios = scenarios();
    let report = run::run_all(&version, &scenarios).await;
    eprintln!("{report}");
    let out = repo_root().join("target/kueue-differential");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("report.txt"), format!("{}\n", report.text()));
    assert_eq!(
        report.differing(),
        0,
        "Kueue and Sluice differ (report in target/kueue-differential/report.txt)"
    );
}
