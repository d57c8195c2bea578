//! Assembles the charts and tables into one HTML page.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::charts::{self, is_preemption};
use super::heatmap::{self, NodeUse};
use super::{ReportError, escape};
use crate::duration::format_duration;
use crate::sim::SimulationReport;

/// Evictions listed in the page's table; the chart shows all of them.
const EVICTIONS_LISTED: usize = 500;

const STYLE: &str = "
body{font-family:sans-serif;margin:0 auto;max-width:1000px;padding:16px;color:#222;background:#fafafa}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;margin:0 0 .3em}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:14px;margin:14px 0}
svg{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;font-size:.9em;margin-top:8px}
th,td{border-bottom:1px solid #eee;padding:3px 10px;text-align:right}
th:first-child,td:first-child{text-align:left}
.summary{display:flex;flex-wrap:wrap;gap:10px}
.figure{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px}
.figure b{display:block;font-size:1.3em}
.notice{background:#fff8e1;border:1px solid #f0c36d;border-radius:6px;padding:12px}
p.note{color:#555;font-size:.9em;margin:.2em 0 .6em}
";

/// The whole report as one HTML page: `report` is the simulation's outcome, `nodes` each Node's use (see
/// [`super::node_uses`]), `title` the page's heading.
pub fn render_html(
    report: &SimulationReport,
    nodes: &[NodeUse],
    title: &str,
) -> Result<String, ReportError> {
    let d = |seconds: f64| format_duration((seconds * 1000.0) as i64);
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    let lost: f64 = report.evictions.iter().map(|e| e.lost_gpu_hours).sum();
    let preemptions = report
        .evictions
        .iter()
        .filter(|e| is_preemption(&e.reason))
        .count();
    let figures = [
        ("virtual time", d(report.duration_seconds)),
        ("workloads", report.workloads.to_string()),
        ("admitted", report.admitted.to_string()),
        ("finished", report.finished.to_string()),
        ("preemptions", preemptions.to_string()),
        (
            "other evictions",
            (report.evictions.len() - preemptions).to_string(),
        ),
        ("GPU-hours lost to evictions", format!("{lost:.1}")),
        (
            "Jain's index, GPU-hours",
            format!("{:.3}", report.fairness.jain_index_gpu_hours),
        ),
        (
            "Jain's index vs quota",
            format!("{:.3}", report.fairness.jain_index_vs_entitlement),
        ),
    ];
    html.push_str("<div class=\"summary\">\n");
    for (label, value) in figures {
        let _ = writeln!(
            html,
            "<div class=\"figure\"><b>{}</b>{}</div>",
            escape(&value),
            escape(label)
        );
    }
    html.push_str("</div>\n");

    // GPU utilisation.
    section(
        &mut html,
        "utilisation",
        "GPU utilisation per flavor",
        "GPUs held by admitted workloads, as a share of each flavor's GPUs.",
        &charts::utilisation(&report.flavors, report.duration_seconds)?,
    );
    table(
        &mut html,
        &["flavor", "GPUs", "mean utilisation"],
        report.flavors.iter().map(|f| {
            vec![
                f.flavor.clone(),
                f.gpus.to_string(),
                format!("{:.1}%", 100.0 * f.mean_utilisation),
            ]
        }),
    );
    html.push_str("</section>\n");

    // Waits.
    section(
        &mut html,
        "waits",
        "Queue wait-time distribution per ClusterQueue",
        "The share of each ClusterQueue's admitted workloads that waited at most a given time from arrival to \
         first admission. Workloads never admitted are counted in the table.",
        &charts::waits(&report.queues)?,
    );
    table(
        &mut html,
        &[
            "ClusterQueue",
            "workloads",
            "admitted",
            "never admitted",
            "mean",
            "p50",
            "p90",
            "p99",
            "max",
        ],
        report.queues.iter().map(|q| {
            vec![
                q.cluster_queue.clone(),
                q.workloads.to_string(),
                q.admitted.to_string(),
                q.pending_at_end.to_string(),
                d(q.wait_seconds.mean),
                d(q.wait_seconds.p50),
                d(q.wait_seconds.p90),
                d(q.wait_seconds.p99),
                d(q.wait_seconds.max),
            ]
        }),
    );
    html.push_str("</section>\n");

    // Fairness.
    section(
        &mut html,
        "fairness",
        "Fairness: share of GPU-hours vs entitlement",
        "Each ClusterQueue's part of all GPU-hours used against its part of all nominal GPU quota. Borrowing \
         shows as a bar past its tick.",
        &charts::fairness(&report.queues)?,
    );
    html.push_str("</section>\n");

    // Timeline.
    let queues: Vec<String> = report
        .queues
        .iter()
        .map(|q| q.cluster_queue.clone())
        .chain(report.evictions.iter().map(|e| e.cluster_queue.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    section(
        &mut html,
        "timeline",
        "Preemptions and failures over time",
        "Every eviction of a workload, on its ClusterQueue's row.",
        &charts::timeline(
            &queues,
            &report.evictions,
            &report.unsettled_at_seconds,
            report.duration_seconds,
        )?,
    );
    if !report.evictions.is_empty() {
        let _ = writeln!(
            html,
            "<details><summary>{} evictions{}</summary>",
            report.evictions.len(),
            if report.evictions.len() > EVICTIONS_LISTED {
                format!(" (the first {EVICTIONS_LISTED} listed)")
            } else {
                String::new()
            }
        );
        table(
            &mut html,
            &["at", "workload", "ClusterQueue", "reason", "GPU-hours lost"],
            report.evictions.iter().take(EVICTIONS_LISTED).map(|e| {
                vec![
                    d(e.at_seconds),
                    e.workload.clone(),
                    e.cluster_queue.clone(),
                    e.reason.clone(),
                    format!("{:.1}", e.lost_gpu_hours),
                ]
            }),
        );
        html.push_str("</details>\n");
    }
    html.push_str("</section>\n");

    // Heat map.
    let racks: BTreeSet<&str> = nodes.iter().map(|n| n.rack.as_str()).collect();
    match heatmap::heat_map(nodes, report.duration_seconds)? {
        Some(svg) => {
            section(
                &mut html,
                "heatmap",
                "Placement heat map by node and rack",
                "The share of each node's GPU-time held by the workloads placed on it.",
                &svg,
            );
        }
        None => {
            let _ = write!(
                html,
                "<section id=\"heatmap\" data-chart=\"heatmap\">\n<h2>Placement heat map by node and rack</h2>\n\
                 <div class=\"notice\"><b>No per-node placement in this run.</b> The simulation assigned quota \
                 per flavor only, so no workload was placed on a node. {} nodes in {} racks were described.</div>\n",
                nodes.len(),
                racks.len()
            );
        }
    }
    html.push_str("</section>\n");
    let _ = write!(
        html,
        "<p class=\"note\">Written by sluice {} (simulate --report).</p>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    Ok(html)
}

/// Opens a section holding a chart; the caller closes it.
fn section(html: &mut String, id: &str, heading: &str, note: &str, svg: &str) {
    let _ = write!(
        html,
        "<section id=\"{id}\" data-chart=\"{id}\">\n<h2>{}</h2>\n<p class=\"note\">{}</p>\n{}\n",
        escape(heading),
        escape(note),
        strip_xml_declaration(svg)
    );
}

/// plotters writes a standalone SVG document; inline in HTML only the `<svg>` element is wanted.
fn strip_xml_declaration(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

fn table(html: &mut String, head: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    html.push_str("<table>\n<tr>");
    for h in head {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr>\n");
    for row in rows {
        html.push_str("<tr>");
        for c in row {
            let _ = write!(html, "<td>{}</td>", escape(&c));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::WorkloadKey;
    use crate::sim::{Recorder, RunEnd};

    fn key(n: &str) -> WorkloadKey {
        WorkloadKey {
            namespace: "ns".into(),
            name: n.into(),
        }
    }

    /// Two queues on one flavor: one workload preempted, one failed, one finished.
    fn synthetic() -> SimulationReport {
        let mut r = Recorder::default();
        let gpus = |n| BTreeMap::from([("h100".to_string(), n)]);
        r.arrive(&key("a"), "team-a", "main", 0);
        r.arrive(&key("b"), "team-<b>", "main", 0);
        r.arrive(&key("c"), "team-a", "main", 0);
        r.admit(&key("a"), "team-a", gpus(4), 0);
        r.place(&key("a"), BTreeMap::from([("node-0".to_string(), 4)]));
        r.admit(&key("b"), "team-<b>", gpus(4), 600_000);
        r.admit(&key("c"), "team-a", gpus(2), 0);
        r.end(
            &key("a"),
            1_800_000,
            RunEnd::Evicted("Preempted/InCohortReclamation".into()),
        );
        r.end(
            &key("c"),
            900_000,
            RunEnd::Evicted("PodsReadyTimeout".into()),
        );
        r.end(&key("b"), 3_600_000, RunEnd::Finished);
        r.unsettled(1_000_000);
        let cap = BTreeMap::from([("h100".to_string(), 8)]);
        let ent = BTreeMap::from([("team-a".to_string(), 4), ("team-<b>".to_string(), 4)]);
        r.report(0, 3_600_000, &cap, &ent, 8)
    }

    fn nodes(report: &SimulationReport) -> Vec<NodeUse> {
        ["node-0", "node-1"]
            .iter()
            .map(|n| NodeUse {
                name: n.to_string(),
                rack: "rack-0".into(),
                gpus: 8,
                gpu_hours: report.node_gpu_hours.get(*n).copied().unwrap_or(0.0),
            })
            .collect()
    }

    #[test]
    fn every_chart_and_table_is_inline() -> Result<(), ReportError> {
        let report = synthetic();
        let html = render_html(&report, &nodes(&report), "Test <report>")?;
        for id in ["utilisation", "waits", "fairness", "timeline", "heatmap"] {
            let at = html
                .find(&format!("data-chart=\"{id}\""))
                .unwrap_or_else(|| panic!("no {id} section"));
            assert!(html[at..].contains("<svg"), "{id} has no chart");
        }
        assert_eq!(html.matches("<svg").count(), 5);
        assert!(html.contains("<title>Test &lt;report&gt;</title>"));
        assert!(html.contains("team-&lt;b&gt;"));
        assert!(!html.contains("team-<b>"));
        // Nothing is fetched when the page is viewed.
        for fetch in ["<script", "<link", "src=", "url(", "<?xml"] {
            assert!(!html.contains(fetch), "the page contains {fetch}");
        }
        // One preemption and one other eviction are counted apart.
        assert!(html.contains("<b>1</b>preemptions"));
        assert!(html.contains("<b>1</b>other evictions"));
        Ok(())
    }

    #[test]
    fn no_placement_says_so() -> Result<(), ReportError> {
        let mut report = synthetic();
        report.node_gpu_hours.clear();
        let html = render_html(&report, &nodes(&report), "t")?;
        assert!(html.contains("No per-node placement in this run."));
        assert!(html.contains("2 nodes in 1 racks"));
        assert_eq!(html.matches("<svg").count(), 4);
        Ok(())
    }
}
