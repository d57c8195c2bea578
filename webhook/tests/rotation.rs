//! The serving certificate is replaced on disk while clients keep sending: no request fails, connections opened
//! before the change keep working, and new connections get the new certificate.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Client, admission_review, client_config, job, make_cert};
use serde_json::json;
use sluice_webhook::server::ServerOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_during_traffic() {
    let options = ServerOptions {
        cert_reload_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    };
    let s = common::start_with(None, options).await;
    let old = s.cert.der.clone();
    let new_cert = make_cert();
    let both = client_config(&[old.clone(), new_cert.der.clone()]);
    let addr = s.addr();
    let review = serde_json::to_vec(&admission_review(
        "CREATE",
        &job(
            "team",
            json!({"kueue.x-k8s.io/queue-name": "q"}),
            json!({}),
            json!({}),
        ),
        None,
    ))
    .unwrap_or_default();

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    // Answers per client, so the test can wait until each one has been served after the change.
    let per_client: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let failures = Arc::new(AtomicUsize::new(0));
    let mut loops = Vec::new();
    // Two clients on long-lived connections opened before the rotation, and one that reconnects every few requests.
    for (i, reconnect_every) in [0usize, 0, 5].into_iter().enumerate() {
        let (stop, sent, per_client, failures, both, review) = (
            stop.clone(),
            sent.clone(),
            per_client.clone(),
            failures.clone(),
            both.clone(),
            review.clone(),
        );
        loops.push(tokio::spawn(async move {
            let mut client = Client::try_connect(addr, both.clone())
                .await
                .expect("connect");
            let first_cert = client.peer_cert.clone();
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if reconnect_every > 0 && n > 0 && n.is_multiple_of(reconnect_every) {
                    match Client::try_connect(addr, both.clone()).await {
                        Ok(c) => client = c,
                        Err(_) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                }
                match client.post("/mutate-batch-v1-job", review.clone()).await {
                    Ok((200, body))
                        if serde_json::from_slice::<serde_json::Value>(&body)
                            .is_ok_and(|v| v["response"]["allowed"] == true) =>
                    {
                        sent.fetch_add(1, Ordering::Relaxed);
                        per_client[i].fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
            }
            (first_cert, client.peer_cert.clone(), n)
        }));
    }

    // Traffic must be flowing before the change; wait for it rather than sleep a fixed time (a loaded CI machine
    // can take longer than any fixed pause for the first handshakes of a debug build).
    wait_until(
        || sent.load(Ordering::Relaxed) > 0,
        "no request answered before rotation",
    )
    .await;
    let before_rotation = sent.load(Ordering::Relaxed);
    s.certs.write(&new_cert);

    // New connections see the new certificate soon after the files change.
    let started = Instant::now();
    loop {
        let c = Client::try_connect(addr, both.clone())
            .await
            .expect("connect during rotation");
        if c.peer_cert == new_cert.der.to_vec() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "new certificate never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A client trusting only the new certificate gets in.
    let only_new =
        Client::try_connect(addr, client_config(std::slice::from_ref(&new_cert.der))).await;
    assert!(only_new.is_ok(), "{:?}", only_new.err());
    // And one trusting only the old one no longer does.
    assert!(
        Client::try_connect(addr, client_config(std::slice::from_ref(&old)))
            .await
            .is_err()
    );

    // Every client is served after the change before they stop; the reconnecting one more than its reconnect
    // interval, so it has opened a connection since.
    let after_change: Vec<usize> = per_client
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    wait_until(
        || {
            per_client
                .iter()
                .zip(&after_change)
                .zip([1, 1, 6])
                .all(|((c, before), more)| c.load(Ordering::Relaxed) >= before + more)
        },
        "a client was not served after rotation",
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut results = Vec::new();
    for l in loops {
        results.push(l.await.expect("client loop"));
    }
    let total = sent.load(Ordering::Relaxed);
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "requests failed during rotation"
    );
    assert!(
        before_rotation > 0 && total > before_rotation,
        "traffic kept flowing: {before_rotation} then {total}"
    );
    // The long-lived connections were opened with the old certificate and kept working after the change.
    for (first, last, n) in &results[..2] {
        assert_eq!(first, &old.to_vec());
        assert_eq!(last, &old.to_vec());
        assert!(*n > 0);
    }
    // The reconnecting client ended on the new certificate.
    assert_eq!(results[2].1, new_cert.der.to_vec());
    assert!(
        s.running
            .metrics
            .encode()
            .contains("sluice_webhook_certificate_reloads_total{result=\"loaded\"} 1")
    );
}

/// Polls `done` every 10 ms for up to 30 s, failing with `what` if it never holds.
async fn wait_until(done: impl Fn() -> bool, what: &str) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_broken_certificate_pair_keeps_the_current_one() {
    let options = ServerOptions {
        cert_reload_interval: Duration::from_millis(30),
        ..ServerOptions::default()
    };
    let s = common::start_with(None, options).await;
    // A key that does not match the certificate: refused, the old pair stays in service.
    let other = make_cert();
    std::fs::write(s.certs.key_path(), &other.key_pem).expect("write key");
    wait_until(
        || {
            s.running
                .metrics
                .encode()
                .contains("sluice_webhook_certificate_reloads_total{result=\"failed\"}")
        },
        "the broken pair was never tried",
    )
    .await;
    let c = Client::try_connect(s.addr(), client_config(std::slice::from_ref(&s.cert.der)))
        .await
        .expect("still served");
    assert_eq!(c.peer_cert, s.cert.der.to_vec());
}
