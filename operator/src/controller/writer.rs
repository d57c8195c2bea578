//! API writes with preconditions and retries.
//!
//! Every update is a JSON merge patch computed from the object as last read to the object as wanted, carrying
//! that read's `metadata.resourceVersion`, so the API server rejects it (409) when someone else wrote in between.
//! A conflict re-reads the object and re-applies the change to the fresh copy; a server error or a broken
//! connection is retried with exponential backoff; the write is given up only when the object is gone (404) or
//! the API server refuses the change itself (another 4xx). What the API server answers is returned without its
//! `managedFields`, as the watchers keep objects: callers cache it, and nothing reads them.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::controller::watch::strip;
use crate::telemetry::Metrics;

/// A write that cannot succeed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The change cannot be made to the object (e.g. an admission that does not fit the job).
    #[error("{object}: {message}")]
    Rejected {
        /// The object.
        object: String,
        /// Why.
        message: String,
    },
    /// The API server refused the write.
    #[error("{object}: API server refused the write: {error}")]
    Api {
        /// The object.
        object: String,
        /// The API error.
        error: Box<kube::Error>,
    },
}

/// Which endpoint a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The object (spec and metadata).
    Main,
    /// The `/status` subresource.
    Status,
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`; None when they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        _ => (old != new).then(|| new.clone()),
    }
}

fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        // Transport, TLS and decoding troubles: the request may not have arrived.
        _ => true,
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Carries out writes for the engine task.
#[derive(Clone)]
pub struct Writer {
    base: Duration,
    max: Duration,
    metrics: Arc<Metrics>,
}

impl Writer {
    /// A writer retrying from `base` up to `max` between attempts.
    pub fn new(base: Duration, max: Duration, metrics: Arc<Metrics>) -> Self {
        Self { base, max, metrics }
    }

    fn delay(&self, attempt: u32) -> Duration {
        self.base
            .checked_mul(1u32 << attempt.min(20))
            .unwrap_or(self.max)
            .min(self.max)
    }

    fn retried(&self, verb: &str, reason: &str) {
        self.metrics.api_write_retried(verb, reason);
    }

    /// Applies `mutate` to `cached` (the last copy read) and writes the difference to `endpoint`, re-reading and
    /// re-applying on conflict. `mutate` returns Ok(false) when there is nothing to change. Returns the object
    /// as written (or as found when unchanged), None when it no longer exists.
    pub async fn update<K, F>(
        &self,
        api: &Api<K>,
        cached: K,
        endpoint: Endpoint,
        mut mutate: F,
    ) -> Result<Option<K>, WriteError>
    where
        K: Resource + Clone + Debug + Serialize + DeserializeOwned,
        K::DynamicType: Default,
        F: FnMut(&mut K) -> Result<bool, String>,
    {
        let mut current = cached;
        let mut attempt = 0u32;
        let kind = K::kind(&Default::default()).into_owned();
        let object = match current.namespace() {
            Some(ns) => format!("{kind} {ns}/{}", current.name_any()),
            None => format!("{kind} {}", current.name_any()),
        };
        let name = current.name_any();
        loop {
            let mut wanted = current.clone();
            match mutate(&mut wanted) {
                Ok(true) => {}
                Ok(false) => return Ok(Some(current)),
                Err(message) => return Err(WriteError::Rejected { object, message }),
            }
            let mut old = serde_json::to_value(&current).unwrap_or(Value::Null);
            let mut new = serde_json::to_value(&wanted).unwrap_or(Value::Null);
            let (old, new) = match endpoint {
                Endpoint::Status => (
                    serde_json::json!({"status": old["status"].take()}),
                    serde_json::json!({"status": new["status"].take()}),
                ),
                Endpoint::Main => {
                    for v in [&mut old, &mut new] {
                        if let Some(m) = v.as_object_mut() {
                            m.remove("status");
                        }
                    }
                    (old, new)
                }
            };
            let Some(mut patch) = merge_diff(&old, &new) else {
                return Ok(Some(current));
            };
            // The precondition: the write applies only to the version it was computed from.
            patch["metadata"]["resourceVersion"] =
                Value::String(current.resource_version().unwrap_or_default());
            let pp = PatchParams::default();
            let result = match endpoint {
                Endpoint::Main => api.patch(&name, &pp, &Patch::Merge(&patch)).await,
                Endpoint::Status => api.patch_status(&name, &pp, &Patch::Merge(&patch)).await,
            };
            let verb = match endpoint {
                Endpoint::Main => "patch",
                Endpoint::Status => "patch_status",
            };
            match result {
                Ok(mut obj) => {
                    strip(&mut obj);
                    return Ok(Some(obj));
                }
                Err(e) if api_code(&e) == Some(404) => return Ok(None),
                Err(e) if api_code(&e) == Some(409) => {
                    self.retried(verb, "conflict");
                    tracing::debug!(%object, "conflict; re-reading");
                    loop {
                        match api.get_opt(&name).await {
                            Ok(Some(mut fresh)) => {
                                strip(&mut fresh);
                                current = fresh;
                                break;
                            }
                            Ok(None) => return Ok(None),
                            Err(e) => {
                                self.retried("get", "error");
                                tracing::warn!(%object, error = %e, "re-read failed; retrying");
                                tokio::time::sleep(self.delay(attempt)).await;
                                attempt += 1;
                            }
                        }
                    }
                }
                Err(e) if retryable(&e) => {
                    self.retried(verb, "error");
                    tracing::warn!(%object, error = %e, "write failed; retrying");
                    tokio::time::sleep(self.delay(attempt)).await;
                    attempt += 1;
                }
                Err(e) => {
                    return Err(WriteError::Api {
                        object,
                        error: Box::new(e),
                    });
                }
            }
        }
    }

    /// Creates `obj`; an object of that name already there counts as created (returns None).
    pub async fn create<K>(&self, api: &Api<K>, obj: &K) -> Result<Option<K>, WriteError>
    where
        K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    {
        let mut attempt = 0u32;
        loop {
            match api.create(&PostParams::default(), obj).await {
                Ok(mut o) => {
                    strip(&mut o);
                    return Ok(Some(o));
                }
                Err(e) if api_code(&e) == Some(409) => return Ok(None),
                Err(e) if retryable(&e) => {
                    self.retried("create", "error");
                    tracing::warn!(object = %obj.name_any(), error = %e, "create failed; retrying");
                    tokio::time::sleep(self.delay(attempt)).await;
                    attempt += 1;
                }
                Err(e) => {
                    return Err(WriteError::Api {
                        object: obj.name_any(),
                        error: Box::new(e),
                    });
                }
            }
        }
    }

    /// Deletes the object; already gone is fine.
    pub async fn delete<K>(&self, api: &Api<K>, name: &str) -> Result<(), WriteError>
    where
        K: Resource + Clone + Debug + DeserializeOwned,
    {
        let mut attempt = 0u32;
        loop {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => return Ok(()),
                Err(e) if api_code(&e) == Some(404) => return Ok(()),
                Err(e) if retryable(&e) => {
                    self.retried("delete", "error");
                    tokio::time::sleep(self.delay(attempt)).await;
                    attempt += 1;
                }
                Err(e) => {
                    return Err(WriteError::Api {
                        object: name.to_string(),
                        error: Box::new(e),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_diff_sets_changes_and_nulls_removed_keys() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]});
        let new = json!({"a": 1, "b": {"c": 5}, "e": [1], "f": "x"});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"b": {"c": 5, "d": null}, "e": [1], "f": "x"}))
        );
        assert_eq!(merge_diff(&old, &old), None);
        let mut patched = old.clone();
        json_patch::merge(&mut patched, &merge_diff(&old, &new).unwrap());
        assert_eq!(patched, new);
    }
}
