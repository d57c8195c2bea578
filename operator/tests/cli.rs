//! The `sluice` binary end to end: simulate fixtures, print CRDs, and fail with exit code 2 and a message that
//! names the file, object and field on bad input.

use std::process::{Command, Output};

use serde_json::Value;

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the sluice binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sluice simulate -o json` on a timed fixture: its SimulationReport document.
fn timed_report(fixture: &str) -> Value {
    let o = sluice(&["simulate", "-f", fixture, "--no-progress", "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn items_of_kind<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list["items"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["kind"] == kind).collect())
        .unwrap_or_default()
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[test]
fn two_teams_admits_the_non_borrowing_workload_first_as_kueue_does() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_json::from_str(&stdout(&o)).expect("JSON List");
    assert_eq!(list["kind"], "List");
    let wls = items_of_kind(&list, "Workload");
    assert_eq!(wls.len(), 2);
    let big = wls.iter().find(|w| w["metadata"]["name"] == "big").unwrap();
    assert_eq!(condition(big, "QuotaReserved").unwrap()["status"], "True");
    assert_eq!(
        condition(big, "Admitted").unwrap()["message"],
        "The workload is admitted"
    );
    assert_eq!(big["status"]["admission"]["clusterQueue"], "team-b");
    assert_eq!(
        big["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"],
        "4"
    );

    // The Job's workload needed to borrow 2 GPUs from team-b, which team-b's own workload now uses.
    let train = wls
        .iter()
        .find(|w| {
            w["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("job-train-")
        })
        .unwrap();
    let qr = condition(train, "QuotaReserved").unwrap();
    assert_eq!(qr["status"], "False");
    assert_eq!(
        qr["reason"], "Pending",
        "Kueue's default without UnadmittedWorkloadsObservability"
    );
    assert!(
        qr["message"].as_str().unwrap().contains("nvidia.com/gpu"),
        "the message says which resource is short: {qr}"
    );
    assert_eq!(
        train["status"]["resourceRequests"][0]["resources"]["nvidia.com/gpu"],
        "6"
    );
    assert!(train["status"]["admission"].is_null());
    let owner = &train["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("Job"), Some("train"))
    );

    let jobs = items_of_kind(&list, "Job");
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        jobs[0]["spec"]["suspend"], true,
        "a Job waiting for quota stays suspended"
    );

    let cqs = items_of_kind(&list, "ClusterQueue");
    let b = cqs
        .iter()
        .find(|c| c["metadata"]["name"] == "team-b")
        .unwrap();
    assert_eq!(b["status"]["admittedWorkloads"], 1);
    let a = cqs
        .iter()
        .find(|c| c["metadata"]["name"] == "team-a")
        .unwrap();
    assert_eq!(a["status"]["pendingWorkloads"], 1);
}

#[test]
fn table_output_names_queues_and_reasons() {
    let o = sluice(&["simulate", "-f", "tests/fixtures/two-teams.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("CLUSTERQUEUE"), "{out}");
    assert!(out.contains("Admitted in team-b"), "{out}");
    assert!(out.contains("Pending"), "{out}");
}

#[test]
fn yaml_output_parses_as_a_list() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "yaml",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_yaml::from_str(&stdout(&o)).expect("YAML List");
    assert_eq!(items_of_kind(&list, "Workload").len(), 2);
}

#[test]
fn jobsets_are_planned_as_gangs_inside_one_rack() {
    let o = sluice(&[
        "simulate",
        "-f",
        "examples/jobset/cluster.yaml",
        "-f",
        "examples/jobset/nodes.yaml",
        "-f",
        "tests/fixtures/jobset-gangs.yaml",
        "-o",
        "yaml",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_yaml::from_str(&stdout(&o)).expect("YAML List");
    let wls = items_of_kind(&list, "Workload");
    assert_eq!(wls.len(), 2);
    for w in &wls {
        let name = w["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("jobset-"), "{name}");
        assert_eq!(w["metadata"]["ownerReferences"][0]["kind"], "JobSet");
        let workers = w["status"]["admission"]["podSetAssignments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "workers")
            .expect("workers admitted");
        // Hostnames of one rack: gpu-r0-* or gpu-r1-*.
        let roots = workers["topologyAssignment"]["slices"][0]["valuesPerLevel"].to_string();
        let racks: Vec<&str> = ["gpu-r0-", "gpu-r1-"]
            .into_iter()
            .filter(|r| roots.contains(r))
            .collect();
        assert_eq!(racks.len(), 1, "{name} spread over racks: {roots}");
    }
    let a = wls
        .iter()
        .find(|w| w["metadata"]["ownerReferences"][0]["name"] == "a")
        .unwrap();
    let sets: Vec<(&str, i64)> = a["spec"]["podSets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["count"].as_i64().unwrap()))
        .collect();
    assert_eq!(sets, [("driver", 1), ("workers", 4)]);
    let jobsets = items_of_kind(&list, "JobSet");
    assert_eq!(jobsets.len(), 2);
    for js in jobsets {
        assert_eq!(js["apiVersion"], "jobset.x-k8s.io/v1alpha2");
        assert_eq!(js["spec"]["suspend"], false, "{js}");
        for rj in js["spec"]["replicatedJobs"].as_array().unwrap() {
            let sel = &rj["template"]["spec"]["template"]["spec"]["nodeSelector"];
            assert_eq!(
                sel["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3",
                "{rj}"
            );
        }
    }
}

/// `sluice simulate -o json` of `examples` on the JobSet example's cluster (two racks of four 8-GPU nodes); the
/// command must succeed.
fn simulate_on_two_racks(examples: &[&str]) -> Value {
    let mut args = vec![
        "simulate",
        "-f",
        "examples/jobset/cluster.yaml",
        "-f",
        "examples/jobset/nodes.yaml",
    ];
    for e in examples {
        args.extend(["-f", e]);
    }
    args.extend(["--no-progress", "-o", "json"]);
    let o = sluice(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn pytorchjobs_are_simulated_with_their_workers_in_one_rack() {
    let report = simulate_on_two_racks(&["examples/pytorchjob"]);
    assert_eq!(report["report"]["admitted"], 2, "{report}");
    assert_eq!(
        report["report"]["topology"]["gangsInOneRack"], 2,
        "{report}"
    );
}

#[test]
fn a_rayjob_a_raycluster_and_a_rayservice_are_simulated_as_kueue_builds_them() {
    let report = simulate_on_two_racks(&[
        "examples/rayjob",
        "examples/raycluster",
        "examples/rayservice",
    ]);
    assert_eq!(report["report"]["admitted"], 3, "{report}");
    // The RayJob's GPU workers are a required-rack gang.
    assert!(
        report["report"]["topology"]["gangsInOneRack"].as_u64() >= Some(1),
        "{report}"
    );
    assert_eq!(report["report"]["topology"]["gangs"], 3, "{report}");
    // A cluster or a service serves until deleted: without a run time it is still admitted at the end.
    let mut unfinished: Vec<&str> = report["report"]["unfinished"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["workload"].as_str().unwrap())
        .collect();
    unfinished.sort();
    assert_eq!(unfinished.len(), 2, "{report}");
    assert!(
        unfinished[0].starts_with("llm/raycluster-llm-serve-")
            && unfinished[1].starts_with("llm/rayservice-chat-"),
        "{report}"
    );
}

#[test]
fn a_leaderworkerset_is_simulated_as_one_workload_per_group() {
    let report = simulate_on_two_racks(&["examples/leaderworkerset"]);
    // Three groups of 32 GPUs on 64: two serve, each with its workers in one rack; the third waits for quota.
    assert_eq!(report["report"]["admitted"], 2, "{report}");
    assert_eq!(report["report"]["topology"]["gangs"], 2, "{report}");
    assert_eq!(
        report["report"]["topology"]["gangsInOneRack"], 2,
        "{report}"
    );
    let unfinished = report["report"]["unfinished"].as_array().unwrap();
    assert_eq!(unfinished.len(), 3, "serving groups never finish: {report}");
    let mut names: Vec<&str> = unfinished
        .iter()
        .map(|u| u["workload"].as_str().unwrap())
        .collect();
    names.sort();
    for (i, n) in names.iter().enumerate() {
        assert!(
            n.starts_with(&format!("llm/leaderworkerset-vllm-405b-{i}-")),
            "{names:?}"
        );
    }
    let waiting: Vec<&Value> = unfinished
        .iter()
        .filter(|u| u["state"] == "Pending (WaitingForQuota)")
        .collect();
    assert_eq!(waiting.len(), 1, "{report}");
}

#[test]
fn trainjobs_are_simulated_on_their_runtime_and_a_missing_runtime_is_named() {
    let report = simulate_on_two_racks(&["examples/trainjob"]);
    assert_eq!(report["report"]["admitted"], 2, "{report}");
    // Each TrainJob's `node` pod set is a gang its runtime patch keeps in one rack.
    assert_eq!(report["report"]["topology"]["gangs"], 2, "{report}");
    assert_eq!(
        report["report"]["topology"]["gangsInOneRack"], 2,
        "{report}"
    );

    // Without its runtime, the TrainJob is refused with Kueue's message, naming it.
    let dir = std::env::temp_dir().join(format!("sluice-cli-trainjob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/trainjob/trainjobs.yaml"),
    )
    .unwrap();
    let lost = dir.join("lost.yaml");
    std::fs::write(
        &lost,
        example.replacen(
            "name: torch-distributed\n  labels",
            "name: other\n  labels",
            1,
        ),
    )
    .unwrap();
    let o = sluice(&[
        "simulate",
        "-f",
        "examples/jobset/cluster.yaml",
        "-f",
        "examples/jobset/nodes.yaml",
        "-f",
        lost.to_str().unwrap(),
        "--no-progress",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("TrainJob llm/finetune: runtime 'torch-distributed' not found"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_naming_a_prebuilt_workload_is_refused_by_the_simulator() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-prebuilt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let setup = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gpu-cluster/cluster.yaml"),
    )
    .unwrap();
    let file = dir.join("prebuilt.yaml");
    std::fs::write(
        &file,
        format!(
            "{setup}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: j, namespace: default, labels: \
             {{kueue.x-k8s.io/prebuilt-workload-name: wl}}}}\nspec: {{template: {{spec: {{restartPolicy: Never, \
             containers: [{{name: c, image: i}}]}}}}}}\n"
        ),
    )
    .unwrap();
    let o = sluice(&["simulate", "-f", file.to_str().unwrap(), "--no-progress"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Job default/j: kueue.x-k8s.io/prebuilt-workload-name: \"wl\": a prebuilt Workload is not simulated yet"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn objects_that_decide_nothing_are_skipped_and_other_unknown_kinds_named() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let with = dir.join("with-configmap.yaml");
    let setup = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gpu-cluster/cluster.yaml"),
    )
    .unwrap();
    std::fs::write(
        &with,
        format!("{setup}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: code}}\ndata: {{a: b}}\n"),
    )
    .unwrap();
    let o = sluice(&["simulate", "-f", with.to_str().unwrap(), "--no-progress"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let other = dir.join("with-deployment.yaml");
    std::fs::write(
        &other,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n",
    )
    .unwrap();
    let o = sluice(&["simulate", "-f", other.to_str().unwrap(), "--no-progress"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Deployment web: unsupported kind \"Deployment\""),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn v1beta1_input_is_converted() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/v1beta1.yaml",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cq = items_of_kind(&list, "ClusterQueue")[0];
    assert_eq!(cq["apiVersion"], "kueue.x-k8s.io/v1beta2");
    assert_eq!(cq["spec"]["cohortName"], "legacy");
    let wl = items_of_kind(&list, "Workload")[0];
    assert_eq!(wl["spec"]["priorityClassRef"]["name"], "high");
    assert_eq!(
        wl["spec"]["priorityClassRef"]["kind"],
        "WorkloadPriorityClass"
    );
    assert_eq!(condition(wl, "QuotaReserved").unwrap()["status"], "True");
}

fn assert_bad_input(file: &str, needles: &[&str]) {
    let o = sluice(&["simulate", "-f", file]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "exit code for {file}: {}",
        stderr(&o)
    );
    let err = stderr(&o);
    for n in needles {
        assert!(
            err.contains(n),
            "error for {file} should mention {n:?}: {err}"
        );
    }
}

#[test]
fn bad_quantity_names_object_and_field() {
    assert_bad_input(
        "tests/fixtures/bad-quantity.yaml",
        &[
            "bad-quantity.yaml (document 2)",
            "ClusterQueue \"cq\" is invalid",
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "\"lots\"",
        ],
    );
}

/// Kueue creates the Workload of a Job whose LocalQueue does not exist and keeps it pending; so does the
/// simulator, warning on stderr.
#[test]
fn unknown_queue_stays_pending_with_a_warning() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/unknown-queue.yaml",
        "-o",
        "yaml",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("Job default/lost") && err.contains("\"nowhere\""),
        "{err}"
    );
    assert!(
        err.contains("Workload default/stray") && err.contains("\"elsewhere\""),
        "{err}"
    );
    let out = stdout(&o);
    for (queue, name) in [("nowhere", "job-lost-"), ("elsewhere", "stray")] {
        assert!(out.contains(name), "{out}");
        assert!(
            out.contains(&format!("message: LocalQueue {queue} doesn't exist")),
            "{out}"
        );
    }
    assert!(out.contains("reason: Inadmissible"), "{out}");
    assert!(!out.contains("reason: QuotaReserved"), "{out}");
}

#[test]
fn unknown_kind_is_refused() {
    assert_bad_input(
        "tests/fixtures/unknown-kind.yaml",
        &["Deployment web", "unsupported kind"],
    );
}

#[test]
fn wrongly_typed_field_names_its_path() {
    assert_bad_input(
        "tests/fixtures/bad-field.yaml",
        &["LocalQueue", "spec.clusterQueue"],
    );
}

#[test]
fn unknown_fields_are_refused_as_kubectl_refuses_them() {
    assert_bad_input(
        "tests/fixtures/unknown-field.yaml",
        &[
            "unknown-field.yaml (document 2)",
            "ClusterQueue cluster-queue",
            r#"strict decoding error: unknown field "spec.resourceGroupz""#,
        ],
    );
    assert_bad_input(
        "tests/fixtures/unknown-field-job.yaml",
        &[
            "unknown-field-job.yaml (document 1)",
            "Job default/train",
            r#"strict decoding error: unknown field "spec.template.spec.containerz""#,
        ],
    );
}

#[test]
fn errors_are_printed_once() {
    let o = sluice(&["simulate", "-f", "tests/fixtures/bad-quantity.yaml"]);
    assert_eq!(
        stderr(&o).matches("is invalid").count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// How often `needle` occurs in `text`, for "each cause is printed once".
fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[test]
fn missing_file_cause_is_printed_once() {
    let o = sluice(&["simulate", "-f", "tests/fixtures/does-not-exist.yaml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert_eq!(count(&err, "does-not-exist.yaml"), 1, "{err}");

    let o = sluice(&["policy", "test", "missing.wasm", "missing-cases.yaml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert!(err.contains("missing.wasm"), "{err}");

    // A shipped module's name with a missing case file: the case file is what is missing.
    let o = sluice(&["policy", "test", "spread", "missing-cases.yaml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert!(err.contains("missing-cases.yaml"), "{err}");
}

#[test]
fn missing_kubeconfig_cause_is_printed_once() {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["list", "clusterqueues"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("the sluice binary runs");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(count(&err, "/nonexistent/kubeconfig"), 1, "{err}");
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert_eq!(count(&err.to_lowercase(), "infer"), 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn policy_test_runs_a_shipped_module_by_name() {
    // As the README says: `sluice policy test FILE.wasm|NAME CASES.yaml`.
    let o = sluice(&[
        "policy",
        "test",
        "spread",
        "../policies-wasm/spread/cases.yaml",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(" passed, 0 failed"), "{}", stdout(&o));
}

#[test]
fn missing_file_is_bad_input() {
    assert_bad_input(
        "tests/fixtures/does-not-exist.yaml",
        &["does-not-exist.yaml"],
    );
}

#[test]
fn bundled_example_runs_and_reports() {
    let o = sluice(&["simulate", "--no-progress", "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let r = &v["report"];
    assert_eq!(r["workloads"], 160);
    assert!(r["admitted"].as_u64().unwrap() >= 150, "{r}");
    assert_eq!(r["queues"].as_array().unwrap().len(), 4);
    for f in r["flavors"].as_array().unwrap() {
        let u = f["meanUtilisation"].as_f64().unwrap();
        assert!(u > 0.0 && u <= 1.0, "utilisation {u} of {}", f["flavor"]);
    }
    let jain = r["fairness"]["jainIndexGpuHours"].as_f64().unwrap();
    assert!(jain > 0.25 && jain <= 1.0, "{jain}");
}

#[test]
fn crds_print_every_kueue_kind() {
    let o = sluice(&["crds"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for kind in [
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Cohort",
        "Workload",
        "WorkloadPriorityClass",
        "Topology",
        "AdmissionCheck",
    ] {
        assert!(
            out.contains(&format!("kind: {kind}\n")),
            "missing CRD for {kind}"
        );
    }
}

#[test]
fn running_workload_is_preempted_by_higher_pod_priority_and_selector_is_enforced() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/running-and-priorities.yaml",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let wls = items_of_kind(&list, "Workload");
    let by_name = |prefix: &str| {
        *wls.iter()
            .find(|w| w["metadata"]["name"].as_str().unwrap().starts_with(prefix))
            .unwrap()
    };

    // The Job's priority comes from its pods' PriorityClass.
    let hotfix = by_name("job-hotfix-");
    assert_eq!(hotfix["spec"]["priority"], 1000);
    assert_eq!(hotfix["spec"]["priorityClassRef"]["kind"], "PriorityClass");
    assert_eq!(
        condition(hotfix, "QuotaReserved").unwrap()["status"],
        "True",
        "{hotfix}"
    );

    // The running workload held 6 of 8 GPUs; the 4-GPU job preempted it.
    let old = by_name("old-run");
    let preempted = condition(old, "Preempted").unwrap();
    assert_eq!(preempted["reason"], "InClusterQueue");
    let job_uid = items_of_kind(&list, "Job")[0]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let message = preempted["message"].as_str().unwrap();
    assert!(message.contains(&format!("JobUID: {job_uid}")), "{message}");
    assert_eq!(condition(old, "Evicted").unwrap()["reason"], "Preempted");
    assert_eq!(condition(old, "Requeued").unwrap()["status"], "True");
    assert!(old["status"]["admission"].is_null(), "{old}");

    // The namespace without the label is not admitted by the ClusterQueue's selector.
    let visitor = by_name("visitor");
    let qr = condition(visitor, "QuotaReserved").unwrap();
    assert_eq!(qr["status"], "False");
    assert!(
        qr["message"].as_str().unwrap().contains("namespace"),
        "{qr}"
    );

    let job = items_of_kind(&list, "Job")[0];
    assert_eq!(job["spec"]["suspend"], false);
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/podset"],
        "main"
    );
}

#[test]
fn timed_run_restores_running_workloads_and_keeps_one_clock() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/timed-small.yaml",
        "--no-progress",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let r = &v["report"];
    assert_eq!(r["workloads"], 2);
    assert_eq!(
        r["finished"], 2,
        "the running workload finishes after its run time: {r}"
    );
    assert!(r["unfinished"].as_array().unwrap().is_empty(), "{r}");
    // "next" (4 GPUs) arrives at 5m and waits for "running" to end at 30m, then runs an hour.
    assert_eq!(r["durationSeconds"], 5400.0, "{r}");
    let q = &r["queues"][0];
    assert_eq!(q["waitSeconds"]["max"], 1500.0, "{q}");
    assert!((q["gpuHours"].as_f64().unwrap() - 6.0).abs() < 1e-9, "{q}");
    let u = r["flavors"][0]["meanUtilisation"].as_f64().unwrap();
    assert!(u > 0.0 && u <= 1.0, "{u}");
}

#[test]
fn a_cluster_queue_naming_a_missing_flavor_stays_inactive_as_in_kueue() {
    let o = sluice(&["simulate", "-f", "tests/fixtures/flavor-missing.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ResourceFlavor \"spot\" is not defined"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("ClusterQueue cluster-queue is inactive"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_cluster_queue_naming_a_missing_admission_check_is_refused() {
    assert_bad_input(
        "tests/fixtures/admission-check-missing.yaml",
        &[
            "ClusterQueue cq",
            "spec.admissionChecksStrategy.admissionChecks[0].name",
            "AdmissionCheck \"prov\" is not defined",
        ],
    );
}

#[test]
fn an_admission_check_that_answers_retry_then_ready_evicts_backs_off_and_admits() {
    let v = timed_report("tests/fixtures/admission-check-retry.yaml");
    let r = &v["report"];
    assert_eq!(r["finished"], 1, "{r}");
    // Sent back at 1m, losing no work (its pods never started).
    let evictions = r["evictions"].as_array().unwrap();
    assert_eq!(evictions.len(), 1, "{r}");
    assert_eq!(evictions[0]["atSeconds"], 60.0, "{r}");
    assert_eq!(evictions[0]["reason"], "AdmissionCheck", "{r}");
    assert_eq!(evictions[0]["lostGpuHours"], 0.0, "{r}");
    // Requeued after the 60 s backoff (2m), admitted when the check said Ready two minutes later (4m).
    assert_eq!(r["queues"][0]["waitSeconds"]["max"], 240.0, "{r}");
}

/// waitForPodsReady with blockAdmission in virtual time (tests/fixtures/pods-ready.yaml): a workload whose pods
/// never start holds every other admission until its timeout, is requeued after the backoff, and is deactivated
/// past backoffLimitCount.
#[test]
fn pods_that_never_start_time_out_and_block_admission_meanwhile() {
    let v = timed_report("tests/fixtures/pods-ready.yaml");
    let r = &v["report"];
    let evictions: Vec<(f64, &str)> = r["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["atSeconds"].as_f64().unwrap(),
                e["reason"].as_str().unwrap(),
            )
        })
        .collect();
    // Admitted at 2m (train's pods ready then), timed out 5 minutes later; requeued after 60 s, readmitted at
    // 8m, timed out again at 13m and deactivated.
    assert_eq!(
        evictions,
        vec![(420.0, "PodsReadyTimeout"), (780.0, "Deactivated")],
        "{r}"
    );
    // eval (30 s) waited for broken's timeout and its pods' 30 s grace: 7 minutes, the longest wait.
    assert_eq!(r["queues"][0]["waitSeconds"]["max"], 420.0, "{r}");
    // broken waited ("Waiting") until train's pods were ready at 2m.
    assert_eq!(r["queues"][0]["waitSeconds"]["p50"], 119.0, "{r}");
    assert_eq!(r["finished"], 2, "{r}");
    assert_eq!(r["unfinished"][0]["state"], "Pending (Deactivated)", "{r}");
}

#[test]
fn admission_fair_sharing_lets_the_team_that_used_less_go_first() {
    let v = timed_report("tests/fixtures/admission-fair-sharing.yaml");
    let r = &v["report"];
    let lq = |name: &str| {
        r["localQueues"]
            .as_array()
            .and_then(|a| a.iter().find(|q| q["localQueue"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {r}"))
    };
    // vision (nothing used) takes the two slots that free up at 1h, 50 minutes after it arrived; its third job
    // waits for research's turn to pass.
    let vision = lq("vision/team");
    assert_eq!(vision["waitSeconds"]["p50"], 3000.0, "{vision}");
    assert_eq!(vision["admitted"], 3, "{vision}");
    assert_eq!(lq("research/team")["gpuHours"], 24.0);
    // The same file without the Configuration runs in creation order: research's six jobs first.
    let text = std::fs::read_to_string("tests/fixtures/admission-fair-sharing.yaml").unwrap();
    let start = text.find("apiVersion: config.kueue").unwrap();
    let end = start + text[start..].find("---").unwrap() + 4;
    let dir = std::env::temp_dir().join(format!("sluice-afs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.yaml");
    std::fs::write(&plain, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let o = sluice(&[
        "simulate",
        "-f",
        plain.to_str().unwrap(),
        "--no-progress",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["report"]["localQueues"].is_null(),
        "no per-LocalQueue table without it"
    );
    // vision's first jobs now wait for research's third pair (2h50m).
    // The last of vision's jobs now runs after all six of research's: admitted at 4h, nearly 3h50m after it came.
    let max = v["report"]["queues"][0]["waitSeconds"]["max"]
        .as_f64()
        .unwrap();
    assert!(max > 3.0 * 3600.0 + 45.0 * 60.0, "{}", v["report"]);
    assert!(
        vision["waitSeconds"]["max"].as_f64().unwrap() < 3.0 * 3600.0,
        "{vision}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn detailed_pending_reasons_follow_kueues_feature_gate() {
    let o = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "json",
        "--detailed-pending-reasons",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let wls = items_of_kind(&list, "Workload");
    let train = wls
        .iter()
        .find(|w| {
            w["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("job-train-")
        })
        .unwrap();
    assert_eq!(
        condition(train, "QuotaReserved").unwrap()["reason"],
        "WaitingForQuota"
    );
}

/// Kueue's sample Job has only `generateName` (it is made with `kubectl create -f`): the simulator names it as
/// the API server would (prefix plus five characters), the same way on every run, and twice the same document
/// makes two Jobs.
#[test]
fn generate_name_is_named_as_the_api_server_would() {
    let args = [
        "simulate",
        "-f",
        "tests/cluster/samples/cluster-queue.yaml",
        "-f",
        "tests/cluster/samples/job.yaml",
        "-f",
        "tests/cluster/samples/job.yaml",
        "-o",
        "json",
    ];
    let o = sluice(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON list");
    let jobs: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == "Job")
        .map(|i| i["metadata"]["name"].as_str().expect("named").to_string())
        .collect();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_ne!(jobs[0], jobs[1]);
    for name in &jobs {
        let suffix = name.strip_prefix("sample-job-").expect("the prefix");
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{name}"
        );
    }
    assert_eq!(sluice(&args).stdout, o.stdout, "deterministic");
}

/// `simulate --config` takes the operator's Kueue Configuration: fair sharing turns on, the gates apply (the
/// detailed pending reasons show), and the same file as a document among the manifests does the same.
#[test]
fn simulate_takes_kueues_configuration() {
    let with_flag = sluice(&[
        "simulate",
        "--config",
        "tests/fixtures/config/kueue-fair-sharing.yaml",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "yaml",
    ]);
    assert_eq!(with_flag.status.code(), Some(0), "{}", stderr(&with_flag));
    let out = stdout(&with_flag);
    assert!(
        out.contains("fairSharing:"),
        "fair sharing status written: {out}"
    );
    let as_document = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/config/kueue-fair-sharing.yaml",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "yaml",
    ]);
    assert_eq!(
        as_document.status.code(),
        Some(0),
        "{}",
        stderr(&as_document)
    );
    assert_eq!(stdout(&as_document), out);
    let plain = sluice(&[
        "simulate",
        "-f",
        "tests/fixtures/two-teams.yaml",
        "-o",
        "yaml",
    ]);
    assert!(!stdout(&plain).contains("fairSharing:"));
}

/// A typo, a feature not simulated and an unknown gate are each an error naming the field (exit 2).
#[test]
fn simulate_config_refuses_what_it_cannot_honour() {
    for (file, needles) in [
        (
            "typo.yaml",
            &["typo.yaml", "unknown field `fairSharingg`"][..],
        ),
        (
            "dra.yaml",
            &["dra.yaml", "resources.deviceClassMappings", "not supported"][..],
        ),
        (
            "gate.yaml",
            &[
                "featureGates.PrioritisePreemptorWorkloads",
                "unknown feature gate",
            ][..],
        ),
    ] {
        let path = format!("tests/fixtures/config/{file}");
        let o = sluice(&[
            "simulate",
            "--config",
            &path,
            "-f",
            "tests/fixtures/two-teams.yaml",
        ]);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", stderr(&o));
        let err = stderr(&o);
        for n in needles {
            assert!(err.contains(n), "{file}: {n:?} in {err}");
        }
    }
}

/// Kueue's resource transformations and a namespace's LimitRange decide what the simulator counts.
#[test]
fn simulate_counts_transformed_and_limit_range_defaulted_requests() {
    let dir = std::env::temp_dir().join(format!("sluice-transform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifests = dir.join("mig.yaml");
    std::fs::write(
        &manifests,
        r#"
apiVersion: v1
kind: LimitRange
metadata: {namespace: team, name: defaults}
spec:
  limits:
  - type: Container
    defaultRequest: {cpu: 250m}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100-mig}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: mig}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, example.com/accelerator-memory]
    flavors:
    - name: a100-mig
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: example.com/accelerator-memory, nominalQuota: 20Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team, name: q}
spec: {clusterQueue: mig}
---
apiVersion: batch/v1
kind: Job
metadata:
  namespace: team
  name: slices
  labels: {kueue.x-k8s.io/queue-name: q}
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources:
          requests: {ephemeral-storage: 1Gi}
          limits: {nvidia.com/mig-1g.5gb: 1}
"#,
    )
    .unwrap();
    let o = sluice(&[
        "simulate",
        "--config",
        "tests/fixtures/config/transformations.yaml",
        "-f",
        manifests.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let items = out["items"].as_array().expect("a List");
    let wl = items
        .iter()
        .find(|i| i["kind"] == "Workload")
        .expect("the Job's Workload");
    assert_eq!(
        wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"],
        // Kueue writes a resource it does not know as bytes in plain units.
        serde_json::json!({"cpu": "750m", "example.com/accelerator-memory": "16106127360"}),
        "{wl}"
    );
    // Without the Configuration the scratch space and MIG slices count as themselves, which the ClusterQueue lacks.
    let o = sluice(&["simulate", "-f", manifests.to_str().unwrap(), "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("resource ephemeral-storage unavailable in ClusterQueue"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulator_logs_instants_as_virtual_time_not_epoch_milliseconds() {
    // The bundled example injects node failures; each is logged with the instant it happens.
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["simulate", "--log-json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RUST_LOG", "sluice_operator=debug")
        .output()
        .expect("the sluice binary runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let injected: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("injecting failure"))
        .collect();
    assert!(!injected.is_empty(), "no failure was logged: {err}");
    for line in err.lines() {
        // Epoch milliseconds of the simulation's instants have 13 digits; virtual time reads like "2h05m".
        let longest = line
            .split(|c: char| !c.is_ascii_digit())
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(longest < 12, "a raw instant in: {line}");
    }
    for line in injected {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let at = v["fields"]["at"].as_str().unwrap_or_default();
        assert!(
            at.ends_with(['s', 'm']) && at.starts_with(|c: char| c.is_ascii_digit()),
            "{line}"
        );
    }
}

#[test]
fn a_job_past_its_maximum_execution_time_is_deactivated_in_virtual_time() {
    let v = timed_report("tests/fixtures/max-exec-time.yaml");
    let r = &v["report"];
    assert_eq!(r["finished"], 1, "{r}");
    // Deactivated after its hour; "waiting" (arrived at 10m) starts once its pods are gone 30 s later.
    assert_eq!(r["evictions"][0]["atSeconds"], 3600.0, "{r}");
    assert_eq!(r["evictions"][0]["reason"], "Deactivated", "{r}");
    assert_eq!(
        r["queues"][0]["waitSeconds"]["max"],
        3600.0 + 30.0 - 600.0,
        "{r}"
    );
    let unfinished = r["unfinished"].as_array().unwrap();
    assert_eq!(unfinished.len(), 1, "{r}");
    assert!(
        unfinished[0]["workload"]
            .as_str()
            .is_some_and(|w| w.starts_with("lab/job-capped-")),
        "{r}"
    );
    assert!(
        unfinished[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deactivated")),
        "{r}"
    );
}

/// The block of README.md after `marker` (a line), between its ```text fence and the closing fence.
fn readme_block(marker: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let after = readme
        .split_once(marker)
        .unwrap_or_else(|| panic!("README.md has no line {marker:?}"))
        .1;
    let body = after
        .split_once("```text\n")
        .expect("a ```text block after the marker")
        .1;
    body.split_once("```")
        .expect("the block's closing fence")
        .0
        .to_string()
}

