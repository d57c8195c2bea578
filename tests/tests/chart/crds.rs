//! The chart ships the CRDs the code defines: its copies must be exactly what `sluice crds` prints.
//! After changing the API types, refresh them with
//! `cargo test -p sluice-tests --test chart crds -- --ignored` (writes both files).

use std::path::PathBuf;

fn chart_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/sluice/files/crds")
        .join(name)
}

/// Sluice's own CRDs (sluice.dev: PolicyModule, NodeGpuTopology) as `sluice crds` prints them after Kueue's;
/// the chart carries them in `sluice.dev.yaml`.
fn sluice_crds_yaml() -> Option<String> {
    Some(sluice_sdk::sluice::crds_yaml())
}

#[test]
fn chart_has_kueue_crds_from_sluice_crds() {
    let path = chart_file("kueue.x-k8s.io.yaml");
    let in_chart =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let generated = sluice_sdk::kueue::crds::crds_yaml();
    assert!(
        in_chart == generated,
        "{} differs from `sluice crds`; refresh it with \
         `cargo run --bin sluice -- crds > charts/sluice/files/crds/kueue.x-k8s.io.yaml`",
        path.display()
    );
}

#[test]
fn chart_has_sluice_crds_exactly_when_the_code_defines_them() {
    let path = chart_file("sluice.dev.yaml");
    match (sluice_crds_yaml(), std::fs::read_to_string(&path).ok()) {
        (Some(generated), Some(in_chart)) => assert!(
            in_chart == generated,
            "{} differs from the generated sluice.dev CRDs",
            path.display()
        ),
        (Some(_), None) => panic!("{} is missing", path.display()),
        (None, Some(_)) => panic!(
            "{} exists but no code generates it: CRDs in the chart must come from the API types",
            path.display()
        ),
        (None, None) => {}
    }
}

/// Rewrites the chart's CRD files from the code (run with `--ignored` after changing the API types).
#[test]
#[ignore]
fn refresh_chart_crds() {
    std::fs::write(
        chart_file("kueue.x-k8s.io.yaml"),
        sluice_sdk::kueue::crds::crds_yaml(),
    )
    .unwrap_or_else(|e| panic!("kueue.x-k8s.io.yaml: {e}"));
    std::fs::write(
        chart_file("sluice.dev.yaml"),
        sluice_sdk::sluice::crds_yaml(),
    )
    .unwrap_or_else(|e| panic!("sluice.dev.yaml: {e}"));
}
