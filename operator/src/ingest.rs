//! Kueue API objects in, engine model out: the one place that reads Kueue's types for the engine.
//!
//! Quantities become integers in the scheduler's units, defaults are applied, and anything the engine cannot use
//! becomes an [`IngestError`] naming the object and the field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::kueue::validation::{self, ValidationErrors};
use sluice_sdk::quantity::resource_value;

use crate::engine;

/// An object the engine cannot take, with the field at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IngestError {
    /// The object breaks one of Kueue's rules (the same validation the webhook applies).
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// A field the engine cannot use.
    #[error("{object}: {field}: {message}")]
    Field {
        /// "Kind name" or "Kind namespace/name".
        object: String,
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn err(object: &str, field: impl Into<String>, message: impl ToString) -> IngestError {
    IngestError::Field {
        object: object.to_string(),
        field: field.into(),
        message: message.to_string(),
    }
}

fn name_of(kind: &str, meta: &meta::ObjectMeta) -> Result<String, IngestError> {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| err(kind, "metadata.name", "required"))
}

/// Workload annotation: when the workload last wrote a checkpoint (RFC 3339); evicting it loses only the work since.
pub const LAST_CHECKPOINT_ANNOTATION: &str = "sluice.dev/last-checkpoint";

/// Milliseconds since the epoch of a Kubernetes timestamp.
pub fn time_of(t: &meta::Time) -> engine::Time {
    t.0.as_millisecond()
}

