//! Printing a simulation: a readable table, or the final objects as a Kubernetes List (JSON/YAML).

use std::fmt::Write as _;

use serde_json::{Value, json};
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;

use super::{SIM_EPOCH, Simulation, SimulationReport};
use crate::duration::format_duration;
use crate::engine::WorkloadState;
use crate::output::{OutputError, OutputFormat, columns, encode};
use crate::status;

/// The final ClusterQueues and LocalQueues (with status), Workloads and Jobs.
fn final_objects(sim: &Simulation, now: i64) -> Vec<Value> {
    let mut items = Vec::new();
    for (name, cq) in &sim.objects.cluster_queues {
        let mut obj = cq.object.clone();
        if let Some(u) = sim.engine.cluster_queue_usage(name) {
            let stopped = obj.spec.stop_policy() != api::StopPolicy::None;
            obj.status = Some(status::cluster_queue_status(
                &u,
                stopped,
                sim.fair_sharing(),
                now,
            ));
        }
        items.push(with_type_meta(
            serde_json::to_value(&obj).unwrap_or(Value::Null),
            api::API_VERSION,
            "ClusterQueue",
        ));
    }
    for ((ns, name), lq) in &sim.objects.local_queues {
        let mut obj = lq.object.clone();
        if let Some(u) = sim.engine.local_queue_usage(ns, name) {
            let cq_name = &obj.spec.cluster_queue;
            let cq_active = match (
                sim.engine.cluster_queue_usage(cq_name),
                sim.objects.cluster_queues.get(cq_name),
            ) {
                (Some(cu), Some(cq)) => Some(status::cluster_queue_is_active(
                    &cu,
                    cq.object.spec.stop_policy() != api::StopPolicy::None,
                )),
                (_, None) => None,
                (None, Some(_)) => Some(false),
            };
            let stopped = obj.spec.stop_policy() != api::StopPolicy::None;
            let consumed = sim.engine.local_queue_consumed_usage(ns, name);
            obj.status = Some(status::local_queue_status(
                &u,
                stopped,
                cq_active,
                consumed.as_ref(),
                now,
            ));
        }
        items.push(with_type_meta(
            serde_json::to_value(&obj).unwrap_or(Value::Null),
            api::API_VERSION,
            "LocalQueue",
        ));
    }
    for sw in sim.workloads.values() {
        items.push(with_type_meta(
            serde_json::to_value(&sw.workload).unwrap_or(Value::Null),
            api::API_VERSION,
            "Workload",
        ));
    }
    for job in sim.jobs.values() {
        let v = job.to_value();
        if !v.is_null() {
            items.push(v);
        }
    }
    items
}

fn with_type_meta(mut v: Value, api_version: &str, kind: &str) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    v
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> &str {
    &q.0
}

