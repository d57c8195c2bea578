//! Each GPU's utilisation history, kept exactly in little space: the suffix maxima of the readings
//! (a reading is kept while no later reading is as high). From it, the highest utilisation over any
//! trailing window is one lookup, whatever window or threshold a reader picks later.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sluice_sdk::sluice::node_gpu_topology::UtilizationPeak;

use super::raw::RawNode;

/// Utilisation readings of the node's GPUs since the agent started.
#[derive(Debug, Default, Clone)]
pub struct UsageHistory {
    gpus: BTreeMap<String, Steps>,
}

#[derive(Debug, Clone)]
struct Steps {
    since: DateTime<Utc>,
    /// Oldest first, peaks strictly falling; the last entry is the latest reading.
    peaks: Vec<(DateTime<Utc>, u32)>,
}

/// RFC 3339 with whole seconds, as Kubernetes writes times.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl UsageHistory {
    /// Adds the readings of `raw` taken at `at`; GPUs gone from the node are forgotten.
    pub fn record(&mut self, raw: &RawNode, at: DateTime<Utc>) {
        self.gpus
            .retain(|uuid, _| raw.gpus.iter().any(|g| &g.uuid == uuid));
        for g in &raw.gpus {
            let Some(u) = g.telemetry.gpu_util else {
                continue;
            };
            let steps = self.gpus.entry(g.uuid.clone()).or_insert_with(|| Steps {
                since: at,
                peaks: Vec::new(),
            });
            while steps.peaks.last().is_some_and(|(_, p)| *p <= u) {
                steps.peaks.pop();
            }
            steps.peaks.push((at, u));
        }
    }

    /// When the history of `uuid` begins and its steps, as the status publishes them.
    pub fn published(&self, uuid: &str) -> (Option<String>, Vec<UtilizationPeak>) {
        match self.gpus.get(uuid) {
            Some(s) => (
                Some(rfc3339(s.since)),
                s.peaks
                    .iter()
                    .map(|(t, p)| UtilizationPeak {
                        since: rfc3339(*t),
                        peak: *p,
                    })
                    .collect(),
            ),
            None => (None, Vec::new()),
        }
    }
}
