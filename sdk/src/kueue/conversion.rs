//! Conversion between Kueue's v1beta1 and v1beta2.
//!
//! The field mapping follows Kueue's `apis/kueue/v1beta1/*_conversion.go` (renames such as `cohort` ->
//! `cohortName`, the priority class reference, the compressed topology assignment). Where one version has data the
//! other cannot hold (e.g. v1beta2 `preemptionGates`, v1beta1 `pendingWorkloadsStatus`), the converter keeps it in an
//! annotation on the converted object ([`V1BETA1_FIELDS_ANNOTATION`], [`V1BETA2_FIELDS_ANNOTATION`]) and re-applies
//! it when converting back, so that round trips are lossless (Kueue itself drops such data). Each remembered field
//! is restored only while the converted object still holds what the conversion produced there, so edits made in
//! the other version win over stale remembered values.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use super::{v1beta1, v1beta2};

/// Annotation holding v1beta1 data that a v1beta2 object cannot represent (JSON list of remembered fields).
pub const V1BETA1_FIELDS_ANNOTATION: &str = "conversion.sluice.dev/v1beta1-fields";
/// Annotation holding v1beta2 data that a v1beta1 object cannot represent (JSON list of remembered fields).
pub const V1BETA2_FIELDS_ANNOTATION: &str = "conversion.sluice.dev/v1beta2-fields";

/// A version of the `kueue.x-k8s.io` group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// The deprecated v1beta1.
    V1beta1,
    /// The storage version v1beta2.
    V1beta2,
}

impl Version {
    /// The `apiVersion` string of this version.
    pub fn api_version(self) -> &'static str {
        match self {
            Version::V1beta1 => v1beta1::API_VERSION,
            Version::V1beta2 => v1beta2::API_VERSION,
        }
    }

    /// Parses an `apiVersion` of the Kueue group.
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            v1beta1::API_VERSION => Some(Version::V1beta1),
            v1beta2::API_VERSION => Some(Version::V1beta2),
            _ => None,
        }
    }

    fn stash_annotation(self) -> &'static str {
        match self {
            Version::V1beta1 => V1BETA1_FIELDS_ANNOTATION,
            Version::V1beta2 => V1BETA2_FIELDS_ANNOTATION,
        }
    }
}