fn weight(
    object: &str,
    field: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<f64, IngestError> {
    let milli = resource_value("cpu", q).map_err(|e| err(object, field, e))?;
    if milli < 0 {
        return Err(err(object, field, "must not be negative"));
    }
    Ok(milli as f64 / 1000.0)
}

/// ResourceFlavor -> engine flavor.
pub fn flavor(rf: &api::ResourceFlavor) -> Result<engine::Flavor, IngestError> {
    validation::validate_resource_flavor(rf)?;
    let name = name_of("ResourceFlavor", &rf.metadata)?;
    let object = format!("ResourceFlavor {name}");
    let node_taints = rf
        .spec
        .node_taints
        .iter()
        .enumerate()
        .map(|(i, t)| taint(&object, &format!("spec.nodeTaints[{i}]"), t))
        .collect::<Result<_, _>>()?;
    let tolerations = rf
        .spec
        .tolerations
        .iter()
        .enumerate()
        .map(|(i, t)| toleration(&object, &format!("spec.tolerations[{i}]"), t))
        .collect::<Result<_, _>>()?;
    Ok(engine::Flavor {
        name,
        node_labels: rf.spec.node_labels.clone(),
        node_taints,
        tolerations,
        topology_name: rf.spec.topology_name.clone(),
    })
}

fn taint_effect(
    object: &str,
    field: &str,
    effect: &str,
) -> Result<engine::TaintEffect, IngestError> {
    match effect {
        "NoSchedule" => Ok(engine::TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(engine::TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(engine::TaintEffect::NoExecute),
        other => Err(err(
            object,
            field,
            format!("unknown effect {other:?} (NoSchedule, PreferNoSchedule, NoExecute)"),
        )),
    }
}

fn taint(object: &str, field: &str, t: &core::Taint) -> Result<engine::Taint, IngestError> {
    Ok(engine::Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: taint_effect(object, &format!("{field}.effect"), &t.effect)?,
    })
}

fn toleration(
    object: &str,
    field: &str,
    t: &core::Toleration,
) -> Result<engine::Toleration, IngestError> {
    let operator = match t.operator.as_deref() {
        None | Some("Equal") | Some("") => engine::TolerationOperator::Equal,
        Some("Exists") => engine::TolerationOperator::Exists,
        Some(other) => {
            return Err(err(
                object,
                format!("{field}.operator"),
                format!("unknown operator {other:?} (Equal, Exists)"),
            ));
        }
    };
    let effect = match t.effect.as_deref().filter(|e| !e.is_empty()) {
        None => None,
        Some(e) => Some(taint_effect(object, &format!("{field}.effect"), e)?),
    };
    Ok(engine::Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        operator,
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect,
    })
}

fn resource_groups(
    object: &str,
    groups: &[api::ResourceGroup],
) -> Result<Vec<engine::ResourceGroup>, IngestError> {
    groups
        .iter()
        .enumerate()
        .map(|(g, rg)| {
            let flavors = rg
                .flavors
                .iter()
                .enumerate()
                .map(|(f, fq)| {
                    let resources = fq
                        .resources
                        .iter()
                        .enumerate()
                        .map(|(r, rq)| {
                            let field =
                                format!("spec.resourceGroups[{g}].flavors[{f}].resources[{r}]");
                            let value = |what: &str, q| {
                                resource_value(&rq.name, q)
                                    .map_err(|e| err(object, format!("{field}.{what}"), e))
                            };
                            Ok(engine::ResourceQuota {
                                name: rq.name.clone(),
                                nominal: value("nominalQuota", &rq.nominal_quota)?,
                                borrowing_limit: rq
                                    .borrowing_limit
                                    .as_ref()
                                    .map(|q| value("borrowingLimit", q))
                                    .transpose()?,
                                lending_limit: rq
                                    .lending_limit
                                    .as_ref()
                                    .map(|q| value("lendingLimit", q))
                                    .transpose()?,
                            })
                        })
                        .collect::<Result<_, IngestError>>()?;
                    Ok(engine::FlavorQuotas {
                        flavor: fq.name.clone(),
                        resources,
                    })
                })
                .collect::<Result<_, IngestError>>()?;
            Ok(engine::ResourceGroup {
                covered_resources: rg.covered_resources.clone(),
                flavors,
            })
        })
        .collect()
}

/// A Kubernetes LabelSelector -> engine selector.
pub fn label_selector(
    object: &str,
    field: &str,
    s: &meta::LabelSelector,
) -> Result<engine::LabelSelector, IngestError> {
    let match_expressions = s
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| {
            let operator = match e.operator.as_str() {
                "In" => engine::LabelSelectorOperator::In,
                "NotIn" => engine::LabelSelectorOperator::NotIn,
                "Exists" => engine::LabelSelectorOperator::Exists,
                "DoesNotExist" => engine::LabelSelectorOperator::DoesNotExist,
                other => {
                    return Err(err(
                        object,
                        format!("{field}.matchExpressions[{i}].operator"),
                        format!("unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"),
                    ));
                }
            };
            Ok(engine::LabelSelectorRequirement {
                key: e.key.clone(),
                operator,
                values: e.values.clone().unwrap_or_default(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(engine::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions,
    })
}

/// ClusterQueue -> engine ClusterQueue (Kueue's defaults applied).
pub fn cluster_queue(cq: &api::ClusterQueue) -> Result<engine::ClusterQueue, IngestError> {
    validation::validate_cluster_queue(cq)?;
    let name = name_of("ClusterQueue", &cq.metadata)?;
    let object = format!("ClusterQueue {name}");
    let spec = &cq.spec;
    let fungibility = spec.flavor_fungibility();
    let preemption = spec.preemption();
    let bwc = preemption.borrow_within_cohort.clone().unwrap_or_default();
    Ok(engine::ClusterQueue {
        cohort: spec.cohort().map(str::to_string),
        resource_groups: resource_groups(&object, &spec.resource_groups)?,
        queueing_strategy: match spec.queueing_strategy() {
            api::QueueingStrategy::StrictFIFO => engine::QueueingStrategy::StrictFIFO,
            api::QueueingStrategy::BestEffortFIFO => engine::QueueingStrategy::BestEffortFIFO,
        },
        namespace_selector: spec
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(&object, "spec.namespaceSelector", s))
            .transpose()?,
        flavor_fungibility: engine::FlavorFungibility {
            when_can_borrow: fungibility_policy(fungibility.when_can_borrow()),
            when_can_preempt: fungibility_policy(fungibility.when_can_preempt()),
            preference: fungibility.preference.map(|p| match p {
                api::FlavorFungibilityPreference::BorrowingOverPreemption => {
                    engine::FlavorPreference::BorrowingOverPreemption
                }
                api::FlavorFungibilityPreference::PreemptionOverBorrowing => {
                    engine::FlavorPreference::PreemptionOverBorrowing
                }
            }),
        },
        preemption: engine::PreemptionPolicy {
            reclaim_within_cohort: match preemption.reclaim_within_cohort() {
                api::PreemptionPolicy::Never => engine::ReclaimPolicy::Never,
                api::PreemptionPolicy::LowerPriority => engine::ReclaimPolicy::LowerPriority,
                api::PreemptionPolicy::Any => engine::ReclaimPolicy::Any,
                other => {
                    return Err(err(
                        &object,
                        "spec.preemption.reclaimWithinCohort",
                        format!("{other:?} is not allowed here"),
                    ));
                }
            },
            within_cluster_queue: match preemption.within_cluster_queue() {
                api::PreemptionPolicy::Never => engine::WithinCqPolicy::Never,
                api::PreemptionPolicy::LowerPriority => engine::WithinCqPolicy::LowerPriority,
                api::PreemptionPolicy::LowerOrNewerEqualPriority => {
                    engine::WithinCqPolicy::LowerOrNewerEqualPriority
                }
                other => {
                    return Err(err(
                        &object,
                        "spec.preemption.withinClusterQueue",
                        format!("{other:?} is not allowed here"),
                    ));
                }
            },
            borrow_within_cohort: engine::BorrowWithinCohort {
                policy: match bwc.policy() {
                    api::BorrowWithinCohortPolicy::Never => engine::BorrowWithinCohortPolicy::Never,
                    api::BorrowWithinCohortPolicy::LowerPriority => {
                        engine::BorrowWithinCohortPolicy::LowerPriority
                    }
                },
                max_priority_threshold: bwc.max_priority_threshold,
            },
        },
        stop_policy: stop_policy(spec.stop_policy()),
        fair_weight: weight(
            &object,
            "spec.fairSharing.weight",
            &spec.fair_sharing_weight(),
        )?,
        admission_checks: spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| s.admission_checks.iter().map(|c| c.name.clone()))
            .collect(),
        admission_fair_sharing: spec.admission_scope.as_ref().and_then(|s| s.admission_mode)
            == Some(api::AdmissionMode::UsageBasedAdmissionFairSharing),
        name,
    })
}

fn fungibility_policy(p: api::FlavorFungibilityPolicy) -> engine::FungibilityPolicy {
    match p {
        api::FlavorFungibilityPolicy::MayStopSearch => engine::FungibilityPolicy::MayStopSearch,
        api::FlavorFungibilityPolicy::TryNextFlavor => engine::FungibilityPolicy::TryNextFlavor,
    }
}

fn stop_policy(p: api::StopPolicy) -> engine::StopPolicy {
    match p {
        api::StopPolicy::None => engine::StopPolicy::None,
        api::StopPolicy::Hold => engine::StopPolicy::Hold,
        api::StopPolicy::HoldAndDrain => engine::StopPolicy::HoldAndDrain,
    }
}

/// Cohort -> engine Cohort.
pub fn cohort(c: &api::Cohort) -> Result<engine::Cohort, IngestError> {
    validation::validate_cohort(c)?;
    let name = name_of("Cohort", &c.metadata)?;
    let object = format!("Cohort {name}");
    Ok(engine::Cohort {
        parent: c.spec.parent().map(str::to_string),
        resource_groups: resource_groups(&object, &c.spec.resource_groups)?,
        fair_weight: weight(
            &object,
            "spec.fairSharing.weight",
            &c.spec.fair_sharing_weight(),
        )?,
        name,
    })
}

/// LocalQueue -> engine LocalQueue.
pub fn local_queue(lq: &api::LocalQueue) -> Result<engine::LocalQueue, IngestError> {
    validation::validate_local_queue(lq)?;
    let name = name_of("LocalQueue", &lq.metadata)?;
    let namespace = lq
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    if lq.spec.cluster_queue.is_empty() {
        return Err(err(
            &format!("LocalQueue {namespace}/{name}"),
            "spec.clusterQueue",
            "required",
        ));
    }
    Ok(engine::LocalQueue {
        cluster_queue: lq.spec.cluster_queue.clone(),
        stop_policy: stop_policy(lq.spec.stop_policy()),
        // Kueue validates no LocalQueue weight: one that is not positive sorts its queue last.
        fair_sharing_weight: match lq
            .spec
            .fair_sharing
            .as_ref()
            .and_then(|f| f.weight.as_ref())
        {
            None => None,
            Some(q) => Some(
                resource_value("cpu", q).map_err(|e| {
                    err(
                        &format!("LocalQueue {namespace}/{name}"),
                        "spec.fairSharing.weight",
                        e,
                    )
                })? as f64
                    / 1000.0,
            ),
        },
        namespace,
        name,
    })
}

/// A LocalQueue's persisted admission-fair-sharing usage (`status.fairSharing.admissionFairSharingStatus`), to
/// restore after a restart; None when it has none or it cannot be read.
pub fn local_queue_usage(lq: &api::LocalQueue) -> Option<engine::ConsumedUsage> {
    let st = lq
        .status
        .as_ref()?
        .fair_sharing
        .as_ref()?
        .admission_fair_sharing_status
        .as_ref()?;
    let resources = st
        .consumed_resources
        .iter()
        .filter_map(|(r, q)| {
            let nanos = sluice_sdk::quantity::nano_value(q)?;
            Some((r.clone(), nanos.max(0) as f64 / 1e9))
        })
        .collect();
    Some(engine::ConsumedUsage {
        resources,
        last_update: st.last_update.0.as_millisecond(),
    })
}

/// Namespace -> engine Namespace (its labels feed namespaceSelectors). Kubernetes labels every namespace with
/// `kubernetes.io/metadata.name`, the key selectors most often use, so it is always present here.
pub fn namespace(ns: &core::Namespace) -> Result<engine::Namespace, IngestError> {
    let name = name_of("Namespace", &ns.metadata)?;
    let mut labels = ns.metadata.labels.clone().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
    Ok(engine::Namespace { name, labels })
}

/// The label Kubernetes sets on every namespace to its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Per-pod requests of a pod spec as Kueue computes them: containers (and sidecar init containers) add up, a
/// regular init container counts when it asks for more, pod overhead is added. A limit stands in for a missing
/// request, as the API server's defaulting does.
pub fn pod_requests(
    object: &str,
    field: &str,
    pod: &core::PodSpec,
) -> Result<engine::ResourceList, IngestError> {
    // Requests of one `resources` block (`field` is its path); a limit stands in for a missing request.
    let requests_of = |res: Option<&core::ResourceRequirements>,
                       field: String|
     -> Result<engine::ResourceList, IngestError> {
        let mut out = engine::ResourceList::new();
        let limits = res.and_then(|r| r.limits.as_ref());
        let requests = res.and_then(|r| r.requests.as_ref());
        for (kind, values) in [("limits", limits), ("requests", requests)] {
            for (name, q) in values.into_iter().flatten() {
                let v = resource_value(name, q)
                    .map_err(|e| err(object, format!("{field}.{kind}[{name}]"), e))?;
                out.insert(name.clone(), v);
            }
        }
        Ok(out)
    };
    let container_requests = |c: &core::Container, cfield: String| {
        requests_of(c.resources.as_ref(), format!("{cfield}.resources"))
    };
    let add = |into: &mut engine::ResourceList, from: &engine::ResourceList| {
        for (k, v) in from {
            let e = into.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    };
    let mut total = engine::ResourceList::new();
    for (i, c) in pod.containers.iter().enumerate() {
        add(
            &mut total,
            &container_requests(c, format!("{field}.containers[{i}]"))?,
        );
    }
    let mut sidecars = engine::ResourceList::new();
    let mut init_peak = engine::ResourceList::new();
    for (i, c) in pod.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c, format!("{field}.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &r);
        } else {
            // A regular init container runs beside the sidecars started before it.
            for (k, v) in &r {
                let with_sidecars = v.saturating_add(sidecars.get(k).copied().unwrap_or(0));
                let peak = init_peak.entry(k.clone()).or_default();
                *peak = (*peak).max(with_sidecars);
            }
        }
    }
    add(&mut total, &sidecars);
    for (k, v) in init_peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    // Pod-level resources (`spec.resources`), when set, stand for the containers' sum of the resources they
    // support (cpu, memory, hugepages), as Kubernetes' PodRequests computes; a limit stands in for a missing
    // request here too.
    if let Some(pod_level) = &pod.resources {
        let level = requests_of(Some(pod_level), format!("{field}.resources"))?;
        for (k, v) in level {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                total.insert(k, v);
            }
        }
    }
    for (name, q) in pod.overhead.iter().flatten() {
        let v = resource_value(name, q)
            .map_err(|e| err(object, format!("{field}.overhead[{name}]"), e))?;
        let e = total.entry(name.clone()).or_default();
        *e = e.saturating_add(v);
    }
    total.retain(|_, v| *v != 0);
    Ok(total)
}

fn node_selector_terms(
    object: &str,
    field: &str,
    pod: &core::PodSpec,
) -> Result<Vec<engine::NodeSelectorTerm>, IngestError> {
    let Some(required) = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Ok(Vec::new());
    };
    required
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(t, term)| {
            let requirements = term
                .match_expressions
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, e)| {
                    let operator = match e.operator.as_str() {
                        "In" => engine::NodeSelectorOperator::In,
                        "NotIn" => engine::NodeSelectorOperator::NotIn,
                        "Exists" => engine::NodeSelectorOperator::Exists,
                        "DoesNotExist" => engine::NodeSelectorOperator::DoesNotExist,
                        "Gt" => engine::NodeSelectorOperator::Gt,
                        "Lt" => engine::NodeSelectorOperator::Lt,
                        other => {
                            return Err(err(
                                object,
                                format!("{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{t}].matchExpressions[{i}].operator"),
                                format!("unknown operator {other:?}"),
                            ));
                        }
                    };
                    Ok(engine::NodeSelectorRequirement {
                        key: e.key.clone(),
                        operator,
                        values: e.values.clone().unwrap_or_default(),
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(engine::NodeSelectorTerm { match_expressions: requirements })
        })
        .collect()
}

/// Workload -> engine Workload, with its admission when it already holds quota.
pub fn workload(
    wl: &api::Workload,
) -> Result<(engine::Workload, Option<engine::Admission>), IngestError> {
    workload_with(wl, &crate::resource_rules::NO_RULES)
}

/// A Workload as the engine sees it once Kueue's adjustments (`rules`: its namespace's LimitRanges, the
/// RuntimeClasses) are made to its pod templates, with the admission it records.
pub fn workload_with(
    wl: &api::Workload,
    rules: &crate::resource_rules::ResourceRules,
) -> Result<(engine::Workload, Option<engine::Admission>), IngestError> {
    validation::validate_workload(wl)?;
    let name = name_of("Workload", &wl.metadata)?;
    let namespace = wl
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let object = format!("Workload {namespace}/{name}");
    if wl.spec.pod_sets.is_empty() {
        return Err(err(
            &object,
            "spec.podSets",
            "at least one pod set is required",
        ));
    }
    // An empty queueName is accepted, as Kueue does: the Workload waits ("LocalQueue  doesn't exist").
    let mut pod_sets = Vec::with_capacity(wl.spec.pod_sets.len());
    let mut adjusted = Vec::with_capacity(wl.spec.pod_sets.len());
    for (i, ps) in wl.spec.pod_sets.iter().enumerate() {
        let field = format!("spec.podSets[{i}]");
        if ps.count < 0 {
            return Err(err(
                &object,
                format!("{field}.count"),
                "must not be negative",
            ));
        }
        if let Some(min) = ps.min_count
            && (min < 1 || min > ps.count)
        {
            return Err(err(
                &object,
                format!("{field}.minCount"),
                format!("must be between 1 and count ({})", ps.count),
            ));
        }
        let mut pod = ps.template.spec.clone().unwrap_or_default();
        rules.adjust(&namespace, &mut pod);
        let tfield = format!("{field}.template.spec");
        let requests = pod_requests(&object, &tfield, &pod)?;
        let mut counted = requests.clone();
        rules.counting.count(&mut counted);
        pod_sets.push(engine::PodSet {
            name: ps.name.clone(),
            count: ps.count,
            min_count: ps.min_count,
            requests: counted,
            node_selector: pod.node_selector.clone().unwrap_or_default(),
            required_affinity: node_selector_terms(&object, &tfield, &pod)?,
            tolerations: pod
                .tolerations
                .iter()
                .flatten()
                .enumerate()
                .map(|(t, tol)| toleration(&object, &format!("{tfield}.tolerations[{t}]"), tol))
                .collect::<Result<_, _>>()?,
            topology: pod_set_topology(&object, &field, ps)?,
        });
        adjusted.push((pod, requests));
    }
    let checked: Vec<_> = adjusted.iter().map(|(p, r)| (p, r)).collect();
    let misconfigured = rules.admissibility(&namespace, &checked);
    let adjusted_resources = adjusted_digest(adjusted.iter().map(|(p, _)| p));
    let creation_time = wl
        .metadata
        .creation_timestamp
        .as_ref()
        .map(time_of)
        .unwrap_or(0);
    let admission = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| admission(&object, a, &wl.spec.pod_sets))
        .transpose()?;
    // Kueue orders preemption candidates of equal priority by when they reserved quota: keep that across a
    // restart instead of taking the creation time.
    let quota_reserved_at = admission
        .as_ref()
        .and(wl.status.as_ref())
        .and_then(|s| {
            s.conditions.iter().find(|c| {
                c.type_ == sluice_sdk::kueue::labels::condition::QUOTA_RESERVED
                    && c.status == "True"
            })
        })
        .map(|c| time_of(&c.last_transition_time));
    let checkpointed_at = match wl
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_CHECKPOINT_ANNOTATION))
    {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<meta::Time>(serde_json::Value::String(v.clone()))
                .map(|t| time_of(&t))
                .map_err(|_| {
                    err(
                        &object,
                        format!("metadata.annotations[{LAST_CHECKPOINT_ANNOTATION}]"),
                        format!("{v:?} is not an RFC 3339 time"),
                    )
                })?,
        ),
    };
    let out = engine::Workload {
        uid: wl
            .metadata
            .uid
            .clone()
            .unwrap_or_else(|| format!("{namespace}/{name}")),
        namespace,
        name,
        queue_name: wl.spec.queue_name.clone(),
        priority: wl.spec.priority(),
        creation_time,
        active: wl.spec.is_active(),
        pod_sets,
        job_uid: wl
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(sluice_sdk::kueue::labels::JOB_UID_LABEL))
            .cloned(),
        quota_reserved_at,
        checkpointed_at,
        // Kueue reads a value that does not parse as the base priority alone (its webhook refuses it when the
        // gate is on).
        priority_boost: wl
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(sluice_sdk::kueue::labels::PRIORITY_BOOST_ANNOTATION))
            .and_then(|v| v.trim().parse::<i32>().ok())
            .unwrap_or(0),
        admitted: condition_true(wl, sluice_sdk::kueue::labels::condition::ADMITTED),
        pods_ready: condition_true(wl, sluice_sdk::kueue::labels::condition::PODS_READY),
        reclaimable: wl
            .status
            .as_ref()
            .map(|s| {
                s.reclaimable_pods
                    .iter()
                    .map(|r| (r.name.clone(), r.count))
                    .collect()
            })
            .unwrap_or_default(),
        scheduling_shape: scheduling_shape(wl),
        misconfigured,
        admission_gated_by: crate::jobs::admission_gates(&wl.metadata).map(str::to_string),
        adjusted_resources,
    };
    Ok((out, admission))
}

