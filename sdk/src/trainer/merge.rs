//! The strategic merge patch Trainer applies with each runtime patch to a replicated job's batch/v1
//! JobTemplateSpec, for the fields a runtime patch can hold (Trainer's `JobTemplatePatch`): maps merge key by key,
//! `null` removes a key, the pod spec's and containers' keyed lists merge item by item on their merge key (new
//! items go last), every other list is replaced.

use serde_json::{Map, Value};

/// The merge key of a keyed list of a pod template, by the list's field name; None for a list the patch replaces.
/// Field names are unique enough within a JobTemplateSpec for the name alone to say which list it is.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims"
        | "env" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "topologySpreadConstraints" => "topologyKey",
        "hostAliases" => "ip",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

/// Merges `patch` into `original` as a strategic merge patch of a JobTemplateSpec.
pub fn strategic_merge(original: &mut Value, patch: &Value) {
    match (original, patch) {
        (Value::Object(orig), Value::Object(p)) => merge_maps(orig, p),
        (orig, p) => *orig = p.clone(),
    }
}

fn merge_maps(orig: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            orig.remove(key);
            continue;
        }
        match orig.get_mut(key) {
            Some(Value::Array(items)) if value.is_array() => {
                let new = value.as_array().map(Vec::as_slice).unwrap_or_default();
                if key == "finalizers" {
                    // A merged list of strings: the union, new ones last.
                    for item in new {
                        if !items.contains(item) {
                            items.push(item.clone());
                        }
                    }
                } else if let Some(mk) = merge_key(key) {
                    merge_keyed(items, new, mk);
                } else {
                    *items = new.to_vec();
                }
            }
            Some(existing @ Value::Object(_)) if value.is_object() => {
                strategic_merge(existing, value);
            }
            _ => {
                let mut fresh = value.clone();
                drop_nulls(&mut fresh);
                orig.insert(key.clone(), fresh);
            }
        }
    }
}

fn merge_keyed(items: &mut Vec<Value>, patch: &[Value], key: &str) {
    for p in patch {
        let id = p.get(key);
        match items
            .iter_mut()
            .find(|item| id.is_some() && item.get(key) == id)
        {
            Some(item) => strategic_merge(item, p),
            None => {
                let mut fresh = p.clone();
                drop_nulls(&mut fresh);
                items.push(fresh);
            }
        }
    }
}

/// A value added whole keeps no `null` fields (a patch's null means "remove", and there is nothing to remove).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keyed_lists_merge_by_key_and_other_lists_are_replaced() {
        let mut original = json!({
            "metadata": {"labels": {"a": "1"}},
            "spec": {"parallelism": 2, "template": {"metadata": {"annotations": {"x": "1"}}, "spec": {
                "containers": [
                    {"name": "node", "image": "i", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "volumeMounts": [{"name": "v", "mountPath": "/data"}]},
                    {"name": "side", "image": "s"}
                ],
                "tolerations": [{"key": "k1", "operator": "Exists"}],
                "nodeSelector": {"zone": "a"},
                "volumes": [{"name": "v", "emptyDir": {}}]
            }}}
        });
        let patch = json!({
            "metadata": {"labels": {"b": "2"}, "creationTimestamp": null},
            "spec": {"template": {"metadata": {"annotations": {"y": "2"}}, "spec": {
                "containers": [{"name": "node", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                    "volumeMounts": [{"name": "w", "mountPath": "/data", "readOnly": true}]},
                    {"name": "extra", "env": [{"name": "D", "value": "5"}]}],
                "tolerations": [{"key": "k2", "operator": "Exists"}],
                "nodeSelector": {"pool": "h100"},
                "schedulingGates": [{"name": "g"}]
            }}}
        });
        strategic_merge(&mut original, &patch);
        let spec = &original["spec"]["template"]["spec"];
        assert_eq!(original["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            original["spec"]["template"]["metadata"]["annotations"],
            json!({"x": "1", "y": "2"})
        );
        assert_eq!(
            spec["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"],
            json!([{"name": "w", "mountPath": "/data", "readOnly": true}])
        );
        assert_eq!(spec["containers"][0]["image"], "i");
        assert_eq!(spec["containers"][2]["name"], "extra");
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "k2", "operator": "Exists"}])
        );
        assert_eq!(spec["nodeSelector"], json!({"zone": "a", "pool": "h100"}));
        assert_eq!(spec["schedulingGates"], json!([{"name": "g"}]));
        assert_eq!(original["spec"]["parallelism"], 2);
    }

    #[test]
    fn null_removes_a_key() {
        let mut original = json!({"spec": {"template": {"spec": {"serviceAccountName": "a"}}}});
        strategic_merge(
            &mut original,
            &json!({"spec": {"template": {"spec": {"serviceAccountName": null}}}}),
        );
        assert_eq!(original, json!({"spec": {"template": {"spec": {}}}}));
    }
}
