//! `anti-thrash`: keeps preemption from going in circles.
//!
//! * A candidate admitted less than `minRunSeconds` ago is protected: no search takes it, so a
//!   workload always runs a while before it can be evicted again (nothing thrashes).
//! * Every candidate's priority is boosted by `min(timesPreempted × boostPerPreemption, maxBoost)`:
//!   a workload preempted again and again becomes ever harder to preempt (nothing starves).
//!
//! Configuration (JSON, every field optional):
//! `{"minRunSeconds": 1800, "boostPerPreemption": 100, "maxBoost": 1000}`.

use serde_json::Value;
use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::{
    CandidateBatch, CostAnswers, PolicyError, PolicyFailure, PreemptionCostPolicy,
};

/// The module's name, in errors and metrics.
pub const NAME: &str = "anti-thrash";

/// Configuration of the module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Candidates admitted for less than this many seconds are protected.
    pub min_run_seconds: f64,
    /// Priority boost per earlier preemption of the candidate.
    pub boost_per_preemption: i32,
    /// Largest boost a candidate gets.
    pub max_boost: i32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            min_run_seconds: 1800.0,
            boost_per_preemption: 100,
            max_boost: 1000,
        }
    }
}

impl Config {
    /// Parses the module's JSON configuration (`""` or `null`: the defaults); errors name the field.
    pub fn parse(config: &str) -> Result<Self, String> {
        let c = config.trim();
        if c.is_empty() || c == "null" {
            return Ok(Self::default());
        }
        let value: Value =
            serde_json::from_str(c).map_err(|e| format!("{NAME} config is not JSON: {e}"))?;
        let Value::Object(fields) = value else {
            return Err(format!(
                "{NAME} config must be a JSON object such as {{\"minRunSeconds\": 1800}}, got {c}"
            ));
        };
        let mut out = Self::default();
        for (key, v) in &fields {
            match key.as_str() {
                "minRunSeconds" => match v.as_f64() {
                    Some(s) if s.is_finite() && s >= 0.0 => out.min_run_seconds = s,
                    _ => {
                        return Err(format!(
                            "{NAME} config: minRunSeconds must be a number of seconds, 0 or more, got {v}"
                        ));
                    }
                },
                "boostPerPreemption" => out.boost_per_preemption = priority_step(key, v)?,
                "maxBoost" => out.max_boost = priority_step(key, v)?,
                other => {
                    return Err(format!(
                        "{NAME} config: unknown field {other:?} (known: minRunSeconds, boostPerPreemption, maxBoost)"
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// A non-negative whole number that fits a priority (`i32`).
fn priority_step(key: &str, v: &Value) -> Result<i32, String> {
    v.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            format!("{NAME} config: {key} must be a whole number from 0 to 2147483647, got {v}")
        })
}

/// Protects recently admitted candidates and boosts often-preempted ones.
#[derive(Clone, Copy, Debug, Default)]
pub struct AntiThrash {
    config: Config,
}

impl AntiThrash {
    /// The policy with `config`.
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    /// The policy's configuration.
    pub fn config(&self) -> Config {
        self.config
    }

    /// The boost of a candidate preempted `times` times before.
    pub fn boost(&self, times: u32) -> i32 {
        // In i64, so that many preemptions times a large step cannot overflow before the cap.
        let b = i64::from(times) * i64::from(self.config.boost_per_preemption);
        b.min(i64::from(self.config.max_boost)) as i32
    }
}

impl PolicyInit for AntiThrash {
    fn init(config: &str) -> Result<Self, String> {
        Config::parse(config).map(Self::new)
    }
}

impl PreemptionCostPolicy for AntiThrash {
    fn name(&self) -> &str {
        NAME
    }

    fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError> {
        let n = batch.len();
        if batch.admitted_seconds.len() != n || batch.times_preempted.len() != n {
            return Err(PolicyError::new(
                NAME,
                PolicyFailure::Rejected,
                format!(
                    "candidate batch columns differ in length: {n} priorities, {} admission times, {} preemption counts",
                    batch.admitted_seconds.len(),
                    batch.times_preempted.len()
                ),
            ));
        }
        let min_run = self.config.min_run_seconds;
        Ok(CostAnswers {
            boost: batch
                .times_preempted
                .iter()
                .map(|&t| self.boost(t))
                .collect(),
            protected: batch
                .admitted_seconds
                .iter()
                .map(|&s| s < min_run)
                .collect(),
        })
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_preemption_cost!(AntiThrash);

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates as (admitted seconds, times preempted).
    fn batch(candidates: &[(f64, u32)]) -> CandidateBatch {
        let mut b = CandidateBatch {
            preemptor_priority: 100,
            ..CandidateBatch::default()
        };
        for (i, &(admitted, times)) in candidates.iter().enumerate() {
            b.push(format!("team/w{i}"), "cq", 0, admitted, admitted, times, 4);
        }
        b
    }

    #[test]
    fn defaults_apply_without_configuration() {
        for c in ["", "  ", "null", "{}"] {
            assert_eq!(Config::parse(c), Ok(Config::default()), "{c:?}");
        }
        let d = Config::default();
        assert_eq!(
            (d.min_run_seconds, d.boost_per_preemption, d.max_boost),
            (1800.0, 100, 1000)
        );
    }

    #[test]
    fn candidates_younger_than_the_minimum_run_are_protected() {
        let p = AntiThrash::init(r#"{"minRunSeconds": 600}"#).unwrap();
        let a = p
            .costs(&batch(&[(0.0, 0), (599.9, 0), (600.0, 0), (86_400.0, 0)]))
            .unwrap();
        assert_eq!(a.protected, vec![true, true, false, false]);
        // A minimum of 0 protects nothing.
        let p = AntiThrash::init(r#"{"minRunSeconds": 0}"#).unwrap();
        let a = p.costs(&batch(&[(0.0, 0), (10.0, 3)])).unwrap();
        assert_eq!(a.protected, vec![false, false]);
    }

    #[test]
    fn boost_grows_with_each_preemption_up_to_the_cap() {
        let p = AntiThrash::init(r#"{"boostPerPreemption": 150, "maxBoost": 500}"#).unwrap();
        let a = p
            .costs(&batch(&[
                (7200.0, 0),
                (7200.0, 1),
                (7200.0, 3),
                (7200.0, 4),
            ]))
            .unwrap();
        assert_eq!(a.boost, vec![0, 150, 450, 500]);
        assert_eq!(a.protected, vec![false; 4]);
        a.check(NAME, 4).unwrap();
    }

    #[test]
    fn huge_counts_and_steps_stay_at_the_cap() {
        let p = AntiThrash::init(r#"{"boostPerPreemption": 2147483647, "maxBoost": 2147483647}"#)
            .unwrap();
        assert_eq!(p.boost(u32::MAX), i32::MAX);
        assert_eq!(p.boost(0), 0);
        assert_eq!(AntiThrash::default().boost(u32::MAX), 1000);
    }

    #[test]
    fn default_policy_protects_and_boosts_as_documented() {
        let p = AntiThrash::init("").unwrap();
        let a = p
            .costs(&batch(&[(60.0, 0), (3600.0, 2), (3600.0, 30)]))
            .unwrap();
        assert_eq!(a.protected, vec![true, false, false]);
        assert_eq!(a.boost, vec![0, 200, 1000]);
    }

    #[test]
    fn an_empty_batch_gets_an_empty_answer() {
        let a = AntiThrash::default()
            .costs(&CandidateBatch::default())
            .unwrap();
        assert_eq!(a, CostAnswers::neutral(0));
    }

    #[test]
    fn ragged_columns_are_refused() {
        let mut b = batch(&[(1.0, 1), (2.0, 2)]);
        b.times_preempted.pop();
        let e = AntiThrash::default().costs(&b).unwrap_err();
        assert_eq!(e.failure, PolicyFailure::Rejected);
        assert!(e.message.contains("differ in length"), "{e}");
    }

    #[test]
    fn bad_configuration_is_refused_naming_the_field() {
        for (config, field, what) in [
            (r#"{"minRunSeconds": -1}"#, "minRunSeconds", "0 or more"),
            (
                r#"{"minRunSeconds": "1h"}"#,
                "minRunSeconds",
                "number of seconds",
            ),
            (
                r#"{"boostPerPreemption": -5}"#,
                "boostPerPreemption",
                "whole number",
            ),
            (
                r#"{"boostPerPreemption": 1.5}"#,
                "boostPerPreemption",
                "whole number",
            ),
            (r#"{"maxBoost": 3000000000}"#, "maxBoost", "2147483647"),
            (r#"{"maxBoost": null}"#, "maxBoost", "got null"),
            (r#"{"minRun": 5}"#, "\"minRun\"", "unknown field"),
        ] {
            let e = AntiThrash::init(config).unwrap_err();
            assert!(e.contains(field) && e.contains(what), "{config}: {e}");
        }
        assert!(
            AntiThrash::init("[1800]")
                .unwrap_err()
                .contains("must be a JSON object")
        );
        assert!(AntiThrash::init("{").unwrap_err().contains("not JSON"));
    }
}
