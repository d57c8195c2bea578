//! Admission fair sharing in the operator: every LocalQueue's decayed usage is written to its
//! `status.fairSharing.admissionFairSharingStatus`, and read back when an operator starts (a restart or a takeover).

use crate::support::*;
use sluice_operator::controller::OperatorConfig;
use sluice_operator::engine::AdmissionFairSharingConfig;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::quantity::nano_value;

fn afs_config() -> OperatorConfig {
    let mut c = config();
    c.engine.admission_fair_sharing = Some(AdmissionFairSharingConfig {
        usage_half_life: 3_600_000,
        usage_sampling_interval: 60_000,
        resource_weights: Default::default(),
    });
    c
}

/// `team-a/lq`'s consumed GPUs in nano-units, once its status has admission fair sharing's part.
fn consumed_gpus(fake: &FakeApi) -> Option<i128> {
    let lq = fake.get::<api::LocalQueue>(Some("team-a"), "lq")?;
    let afs = lq.status?.fair_sharing?.admission_fair_sharing_status?;
    Some(
        afs.consumed_resources
            .get("nvidia.com/gpu")
            .and_then(nano_value)
            .unwrap_or(0),
    )
}

/// ClusterQueue `cq` of [`seed_queues`], ordered by LocalQueue usage.
fn usage_based(fake: &FakeApi) {
    let mut cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    cq.spec.admission_scope = Some(api::AdmissionScope {
        admission_mode: Some(api::AdmissionMode::UsageBasedAdmissionFairSharing),
    });
    fake.put(&cq);
}

#[tokio::test]
async fn an_admission_charges_its_local_queue_and_the_status_says_so() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    usage_based(&fake);
    let op = start(&fake, "op", afs_config());
    wait_for(5, "the LocalQueue's first sample", || {
        consumed_gpus(&fake) == Some(0)
    })
    .await;
    fake.put(&job("train", 1, 4, None));
    // The entry penalty, 4 GPUs x (1 - 0.5^(1 min / 1 h)), settled at once (no admission checks).
    let want = (4.0 * (1.0 - 0.5f64.powf(1.0 / 60.0)) * 1e9) as i128;
    // (Plus the admitted 4 GPUs' share of the moment between the first sample and the admission.)
    wait_for(5, "the entry penalty in the LocalQueue's status", || {
        consumed_gpus(&fake).is_some_and(|n| n >= want && n < want + want / 100)
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_starting_operator_keeps_the_usage_its_local_queues_carry() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut lq = fake.get::<api::LocalQueue>(Some("team-a"), "lq").unwrap();
    lq.status = Some(yaml(
        r#"
fairSharing:
  weightedShare: 0
  admissionFairSharingStatus:
    consumedResources: {nvidia.com/gpu: "5"}
    lastUpdate: "2026-01-01T00:00:00Z"
"#,
    ));
    fake.put(&lq);
    let op = start(&fake, "op", afs_config());
    // Restored, then the first sample starts its clock: still 5 GPUs (a fresh one would say 0).
    wait_for(5, "the restored usage written back", || {
        let lq = fake.get::<api::LocalQueue>(Some("team-a"), "lq");
        lq.and_then(|l| l.status?.fair_sharing?.admission_fair_sharing_status)
            .is_some_and(|a| a.last_update.0.as_second() > 1_767_225_600)
    })
    .await;
    assert_eq!(consumed_gpus(&fake), Some(5_000_000_000));
    op.abort();
}
