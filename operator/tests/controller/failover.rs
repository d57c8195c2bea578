//! Two operator replicas with leader election over one fake API server: the leader is killed mid-stream, the
//! standby takes over, and the final admissions equal a single replica's; the two never both write.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;
use sluice_operator::controller::Operator;
use sluice_operator::leader::{LeaderElector, LeaseConfig};
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;

const WORKLOADS: usize = 12;
const GPUS: u32 = 6;

fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_millis(600),
        renew_deadline: Duration::from_millis(400),
        retry_period: Duration::from_millis(50),
        ..LeaseConfig::new("sluice-operator", "sluice-system", identity)
    }
}

/// Starts a replica with leader election; returns its task (operator and elector together).
fn replica(fake: &FakeApi, identity: &str) -> tokio::task::JoinHandle<()> {
    let client = fake.client(identity);
    let (elector, leadership) = LeaderElector::new(client.clone(), lease(identity));
    let op = Operator::new(client, config(), leadership).without_events();
    tokio::spawn(async move {
        tokio::select! {
            _ = op.run() => {}
            _ = elector.run() => {}
        }
    })
}

fn admitted_set(fake: &FakeApi) -> BTreeSet<String> {
    fake.list::<api::Workload>()
        .into_iter()
        .filter(|w| w.status.as_ref().is_some_and(|s| s.admission.is_some()))
        .filter_map(|w| w.metadata.name)
        .collect()
}

fn name(i: usize) -> String {
    format!("w{i:02}")
}

/// Streams the workloads in, one every 20ms; `midway` runs after a quarter of them (before the quota is used up).
async fn stream(fake: &FakeApi, mut midway: impl FnMut()) {
    for i in 0..WORKLOADS {
        if i == WORKLOADS / 4 {
            midway();
        }
        fake.put(&workload(&name(i), 1, 0));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn settle(fake: &FakeApi) {
    wait_for(15, "all quota used", || {
        admitted_set(fake).len() == GPUS as usize
    })
    .await;
    // Let any late (wrong) admission show up before comparing.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn standby_takes_over_and_admits_exactly_what_one_replica_would() {
    // Reference: one replica, no failure.
    let single = FakeApi::new();
    seed_queues(&single, GPUS);
    let op = start(&single, "solo", config());
    stream(&single, || {}).await;
    settle(&single).await;
    let expected = admitted_set(&single);
    op.abort();

    let fake = FakeApi::new();
    seed_queues(&fake, GPUS);
    let a = replica(&fake, "a");
    wait_for(5, "a leads", || {
        fake.get::<k8s_openapi::api::coordination::v1::Lease>(
            Some("sluice-system"),
            "sluice-operator",
        )
        .and_then(|l| l.spec?.holder_identity)
        .is_some_and(|h| h == "a")
    })
    .await;
    let b = replica(&fake, "b");
    let mut killed_at = None;
    stream(&fake, || {
        // Kill the leader: its tasks stop and its connections drop.
        a.abort();
        fake.disconnect("a");
        killed_at = Some(fake.requests().len());
    })
    .await;
    wait_for(5, "b leads", || {
        fake.get::<k8s_openapi::api::coordination::v1::Lease>(
            Some("sluice-system"),
            "sluice-operator",
        )
        .and_then(|l| l.spec?.holder_identity)
        .is_some_and(|h| h == "b")
    })
    .await;
    settle(&fake).await;
    let got = admitted_set(&fake);
    assert_eq!(got, expected, "final admissions equal a single replica's");

    let holder = fake
        .get::<k8s_openapi::api::coordination::v1::Lease>(Some("sluice-system"), "sluice-operator")
        .and_then(|l| l.spec?.holder_identity);
    assert_eq!(holder.as_deref(), Some("b"), "the standby holds the lease");

    // No workload was admitted twice, by either replica.
    for i in 0..WORKLOADS {
        assert!(
            admission_writes(&fake, &name(i)) <= 1,
            "{} admitted twice",
            name(i)
        );
    }
    // The leader admitted some before it died, the standby the rest; they never both wrote.
    let log = fake.requests();
    let is_data_write = |r: &sluice_operator::testing::RecordedRequest| {
        r.is_write() && r.status < 300 && !r.path.contains("/leases")
    };
    let last_a = log
        .iter()
        .rposition(|r| r.client == "a" && is_data_write(r))
        .expect("a wrote while leading");
    let first_b = log
        .iter()
        .position(|r| r.client == "b" && is_data_write(r))
        .expect("b wrote after taking over");
    assert!(
        last_a < first_b,
        "a's last write {last_a} precedes b's first {first_b}"
    );
    assert!(killed_at.is_some_and(|k| k <= first_b));
    b.abort();
}

#[tokio::test]
async fn two_live_replicas_never_both_lead() {
    let fake = FakeApi::new();
    seed_queues(&fake, GPUS);
    let a = replica(&fake, "a");
    let b = replica(&fake, "b");
    stream(&fake, || {}).await;
    settle(&fake).await;
    let log = fake.requests();
    let writers: BTreeSet<_> = log
        .iter()
        .filter(|r| r.is_write() && r.status < 300 && !r.path.contains("/leases"))
        .map(|r| r.client.clone())
        .collect();
    assert_eq!(writers.len(), 1, "only the leader writes: {writers:?}");
    for i in 0..WORKLOADS {
        assert!(admission_writes(&fake, &name(i)) <= 1);
    }
    a.abort();
    b.abort();
}

#[tokio::test]
async fn leader_that_cannot_renew_stops_writing_before_anyone_may_take_over() {
    let fake = FakeApi::new();
    let (elector, leadership) = LeaderElector::new(fake.client("a"), lease("a"));
    let run = tokio::spawn(elector.run());
    wait_for(5, "a leads", || leadership.is_leader()).await;
    // The API server stops answering a: every lease read and write fails from now on.
    for method in [http::Method::GET, http::Method::PUT] {
        fake.inject(sluice_operator::testing::Fault {
            method: Some(method),
            path_contains: "/leases/".into(),
            status: 500,
            times: u32::MAX,
        });
    }
    // Its last renewal started before now, so the renew deadline (400ms) passes before the lease duration
    // (600ms) that a standby must wait: a stops leading first.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(
        !leadership.is_leader(),
        "a still leads past its renew deadline"
    );
    let result = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("elector ends")
        .expect("elector task");
    assert!(matches!(
        result,
        Err(sluice_operator::leader::LeaderError::Lost { .. })
    ));
}
