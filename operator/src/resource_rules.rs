//! What Kueue reads beside a Workload to know its pods' requests, and whether they may be admitted at all: the
//! namespace's LimitRanges (their container defaults fill in missing limits and requests; their min and max bound
//! what a pod set may ask), the RuntimeClasses (a pod's fixed overhead), and its Configuration's `resources`
//! (excluded resource prefixes and resource transformations). Kueue adjusts an in-memory copy of each Workload when
//! it is queued (`workload.AdjustResources`), checks it when it is nominated (`workload.ValidateAdmissibility`) and
//! transforms the per-pod requests it counts (`workload.NewInfo`); the stored Workload keeps its template as the
//! job wrote it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, LimitRange, LimitRangeItem, PodSpec, ResourceRequirements,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use sluice_sdk::quantity::resource_value;

/// A resource list as the API writes it.
type List = BTreeMap<String, Quantity>;

/// LimitRanges by namespace and name, RuntimeClasses by name, and the Configuration's resource rules.
#[derive(Clone, Debug, Default)]
pub struct ResourceRules {
    limit_ranges: BTreeMap<String, BTreeMap<String, LimitRange>>,
    runtime_classes: BTreeMap<String, RuntimeClass>,
    /// The Configuration's `resources`.
    pub counting: Counting,
}

/// No LimitRange, no RuntimeClass, no transformation: requests are the templates' own.
pub static NO_RULES: ResourceRules = ResourceRules {
    limit_ranges: BTreeMap::new(),
    runtime_classes: BTreeMap::new(),
    counting: Counting {
        exclude_prefixes: Vec::new(),
        transformations: BTreeMap::new(),
    },
};

/// Kueue's Configuration `resources`: which requested resources are not counted, and how others are counted as
/// something else.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counting {
    /// `excludeResourcePrefixes`: a resource whose name starts with one is dropped from the requests.
    pub exclude_prefixes: Vec<String>,
    /// `transformations` by input resource.
    pub transformations: BTreeMap<String, Transformation>,
}

/// One of Kueue's resource transformations.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformation {
    /// `strategy: Replace` (the input is not counted itself); `Retain` (the default) keeps it.
    pub replace: bool,
    /// `multiplyBy`: the outputs scale with the request of this resource too.
    pub multiply_by: Option<String>,
    /// `outputs`: per unit of input, as nano-units (exact to the finest precision Kubernetes keeps).
    pub outputs: BTreeMap<String, i128>,
}

/// Nano-units per unit of a resource's scheduler value (milli-cpu, or base units).
fn nanos_per_value(resource: &str) -> i128 {
    if resource == "cpu" {
        1_000_000
    } else {
        1_000_000_000
    }
}

impl Counting {
    /// Kueue's per-pod requests once excluded resources are dropped and transformations applied (before the pod
    /// count multiplies them); a generated total below zero counts as zero, as does any negative request.
    pub fn count(&self, requests: &mut BTreeMap<String, i64>) {
        if !self.exclude_prefixes.is_empty() {
            requests.retain(|name, _| {
                !self
                    .exclude_prefixes
                    .iter()
                    .any(|p| name.starts_with(p.as_str()))
            });
        }
        if self.transformations.is_empty()
            || !requests
                .keys()
                .any(|k| self.transformations.contains_key(k))
        {
            requests.values_mut().for_each(|v| *v = (*v).max(0));
            return;
        }
        let mut retained = BTreeMap::new();
        // Generated totals in nano-units, kept apart from what was asked so they only cancel each other.
        let mut generated: BTreeMap<String, i128> = BTreeMap::new();
        for (name, &v) in requests.iter() {
            let Some(t) = self.transformations.get(name) else {
                retained.insert(name.clone(), v);
                continue;
            };
            let mut input = i128::from(v) * nanos_per_value(name);
            if let Some(by) = &t.multiply_by
                && let Some(&m) = requests.get(by)
            {
                input = input.saturating_mul(i128::from(m) * nanos_per_value(by)) / 1_000_000_000;
            }
            for (out, factor) in &t.outputs {
                let e = generated.entry(out.clone()).or_default();
                *e = e.saturating_add(input.saturating_mul(*factor) / 1_000_000_000);
            }
            if !t.replace {
                retained.insert(name.clone(), v);
            }
        }
        for (name, nanos) in generated {
            let per = nanos_per_value(&name);
            // Rounded up to the scheduler unit, as Kueue's quantities are read.
            let v = i64::try_from((nanos.max(0) as u128).div_ceil(per as u128)).unwrap_or(i64::MAX);
            let e = retained.entry(name).or_default();
            *e = e.saturating_add(v);
        }
        retained.values_mut().for_each(|v| *v = (*v).max(0));
        *requests = retained;
    }
}