/// A digest of the pod templates' shapes (Kueue's `SpecShape`, which its scheduling hash covers): of what it
/// holds, the ports, runtime class, pod priority, spread constraints, overhead and claims are nowhere else in the
/// engine's workload.
/// A digest of what Kueue's adjustments change in the pod templates: every container's resources, the pod's
/// resources and its overhead.
fn adjusted_digest<'a>(pods: impl Iterator<Item = &'a core::PodSpec>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for pod in pods {
        let containers = pod.init_containers.iter().flatten().chain(&pod.containers);
        for c in containers {
            serde_json::to_string(&c.resources)
                .unwrap_or_default()
                .hash(&mut h);
        }
        serde_json::to_string(&(&pod.resources, &pod.overhead))
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

fn scheduling_shape(wl: &api::Workload) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for ps in &wl.spec.pod_sets {
        if let Some(spec) = ps.template.spec.as_ref() {
            validation::job::pod_spec_shape(spec)
                .to_string()
                .hash(&mut h);
        }
    }
    h.finish()
}

fn condition_true(wl: &api::Workload, type_: &str) -> bool {
    wl.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

/// `status.admission` -> engine admission. A missing count means the whole pod set, as Kueue reads it.
fn admission(
    object: &str,
    a: &api::Admission,
    pod_sets: &[api::PodSet],
) -> Result<engine::Admission, IngestError> {
    let pod_set_assignments = a
        .pod_set_assignments
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let resource_usage = p
                .resource_usage
                .iter()
                .map(|(r, q)| {
                    resource_value(r, q).map(|v| (r.clone(), v)).map_err(|e| {
                        err(
                            object,
                            format!("status.admission.podSetAssignments[{i}].resourceUsage[{r}]"),
                            e,
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(engine::PodSetAssignment {
                name: p.name.clone(),
                flavors: p.flavors.clone(),
                resource_usage,
                count: p.count.unwrap_or_else(|| {
                    pod_sets
                        .iter()
                        .find(|ps| ps.name == p.name)
                        .map_or(0, |ps| ps.count)
                }),
            })
        })
        .collect::<Result<_, IngestError>>()?;
    Ok(engine::Admission {
        cluster_queue: a.cluster_queue.clone(),
        pod_set_assignments,
    })
}

/// Flavor name -> GPUs of that flavor held by an admission (for reports).
pub fn gpus_by_flavor(a: &engine::Admission, gpu_resource: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for p in &a.pod_set_assignments {
        if let (Some(f), Some(v)) = (
            p.flavors.get(gpu_resource),
            p.resource_usage.get(gpu_resource),
        ) {
            *out.entry(f.clone()).or_default() += v;
        }
    }
    out
}

/// A pod set's topology request: `spec.podSets[].topologyRequest` (Kueue reads the
/// `kueue.x-k8s.io/podset-*-topology` annotations only on job pod templates, when it builds the
/// Workload, so on a Workload they are ignored), plus Sluice's
/// `sluice.dev/podset-required-topology: nvlink` pod template annotation.
pub fn pod_set_topology(
    object: &str,
    field: &str,
    ps: &api::PodSet,
) -> Result<Option<engine::PodSetTopology>, IngestError> {
    use sluice_sdk::topology as st;
    let nvlink = match ps
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(st::PODSET_REQUIRED_TOPOLOGY_ANNOTATION))
    {
        None => false,
        Some(v) if v == st::NVLINK => true,
        Some(v) => {
            return Err(err(
                object,
                format!(
                    "{field}.template.metadata.annotations[{}]",
                    st::PODSET_REQUIRED_TOPOLOGY_ANNOTATION
                ),
                format!(
                    "unsupported value {v:?}: the only level is {:?}",
                    st::NVLINK
                ),
            ));
        }
    };
    let tr = ps.topology_request.clone().unwrap_or_default();
    let (mode, level) = match (tr.required, tr.preferred, tr.unconstrained.unwrap_or(false)) {
        (Some(l), _, _) => (engine::TopologyMode::Required, Some(l)),
        (None, Some(l), _) => (engine::TopologyMode::Preferred, Some(l)),
        (None, None, true) => (engine::TopologyMode::Unconstrained, None),
        (None, None, false) => (engine::TopologyMode::None, None),
    };
    // Kueue uses the constraints list when set, else the single slice fields.
    let (slice_level, slice_size) = match tr.podset_slice_required_topology_constraints.first() {
        Some(c) => (Some(c.topology.clone()), Some(c.size)),
        None => {
            let size = match &tr.pod_set_slice_required_topology {
                Some(_) => Some(tr.pod_set_slice_size.unwrap_or(0)),
                None => tr.pod_set_slice_size,
            };
            (tr.pod_set_slice_required_topology, size)
        }
    };
    let out = engine::PodSetTopology {
        mode,
        level,
        nvlink,
        slice_level,
        slice_size,
        group: tr.pod_set_group_name,
    };
    Ok((out.explicit() || out.group.is_some()).then_some(out))
}

/// Kueue Topology -> engine topology levels.
pub fn topology(t: &api::Topology) -> Result<engine::TopologyLevels, IngestError> {
    let name = name_of("Topology", &t.metadata)?;
    if t.spec.levels.is_empty() {
        return Err(err(
            &format!("Topology {name}"),
            "spec.levels",
            "at least one level is required",
        ));
    }
    Ok(engine::TopologyLevels {
        name,
        levels: t.spec.levels.iter().map(|l| l.node_label.clone()).collect(),
    })
}

/// v1 Node -> engine Node (allocatable in scheduler units, Ready condition, taints).
pub fn node(n: &core::Node) -> Result<engine::Node, IngestError> {
    let name = name_of("Node", &n.metadata)?;
    let object = format!("Node {name}");
    let mut allocatable = engine::ResourceList::new();
    let status = n.status.clone().unwrap_or_default();
    for (r, q) in status.allocatable.iter().flatten() {
        let v = resource_value(r, q)
            .map_err(|e| err(&object, format!("status.allocatable[{r}]"), e))?;
        allocatable.insert(r.clone(), v);
    }
    // A node without conditions (e.g. a hand-written manifest) counts as Ready.
    let ready = status.conditions.as_ref().is_none_or(|cs| {
        cs.iter()
            .find(|c| c.type_ == "Ready")
            .is_none_or(|c| c.status == "True")
    });
    let spec = n.spec.clone().unwrap_or_default();
    let taints = spec
        .taints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| taint(&object, &format!("spec.taints[{i}]"), t))
        .collect::<Result<_, _>>()?;
    Ok(engine::Node {
        name,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        allocatable,
        taints,
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
    })
}

/// NodeGpuTopology -> the engine's GPU report event.
pub fn node_gpu_topology(
    t: &sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology,
) -> Result<engine::Event, IngestError> {
    let name = name_of("NodeGpuTopology", &t.metadata)?;
    let node = if t.spec.node_name.is_empty() {
        name.clone()
    } else {
        t.spec.node_name.clone()
    };
    t.spec
        .gpus
        .validate(&node)
        .map_err(|e| err(&format!("NodeGpuTopology {name}"), "spec", e))?;
    Ok(engine::Event::UpsertNodeGpus {
        node,
        gpus: t.spec.gpus.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> core::PodSpec {
        serde_yaml::from_str(yaml).expect("pod spec")
    }

    #[test]
    fn containers_add_up_init_containers_peak_and_sidecars_run_beside() {
        let p = pod(r#"
containers:
- {name: a, resources: {requests: {cpu: "1", memory: 1Gi}}}
- {name: b, resources: {limits: {cpu: "2", nvidia.com/gpu: "1"}}}
initContainers:
- {name: setup, resources: {requests: {cpu: "4"}}}
- {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 500m}}}
- {name: late, resources: {requests: {cpu: "3"}}}
overhead: {cpu: 100m}
"#);
        let r = pod_requests("Pod p", "spec", &p).unwrap();
        // containers 3 + sidecar 0.5 = 3.5; init peak max(4, 3 + 0.5) = 4 -> 4, plus overhead 0.1.
        assert_eq!(r["cpu"], 4_100);
        assert_eq!(r["memory"], 1 << 30);
        assert_eq!(
            r["nvidia.com/gpu"], 1,
            "a limit stands in for a missing request"
        );
    }

    #[test]
    fn huge_requests_saturate_instead_of_overflowing() {
        let p = pod(r#"
containers:
- {name: a, resources: {requests: {memory: 5E}}}
- {name: b, resources: {requests: {memory: 5E}}}
"#);
        let r = pod_requests("Pod p", "spec", &p).unwrap();
        assert_eq!(r["memory"], i64::MAX);
    }

    #[test]
    fn pod_level_resources_replace_the_containers_sum() {
        let p = pod(r#"
resources: {requests: {cpu: "40"}, limits: {memory: 8Gi}}
containers:
- {name: a, resources: {requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "2"}}}
"#);
        let r = pod_requests("Pod p", "spec", &p).unwrap();
        assert_eq!(r["cpu"], 40_000);
        assert_eq!(r["memory"], 8 << 30);
        assert_eq!(
            r["nvidia.com/gpu"], 2,
            "extended resources stay per container"
        );
    }

    #[test]
    fn bad_container_quantity_names_the_field() {
        let p = pod("containers:\n- {name: a, resources: {requests: {cpu: lots}}}\n");
        let e = pod_requests("Workload ns/w", "spec.podSets[0].template.spec", &p).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("spec.podSets[0].template.spec.containers[0].resources.requests[cpu]"),
            "{msg}"
        );
    }

    #[test]
    fn namespaces_carry_their_name_label() {
        let ns: core::Namespace = serde_yaml::from_str("metadata: {name: team-a}").unwrap();
        let n = namespace(&ns).unwrap();
        assert_eq!(n.labels[NAMESPACE_NAME_LABEL], "team-a");
    }

    #[test]
    fn workload_topology_comes_from_topology_request_not_template_annotations() {
        // Kueue (workload.IsExplicitlyRequestingTAS, TASFlavorSnapshot.levelKey) reads only
        // spec.podSets[].topologyRequest on a Workload.
        let ps: api::PodSet = serde_yaml::from_str(
            "name: main\ncount: 2\ntemplate:\n  metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: rack}}\n  spec: {containers: []}\n",
        )
        .unwrap();
        assert_eq!(
            pod_set_topology("ns/w", "spec.podSets[0]", &ps).unwrap(),
            None
        );
        let ps: api::PodSet = serde_yaml::from_str(
            "name: main\ncount: 4\ntopologyRequest: {preferred: block, podSetSliceRequiredTopology: rack, podSetSliceSize: 2, podSetGroupName: g}\ntemplate:\n  metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: rack}}\n  spec: {containers: []}\n",
        )
        .unwrap();
        let t = pod_set_topology("ns/w", "spec.podSets[0]", &ps)
            .unwrap()
            .unwrap();
        assert_eq!(t.mode, engine::TopologyMode::Preferred);
        assert_eq!(t.level.as_deref(), Some("block"));
        assert_eq!(t.slice_level.as_deref(), Some("rack"));
        assert_eq!(t.slice_size, Some(2));
        assert_eq!(t.group.as_deref(), Some("g"));
    }
}