/// Prints the state a fixed-point simulation reached.
pub fn render_final_state(sim: &Simulation, format: OutputFormat) -> String {
    let now = SIM_EPOCH;
    if format != OutputFormat::Table {
        // A JSON value always encodes.
        return encode::<OutputError>(
            &json!({"apiVersion": "v1", "kind": "List", "items": final_objects(sim, now)}),
            format,
        )
        .unwrap_or_default();
    }
    let mut out = String::new();
    let mut rows = vec![vec![
        "CLUSTERQUEUE".to_string(),
        "COHORT".into(),
        "PENDING".into(),
        "ADMITTED".into(),
        "USAGE (flavor resource: used/nominal, borrowed)".into(),
    ]];
    for (name, cq) in &sim.objects.cluster_queues {
        let usage = sim.engine.cluster_queue_usage(name);
        let mut parts = Vec::new();
        for rg in &cq.object.spec.resource_groups {
            for fq in &rg.flavors {
                for rq in &fq.resources {
                    let (used, borrowed) = usage
                        .as_ref()
                        .and_then(|u| u.flavors_reservation.iter().find(|f| f.name == fq.name))
                        .and_then(|f| f.resources.iter().find(|r| r.name == rq.name))
                        .map(|r| (r.total, r.borrowed))
                        .unwrap_or((0, 0));
                    if used == 0 && rq.name != sluice_sdk::topology::GPU_RESOURCE {
                        continue;
                    }
                    let used = sluice_sdk::quantity::format_resource_value(&rq.name, used);
                    let mut s = format!(
                        "{} {}: {}/{}",
                        fq.name,
                        rq.name,
                        quantity(&used),
                        quantity(&rq.nominal_quota)
                    );
                    if borrowed > 0 {
                        let b = sluice_sdk::quantity::format_resource_value(&rq.name, borrowed);
                        let _ = write!(s, " (+{} borrowed)", quantity(&b));
                    }
                    parts.push(s);
                }
            }
        }
        rows.push(vec![
            name.clone(),
            cq.object.spec.cohort().unwrap_or("-").to_string(),
            usage
                .as_ref()
                .map_or(0, |u| u.pending_workloads)
                .to_string(),
            usage
                .as_ref()
                .map_or(0, |u| u.admitted_workloads)
                .to_string(),
            if parts.is_empty() {
                "-".into()
            } else {
                parts.join(", ")
            },
        ]);
    }
    out.push_str(&columns(&rows, 2));
    out.push('\n');

    let mut rows = vec![vec![
        "WORKLOAD".to_string(),
        "QUEUE".into(),
        "PRIORITY".into(),
        "STATUS".into(),
        "ASSIGNMENT / WHY IT WAITS".into(),
    ]];
    for (key, sw) in &sim.workloads {
        let state = sim.engine.workload_state(key);
        let (st, detail) = match &state {
            Some(WorkloadState::Admitted(a)) => {
                let flavors: Vec<String> = a
                    .pod_set_assignments
                    .iter()
                    .map(|p| {
                        let fl: Vec<String> =
                            p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                        format!("{}×{} [{}]", p.name, p.count, fl.join(" "))
                    })
                    .collect();
                (
                    format!("Admitted in {}", a.cluster_queue),
                    flavors.join("; "),
                )
            }
            Some(WorkloadState::Pending { reason, message }) => {
                (format!("Pending ({reason})"), message.clone())
            }
            Some(WorkloadState::Evicting) => ("Evicting".into(), String::new()),
            Some(WorkloadState::Finished) => ("Finished".into(), String::new()),
            None => {
                let finished = sw
                    .workload
                    .status
                    .as_ref()
                    .and_then(|s| status::condition(&s.conditions, labels::condition::FINISHED))
                    .is_some();
                (
                    if finished { "Finished" } else { "Unknown" }.into(),
                    String::new(),
                )
            }
        };
        rows.push(vec![
            key.to_string(),
            sw.workload.spec.queue_name.clone(),
            sw.workload.spec.priority().to_string(),
            st,
            detail,
        ]);
    }
    out.push_str(&columns(&rows, 2));
    let _ = writeln!(out, "\n{} scheduling cycles.", sim.cycles());
    out
}