/// One limit type's ranges merged as Kueue's `limitrange.Summarize` does: the lowest max, the highest min, the
/// first default and default request met.
#[derive(Clone, Debug, Default, PartialEq)]
struct Summary {
    max: List,
    min: List,
    default: List,
    default_request: List,
}

impl ResourceRules {
    /// No LimitRange or RuntimeClass yet, and the Configuration's `counting`.
    pub fn with_counting(counting: Counting) -> Self {
        Self {
            counting,
            ..Self::default()
        }
    }

    /// Records a LimitRange (added or changed).
    pub fn upsert_limit_range(&mut self, mut lr: LimitRange) {
        // A manifest read from a file has not been through the API server's defaulting; one that has is unchanged.
        for item in lr.spec.iter_mut().flat_map(|s| &mut s.limits) {
            default_limit_range_item(item);
        }
        let ns = lr.metadata.namespace.clone().unwrap_or_default();
        let name = lr.metadata.name.clone().unwrap_or_default();
        self.limit_ranges.entry(ns).or_default().insert(name, lr);
    }

    /// Forgets a LimitRange.
    pub fn remove_limit_range(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.limit_ranges.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                self.limit_ranges.remove(namespace);
            }
        }
    }

    /// Records a RuntimeClass (added or changed).
    pub fn upsert_runtime_class(&mut self, rc: RuntimeClass) {
        let name = rc.metadata.name.clone().unwrap_or_default();
        self.runtime_classes.insert(name, rc);
    }

    /// Forgets a RuntimeClass.
    pub fn remove_runtime_class(&mut self, name: &str) {
        self.runtime_classes.remove(name);
    }

    /// The namespace's ranges of one limit type (`Container`, `Pod`), summarized; None when it has none.
    fn summary(&self, namespace: &str, kind: &str) -> Option<Summary> {
        let mut out: Option<Summary> = None;
        // Kueue lists the ranges from its cache, in name order.
        for lr in self
            .limit_ranges
            .get(namespace)
            .into_iter()
            .flat_map(|m| m.values())
        {
            for item in lr.spec.iter().flat_map(|s| &s.limits) {
                if item.type_ != kind {
                    continue;
                }
                let s = out.get_or_insert_with(Summary::default);
                add_to_summary(s, item);
            }
        }
        out
    }

    /// Kueue's `AdjustResources` on one pod template of a Workload in `namespace`: the RuntimeClass's overhead
    /// where the pod names one and has none, the container defaults of the namespace's LimitRanges (and the pod
    /// defaults for pod-level resources), then limits standing in for missing requests.
    pub fn adjust(&self, namespace: &str, pod: &mut PodSpec) {
        if pod.overhead.as_ref().is_none_or(|o| o.is_empty())
            && let Some(rc) = pod
                .runtime_class_name
                .as_ref()
                .and_then(|n| self.runtime_classes.get(n))
            && let Some(fixed) = rc.overhead.as_ref().and_then(|o| o.pod_fixed.clone())
        {
            pod.overhead = Some(fixed);
        }
        let container = self.summary(namespace, "Container");
        let pod_range = self.summary(namespace, "Pod");
        if let Some(c) = &container {
            let all = pod.init_containers.iter_mut().flatten();
            for ct in all.chain(pod.containers.iter_mut()) {
                let res = ct.resources.get_or_insert_with(Default::default);
                merge_keep_first(&mut res.limits, &c.default);
                merge_keep_first(&mut res.requests, &c.default_request);
            }
        }
        if let (Some(p), Some(res)) = (&pod_range, pod.resources.as_mut()) {
            merge_keep_first(&mut res.limits, &p.default);
            merge_keep_first(&mut res.requests, &p.default_request);
        }
        let all = pod.init_containers.iter_mut().flatten();
        for ct in all.chain(pod.containers.iter_mut()) {
            if let Some(res) = ct.resources.as_mut() {
                limits_as_missing_requests(res);
            }
        }
        if let Some(res) = pod.resources.as_mut() {
            limits_as_missing_requests(res);
        }
    }

    /// Kueue's admissibility checks of adjusted pod templates (`ValidateResources`, then `ValidateLimitRange`):
    /// the pending message when one fails ("resources validation failed: ..." or "resources didn't satisfy
    /// LimitRange constraints: ..."), None when they pass. `pods[i]` is pod set i's template spec and its
    /// per-pod requests.
    pub fn admissibility(
        &self,
        namespace: &str,
        pods: &[(&PodSpec, &BTreeMap<String, i64>)],
    ) -> Option<String> {
        let mut errors = Vec::new();
        for (i, (pod, _)) in pods.iter().enumerate() {
            let path = format!("spec.podSets[{i}].template.spec");
            for (field, list) in containers(pod) {
                for (c, ct) in list.iter().enumerate() {
                    let (requests, limits) = lists(ct.resources.as_ref());
                    let over = greater_keys(&values(requests), &values(limits));
                    if !over.is_empty() {
                        errors.push(invalid(
                            &format!("{path}.{field}[{c}]"),
                            &over,
                            REQUESTS_OVER_LIMITS,
                        ));
                    }
                }
            }
            if let Some(res) = &pod.resources {
                let (requests, limits) = lists(Some(res));
                let over = greater_keys(&values(requests), &values(limits));
                if !over.is_empty() {
                    errors.push(invalid(
                        &format!("{path}.resources"),
                        &over,
                        REQUESTS_OVER_LIMITS,
                    ));
                }
            }
        }
        if !errors.is_empty() {
            return Some(format!(
                "resources validation failed: {}",
                aggregate(&errors)
            ));
        }
        if !self.limit_ranges.contains_key(namespace) {
            return None;
        }
        let bounds = |kind| {
            self.summary(namespace, kind)
                .map(|s| (values(&s.max), values(&s.min)))
        };
        let (container, pod_range) = (bounds("Container"), bounds("Pod"));
        for (i, (pod, total)) in pods.iter().enumerate() {
            let path = format!("spec.podSets[{i}].template.spec");
            if let Some((max, min)) = &container {
                for (field, list) in containers(pod) {
                    for (c, ct) in list.iter().enumerate() {
                        let at = format!("{path}.{field}[{c}]");
                        let (requests, limits) = lists(ct.resources.as_ref());
                        let (requests, limits) = (values(requests), values(limits));
                        let c_min = merged(&requests, &limits, i64::min);
                        let c_max = merged(&requests, &limits, i64::max);
                        let over = greater_keys(&c_max, max);
                        if !over.is_empty() {
                            errors.push(invalid(&at, &over, ABOVE_MAX));
                        }
                        let under = greater_keys(min, &c_min);
                        if !under.is_empty() {
                            errors.push(invalid(&at, &under, BELOW_MIN));
                        }
                    }
                }
            }
            if let Some((max, min)) = &pod_range {
                let over = greater_keys(total, max);
                if !over.is_empty() {
                    errors.push(invalid(&path, &over, ABOVE_MAX));
                }
                let under = greater_keys(min, total);
                if !under.is_empty() {
                    errors.push(invalid(&path, &under, BELOW_MIN));
                }
            }
        }
        (!errors.is_empty()).then(|| {
            format!(
                "resources didn't satisfy LimitRange constraints: {}",
                aggregate(&errors)
            )
        })
    }
}

