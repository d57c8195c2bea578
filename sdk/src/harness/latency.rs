//! Per-call latency percentiles of a policy call.

use std::time::{Duration, Instant};

use crate::policy::PolicyError;

/// Latency percentiles over a number of calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    /// Calls measured.
    pub calls: usize,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Slowest call.
    pub max: Duration,
    /// Mean.
    pub mean: Duration,
}

/// Runs `f` `warmup` times unmeasured, then `calls` times, timing each call.
pub fn measure<R>(
    warmup: usize,
    calls: usize,
    mut f: impl FnMut() -> Result<R, PolicyError>,
) -> Result<Percentiles, PolicyError> {
    for _ in 0..warmup {
        std::hint::black_box(f()?);
    }
    let mut times = Vec::with_capacity(calls.max(1));
    for _ in 0..calls.max(1) {
        let t = Instant::now();
        std::hint::black_box(f()?);
        times.push(t.elapsed());
    }
    times.sort();
    let at = |q: f64| times[(((times.len() - 1) as f64) * q).round() as usize];
    let total: Duration = times.iter().sum();
    Ok(Percentiles {
        calls: times.len(),
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: times[times.len() - 1],
        mean: total / times.len() as u32,
    })
}
