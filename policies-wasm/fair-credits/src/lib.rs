//! `fair-credits`: fair sharing with usage history. A queue's share blends its current dominant
//! resource share with its decayed past usage (the engine keeps it, with the half-life this module
//! asks for), so teams that used less than their share recently go first and a quiet team can
//! burst later.
//!
//! Configuration (JSON, all optional):
//! `{"halfLifeSeconds": 3600, "historyWeight": 0.5}`: `historyWeight` in `[0, 1]` is the part of the
//! share that comes from history (0 gives plain dominant resource share).

use serde::Deserialize;
use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch, Shares};
use sluice_sdk::policy::{PolicyError, PolicyFailure};

/// Configuration of the module.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Half-life of the usage history, in seconds.
    #[serde(default = "default_half_life")]
    pub half_life_seconds: f64,
    /// Part of the share that comes from history, in `[0, 1]`.
    #[serde(default = "default_weight")]
    pub history_weight: f64,
}

fn default_half_life() -> f64 {
    3600.0
}

fn default_weight() -> f64 {
    0.5
}

impl Default for Config {
    fn default() -> Self {
        Self {
            half_life_seconds: default_half_life(),
            history_weight: default_weight(),
        }
    }
}

/// Fair sharing with decaying usage credits.
#[derive(Clone, Copy, Debug, Default)]
pub struct FairCredits {
    config: Config,
}

impl FairCredits {
    /// A policy with `config` (validated).
    pub fn new(config: Config) -> Result<Self, String> {
        if !(config.half_life_seconds.is_finite() && config.half_life_seconds > 0.0) {
            return Err(format!(
                "halfLifeSeconds must be a positive number, got {}",
                config.half_life_seconds
            ));
        }
        if !(0.0..=1.0).contains(&config.history_weight) {
            return Err(format!(
                "historyWeight must be within [0, 1], got {}",
                config.history_weight
            ));
        }
        Ok(Self { config })
    }
}

impl PolicyInit for FairCredits {
    fn init(config: &str) -> Result<Self, String> {
        let c = config.trim();
        let config = if c.is_empty() || c == "null" {
            Config::default()
        } else {
            serde_json::from_str(c).map_err(|e| format!("fair-credits config: {e}"))?
        };
        Self::new(config)
    }
}

impl FairnessPolicy for FairCredits {
    fn name(&self) -> &str {
        "fair-credits"
    }

    fn history_half_life(&self) -> Option<f64> {
        Some(self.config.half_life_seconds)
    }

    fn shares(&self, batch: &ShareBatch) -> Result<Shares, PolicyError> {
        let n = batch.len();
        if batch.history.len() != n || batch.has_parent.len() != n {
            return Err(PolicyError::new(
                "fair-credits",
                PolicyFailure::Rejected,
                "share batch columns differ in length",
            ));
        }
        let a = self.config.history_weight;
        let mut out = Shares {
            ratio: Vec::with_capacity(n),
            weight: batch.weight.clone(),
            borrowing: Vec::with_capacity(n),
        };
        for i in 0..n {
            // A root has no share, whatever its history.
            if !batch.has_parent[i] {
                out.ratio.push(0.0);
                out.borrowing.push(false);
                continue;
            }
            let (drs, borrowing) = batch.dominant_ratio(i);
            let history = batch.history[i].max(0.0);
            out.ratio.push((1.0 - a) * drs + a * history);
            out.borrowing.push(borrowing);
        }
        Ok(out)
    }

    fn order(&self, batch: &OrderBatch) -> Result<Vec<u32>, PolicyError> {
        batch.kueue_order("fair-credits")
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_fairness!(FairCredits);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_team_goes_first_at_equal_current_share() {
        let p = FairCredits::init(r#"{"halfLifeSeconds": 600, "historyWeight": 0.5}"#).unwrap();
        assert_eq!(p.history_half_life(), Some(600.0));
        let mut b = ShareBatch::default();
        // Same borrowing now; "busy" used 900 per mille of its quota recently, "quiet" 0.
        b.push(1, 1.0, true, &[(0, 10, 100)], 900.0);
        b.push(2, 1.0, true, &[(0, 10, 100)], 0.0);
        let s = p.shares(&b).unwrap();
        assert!(s.ratio[0] > s.ratio[1], "{s:?}");
        let heads = OrderBatch {
            borrowing_on_requested: vec![false, false],
            ratio: s.ratio.clone(),
            weight: s.weight.clone(),
            borrowing: s.borrowing.clone(),
            priority: vec![0, 0],
            timestamp: vec![0, 1],
        };
        assert_eq!(p.order(&heads).unwrap(), vec![1, 0]);
    }

    #[test]
    fn zero_history_weight_is_plain_drs() {
        let p = FairCredits::init(r#"{"historyWeight": 0}"#).unwrap();
        let mut b = ShareBatch::default();
        b.push(1, 1.0, true, &[(0, 5, 10), (1, 9, 10)], 500.0);
        assert_eq!(p.shares(&b).unwrap().ratio, vec![900.0]);
    }

    #[test]
    fn bad_config_is_refused_with_the_field() {
        let e = FairCredits::init(r#"{"halfLifeSeconds": -1}"#).unwrap_err();
        assert!(e.contains("halfLifeSeconds"), "{e}");
        let e = FairCredits::init(r#"{"halfLife": 5}"#).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
    }
}
