//! The node/rack heat map: one cell per node, grouped in rows by rack, shaded by the fraction of the node's
//! GPU-time that placed workloads held.

use std::collections::BTreeMap;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::ReportError;
use super::charts::svg;
use sluice_sdk::topology::GPU_RESOURCE;

use crate::sim::{Simulation, SimulationReport};

/// The node label Kueue's topology-aware scheduling uses for the host level.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The row for nodes with no rack label.
const NO_RACK: &str = "(no rack label)";

/// One node's GPU use over the simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeUse {
    /// Node name.
    pub name: String,
    /// Its rack (the value of the rack label), or "(no rack label)".
    pub rack: String,
    /// Allocatable GPUs.
    pub gpus: i64,
    /// GPU-hours placed workloads held on it.
    pub gpu_hours: f64,
}

/// The label naming a node's rack: the level above the hostname in the first Topology that has one, else the
/// first node label whose key ends in "rack".
fn rack_label(sim: &Simulation) -> Option<String> {
    for t in sim.objects.topologies.values() {
        let levels = &t.object.spec.levels;
        if let Some(i) = levels.iter().position(|l| l.node_label == HOSTNAME_LABEL)
            && i > 0
        {
            return Some(levels[i - 1].node_label.clone());
        }
    }
    sim.objects
        .nodes
        .values()
        .flat_map(|n| n.object.metadata.labels.iter().flatten())
        .map(|(k, _)| k)
        .find(|k| k.ends_with("rack"))
        .cloned()
}

/// Every Node of the simulation with its rack and the GPU-hours the report recorded on it.
pub fn node_uses(sim: &Simulation, report: &SimulationReport) -> Vec<NodeUse> {
    let rack_key = rack_label(sim);
    sim.objects
        .nodes
        .iter()
        .map(|(name, n)| {
            let labels = n.object.metadata.labels.as_ref();
            let rack = rack_key
                .as_ref()
                .and_then(|k| labels.and_then(|l| l.get(k)))
                .cloned()
                .unwrap_or_else(|| NO_RACK.to_string());
            let gpus = n
                .object
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get(GPU_RESOURCE))
                .and_then(|q| sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok())
                .unwrap_or(0);
            NodeUse {
                name: name.clone(),
                rack,
                gpus,
                gpu_hours: report.node_gpu_hours.get(name).copied().unwrap_or(0.0),
            }
        })
        .collect()
}