/// Why an object could not be converted.
#[derive(Debug, Error)]
pub enum ConversionError {
    /// The object is not valid in its version, or its data is inconsistent.
    #[error("cannot convert {kind} {name:?}: {reason}")]
    Invalid {
        /// Kind of the object.
        kind: String,
        /// metadata.name, or empty when unreadable.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The kind is not one of Kueue's.
    #[error("unknown Kueue kind {0:?}")]
    UnknownKind(String),
}

/// The Kueue kinds this crate models.
pub const KINDS: [&str; 8] = [
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "Workload",
    "WorkloadPriorityClass",
    "Topology",
    "AdmissionCheck",
];

fn name_of(doc: &Value) -> String {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Converts a JSON object of a Kueue kind to version `to`; objects already in `to` come back unchanged.
///
/// `doc` should be a normalized object (as serialized from this crate's types); [`super::decode`] takes care of that
/// for arbitrary input.
pub fn convert_value(doc: Value, to: Version) -> Result<Value, ConversionError> {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !KINDS.contains(&kind.as_str()) {
        return Err(ConversionError::UnknownKind(kind));
    }
    let from = doc
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(Version::from_api_version)
        .ok_or_else(|| ConversionError::Invalid {
            kind: kind.clone(),
            name: name_of(&doc),
            reason: "apiVersion is not kueue.x-k8s.io/v1beta1 or v1beta2".to_owned(),
        })?;
    if from == to {
        return Ok(doc);
    }
    let mut input = doc;
    // Data stashed for the target version by an earlier conversion in the other direction.
    let restore = take_annotation(&mut input, to.stash_annotation());
    let _stale = take_annotation(&mut input, from.stash_annotation());
    let restore = match restore {
        Some(s) => Some(serde_json::from_str::<Vec<StashEntry>>(&s).map_err(|e| {
            ConversionError::Invalid {
                kind: kind.clone(),
                name: name_of(&input),
                reason: format!("annotation {} is malformed: {e}", to.stash_annotation()),
            }
        })?),
        None => None,
    };

    let mut out = convert_plain(&kind, input.clone(), to)?;
    for entry in restore.iter().flatten() {
        entry.apply(&mut out);
    }
    // Whatever the plain reverse conversion cannot reproduce is stashed for the way back.
    let back = convert_plain(&kind, out.clone(), from)?;
    let mut stash = Vec::new();
    diff(&back, &input, &mut Vec::new(), &mut stash);
    if !stash.is_empty() {
        let text = serde_json::to_string(&stash).map_err(|e| ConversionError::Invalid {
            kind: kind.clone(),
            name: name_of(&input),
            reason: e.to_string(),
        })?;
        set_annotation(&mut out, from.stash_annotation(), text);
    }
    Ok(out)
}

/// Field mapping alone, without the annotation that makes it lossless.
fn convert_plain(kind: &str, mut doc: Value, to: Version) -> Result<Value, ConversionError> {
    let name = name_of(&doc);
    let invalid = |reason: String| ConversionError::Invalid {
        kind: kind.to_owned(),
        name: name.clone(),
        reason,
    };
    let Some(root) = doc.as_object_mut() else {
        return Err(invalid("not a JSON object".to_owned()));
    };
    root.insert(
        "apiVersion".to_owned(),
        Value::String(to.api_version().to_owned()),
    );
    match (kind, to) {
        ("ClusterQueue", Version::V1beta2) => {
            if let Some(spec) = child(root, "spec") {
                rename(spec, "cohort", "cohortName");
                if let Some(Value::Array(checks)) = spec.remove("admissionChecks")
                    && !checks.is_empty()
                {
                    let rules: Vec<Value> = checks
                        .into_iter()
                        .map(|name| Value::Object(Map::from_iter([("name".to_owned(), name)])))
                        .collect();
                    spec.insert(
                        "admissionChecksStrategy".to_owned(),
                        Value::Object(Map::from_iter([(
                            "admissionChecks".to_owned(),
                            Value::Array(rules),
                        )])),
                    );
                }
                if let Some(ff) = child(spec, "flavorFungibility") {
                    replace_str(ff, "whenCanBorrow", "Borrow", "MayStopSearch");
                    replace_str(ff, "whenCanPreempt", "Preempt", "MayStopSearch");
                }
            }
            if let Some(status) = child(root, "status") {
                status.remove("pendingWorkloadsStatus");
                if let Some(fs) = child(status, "fairSharing") {
                    fs.remove("admissionFairSharingStatus");
                }
            }
        }
        ("ClusterQueue", Version::V1beta1) => {
            if let Some(spec) = child(root, "spec") {
                rename(spec, "cohortName", "cohort");
                spec.remove("concurrentAdmissionPolicy");
            }
        }
        ("Cohort", Version::V1beta2) => {
            if let Some(fs) = child(root, "status").and_then(|s| child(s, "fairSharing")) {
                fs.remove("admissionFairSharingStatus");
            }
        }
        ("LocalQueue", Version::V1beta2) => {
            if let Some(status) = child(root, "status") {
                rename(status, "flavorUsage", "flavorsUsage");
                status.remove("flavors");
            }
        }
        ("LocalQueue", Version::V1beta1) => {
            if let Some(status) = child(root, "status") {
                rename(status, "flavorsUsage", "flavorUsage");
            }
        }
        ("AdmissionCheck", Version::V1beta2) => {
            if let Some(spec) = child(root, "spec") {
                spec.remove("retryDelayMinutes");
            }
        }
        ("Workload", _) => workload_plain(root, to).map_err(invalid)?,
        _ => {}
    }
    Ok(doc)
}

fn workload_plain(root: &mut Map<String, Value>, to: Version) -> Result<(), String> {
    if let Some(spec) = child(root, "spec") {
        match to {
            Version::V1beta2 => {
                let source = spec.remove("priorityClassSource");
                let name = spec.remove("priorityClassName");
                let name = name.as_ref().and_then(Value::as_str).unwrap_or_default();
                let pc_ref = match source.as_ref().and_then(Value::as_str) {
                    Some(v1beta1::WORKLOAD_PRIORITY_CLASS_SOURCE) => {
                        Some(v1beta2::PriorityClassRef::workload_priority_class(name))
                    }
                    Some(v1beta1::POD_PRIORITY_CLASS_SOURCE) => {
                        Some(v1beta2::PriorityClassRef::pod_priority_class(name))
                    }
                    _ => None,
                };
                if let Some(r) = pc_ref {
                    spec.insert("priorityClassRef".to_owned(), to_json(&r)?);
                }
            }
            Version::V1beta1 => {
                if let Some(r) = spec.remove("priorityClassRef") {
                    let r: v1beta2::PriorityClassRef = serde_json::from_value(r)
                        .map_err(|e| format!("spec.priorityClassRef: {e}"))?;
                    use v1beta2::{PriorityClassGroup as G, PriorityClassKind as K};
                    let source = match (r.group, r.kind) {
                        (Some(G::Kueue), Some(K::WorkloadPriorityClass)) => {
                            Some(v1beta1::WORKLOAD_PRIORITY_CLASS_SOURCE)
                        }
                        (Some(G::Scheduling), Some(K::PriorityClass)) => {
                            Some(v1beta1::POD_PRIORITY_CLASS_SOURCE)
                        }
                        _ => None,
                    };
                    if let Some(source) = source {
                        spec.insert(
                            "priorityClassSource".to_owned(),
                            Value::String(source.to_owned()),
                        );
                        if !r.name.is_empty() {
                            spec.insert("priorityClassName".to_owned(), Value::String(r.name));
                        }
                    }
                }
                spec.remove("preemptionGates");
                if let Some(Value::Array(pod_sets)) = spec.get_mut("podSets") {
                    for ps in pod_sets.iter_mut().filter_map(Value::as_object_mut) {
                        if let Some(tr) = child(ps, "topologyRequest") {
                            tr.remove("podsetSliceRequiredTopologyConstraints");
                        }
                    }
                }
            }
        }
    }
    if let Some(status) = child(root, "status") {
        match to {
            Version::V1beta2 => rename(
                status,
                "accumulatedPastExexcutionTimeSeconds",
                "accumulatedPastExecutionTimeSeconds",
            ),
            Version::V1beta1 => {
                rename(
                    status,
                    "accumulatedPastExecutionTimeSeconds",
                    "accumulatedPastExexcutionTimeSeconds",
                );
                status.remove("preemptionGates");
            }
        }
        if let Some(Value::Array(psas)) =
            child(status, "admission").and_then(|a| a.get_mut("podSetAssignments"))
        {
            for (i, psa) in psas.iter_mut().enumerate() {
                let Some(ta) = psa
                    .as_object_mut()
                    .and_then(|p| p.get_mut("topologyAssignment"))
                else {
                    continue;
                };
                let path = format!("status.admission.podSetAssignments[{i}].topologyAssignment");
                let taken = ta.take();
                *ta = match to {
                    Version::V1beta2 => {
                        let v1: v1beta1::TopologyAssignment =
                            serde_json::from_value(taken).map_err(|e| format!("{path}: {e}"))?;
                        to_json(&compress_topology_assignment(&v1))?
                    }
                    Version::V1beta1 => {
                        let v2: v1beta2::TopologyAssignment =
                            serde_json::from_value(taken).map_err(|e| format!("{path}: {e}"))?;
                        to_json(
                            &expand_topology_assignment(&v2).map_err(|e| format!("{path}: {e}"))?,
                        )?
                    }
                };
            }
        }
    }
    Ok(())
}

fn to_json<T: Serialize>(v: &T) -> Result<Value, String> {
    serde_json::to_value(v).map_err(|e| e.to_string())
}

fn child<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn rename(m: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = m.remove(from) {
        m.insert(to.to_owned(), v);
    }
}

fn replace_str(m: &mut Map<String, Value>, key: &str, from: &str, to: &str) {
    if m.get(key).and_then(Value::as_str) == Some(from) {
        m.insert(key.to_owned(), Value::String(to.to_owned()));
    }
}

fn take_annotation(doc: &mut Value, key: &str) -> Option<String> {
    let meta = doc.get_mut("metadata")?.as_object_mut()?;
    let annotations = meta.get_mut("annotations")?.as_object_mut()?;
    let v = annotations.remove(key)?;
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    v.as_str().map(str::to_owned)
}

fn set_annotation(doc: &mut Value, key: &str, value: String) {
    let Some(root) = doc.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(key.to_owned(), Value::String(value));
    }
}

/// A remembered field: at `path` (object keys as strings, array indexes as numbers) the original object had
/// `value` (None: no field) where plain conversion back yields `was` (None: no field).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct StashEntry {
    path: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    was: Option<Value>,
}

