//! The node agent with fake NVML data: islands, cliques, health, GFD labels, the printed object,
//! the requests it would publish, and the CLI's behaviour with and without NVML.

use std::process::Command;

use sluice_operator::agent::{self, FakeSource, GpuSource, RawNode};
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::topology::{NvlinkIsland, PcieLevel};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str) -> RawNode {
    FakeSource {
        path: fixture(name),
    }
    .read()
    .expect("fixture parses")
}

#[test]
fn hgx_switches_make_one_island_and_xid_79_marks_the_gpu_unhealthy() {
    let m = agent::derive(&read("agent-hgx.yaml"));
    assert_eq!(
        m.nvlink_islands,
        vec![NvlinkIsland {
            gpus: (0..8).collect(),
            nvswitch: true
        }]
    );
    assert_eq!(
        m.fabric_clique.as_deref(),
        Some("7b968a6d-c8aa-45e1-9e07-e1e51be99c31.3")
    );
    let unhealthy: Vec<u32> = m
        .gpus
        .iter()
        .filter(|g| !g.health.healthy)
        .map(|g| g.index)
        .collect();
    assert_eq!(unhealthy, vec![3], "XID 13 alone is not fatal, 79 is");
    assert!(m.gpus[5].health.in_use);
    assert_eq!(m.gpus[0].memory_mib, 81_559);
    assert_eq!(m.gpus[4].numa_node, Some(1));
    assert_eq!(m.pcie_pairs[1].common_ancestor, PcieLevel::System);
    let labels = agent::gfd_labels(&m);
    assert_eq!(labels["nvidia.com/gpu.count"], "8");
    assert_eq!(labels["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
    assert_eq!(labels["nvidia.com/gpu.memory"], "81559");
    assert_eq!(
        labels["nvidia.com/gpu.clique"],
        "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.3"
    );
}

#[test]
fn pcie_bridges_make_pairs_ecc_marks_unhealthy_and_mig_is_reported() {
    let m = agent::derive(&read("agent-pcie.yaml"));
    let islands: Vec<Vec<u32>> = m.nvlink_islands.iter().map(|i| i.gpus.clone()).collect();
    assert_eq!(islands, vec![vec![0, 1], vec![2, 3]]);
    assert!(m.nvlink_islands.iter().all(|i| !i.nvswitch));
    assert!(!m.gpus[2].health.healthy && m.gpus[2].health.ecc_uncorrected == 1);
    assert!(m.gpus[0].mig_enabled);
    assert_eq!(m.gpus[0].mig_instances.len(), 2);
    assert_eq!(m.gpus[0].mig_instances[0].profile, "3g.40gb");
    assert_eq!(m.fabric_clique, None);
    assert!(!agent::gfd_labels(&m).contains_key("nvidia.com/gpu.clique"));
}

#[test]
fn disagreeing_cliques_publish_none() {
    let mut raw = read("agent-hgx.yaml");
    raw.gpus[7].fabric = Some(("other".into(), 1));
    assert_eq!(agent::derive(&raw).fabric_clique, None);
}

#[test]
fn printed_output_is_the_object_it_would_publish() {
    let m = agent::discover(
        "node-a",
        &mut FakeSource {
            path: fixture("agent-hgx.yaml"),
        },
    )
    .unwrap();
    let text = agent::render("node-a", &m).unwrap();
    let obj: NodeGpuTopology = serde_yaml::from_str(&text).unwrap();
    assert_eq!(obj.metadata.name.as_deref(), Some("node-a"));
    assert_eq!(obj.spec.node_name, "node-a");
    assert_eq!(obj.spec.gpus, m);
    assert!(text.contains("#   nvidia.com/gpu.count: 8"), "{text}");
}

#[test]
fn publish_builds_server_side_apply_and_label_patch() {
    let m = agent::derive(&read("agent-pcie.yaml"));
    let apply = agent::publish::apply_topology("node-a", &m).unwrap();
    assert_eq!(apply.method(), "PATCH");
    assert_eq!(
        apply.uri(),
        "/apis/sluice.dev/v1alpha1/nodegputopologies/node-a?fieldManager=sluice-node-agent&force=true"
    );
    assert_eq!(
        apply.headers()["content-type"],
        "application/apply-patch+yaml"
    );
    let body: serde_json::Value = serde_json::from_slice(apply.body()).unwrap();
    assert_eq!(body["apiVersion"], "sluice.dev/v1alpha1");
    assert_eq!(body["kind"], "NodeGpuTopology");
    assert_eq!(
        body["spec"]["nvlinkIslands"][1]["gpus"],
        serde_json::json!([2, 3])
    );
    let patch = agent::publish::patch_node_labels("node-a", &m).unwrap();
    assert_eq!(patch.uri(), "/api/v1/nodes/node-a");
    assert_eq!(
        patch.headers()["content-type"],
        "application/merge-patch+json"
    );
    let body: serde_json::Value = serde_json::from_slice(patch.body()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"metadata": {"labels": {
            "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB",
            "nvidia.com/gpu.memory": "40960",
            "nvidia.com/gpu.clique": null
        }}})
    );
}

#[test]
fn bad_fake_file_names_the_field() {
    let dir = std::env::temp_dir().join(format!("sluice-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.yaml");
    std::fs::write(&f, "gpus:\n- index: zero\n").unwrap();
    let err = FakeSource { path: f }.read().unwrap_err().to_string();
    assert!(err.contains("gpus[0].index"), "{err}");
}

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("NODE_NAME")
        .output()
        .expect("runs")
}

#[test]
fn cli_prints_with_fake_data_and_refuses_without_nvml() {
    let f = fixture("agent-hgx.yaml");
    let o = sluice(&[
        "node-agent",
        "--node-name",
        "n1",
        "--fake",
        f.to_str().unwrap(),
        "--print",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("kind: NodeGpuTopology") && out.contains("nvidia.com/gpu.clique"),
        "{out}"
    );
    // This machine has no NVIDIA driver: a clear message and a failure exit code.
    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    let o = sluice(&["node-agent", "--node-name", "n1", "--print"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NVML is not available"), "{err}");
}
