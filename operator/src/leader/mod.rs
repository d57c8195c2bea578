//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it: the holder renews
//! the lease every retry period; others take it over once they have seen it unchanged for a whole lease
//! duration. A leader that cannot renew within the renew deadline stops leading before anyone else may start
//! (renew deadline < lease duration), so two replicas never lead at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{PostParams, ResourceExt};
use tokio::sync::watch;
use tokio::time::Instant;

/// Lease settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (pod name).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal (must be below `lease_duration`).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Kubernetes' usual timings: 15s lease, 10s renew deadline, 2s retry.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.to_string(),
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A replica's view of its leadership, shared with the controllers.
#[derive(Clone, Debug)]
pub struct Leadership {
    valid_until: Arc<Mutex<Option<Instant>>>,
    changes: watch::Receiver<bool>,
    /// Keeps the channel open when no elector drives it (leader election off).
    _fixed: Option<Arc<watch::Sender<bool>>>,
}

impl Leadership {
    /// Always the leader (leader election off).
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Self {
            valid_until: Arc::new(Mutex::new(None)),
            changes: rx,
            _fixed: Some(Arc::new(tx)),
        }
    }

    /// Whether this replica may write now: it holds the lease and its last renewal is within the renew deadline.
    pub fn is_leader(&self) -> bool {
        if !*self.changes.borrow() {
            return false;
        }
        match *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(t) => Instant::now() < t,
            // Leader election is off.
            None => true,
        }
    }

    /// A receiver told about every change of leadership.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.changes.clone()
    }
}

/// Errors of the elector.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// This replica was the leader and could not renew within the renew deadline.
    #[error("leadership of Lease {namespace}/{name} lost")]
    Lost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
    },
}

/// What this replica last saw of the lease, and when (local clock, as client-go: no cross-node clock skew).
struct Observed {
    holder: String,
    renew: Option<Timestamp>,
    at: Instant,
}

/// The elector: run it in its own task.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    tx: watch::Sender<bool>,
    valid_until: Arc<Mutex<Option<Instant>>>,
    observed: Option<Observed>,
}

impl LeaderElector {
    /// An elector and the leadership handle it drives.
    pub fn new(client: kube::Client, config: LeaseConfig) -> (Self, Leadership) {
        let (tx, rx) = watch::channel(false);
        let valid_until = Arc::new(Mutex::new(Some(Instant::now())));
        let api = Api::namespaced(client, &config.namespace);
        (
            Self {
                api,
                config,
                tx,
                valid_until: valid_until.clone(),
                observed: None,
            },
            Leadership {
                valid_until,
                changes: rx,
                _fixed: None,
            },
        )
    }

    fn set_valid_until(&self, t: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    }

    /// One attempt to acquire or renew; Ok(true) when this replica holds the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let me = self.config.identity.clone();
        let secs = self.config.lease_duration.as_secs_f64().ceil().max(1.0) as i32;
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let renew = spec.renew_time.as_ref().map(|t| t.0);
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew != renew);
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew,
                at: Instant::now(),
            });
        }
        let observed_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
        let expired = Instant::now() >= observed_at + self.config.lease_duration;
        if !holder.is_empty() && holder != me && !expired {
            return Ok(false);
        }
        let taking_over = holder != me;
        let mut new_spec = spec;
        new_spec.holder_identity = Some(me);
        new_spec.lease_duration_seconds = Some(secs);
        new_spec.renew_time = Some(MicroTime(now));
        if taking_over {
            new_spec.acquire_time = Some(MicroTime(now));
            new_spec.lease_transitions = Some(new_spec.lease_transitions.unwrap_or(0) + 1);
        }
        lease.spec = Some(new_spec);
        // The replace carries the resourceVersion just read: a competing writer makes it fail with 409.
        let name = lease.name_any();
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Campaigns, then leads until the lease cannot be renewed within the renew deadline (returns
    /// [`LeaderError::Lost`]). Never returns while leading normally.
    pub async fn run(mut self) -> Result<(), LeaderError> {
        let mut leading = false;
        let mut last_renew = Instant::now();
        loop {
            let attempt_start = Instant::now();
            let ok = match self.try_acquire_or_renew().await {
                Ok(ok) => ok,
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.config.name, "lease acquire/renew failed");
                    false
                }
            };
            if ok {
                last_renew = attempt_start;
                self.set_valid_until(attempt_start + self.config.renew_deadline);
                if !leading {
                    leading = true;
                    tracing::info!(identity = %self.config.identity, lease = %self.config.name, "became leader");
                    let _ = self.tx.send(true);
                }
            } else if leading && Instant::now() >= last_renew + self.config.renew_deadline {
                self.set_valid_until(Instant::now());
                let _ = self.tx.send(false);
                tracing::error!(identity = %self.config.identity, "leadership lost");
                return Err(LeaderError::Lost {
                    namespace: self.config.namespace.clone(),
                    name: self.config.name.clone(),
                });
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }
}