impl StashEntry {
    /// Restores the remembered value if the field still holds what plain conversion produced.
    fn apply(&self, doc: &mut Value) {
        let Some((last, parent_path)) = self.path.split_last() else {
            return;
        };
        if lookup(doc, &self.path) != self.was.as_ref() {
            return;
        }
        let Some(parent) = lookup_mut(doc, parent_path) else {
            return;
        };
        match (parent, last, &self.value) {
            (Value::Object(m), Value::String(k), Some(v)) => {
                m.insert(k.clone(), v.clone());
            }
            (Value::Object(m), Value::String(k), None) => {
                m.remove(k);
            }
            (Value::Array(a), Value::Number(n), Some(v)) => {
                if let Some(slot) = n
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| a.get_mut(i))
                {
                    *slot = v.clone();
                }
            }
            _ => {}
        }
    }
}

fn step<'a>(v: &'a Value, seg: &Value) -> Option<&'a Value> {
    match (v, seg) {
        (Value::Object(m), Value::String(k)) => m.get(k),
        (Value::Array(a), Value::Number(n)) => a.get(usize::try_from(n.as_u64()?).ok()?),
        _ => None,
    }
}

fn lookup<'a>(v: &'a Value, path: &[Value]) -> Option<&'a Value> {
    path.iter().try_fold(v, step)
}

fn lookup_mut<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, seg| match (cur, seg) {
        (Value::Object(m), Value::String(k)) => m.get_mut(k),
        (Value::Array(a), Value::Number(n)) => a.get_mut(usize::try_from(n.as_u64()?).ok()?),
        _ => None,
    })
}

/// Records where `back` differs from `orig`, descending into objects and equal-length arrays so that each entry is
/// as narrow as possible.
fn diff(back: &Value, orig: &Value, path: &mut Vec<Value>, out: &mut Vec<StashEntry>) {
    match (back, orig) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, ov) in o {
                path.push(Value::String(k.clone()));
                match b.get(k) {
                    Some(bv) => diff(bv, ov, path, out),
                    None => out.push(StashEntry {
                        path: path.clone(),
                        value: Some(ov.clone()),
                        was: None,
                    }),
                }
                path.pop();
            }
            for (k, bv) in b.iter().filter(|(k, _)| !o.contains_key(*k)) {
                let mut p = path.clone();
                p.push(Value::String(k.clone()));
                out.push(StashEntry {
                    path: p,
                    value: None,
                    was: Some(bv.clone()),
                });
            }
        }
        (Value::Array(b), Value::Array(o)) if b.len() == o.len() => {
            for (i, (bv, ov)) in b.iter().zip(o).enumerate() {
                path.push(Value::from(i));
                diff(bv, ov, path, out);
                path.pop();
            }
        }
        _ if back == orig => {}
        _ => out.push(StashEntry {
            path: path.clone(),
            value: Some(orig.clone()),
            was: Some(back.clone()),
        }),
    }
}