#[test]
fn the_readme_shows_what_the_bundled_example_prints() {
    // As a newcomer runs it, from the repository root (README: the main job).
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["simulate", "--no-progress"])
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the sluice binary runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let readme = readme_block("What the bundled example prints");
    assert_eq!(
        stdout(&o),
        readme,
        "README.md's bundled-example output is stale: update it with `cargo run --release --bin sluice -- simulate --no-progress`"
    );
}

#[test]
fn operator_refuses_zero_writes_in_flight_before_reaching_a_cluster() {
    let o = sluice(&["operator", "--writes-in-flight", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--writes-in-flight"), "{}", stderr(&o));
}

#[test]
fn bench_topology_fills_a_small_cluster_and_prints_its_figures() {
    let o = sluice(&[
        "bench",
        "--topology",
        "--nodes",
        "64",
        "--gangs",
        "100",
        "--probes",
        "5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let fixed_point = out
        .lines()
        .find(|l| l.starts_with("time to fixed point:"))
        .unwrap_or_else(|| panic!("no fixed-point line in\n{out}"));
    assert!(fixed_point.ends_with(" cycles)"), "{out}");
    for needle in [
        "sluice bench --topology: 64 nodes x 8 GPUs",
        "GPUs allocated:",
        "of 5 probes placed)",
        "peak memory (VmHWM):",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from\n{out}");
    }
}

#[test]
fn bench_topology_refuses_bad_values_naming_the_flag() {
    for (args, flag) in [
        (&["bench", "--topology", "--nodes", "0"][..], "--nodes"),
        (&["bench", "--topology", "--gangs", "0"][..], "--gangs"),
        (&["bench", "--nodes", "64"][..], "--topology"),
        (
            &["bench", "--topology", "--fair-sharing"][..],
            "--fair-sharing",
        ),
    ] {
        let o = sluice(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn the_webhook_refuses_a_configuration_the_operator_would_refuse_naming_the_field() {
    let dir =
        std::env::temp_dir().join(format!("sluice-cli-webhook-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks: [batch/job, jobset]\n",
    )
    .unwrap();
    let missing = dir.join("absent.pem");
    let o = sluice(&[
        "webhook",
        "--tls-cert",
        missing.to_str().unwrap(),
        "--tls-key",
        missing.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("config.yaml")
            && err.contains("integrations.frameworks[1]")
            && err.contains("jobset"),
        "{err}"
    );
}

#[test]
fn jobs_of_a_framework_the_configuration_leaves_out_are_not_simulated() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-frameworks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    let plan = |frameworks: &str| {
        std::fs::write(
            &config,
            format!("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks: [{frameworks}]\n"),
        )
        .unwrap();
        let o = sluice(&[
            "simulate",
            "-f",
            "examples/jobset/cluster.yaml",
            "-f",
            "examples/jobset/nodes.yaml",
            "-f",
            "tests/fixtures/jobset-gangs.yaml",
            "--config",
            config.to_str().unwrap(),
            "-o",
            "json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let list: Value = serde_json::from_str(&stdout(&o)).expect("JSON List");
        items_of_kind(&list, "Workload").len()
    };
    let with = plan("batch/job, jobset.x-k8s.io/jobset");
    let without = plan("batch/job");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        with > 0,
        "the JobSets were not simulated with their integration on"
    );
    assert_eq!(without, 0, "JobSets simulated with their integration off");
}
