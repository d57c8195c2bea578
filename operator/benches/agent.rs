//! The node agent's cost per read of eight GPUs (the fake NVML example, `operator/examples/fake-nvml/h100x8.yaml`):
//! rendering the dcgm-exporter families, and a whole round (read the source, judge health, derive the model,
//! render the metrics, build the status) with pods attributed. Serving a scrape only copies the last text.
//!
//! Run: `CARGO_INCREMENTAL=0 cargo bench -p sluice-operator --bench agent`.

use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_operator::agent::health::HealthRules;
use sluice_operator::agent::metrics::{Holder, Holders};
use sluice_operator::agent::{Agent, FakeSource, GpuSource, derive, metrics};

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/fake-nvml/h100x8.yaml")
}

/// Every GPU held by a pod, as on a busy node.
fn holders(raw: &sluice_operator::agent::RawNode) -> Holders {
    raw.gpus
        .iter()
        .map(|g| {
            (
                g.uuid.clone(),
                vec![Holder {
                    pod: format!("train-{}", g.index / 4),
                    namespace: "team-a".into(),
                    container: "trainer".into(),
                }],
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let raw = FakeSource { path: example() }.read().expect("example");
    let model = derive(&raw);
    let held = holders(&raw);
    let text = metrics::render("gpu-0", &raw, &model, &held);
    eprintln!(
        "exposition for 8 GPUs: {} bytes, {} series",
        text.len(),
        text.lines().filter(|l| !l.starts_with('#')).count()
    );
    c.bench_function("agent/render 8 GPUs", |b| {
        b.iter(|| metrics::render("gpu-0", &raw, &model, &held))
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut agent = Agent::new(
        "gpu-0",
        Box::new(FakeSource { path: example() }),
        HealthRules::default(),
    );
    c.bench_function("agent/round 8 GPUs (fake source, no API)", |b| {
        b.iter(|| runtime.block_on(agent.tick()).expect("tick"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