/// Most domains one slice may hold (Kueue's limit).
const MAX_DOMAINS_PER_SLICE: usize = 100_000;
/// Most slices a hostname-prefix encoding may produce before a coarser prefix is tried (Kueue's limit).
const MAX_SLICES: usize = 1_000;
/// Node label of the hostname level.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Encodes a per-domain assignment in v1beta2's compressed form, choosing the same encoding as Kueue v0.19 with its
/// default (beta) TASAssignmentsEncodingByHostnamePrefix: domains whose hostnames share a dash-terminated prefix are
/// grouped into slices, unless one single slice serializes shorter.
pub fn compress_topology_assignment(
    ta: &v1beta1::TopologyAssignment,
) -> v1beta2::TopologyAssignment {
    let by_prefix = encode_by_hostname_prefix(ta);
    if by_prefix.slices.len() <= 1 || ta.domains.len() > MAX_DOMAINS_PER_SLICE {
        return by_prefix;
    }
    let single = encode_single_slice(ta);
    match (serde_json::to_vec(&single), serde_json::to_vec(&by_prefix)) {
        (Ok(a), Ok(b)) if a.len() < b.len() => single,
        _ => by_prefix,
    }
}

fn encode_single_slice(ta: &v1beta1::TopologyAssignment) -> v1beta2::TopologyAssignment {
    v1beta2::TopologyAssignment {
        levels: ta.levels.clone(),
        slices: if ta.domains.is_empty() {
            Vec::new()
        } else {
            vec![compact_slice(ta.levels.len(), &ta.domains)]
        },
    }
}

fn encode_by_hostname_prefix(ta: &v1beta1::TopologyAssignment) -> v1beta2::TopologyAssignment {
    let keys =
        if ta.domains.len() > 1 && ta.levels.last().map(String::as_str) == Some(HOSTNAME_LABEL) {
            hostname_prefix_keys(ta.levels.len() - 1, &ta.domains)
        } else {
            None
        };
    let mut slices = Vec::new();
    let mut start = 0;
    for len in run_lengths(keys.as_deref(), ta.domains.len()) {
        for chunk in ta.domains[start..start + len].chunks(MAX_DOMAINS_PER_SLICE) {
            slices.push(compact_slice(ta.levels.len(), chunk));
        }
        start += len;
    }
    v1beta2::TopologyAssignment {
        levels: ta.levels.clone(),
        slices,
    }
}

/// Lengths of the runs of equal consecutive keys; one run of everything without keys.
fn run_lengths(keys: Option<&[&str]>, n: usize) -> Vec<usize> {
    let Some(keys) = keys else {
        return if n == 0 { Vec::new() } else { vec![n] };
    };
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..keys.len() {
        if keys[i] != keys[start] {
            runs.push(i - start);
            start = i;
        }
    }
    if !keys.is_empty() {
        runs.push(keys.len() - start);
    }
    runs
}

fn value_at(d: &v1beta1::TopologyDomainAssignment, level: usize) -> &str {
    d.values.get(level).map_or("", String::as_str)
}

/// Per domain, the longest dash-terminated hostname prefix shared with another domain, limited to the deepest
/// prefix depth that keeps the slice count within [`MAX_SLICES`]; None when no depth qualifies.
fn hostname_prefix_keys(
    level: usize,
    domains: &[v1beta1::TopologyDomainAssignment],
) -> Option<Vec<&str>> {
    let candidates: Vec<Vec<&str>> = domains
        .iter()
        .map(|d| {
            let h = value_at(d, level);
            h.bytes()
                .enumerate()
                .filter(|&(i, b)| b == b'-' && i + 1 < h.len())
                .map(|(i, _)| &h[..=i])
                .collect()
        })
        .collect();
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for c in candidates.iter().flatten() {
        *counts.entry(c).or_default() += 1;
    }
    let max_depth = candidates.iter().map(Vec::len).max().unwrap_or(0);
    for depth in (1..=max_depth).rev() {
        let keys: Vec<&str> = candidates
            .iter()
            .map(|c| {
                c[..c.len().min(depth)]
                    .iter()
                    .rev()
                    .find(|p| counts.get(*p).copied().unwrap_or(0) >= 2)
                    .copied()
                    .unwrap_or("")
            })
            .collect();
        let slices: usize = run_lengths(Some(&keys), keys.len())
            .into_iter()
            .map(|len| len.div_ceil(MAX_DOMAINS_PER_SLICE))
            .sum();
        if slices <= MAX_SLICES {
            return Some(keys);
        }
    }
    None
}

/// One slice for `domains`: per level a shared value or prefix/roots/suffix, and shared or per-domain pod counts.
fn compact_slice(
    levels: usize,
    domains: &[v1beta1::TopologyDomainAssignment],
) -> v1beta2::TopologyAssignmentSlice {
    let values_per_level = (0..levels)
        .map(|level| {
            let values: Vec<&str> = domains.iter().map(|d| value_at(d, level)).collect();
            compress_level(&values)
        })
        .collect();
    let first = domains.first().map_or(0, |d| d.count);
    let pod_counts = if domains.iter().all(|d| d.count == first) {
        v1beta2::TopologyAssignmentSlicePodCounts {
            universal: Some(first),
            individual: Vec::new(),
        }
    } else {
        v1beta2::TopologyAssignmentSlicePodCounts {
            universal: None,
            individual: domains.iter().map(|d| d.count).collect(),
        }
    };
    v1beta2::TopologyAssignmentSlice {
        domain_count: i32::try_from(domains.len()).unwrap_or(i32::MAX),
        values_per_level,
        pod_counts,
    }
}

