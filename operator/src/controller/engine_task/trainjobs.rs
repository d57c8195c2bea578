//! TrainJobs and the runtimes they run on: each cached TrainJob carries the runtime its reference names, resolved
//! from the cached TrainingRuntimes and ClusterTrainingRuntimes whenever the job or a runtime changes (Kueue reads
//! the runtime on every reconcile; a changed runtime here marks its TrainJobs for reconciling instead).

use std::sync::Arc;

use sluice_sdk::trainer::{ClusterTrainingRuntime, RuntimeKey, TrainJob, TrainingRuntime};

use super::crd_kinds::{self, CrdKind};
use super::kinds::Kinds;
use super::writes::Cached;
use super::{Cache, EngineTask};
use crate::controller::objects::object_key;
use crate::jobs::TrainJobJob;

/// Gives `tj` the runtime its reference names as the cache holds it, or Kueue's error.
fn resolve(cache: &Cache, tj: &mut TrainJob) {
    let resolved = match tj.runtime_key() {
        Err(e) => Err(e),
        Ok(RuntimeKey::Namespaced(ns, name)) => cache
            .training_runtimes
            .get(&(ns, name))
            .map(|r| r.spec.clone())
            .ok_or_else(|| tj.runtime_not_found()),
        Ok(RuntimeKey::Cluster(name)) => cache
            .cluster_training_runtimes
            .get(&name)
            .map(|r| r.spec.clone())
            .ok_or_else(|| tj.runtime_not_found()),
    };
    tj.runtime = Some(Arc::new(resolved));
}

/// A TrainJob write's result is cached with its runtime resolved.
impl Cached for TrainJob {
    const WRITE_FAILED_EVENT: Option<&'static str> = Some("FailedToStart");
    fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self> {
        cache.trainjobs.get(key)
    }
    fn put(cache: &mut Cache, key: (String, String), mut obj: Self) {
        resolve(cache, &mut obj);
        cache.trainjobs.insert(key, obj);
    }
    fn forget(cache: &mut Cache, key: &(String, String)) {
        cache.trainjobs.remove(key);
    }
}

/// Absorbs a TrainJob change (its runtime resolved first); returns the Workload of a deleted one.
pub(super) fn absorb_trainjob(
    cache: &mut Cache,
    kinds: &mut Kinds,
    mut tj: TrainJob,
    deleted: bool,
) -> Option<(String, String)> {
    resolve(cache, &mut tj);
    let mut jobs = std::mem::take(&mut cache.trainjobs);
    let gone = crd_kinds::absorb_change::<TrainJobJob>(&mut jobs, kinds, tj, deleted);
    cache.trainjobs = jobs;
    gone
}

/// Absorbs a runtime change: the TrainJobs whose runtime it changes are resolved again and reconciled.
fn rerun_referrers(cache: &mut Cache, kinds: &mut Kinds, key: &RuntimeKey) {
    let keys: Vec<(String, String)> = cache
        .trainjobs
        .iter()
        .filter(|(_, tj)| tj.runtime_key().as_ref() == Ok(key))
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        let Some(mut tj) = cache.trainjobs.remove(&k) else {
            continue;
        };
        let before = tj.runtime.clone();
        resolve(cache, &mut tj);
        if tj.runtime != before {
            <TrainJobJob as CrdKind>::queues(kinds)
                .dirty
                .insert(k.clone());
        }
        cache.trainjobs.insert(k, tj);
    }
}

impl EngineTask {
    /// Absorbs a TrainingRuntime change.
    pub(super) fn absorb_training_runtime(&mut self, rt: TrainingRuntime, deleted: bool) {
        let (ns, name) = object_key(&rt);
        if deleted {
            self.cache
                .training_runtimes
                .remove(&(ns.clone(), name.clone()));
        } else {
            self.cache
                .training_runtimes
                .insert((ns.clone(), name.clone()), rt);
        }
        rerun_referrers(
            &mut self.cache,
            &mut self.kinds,
            &RuntimeKey::Namespaced(ns, name),
        );
    }

    /// Absorbs a ClusterTrainingRuntime change.
    pub(super) fn absorb_cluster_training_runtime(
        &mut self,
        rt: ClusterTrainingRuntime,
        deleted: bool,
    ) {
        let name = rt.metadata.name.clone().unwrap_or_default();
        if deleted {
            self.cache.cluster_training_runtimes.remove(&name);
        } else {
            self.cache
                .cluster_training_runtimes
                .insert(name.clone(), rt);
        }
        rerun_referrers(&mut self.cache, &mut self.kinds, &RuntimeKey::Cluster(name));
    }
}