/// The fraction of a node's GPU-time that was held, in [0, 1].
pub(super) fn utilisation(node: &NodeUse, duration_seconds: f64) -> f64 {
    let available = node.gpus as f64 * duration_seconds / 3600.0;
    if available > 0.0 {
        (node.gpu_hours / available).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Centred cell text in `colour`.
fn cell_style(colour: &'static RGBColor, size: u32) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font())
        .color(colour)
        .pos(Pos::new(HPos::Center, VPos::Center))
}

/// Light grey-blue at 0 to dark blue at 1.
fn shade(u: f64) -> RGBColor {
    let lerp = |a: f64, b: f64| (a + (b - a) * u).round() as u8;
    RGBColor(lerp(241.0, 8.0), lerp(245.0, 48.0), lerp(250.0, 107.0))
}

const CELL_H: i32 = 58;
const RACK_W: i32 = 150;
const WIDTH: i32 = 960;

/// Draws the heat map; None when no node has recorded placement (the page then says so instead).
pub(super) fn heat_map(
    nodes: &[NodeUse],
    duration_seconds: f64,
) -> Result<Option<String>, ReportError> {
    if nodes.iter().all(|n| n.gpu_hours <= 0.0) {
        return Ok(None);
    }
    let mut racks: BTreeMap<&str, Vec<&NodeUse>> = BTreeMap::new();
    for n in nodes {
        racks.entry(n.rack.as_str()).or_default().push(n);
    }
    let widest = racks.values().map(Vec::len).max().unwrap_or(1).max(1) as i32;
    let cell_w = ((WIDTH - RACK_W - 20) / widest).clamp(24, 140);
    let height = 30 + CELL_H * racks.len() as i32 + 70;
    let s = |e: plotters::drawing::DrawingAreaErrorKind<_>| e.to_string();
    svg("node heat map", (WIDTH as u32, height as u32), |root| {
        for (row, (rack, members)) in racks.iter().enumerate() {
            let y0 = 20 + row as i32 * CELL_H;
            let rack_style = TextStyle::from(("sans-serif", 14).into_font())
                .pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(
                rack.to_string(),
                (RACK_W - 10, y0 + CELL_H / 2),
                rack_style,
            ))
            .map_err(s)?;
            for (col, n) in members.iter().enumerate() {
                let x0 = RACK_W + col as i32 * cell_w;
                let u = utilisation(n, duration_seconds);
                root.draw(&Rectangle::new(
                    [(x0 + 2, y0 + 2), (x0 + cell_w - 2, y0 + CELL_H - 2)],
                    shade(u).filled(),
                ))
                .map_err(s)?;
                let ink: &'static RGBColor = if u > 0.55 { &WHITE } else { &BLACK };
                if cell_w >= 60 {
                    root.draw(&Text::new(
                        n.name.clone(),
                        (x0 + cell_w / 2, y0 + CELL_H / 2 - 9),
                        cell_style(ink, 11),
                    ))
                    .map_err(s)?;
                }
                root.draw(&Text::new(
                    format!("{:.0}%", 100.0 * u),
                    (x0 + cell_w / 2, y0 + CELL_H / 2 + 9),
                    cell_style(ink, 13),
                ))
                .map_err(s)?;
            }
        }
        // The colour scale.
        let y = 30 + CELL_H * racks.len() as i32;
        for i in 0..20 {
            let x = RACK_W + i * 15;
            root.draw(&Rectangle::new(
                [(x, y), (x + 15, y + 14)],
                shade(i as f64 / 19.0).filled(),
            ))
            .map_err(s)?;
        }
        let left =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Top));
        root.draw(&Text::new("0%", (RACK_W, y + 18), left.clone()))
            .map_err(s)?;
        root.draw(&Text::new(
            "100% of the node's GPU-time held",
            (RACK_W + 200, y + 18),
            left,
        ))
        .map_err(s)?;
        Ok(())
    })
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rack: &str, gpus: i64, gpu_hours: f64) -> NodeUse {
        NodeUse {
            name: name.into(),
            rack: rack.into(),
            gpus,
            gpu_hours,
        }
    }

    #[test]
    fn no_placement_draws_nothing() {
        let nodes = [node("a", "r0", 8, 0.0), node("b", "r1", 8, 0.0)];
        assert!(matches!(heat_map(&nodes, 3600.0), Ok(None)));
    }

    #[test]
    fn cells_grouped_by_rack_and_shaded_by_use() -> Result<(), ReportError> {
        // Two hours: 8 GPUs x 2 h = 16 GPU-hours available per node.
        let nodes = [
            node("gpu-a", "rack-0", 8, 16.0),
            node("gpu-b", "rack-0", 8, 4.0),
            node("gpu-c", "rack-1", 8, 0.0),
            node("cpu-d", "rack-1", 0, 0.0),
        ];
        let Some(svg) = heat_map(&nodes, 7200.0)? else {
            panic!("placement was recorded, so a heat map is drawn");
        };
        // plotters writes each text on its own line inside its <text> element.
        for text in [
            "rack-0", "rack-1", "gpu-a", "gpu-b", "gpu-c", "cpu-d", "100%", "25%",
        ] {
            assert!(
                svg.contains(&format!("\n{text}\n")),
                "{text} missing from the heat map"
            );
        }
        // A fully used node is the darkest shade, an idle one the lightest.
        assert!(svg.contains("#08306B"), "{svg}");
        assert!(svg.contains("#F1F5FA"), "{svg}");
        // rack-0 is the first row, so its rack label is above rack-1's.
        let r0 = svg.find("\nrack-0\n").unwrap_or(usize::MAX);
        let r1 = svg.find("\nrack-1\n").unwrap_or(0);
        assert!(r0 < r1);
        Ok(())
    }

    #[test]
    fn utilisation_is_bounded() {
        assert_eq!(utilisation(&node("x", "r", 0, 5.0), 3600.0), 0.0);
        assert_eq!(utilisation(&node("x", "r", 2, 5.0), 3600.0), 1.0);
        assert!((utilisation(&node("x", "r", 4, 1.0), 3600.0) - 0.25).abs() < 1e-12);
    }
}