fn compress_level(values: &[&str]) -> v1beta2::TopologyAssignmentSliceLevelValues {
    let first = values.first().copied().unwrap_or_default();
    if values.iter().all(|v| *v == first) {
        return v1beta2::TopologyAssignmentSliceLevelValues {
            universal: Some(first.to_owned()),
            individual: None,
        };
    }
    let min_len = values.iter().map(|v| v.len()).min().unwrap_or(0);
    let mut prefix = first.len();
    let mut suffix = first.len();
    for v in values {
        prefix = common_prefix_len(&first[..prefix], v);
        suffix = common_suffix_len(&first[first.len() - suffix..], v);
    }
    if prefix + suffix > min_len {
        prefix = min_len - suffix;
        // Prefix bytes are shared, so a char boundary in `first` is one in every value.
        while !first.is_char_boundary(prefix) {
            prefix -= 1;
        }
    }
    let roots = values
        .iter()
        .map(|v| {
            v.get(prefix..v.len() - suffix)
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    v1beta2::TopologyAssignmentSliceLevelValues {
        universal: None,
        individual: Some(v1beta2::TopologyAssignmentSliceLevelIndividualValues {
            prefix: (prefix > 0).then(|| first[..prefix].to_owned()),
            suffix: (suffix > 0).then(|| first[first.len() - suffix..].to_owned()),
            roots,
        }),
    }
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, ca), cb)| ca != cb)
        .map_or_else(|| a.len().min(b.len()), |((i, _), _)| i)
        .min(b.len())
}

fn common_suffix_len(a: &str, b: &str) -> usize {
    let mut n = 0;
    for (ca, cb) in a.chars().rev().zip(b.chars().rev()) {
        if ca != cb {
            break;
        }
        n += ca.len_utf8();
    }
    n
}

/// Expands a compressed topology assignment into one entry per domain.
pub fn expand_topology_assignment(
    ta: &v1beta2::TopologyAssignment,
) -> Result<v1beta1::TopologyAssignment, String> {
    let mut domains = Vec::new();
    for (s, slice) in ta.slices.iter().enumerate() {
        if slice.values_per_level.len() != ta.levels.len() {
            return Err(format!(
                "slices[{s}].valuesPerLevel has {} entries for {} levels",
                slice.values_per_level.len(),
                ta.levels.len()
            ));
        }
        let n = usize::try_from(slice.domain_count)
            .map_err(|_| format!("slices[{s}].domainCount is negative"))?;
        for i in 0..n {
            let mut values = Vec::with_capacity(ta.levels.len());
            for (l, lv) in slice.values_per_level.iter().enumerate() {
                values.push(match (&lv.universal, &lv.individual) {
                    (Some(u), _) => u.clone(),
                    (None, Some(ind)) => {
                        let root = ind.roots.get(i).ok_or_else(|| {
                            format!(
                                "slices[{s}].valuesPerLevel[{l}].individual.roots has no entry {i}"
                            )
                        })?;
                        format!(
                            "{}{root}{}",
                            ind.prefix.as_deref().unwrap_or_default(),
                            ind.suffix.as_deref().unwrap_or_default()
                        )
                    }
                    (None, None) => {
                        return Err(format!("slices[{s}].valuesPerLevel[{l}] is empty"));
                    }
                });
            }
            let count =
                match slice.pod_counts.universal {
                    Some(c) => c,
                    None => *slice.pod_counts.individual.get(i).ok_or_else(|| {
                        format!("slices[{s}].podCounts.individual has no entry {i}")
                    })?,
                };
            domains.push(v1beta1::TopologyDomainAssignment { values, count });
        }
    }
    Ok(v1beta1::TopologyAssignment {
        levels: ta.levels.clone(),
        domains,
    })
}

/// Typed conversion through [`convert_value`].
fn convert_typed<A: Serialize, B: DeserializeOwned>(
    obj: &A,
    kind: &str,
    to: Version,
) -> Result<B, ConversionError> {
    let invalid = |reason: String| ConversionError::Invalid {
        kind: kind.to_owned(),
        name: String::new(),
        reason,
    };
    let doc = serde_json::to_value(obj).map_err(|e| invalid(e.to_string()))?;
    let name = name_of(&doc);
    let out = convert_value(doc, to)?;
    serde_json::from_value(out).map_err(|e| ConversionError::Invalid {
        kind: kind.to_owned(),
        name,
        reason: e.to_string(),
    })
}

/// Conversion of a v1beta1 object to its v1beta2 form.
pub trait ToV1beta2 {
    /// The v1beta2 type.
    type Out;
    /// Converts, stashing v1beta1-only data in [`V1BETA1_FIELDS_ANNOTATION`].
    fn to_v1beta2(&self) -> Result<Self::Out, ConversionError>;
}

/// Conversion of a v1beta2 object to its v1beta1 form.
pub trait ToV1beta1 {
    /// The v1beta1 type.
    type Out;
    /// Converts, stashing v1beta2-only data in [`V1BETA2_FIELDS_ANNOTATION`].
    fn to_v1beta1(&self) -> Result<Self::Out, ConversionError>;
}

macro_rules! conversions {
    ($($kind:ident),*) => {$(
        impl ToV1beta2 for v1beta1::$kind {
            type Out = v1beta2::$kind;
            fn to_v1beta2(&self) -> Result<v1beta2::$kind, ConversionError> {
                convert_typed(self, stringify!($kind), Version::V1beta2)
            }
        }
        impl ToV1beta1 for v1beta2::$kind {
            type Out = v1beta1::$kind;
            fn to_v1beta1(&self) -> Result<v1beta1::$kind, ConversionError> {
                convert_typed(self, stringify!($kind), Version::V1beta1)
            }
        }
    )*};
}

