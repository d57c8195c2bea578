//! Every (API group, resource, verb) the operator uses, in one table, so the chart's ClusterRole can be checked
//! against it.

/// One permission: API group ("" for core), resource (with `/status` for the subresource), verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// API group.
    pub group: &'static str,
    /// Resource or `resource/subresource`.
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
}

const WATCH: &[&str] = &["get", "list", "watch"];
const WATCH_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];
const STATUS: &[&str] = &["get", "update", "patch"];
/// A job kind: watched and updated, and deleted once Kueue's deactivation retention (objectRetentionPolicies) ends.
const JOB: &[&str] = &["get", "list", "watch", "update", "patch", "delete"];

/// The operator's permissions.
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        group: "kueue.x-k8s.io",
        resource: "workloads",
        verbs: &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "workloads/status",
        verbs: STATUS,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "clusterqueues",
        verbs: WATCH_UPDATE,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "clusterqueues/status",
        verbs: STATUS,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "localqueues",
        verbs: WATCH_UPDATE,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "localqueues/status",
        verbs: STATUS,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "cohorts",
        verbs: WATCH,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "cohorts/status",
        verbs: STATUS,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "resourceflavors",
        verbs: WATCH_UPDATE,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "workloadpriorityclasses",
        verbs: WATCH,
    },
    Permission {
        group: "batch",
        resource: "jobs",
        verbs: JOB,
    },
    Permission {
        group: "batch",
        resource: "jobs/status",
        verbs: &["get"],
    },
    Permission {
        group: "jobset.x-k8s.io",
        resource: "jobsets",
        verbs: JOB,
    },
    Permission {
        group: "kubeflow.org",
        resource: "pytorchjobs",
        verbs: JOB,
    },
    Permission {
        group: "ray.io",
        resource: "rayjobs",
        verbs: JOB,
    },
    Permission {
        group: "ray.io",
        resource: "rayclusters",
        verbs: JOB,
    },
    Permission {
        group: "ray.io",
        resource: "rayservices",
        verbs: JOB,
    },
    Permission {
        group: "trainer.kubeflow.org",
        resource: "trainjobs",
        verbs: JOB,
    },
    Permission {
        group: "trainer.kubeflow.org",
        resource: "trainingruntimes",
        verbs: WATCH,
    },
    Permission {
        group: "trainer.kubeflow.org",
        resource: "clustertrainingruntimes",
        verbs: WATCH,
    },
    Permission {
        group: "leaderworkerset.x-k8s.io",
        resource: "leaderworkersets",
        verbs: &["get", "list", "watch", "delete"],
    },
    Permission {
        group: "apps",
        resource: "statefulsets",
        // The revisions of the StatefulSets LWS makes (a rolling update lets the old revision's pods go).
        verbs: WATCH,
    },
    Permission {
        group: "",
        resource: "pods",
        // delete: pods of an evicted plain-pod group are ended, as Kueue does.
        verbs: &["get", "list", "watch", "patch", "delete"],
    },
    Permission {
        group: "",
        resource: "pods/status",
        // The TerminationTarget condition set before such a pod is deleted.
        verbs: &["patch"],
    },
    Permission {
        group: "",
        resource: "namespaces",
        verbs: WATCH,
    },
    Permission {
        group: "scheduling.k8s.io",
        resource: "priorityclasses",
        verbs: WATCH,
    },
    Permission {
        group: "",
        resource: "limitranges",
        verbs: WATCH,
    },
    Permission {
        group: "node.k8s.io",
        resource: "runtimeclasses",
        verbs: WATCH,
    },
    Permission {
        group: "",
        resource: "nodes",
        verbs: WATCH,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "topologies",
        verbs: WATCH,
    },
    Permission {
        group: "kueue.x-k8s.io",
        resource: "admissionchecks",
        verbs: WATCH,
    },
    Permission {
        group: "sluice.dev",
        resource: "nodegputopologies",
        verbs: WATCH,
    },
    Permission {
        group: "sluice.dev",
        resource: "policymodules",
        verbs: WATCH,
    },
    Permission {
        group: "sluice.dev",
        resource: "policymodules/status",
        verbs: &["get", "patch"],
    },
    // Only the ConfigMaps PolicyModules name (the chart grants them in the operator's namespace).
    Permission {
        group: "",
        resource: "configmaps",
        verbs: WATCH,
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "create", "update"],
    },
    Permission {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
    },
];

/// Whether the table grants `verb` on `group`/`resource`.
pub fn allows(group: &str, resource: &str, verb: &str) -> bool {
    PERMISSIONS
        .iter()
        .any(|p| p.group == group && p.resource == resource && p.verbs.contains(&verb))
}

/// The (group, resource, verb) an API request needs, from its method, path and query (None for paths that are
/// not resources).
pub fn required(method: &str, path: &str, query: &str) -> Option<(String, String, String)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _, rest @ ..] => ("", rest),
        ["apis", g, _, rest @ ..] => (*g, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
        r => r,
    };
    let (resource, named) = match rest {
        [r] => (r.to_string(), false),
        [r, _] => (r.to_string(), true),
        [r, _, sub] => (format!("{r}/{sub}"), true),
        _ => return None,
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, named) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    Some((group.to_string(), resource, verb.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_map_to_permissions() {
        assert_eq!(
            required(
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status",
                ""
            ),
            Some((
                "kueue.x-k8s.io".into(),
                "workloads/status".into(),
                "patch".into()
            ))
        );
        assert_eq!(
            required("GET", "/apis/batch/v1/jobs", "watch=true&resourceVersion=3"),
            Some(("batch".into(), "jobs".into(), "watch".into()))
        );
        assert!(allows("kueue.x-k8s.io", "workloads/status", "patch"));
        assert!(!allows("kueue.x-k8s.io", "cohorts", "delete"));
    }
}
