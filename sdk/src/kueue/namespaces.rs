//! Kueue's `managedJobsNamespaceSelector`: which namespaces' jobs Kueue manages at all (always respected in v0.19),
//! judged on a Namespace's labels by the webhook, the operator and the simulator alike.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// The label the API server puts on every Namespace, with its name.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Kueue's default selector: every namespace but `kube-system` and Kueue's own.
pub fn kueue_default(kueue_namespace: &str) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAME_LABEL.to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(vec!["kube-system".to_owned(), kueue_namespace.to_owned()]),
        }]),
    }
}

/// Whether a namespace with these labels is selected (an unknown operator selects nothing: the Configuration
/// check refuses it before).
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector.match_expressions.iter().flatten().all(|r| {
            let value = labels.get(&r.key);
            let values = r.values.as_deref().unwrap_or_default();
            match r.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// Whether namespace `name` is selected, with `labels` its Namespace's labels when known: the name label is
/// always there (the API server sets it), so a selector on names alone needs no Namespace.
pub fn selects_namespace(
    selector: &LabelSelector,
    name: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let mut all = labels.cloned().unwrap_or_default();
    all.insert(NAME_LABEL.to_owned(), name.to_owned());
    selects(selector, &all)
}

/// Whether the selector reads labels other than the namespace's name (so a Namespace not seen yet cannot be
/// judged).
pub fn reads_other_labels(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .any(|(k, _)| k != NAME_LABEL)
        || selector
            .match_expressions
            .iter()
            .flatten()
            .any(|r| r.key != NAME_LABEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn kueues_default_leaves_out_kube_system_and_its_own_namespace_by_name() {
        let d = kueue_default("kueue-system");
        assert!(selects_namespace(&d, "team-a", None));
        assert!(!selects_namespace(&d, "kube-system", None));
        assert!(!selects_namespace(&d, "kueue-system", None));
        assert!(selects_namespace(
            &kueue_default("kueue"),
            "kueue-system",
            None
        ));
        assert!(!reads_other_labels(&d));
    }

    #[test]
    fn every_operator_and_match_labels_are_anded() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"team": "ml"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]},
                {"key": "frozen", "operator": "DoesNotExist"},
                {"key": "owner", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]}
            ]
        }))
        .unwrap();
        let ok = labels(&[("team", "ml"), ("tier", "gpu"), ("owner", "x")]);
        assert!(selects(&sel, &ok));
        for (k, v) in [
            ("team", "web"),
            ("tier", "tpu"),
            ("frozen", "1"),
            ("env", "prod"),
        ] {
            let mut l = ok.clone();
            l.insert(k.to_owned(), v.to_owned());
            assert!(!selects(&sel, &l), "{k}={v}");
        }
        let mut no_owner = ok.clone();
        no_owner.remove("owner");
        assert!(!selects(&sel, &no_owner));
        assert!(reads_other_labels(&sel));
        let bad: LabelSelector = serde_json::from_value(
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}),
        )
        .unwrap();
        assert!(!selects(&bad, &ok));
        assert!(selects(&LabelSelector::default(), &BTreeMap::new()));
    }
}