conversions!(
    ResourceFlavor,
    ClusterQueue,
    LocalQueue,
    Cohort,
    Workload,
    WorkloadPriorityClass,
    Topology,
    AdmissionCheck
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn up(doc: Value) -> Value {
        match convert_value(doc, Version::V1beta2) {
            Ok(v) => v,
            Err(e) => panic!("up: {e}"),
        }
    }

    fn down(doc: Value) -> Value {
        match convert_value(doc, Version::V1beta1) {
            Ok(v) => v,
            Err(e) => panic!("down: {e}"),
        }
    }

    fn annotations(doc: &Value) -> Option<&Value> {
        doc.pointer("/metadata/annotations")
    }

    #[test]
    fn cluster_queue_renames_and_round_trips() {
        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohort": "eng", "admissionChecks": ["prov"],
                     "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}},
            "status": {"pendingWorkloads": 1, "reservingWorkloads": 0, "admittedWorkloads": 0,
                       "pendingWorkloadsStatus": {"lastChangeTime": "2025-01-01T00:00:00Z"}}
        });
        let v2 = up(v1.clone());
        assert_eq!(v2["apiVersion"], "kueue.x-k8s.io/v1beta2");
        assert_eq!(v2["spec"]["cohortName"], "eng");
        assert!(v2["spec"].get("cohort").is_none());
        assert_eq!(
            v2["spec"]["admissionChecksStrategy"],
            json!({"admissionChecks": [{"name": "prov"}]})
        );
        assert_eq!(
            v2["spec"]["flavorFungibility"]["whenCanBorrow"],
            "MayStopSearch"
        );
        assert_eq!(
            v2["spec"]["flavorFungibility"]["whenCanPreempt"],
            "MayStopSearch"
        );
        assert!(v2["status"].get("pendingWorkloadsStatus").is_none());
        assert!(annotations(&v2).is_some(), "v1beta1-only data is stashed");
        assert_eq!(down(v2), v1);
    }

    #[test]
    fn cluster_queue_v1beta2_only_fields_survive() {
        let v2 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohortName": "eng", "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}}
        });
        let v1 = down(v2.clone());
        assert_eq!(v1["spec"]["cohort"], "eng");
        assert!(v1["spec"].get("concurrentAdmissionPolicy").is_none());
        assert_eq!(up(v1), v2);
    }

    #[test]
    fn plain_objects_need_no_stash() {
        let v2 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohortName": "eng", "queueingStrategy": "StrictFIFO"}
        });
        let v1 = down(v2.clone());
        assert!(annotations(&v1).is_none());
        assert_eq!(up(v1), v2);
    }

    #[test]
    fn local_queue_flavor_usage_rename() {
        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
            "status": {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0,
                       "flavorUsage": [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]}
        });
        let v2 = up(v1.clone());
        assert_eq!(v2["status"]["flavorsUsage"][0]["name"], "f");
        assert!(v2["status"].get("flavorUsage").is_none());
        assert!(annotations(&v2).is_none());
        assert_eq!(down(v2), v1);
    }

    #[test]
    fn workload_priority_accumulated_time_and_gates() {
        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}], "queueName": "lq",
                     "priorityClassName": "high", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                     "priority": 100},
            "status": {"accumulatedPastExexcutionTimeSeconds": 42}
        });
        let v2 = up(v1.clone());
        assert_eq!(
            v2["spec"]["priorityClassRef"],
            json!({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"})
        );
        assert_eq!(v2["status"]["accumulatedPastExecutionTimeSeconds"], 42);
        assert!(annotations(&v2).is_none());
        assert_eq!(down(v2.clone()), v1);

        let mut with_gates = v2.clone();
        with_gates["spec"]["preemptionGates"] = json!([{"name": "g"}]);
        with_gates["spec"]["priorityClassRef"] =
            json!({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"});
        let v1b = down(with_gates.clone());
        assert_eq!(
            v1b["spec"]["priorityClassSource"],
            "scheduling.k8s.io/priorityclass"
        );
        assert_eq!(v1b["spec"]["priorityClassName"], "p");
        assert!(v1b["spec"].get("preemptionGates").is_none());
        assert_eq!(up(v1b), with_gates);
    }

    #[test]
    fn topology_assignment_compression() {
        let v1 = v1beta1::TopologyAssignment {
            levels: vec!["rack".into(), "kubernetes.io/hostname".into()],
            domains: vec![
                v1beta1::TopologyDomainAssignment {
                    values: vec!["r1".into(), "node-a-1".into()],
                    count: 2,
                },
                v1beta1::TopologyDomainAssignment {
                    values: vec!["r1".into(), "node-b-1".into()],
                    count: 2,
                },
                v1beta1::TopologyDomainAssignment {
                    values: vec!["r1".into(), "node-c-1".into()],
                    count: 2,
                },
            ],
        };
        let v2 = compress_topology_assignment(&v1);
        let json = serde_json::to_value(&v2).unwrap_or_default();
        assert_eq!(
            json,
            json!({"levels": ["rack", "kubernetes.io/hostname"], "slices": [{
                "domainCount": 3,
                "valuesPerLevel": [{"universal": "r1"},
                                   {"individual": {"prefix": "node-", "suffix": "-1", "roots": ["a", "b", "c"]}}],
                "podCounts": {"universal": 2}}]})
        );
        assert_eq!(expand_topology_assignment(&v2), Ok(v1));
    }

    #[test]
    fn topology_assignment_overlapping_prefix_suffix_and_counts() {
        let v1 = v1beta1::TopologyAssignment {
            levels: vec!["h".into()],
            domains: vec![
                v1beta1::TopologyDomainAssignment {
                    values: vec!["aa".into()],
                    count: 1,
                },
                v1beta1::TopologyDomainAssignment {
                    values: vec!["aaa".into()],
                    count: 3,
                },
                v1beta1::TopologyDomainAssignment {
                    values: vec!["é".into()],
                    count: 3,
                },
                v1beta1::TopologyDomainAssignment {
                    values: vec!["".into()],
                    count: 0,
                },
            ],
        };
        let v2 = compress_topology_assignment(&v1);
        assert_eq!(v2.slices[0].pod_counts.individual, vec![1, 3, 3, 0]);
        assert_eq!(expand_topology_assignment(&v2), Ok(v1));
    }

    #[test]
    fn workload_topology_assignment_round_trip() {
        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 4, "template": {}}]},
            "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 4,
                "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                    "domains": [{"values": ["n1"], "count": 3}, {"values": ["n2"], "count": 1}]}}]}}
        });
        let v2 = up(v1.clone());
        let ta = &v2["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"];
        assert_eq!(ta["slices"][0]["domainCount"], 2);
        assert_eq!(ta["slices"][0]["podCounts"]["individual"], json!([3, 1]));
        assert_eq!(down(v2), v1);
    }

    fn domains(hosts: &[&str]) -> v1beta1::TopologyAssignment {
        v1beta1::TopologyAssignment {
            levels: vec!["kubernetes.io/hostname".into()],
            domains: hosts
                .iter()
                .map(|h| v1beta1::TopologyDomainAssignment {
                    values: vec![(*h).into()],
                    count: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn hostname_prefix_runs_become_slices_when_shorter() {
        let hosts: Vec<String> = (1..=10)
            .map(|i| format!("gpu-rack-alpha-node-{i}"))
            .chain((1..=10).map(|i| format!("cpu-rack-beta-node-{i}")))
            .collect();
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let ta = domains(&hosts);
        let v2 = compress_topology_assignment(&ta);
        assert_eq!(v2.slices.len(), 2);
        let prefixes: Vec<Option<&str>> = v2
            .slices
            .iter()
            .map(|s| {
                s.values_per_level[0]
                    .individual
                    .as_ref()
                    .and_then(|i| i.prefix.as_deref())
            })
            .collect();
        assert_eq!(
            prefixes,
            [Some("gpu-rack-alpha-node-"), Some("cpu-rack-beta-node-")]
        );
        assert_eq!(expand_topology_assignment(&v2), Ok(ta));
    }

    #[test]
    fn single_slice_wins_when_shorter() {
        let ta = domains(&["pool-a-1", "pool-a-2", "pool-b-1", "pool-b-2"]);
        let v2 = compress_topology_assignment(&ta);
        assert_eq!(v2.slices.len(), 1);
        let ind = v2.slices[0].values_per_level[0]
            .individual
            .clone()
            .unwrap_or_default();
        assert_eq!(ind.prefix.as_deref(), Some("pool-"));
        assert_eq!(ind.roots, ["a-1", "a-2", "b-1", "b-2"]);
        assert_eq!(expand_topology_assignment(&v2), Ok(ta));
    }

    /// Kueue v0.19.2's own vectors: half the hosts `pool-a-node-NNNNN`, half `pool-b-node-NNNNN`.
    #[test]
    fn encoding_choice_matches_kueue_vectors() {
        for (n, want_slices) in [(1, 1), (4, 1), (20, 2)] {
            let hosts: Vec<String> = (0..n)
                .map(|i| {
                    let half = n / 2;
                    if i >= half {
                        format!("pool-b-node-{:05}", i - half)
                    } else {
                        format!("pool-a-node-{i:05}")
                    }
                })
                .collect();
            let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
            let ta = domains(&hosts);
            let v2 = compress_topology_assignment(&ta);
            assert_eq!(v2.slices.len(), want_slices, "{n} domains");
            assert_eq!(expand_topology_assignment(&v2), Ok(ta));
        }
        let ta = domains(&[
            "gke-c-pool-a-hash1-aa",
            "gke-c-pool-a-hash1-bb",
            "gke-c-pool-b-hash2-cc",
            "gke-c-pool-b-hash2-dd",
        ]);
        assert_eq!(
            hostname_prefix_keys(0, &ta.domains),
            Some(vec![
                "gke-c-pool-a-hash1-",
                "gke-c-pool-a-hash1-",
                "gke-c-pool-b-hash2-",
                "gke-c-pool-b-hash2-"
            ])
        );
        assert_eq!(
            hostname_prefix_keys(0, &domains(&["node-a", "host-b"]).domains),
            Some(vec!["", ""])
        );
        assert_eq!(
            hostname_prefix_keys(0, &domains(&["nodea", "hostb"]).domains),
            None
        );
    }

    #[test]
    fn edits_in_the_other_version_win_over_remembered_fields() {
        let v2 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [
                {"name": "a", "count": 4, "template": {}, "topologyRequest": {"required": "rack",
                    "podsetSliceRequiredTopologyConstraints": [{"topology": "host", "size": 2}]}},
                {"name": "b", "count": 1, "template": {}}],
                "preemptionGates": [{"name": "g"}]}
        });
        let mut v1 = down(v2.clone());
        assert!(
            v1["spec"]["podSets"][0]["topologyRequest"]
                .get("podsetSliceRequiredTopologyConstraints")
                .is_none()
        );
        // A v1beta1 client scales pod set b and removes the topology request of pod set a.
        v1["spec"]["podSets"][1]["count"] = json!(3);
        if let Some(ps) = v1["spec"]["podSets"][0].as_object_mut() {
            ps.remove("topologyRequest");
        }
        let back = up(v1);
        assert_eq!(back["spec"]["podSets"][1]["count"], 3);
        assert!(
            back["spec"]["podSets"][0].get("topologyRequest").is_none(),
            "{back}"
        );
        assert_eq!(back["spec"]["preemptionGates"], json!([{"name": "g"}]));

        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"flavorFungibility": {"whenCanBorrow": "Borrow"}}
        });
        let mut v2 = up(v1);
        v2["spec"]["flavorFungibility"]["whenCanBorrow"] = json!("TryNextFlavor");
        assert_eq!(
            down(v2)["spec"]["flavorFungibility"]["whenCanBorrow"],
            "TryNextFlavor"
        );
    }

    #[test]
    fn local_queue_v1beta1_only_status_survives() {
        let v1 = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
            "status": {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0,
                       "flavors": [{"name": "f", "resources": ["cpu"], "topology": {"name": "t", "levels": ["h"]}}],
                       "fairSharing": {"weightedShare": 5, "admissionFairSharingStatus": {
                           "consumedResources": {"cpu": "2"}, "lastUpdate": "2025-01-01T00:00:00Z"}}}
        });
        let v2 = up(v1.clone());
        assert!(v2["status"].get("flavors").is_none());
        assert_eq!(
            v2["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]["cpu"],
            "2"
        );
        assert_eq!(down(v2), v1);
    }

    proptest::proptest! {
        #[test]
        fn topology_assignment_round_trips(
            hosts in proptest::collection::vec(("[ab]{0,2}", "[-xé]{0,3}", "[0-9]{0,2}"), 0..40),
            counts in proptest::collection::vec(0i32..4, 40),
            rack in proptest::bool::ANY,
        ) {
            let mut levels = vec!["kubernetes.io/hostname".to_owned()];
            if rack {
                levels.insert(0, "rack".to_owned());
            }
            let domains = hosts
                .iter()
                .zip(&counts)
                .map(|((a, b, c), n)| {
                    let host = format!("{a}{b}{c}");
                    let values = if rack { vec![format!("r{a}"), host] } else { vec![host] };
                    v1beta1::TopologyDomainAssignment { values, count: *n }
                })
                .collect();
            let ta = v1beta1::TopologyAssignment { levels, domains };
            proptest::prop_assert_eq!(expand_topology_assignment(&compress_topology_assignment(&ta)), Ok(ta));
        }
    }

    #[test]
    fn malformed_stash_is_an_error() {
        let doc = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
            "metadata": {"name": "c", "annotations": {"conversion.sluice.dev/v1beta1-fields": "{oops"}}
        });
        let e = convert_value(doc, Version::V1beta1);
        assert!(matches!(e, Err(ConversionError::Invalid { .. })), "{e:?}");
    }

    #[test]
    fn malformed_slices_are_errors() {
        let v2 = v1beta2::TopologyAssignment {
            levels: vec!["h".into()],
            slices: vec![v1beta2::TopologyAssignmentSlice {
                domain_count: 2,
                values_per_level: vec![v1beta2::TopologyAssignmentSliceLevelValues {
                    universal: None,
                    individual: Some(v1beta2::TopologyAssignmentSliceLevelIndividualValues {
                        prefix: None,
                        suffix: None,
                        roots: vec!["a".into()],
                    }),
                }],
                pod_counts: v1beta2::TopologyAssignmentSlicePodCounts {
                    universal: Some(1),
                    individual: vec![],
                },
            }],
        };
        assert!(expand_topology_assignment(&v2).is_err());
    }

    #[test]
    fn typed_round_trip_every_kind() {
        let docs = [
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "rf"},
                   "spec": {"nodeLabels": {"a": "b"}, "topologyName": "t"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "t"},
                   "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"},
                   "value": 10, "description": "d"}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "c"},
                   "spec": {"parentName": "root"}, "status": {"fairSharing": {"weightedShare": 3,
                   "admissionFairSharingStatus": {"consumedResources": {"cpu": "1"}, "lastUpdate": "2025-01-01T00:00:00Z"}}}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "ac"},
                   "spec": {"controllerName": "c", "retryDelayMinutes": 15}}),
        ];
        for d in docs {
            let v2 = up(d.clone());
            assert_eq!(v2["apiVersion"], "kueue.x-k8s.io/v1beta2");
            assert_eq!(down(v2), d);
        }

        let wl: v1beta1::Workload = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w"},
            "spec": {"podSets": [{"count": 2, "template": {}}], "priorityClassName": "x",
                     "priorityClassSource": "scheduling.k8s.io/priorityclass"}
        }))
        .unwrap_or_default();
        let v2 = wl.to_v1beta2().map_err(|e| e.to_string());
        let Ok(v2) = v2 else { panic!("{v2:?}") };
        assert_eq!(
            v2.spec.priority_class_ref,
            Some(v1beta2::PriorityClassRef::pod_priority_class("x"))
        );
        assert_eq!(v2.spec.pod_sets[0].name, "main");
        assert_eq!(v2.to_v1beta1().ok(), Some(wl));
    }
}