const REQUESTS_OVER_LIMITS: &str = "requests must not exceed its limits";
const ABOVE_MAX: &str = "requests must not be above the limitRange max";
const BELOW_MIN: &str = "requests must not be below the limitRange min";

/// The API server's defaulting of a Container item: the default limit is the max where unset, and the default
/// request the default limit, else the min, where unset.
fn default_limit_range_item(item: &mut LimitRangeItem) {
    if item.type_ != "Container" {
        return;
    }
    let default = item.default.get_or_insert_with(Default::default);
    for (k, v) in item.max.iter().flatten() {
        default.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let request = item.default_request.get_or_insert_with(Default::default);
    for (k, v) in default.iter().chain(item.min.iter().flatten()) {
        request.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

fn add_to_summary(s: &mut Summary, item: &LimitRangeItem) {
    merge_with(&mut s.max, item.max.as_ref(), i64::min);
    merge_with(&mut s.min, item.min.as_ref(), i64::max);
    for (into, from) in [
        (&mut s.default, &item.default),
        (&mut s.default_request, &item.default_request),
    ] {
        for (k, v) in from.iter().flatten() {
            into.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// Merges `from` into `into`, a resource in both keeping the quantity `pick` chooses by value.
fn merge_with(into: &mut List, from: Option<&List>, pick: fn(i64, i64) -> i64) {
    for (k, v) in from.into_iter().flatten() {
        match into.get(k) {
            None => {
                into.insert(k.clone(), v.clone());
            }
            Some(old) => {
                let (a, b) = (value(k, old), value(k, v));
                if let (Some(a), Some(b)) = (a, b)
                    && pick(a, b) != a
                {
                    into.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// Kueue's `MergeResourceListKeepFirst`: what `list` lacks is taken from `from`.
fn merge_keep_first(list: &mut Option<List>, from: &List) {
    if from.is_empty() {
        return;
    }
    let l = list.get_or_insert_with(Default::default);
    for (k, v) in from {
        l.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

fn limits_as_missing_requests(res: &mut ResourceRequirements) {
    if let Some(limits) = res.limits.clone() {
        merge_keep_first(&mut res.requests, &limits);
    }
}

/// A pod's init containers and containers, each list with its field name.
fn containers(pod: &PodSpec) -> [(&'static str, &[Container]); 2] {
    [
        (
            "initContainers",
            pod.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", &pod.containers[..]),
    ]
}

fn lists(res: Option<&ResourceRequirements>) -> (&List, &List) {
    static EMPTY: List = BTreeMap::new();
    let requests = res.and_then(|r| r.requests.as_ref()).unwrap_or(&EMPTY);
    let limits = res.and_then(|r| r.limits.as_ref()).unwrap_or(&EMPTY);
    (requests, limits)
}

/// A quantity's value in Kueue's units (milli for cpu); None when it does not parse (the API server has
/// validated LimitRanges and pod templates, so only a hand-written simulator input gets here).
fn value(resource: &str, q: &Quantity) -> Option<i64> {
    resource_value(resource, q).ok()
}

fn values(list: &List) -> BTreeMap<String, i64> {
    list.iter()
        .filter_map(|(k, q)| value(k, q).map(|v| (k.clone(), v)))
        .collect()
}

fn merged(
    a: &BTreeMap<String, i64>,
    b: &BTreeMap<String, i64>,
    pick: fn(i64, i64) -> i64,
) -> BTreeMap<String, i64> {
    let mut out = a.clone();
    for (k, v) in b {
        out.entry(k.clone())
            .and_modify(|x| *x = pick(*x, *v))
            .or_insert(*v);
    }
    out
}

/// Kueue's `GreaterKeys`: the resources in both lists whose value in `a` is above that in `b`, in name order.
fn greater_keys(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|o| *v > o))
        .map(|(k, _)| k.clone())
        .collect()
}

/// A field error as the API machinery words `field.Invalid` with a list of resource names.
fn invalid(path: &str, names: &[String], detail: &str) -> String {
    let list = serde_json::to_string(names).unwrap_or_default();
    format!("{path}: Invalid value: {list}: {detail}")
}

/// The API machinery's aggregate of errors: one alone, several bracketed and comma-separated, repeats once.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit_range(ns: &str, name: &str, items: serde_json::Value) -> LimitRange {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"limits": items}
        }))
        .unwrap()
    }

    fn pod(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn requests_of(pod: &PodSpec, c: usize) -> BTreeMap<String, String> {
        pod.containers[c]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .map(|l| l.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
            .unwrap_or_default()
    }

    #[test]
    fn container_defaults_fill_missing_requests_and_limits_stand_in_for_requests() {
        let mut rules = ResourceRules::default();
        rules.upsert_limit_range(limit_range(
            "team",
            "a",
            serde_json::json!([{"type": "Container", "defaultRequest": {"cpu": "500m"}, "default": {"memory": "1Gi"}}]),
        ));
        // A later range's defaults do not replace the first's.
        rules.upsert_limit_range(limit_range(
            "team",
            "b",
            serde_json::json!([{"type": "Container", "defaultRequest": {"cpu": "2"}}]),
        ));
        let mut p = pod(serde_json::json!({"containers": [
            {"name": "a"},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}}
        ]}));
        rules.adjust("team", &mut p);
        assert_eq!(
            requests_of(&p, 0),
            BTreeMap::from([
                ("cpu".into(), "500m".into()),
                ("memory".into(), "1Gi".into())
            ])
        );
        assert_eq!(
            requests_of(&p, 1),
            BTreeMap::from([("cpu".into(), "1".into()), ("memory".into(), "1Gi".into())])
        );
        // Another namespace's ranges do not apply.
        let mut other = pod(serde_json::json!({"containers": [{"name": "a"}]}));
        rules.adjust("elsewhere", &mut other);
        assert!(requests_of(&other, 0).is_empty());
        assert_eq!(rules.admissibility("team", &[(&p, &BTreeMap::new())]), None);
    }

    #[test]
    fn a_range_read_from_a_file_is_defaulted_as_the_api_server_defaults_it() {
        // Only a max and a min: the default limit is the max, the default request the default limit (cpu) or the
        // min (memory, which has no max).
        let mut rules = ResourceRules::default();
        rules.upsert_limit_range(limit_range(
            "team",
            "bounds",
            serde_json::json!([{"type": "Container", "max": {"cpu": "500m"}, "min": {"memory": "1Mi"}}]),
        ));
        let mut p = pod(serde_json::json!({"containers": [
            {"name": "bare"},
            {"name": "asks", "resources": {"requests": {"cpu": "1"}}}
        ]}));
        rules.adjust("team", &mut p);
        assert_eq!(
            requests_of(&p, 0),
            BTreeMap::from([
                ("cpu".into(), "500m".into()),
                ("memory".into(), "1Mi".into())
            ])
        );
        let limits = p.containers[1]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone());
        assert_eq!(limits.unwrap()["cpu"].0, "500m");
        let totals = amounts(&[("cpu", 1500), ("memory", 1 << 20)]);
        let why = rules.admissibility("team", &[(&p, &totals)]).unwrap();
        assert!(
            why.starts_with(
                "resources validation failed: spec.podSets[0].template.spec.containers[1]"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_runtime_class_gives_its_overhead_to_a_pod_without_one() {
        let mut rules = ResourceRules::default();
        rules.upsert_runtime_class(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
                "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}
            }))
            .unwrap(),
        );
        let mut p =
            pod(serde_json::json!({"runtimeClassName": "kata", "containers": [{"name": "a"}]}));
        rules.adjust("ns", &mut p);
        assert_eq!(p.overhead.unwrap()["cpu"].0, "250m");
        let mut own = pod(
            serde_json::json!({"runtimeClassName": "kata", "overhead": {"cpu": "1"}, "containers": [{"name": "a"}]}),
        );
        rules.adjust("ns", &mut own);
        assert_eq!(own.overhead.unwrap()["cpu"].0, "1");
        rules.remove_runtime_class("kata");
        let mut gone =
            pod(serde_json::json!({"runtimeClassName": "kata", "containers": [{"name": "a"}]}));
        rules.adjust("ns", &mut gone);
        assert!(gone.overhead.is_none());
    }

    #[test]
    fn requests_outside_the_ranges_are_named_as_kueue_words_them() {
        let mut rules = ResourceRules::default();
        rules.upsert_limit_range(limit_range(
            "team",
            "a",
            serde_json::json!([
                {"type": "Container", "max": {"cpu": "2", "memory": "4Gi"}, "min": {"cpu": "100m"}},
                {"type": "Pod", "max": {"cpu": "3"}}
            ]),
        ));
        let p = pod(serde_json::json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "50m"}}},
            {"name": "b", "resources": {"requests": {"cpu": "3", "memory": "8Gi"}}}
        ]}));
        let total = BTreeMap::from([("cpu".to_string(), 3050), ("memory".to_string(), 8 << 30)]);
        assert_eq!(
            rules.admissibility("team", &[(&p, &total)]).unwrap(),
            "resources didn't satisfy LimitRange constraints: [\
             spec.podSets[0].template.spec.containers[0]: Invalid value: [\"cpu\"]: requests must not be below the limitRange min, \
             spec.podSets[0].template.spec.containers[1]: Invalid value: [\"cpu\",\"memory\"]: requests must not be above the limitRange max, \
             spec.podSets[0].template.spec: Invalid value: [\"cpu\"]: requests must not be above the limitRange max]"
        );
        rules.remove_limit_range("team", "a");
        assert_eq!(rules.admissibility("team", &[(&p, &total)]), None);
    }

    #[test]
    fn a_default_limit_below_the_request_fails_resource_validation() {
        let mut rules = ResourceRules::default();
        rules.upsert_limit_range(limit_range(
            "team",
            "a",
            serde_json::json!([{"type": "Container", "default": {"cpu": "1"}}]),
        ));
        let mut p = pod(
            serde_json::json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}),
        );
        rules.adjust("team", &mut p);
        assert_eq!(
            rules
                .admissibility("team", &[(&p, &BTreeMap::new())])
                .unwrap(),
            "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: [\"cpu\"]: \
             requests must not exceed its limits"
        );
    }

    /// Amounts by resource name, as the counting works on them.
    fn amounts(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn counting(yaml: &str) -> Counting {
        let file: crate::controller::config::ResourcesFile = serde_yaml::from_str(yaml).unwrap();
        file.counting("config.yaml").unwrap()
    }

    #[test]
    fn mig_profiles_are_counted_as_accelerator_memory_and_excluded_prefixes_dropped() {
        let c = counting(
            r#"
excludeResourcePrefixes: ["ephemeral-"]
transformations:
- input: nvidia.com/mig-1g.5gb
  strategy: Replace
  outputs: {example.com/accelerator-memory: 5Gi, example.com/accelerator-gpc: 1}
- input: nvidia.com/mig-2g.10gb
  strategy: Replace
  outputs: {example.com/accelerator-memory: 10Gi, example.com/accelerator-gpc: 2}
"#,
        );
        let mut r = amounts(&[
            ("cpu", 1000),
            ("ephemeral-storage", 1 << 30),
            ("nvidia.com/mig-1g.5gb", 2),
            ("nvidia.com/mig-2g.10gb", 1),
        ]);
        c.count(&mut r);
        assert_eq!(
            r,
            amounts(&[
                ("cpu", 1000),
                ("example.com/accelerator-gpc", 4),
                ("example.com/accelerator-memory", 20 << 30),
            ])
        );
    }

    #[test]
    fn retained_inputs_multipliers_and_allowances_count_as_kueue_counts_them() {
        let c = counting(
            r#"
transformations:
- input: cpu
  multiplyBy: nvidia.com/gpu
  outputs: {example.com/credits: "2"}
- input: nvidia.com/gpu
  outputs: {memory: "-1Gi"}
"#,
        );
        // 500m x 4 GPUs x 2 = 4 credits; the input is retained as asked, not multiplied.
        let mut r = amounts(&[("cpu", 500), ("nvidia.com/gpu", 4), ("memory", 1 << 30)]);
        c.count(&mut r);
        // A negative generated total counts as zero and does not reduce the memory asked.
        assert_eq!(
            r,
            amounts(&[
                ("cpu", 500),
                ("example.com/credits", 4),
                ("memory", 1 << 30),
                ("nvidia.com/gpu", 4),
            ])
        );
    }

    #[test]
    fn a_configuration_kueue_refuses_is_refused_naming_the_field() {
        let bad = |yaml: &str| {
            let file: crate::controller::config::ResourcesFile =
                serde_yaml::from_str(yaml).unwrap();
            file.counting("config.yaml").unwrap_err().to_string()
        };
        let e = bad("transformations: [{input: a, strategy: Keep}]");
        assert!(
            e.contains("resources.transformations[0].strategy") && e.contains("\"Keep\""),
            "{e}"
        );
        let e = bad("transformations: [{input: a}, {input: a}]");
        assert!(
            e.contains("resources.transformations[1].input: Duplicate value"),
            "{e}"
        );
        let e = bad("transformations: [{input: a, outputs: {b: lots}}]");
        assert!(e.contains("resources.transformations[0].outputs[b]"), "{e}");
        let e = bad("deviceClassMappings: [{name: x}]");
        assert!(e.contains("resources.deviceClassMappings"), "{e}");
    }
}