const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn sparkline(values: &[i64], max: i64) -> String {
    values
        .iter()
        .map(|v| {
            if max <= 0 {
                SPARKS[0]
            } else {
                SPARKS[((*v as f64 / max as f64) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

/// Prints a discrete-event simulation's report.
pub fn render_report(sim: &Simulation, report: &SimulationReport, format: OutputFormat) -> String {
    if format != OutputFormat::Table {
        let mut v = serde_json::to_value(report).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("schedulingCycles".into(), json!(sim.cycles()));
        }
        return encode::<OutputError>(
            &json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "SimulationReport", "report": v}),
            format,
        )
        .unwrap_or_default();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Simulated {} of virtual time: {} workloads arrived, {} admitted, {} finished, {} evictions, {} scheduling cycles.\n",
        format_duration((report.duration_seconds * 1000.0) as i64),
        report.workloads,
        report.admitted,
        report.finished,
        report.evictions.len(),
        sim.cycles()
    );
    let mut rows = vec![
        [
            "CLUSTERQUEUE",
            "WORKLOADS",
            "ADMITTED",
            "NEVER",
            "EVICTED",
            "WAIT p50",
            "p90",
            "p99",
            "max",
            "GPU-HOURS",
            "SHARE",
            "ENTITLED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let d = |s: f64| format_duration((s * 1000.0) as i64);
    for q in &report.queues {
        rows.push(vec![
            q.cluster_queue.clone(),
            q.workloads.to_string(),
            q.admitted.to_string(),
            q.pending_at_end.to_string(),
            q.evictions.to_string(),
            d(q.wait_seconds.p50),
            d(q.wait_seconds.p90),
            d(q.wait_seconds.p99),
            d(q.wait_seconds.max),
            format!("{:.1}", q.gpu_hours),
            format!("{:.1}%", q.usage_share * 100.0),
            format!("{:.1}%", q.entitlement_share * 100.0),
        ]);
    }
    out.push_str(&columns(&rows, 2));
    out.push('\n');
    if !report.local_queues.is_empty() {
        // Admission fair sharing orders LocalQueues within a ClusterQueue: their figures side by side.
        let mut rows = vec![
            [
                "LOCALQUEUE",
                "CLUSTERQUEUE",
                "WORKLOADS",
                "ADMITTED",
                "WAIT p50",
                "p90",
                "max",
                "GPU-HOURS",
                "CONSUMED NOW",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for q in &report.local_queues {
            let (ns, name) = q
                .local_queue
                .split_once('/')
                .unwrap_or(("", &q.local_queue));
            let consumed = sim
                .engine
                .local_queue_consumed_usage(ns, name)
                .map(|u| {
                    u.resources
                        .iter()
                        .filter(|(_, v)| **v > 0.0)
                        .map(|(r, v)| format!("{r}={v:.2}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".into());
            rows.push(vec![
                q.local_queue.clone(),
                q.cluster_queue.clone(),
                q.workloads.to_string(),
                q.admitted.to_string(),
                d(q.wait_seconds.p50),
                d(q.wait_seconds.p90),
                d(q.wait_seconds.max),
                format!("{:.1}", q.gpu_hours),
                consumed,
            ]);
        }
        out.push_str(&columns(&rows, 2));
        out.push('\n');
    }
    let mut rows = vec![
        [
            "FLAVOR",
            "GPUS",
            "MEAN UTILISATION",
            "GPUS IN USE OVER TIME",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for f in &report.flavors {
        let series: Vec<i64> = f.series.iter().map(|s| s.gpus_in_use).collect();
        rows.push(vec![
            f.flavor.clone(),
            f.gpus.to_string(),
            format!("{:.1}%", f.mean_utilisation * 100.0),
            sparkline(&series, f.gpus),
        ]);
    }
    out.push_str(&columns(&rows, 2));
    let _ = writeln!(
        out,
        "\nFairness: Jain's index of GPU-hours per ClusterQueue {:.3}; of GPU-hours relative to nominal quota {:.3} (1 = perfectly fair).",
        report.fairness.jain_index_gpu_hours, report.fairness.jain_index_vs_entitlement
    );
    if let Some(t) = &report.topology {
        let _ = writeln!(
            out,
            "\nTopology ({}, {}): {} of {} gang admissions inside one rack ({:.1}%); {} of {} multi-GPU pods inside one NVLink island ({:.1}%); {} failures injected, {} NodeFailures evictions.",
            t.placement,
            t.policy,
            t.gangs_in_one_rack,
            t.gangs,
            t.one_rack_share * 100.0,
            t.pods_in_one_island,
            t.multi_gpu_pods,
            t.one_island_share * 100.0,
            t.failures_injected,
            t.node_failure_evictions
        );
        if t.gpus_degraded > 0 {
            let _ = writeln!(
                out,
                "Degrading GPUs: {} degraded before failing; {} workloads moved off them, {} of which would still have been running when the GPU failed: {:.1} GPU-hours of work saved.",
                t.gpus_degraded, t.moved_ahead, t.moved_ahead_of_failure, t.gpu_hours_saved
            );
        }
    }
    if !report.unsettled_at_seconds.is_empty() {
        let at: Vec<String> = report
            .unsettled_at_seconds
            .iter()
            .map(|s| format_duration((s * 1000.0) as i64))
            .collect();
        let _ = writeln!(
            out,
            "\nWARNING: scheduling did not settle (admissions and preemptions kept alternating) at {}.",
            at.join(", ")
        );
    }
    if !report.unfinished.is_empty() {
        let _ = writeln!(
            out,
            "\nUnfinished at the end ({}):",
            report.unfinished.len()
        );
        for u in &report.unfinished {
            let _ = writeln!(out, "  {}  {}  {}", u.workload, u.state, u.message);
        }
    }
    if !report.evictions.is_empty() {
        let lost: f64 = report.evictions.iter().map(|e| e.lost_gpu_hours).sum();
        let _ = writeln!(out, "Evictions cost {lost:.1} GPU-hours of lost work.");
    }
    let vw = &report.victim_wait;
    if vw.preemptors > 0 {
        let d = |s: f64| format_duration((s * 1000.0) as i64);
        let _ = writeln!(
            out,
            "Preemptors waited for their victims to leave: {} admissions after preempting, mean {}, max {}, {} in all.",
            vw.preemptors,
            d(vw.seconds.mean),
            d(vw.seconds.max),
            d(vw.total_seconds)
        );
    }
    out
}
