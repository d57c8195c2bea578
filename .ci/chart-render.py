#!/usr/bin/env python3
"""Lints charts/sluice and renders it with Helm's own engine (the helm-sdkpy package bundles Helm's library).

helm-sdkpy exposes install but no `helm template`, so each variant is installed (no waiting) into a minimal
in-process stand-in for the Kubernetes API: it answers discovery and accepts every create, and the objects Helm
creates are written out as the rendered manifests, one JSON list per variant. Usage:

    chart-render.py CHART OUT_DIR

Writes OUT_DIR/<variant>.json for each variant and prints Helm's lint messages; exits non-zero on any lint
error or failed render.
"""

import asyncio
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import helm_sdkpy

NAMESPACE = "sluice-system"
RELEASE = "sluice"

# Values of each rendered variant.
VARIANTS = {
    "default": {},
    "cert-manager": {
        "certificates": {"source": "cert-manager"},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
                    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}},
        "nodeAgent": {"nvml": {"mode": "hostPath", "driverRoot": "/"},
                      "podResources": {"enabled": True},
                      "healthRules": {"thermalReads": 3, "degradingXids": [63, 92]},
                      "metrics": {"serviceMonitor": {"enabled": True}}},
        "operator": {"config": {"fairSharing": {"enable": True},
                                "waitForPodsReady": {"enable": True, "requeuingStrategy": {"backoffLimitCount": 3}},
                                "admissionFairSharing": {"enable": True,
                                                         "resourceWeights": {"cpu": 0, "nvidia.com/gpu": 1}}}},
    },
    "cert-manager-issuer": {
        "certificates": {"source": "cert-manager",
                         "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer",
                                                       "group": "cert-manager.io"}}},
        "operator": {"visibility": {"enabled": False}, "replicas": 1},
        "nodeAgent": {"enabled": False},
        "crds": {"install": False},
    },
}

# Values the chart must refuse, by its schema or its templates (each install must fail).
INVALID = {
    "failure-policy": {"webhook": {"failurePolicy": "Sometimes"}},
    "unknown-key": {"operator": {"replica": 3}},
    "health-rule-typo": {"nodeAgent": {"healthRules": {"thermalReeds": 3}}},
    "certificate-source": {"certificates": {"source": "vault"}},
    "no-limits": {"webhook": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": None}}},
    "replicas-without-leader": {"operator": {"leaderElection": {"enabled": False}}},
}

# (group, version) -> [(plural, kind, namespaced)]: what the stand-in API server says it serves.
RESOURCES = {
    ("", "v1"): [("namespaces", "Namespace", False), ("nodes", "Node", False), ("secrets", "Secret", True),
                 ("configmaps", "ConfigMap", True), ("services", "Service", True),
                 ("serviceaccounts", "ServiceAccount", True), ("pods", "Pod", True), ("events", "Event", True)],
    ("apps", "v1"): [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    ("batch", "v1"): [("jobs", "Job", True)],
    ("rbac.authorization.k8s.io", "v1"): [("clusterroles", "ClusterRole", False),
                                          ("clusterrolebindings", "ClusterRoleBinding", False),
                                          ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
    ("admissionregistration.k8s.io", "v1"): [
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("coordination.k8s.io", "v1"): [("leases", "Lease", True)],
    ("scheduling.k8s.io", "v1"): [("priorityclasses", "PriorityClass", False)],
    ("apiextensions.k8s.io", "v1"): [("customresourcedefinitions", "CustomResourceDefinition", False)],
    ("apiregistration.k8s.io", "v1"): [("apiservices", "APIService", False)],
    ("cert-manager.io", "v1"): [("certificates", "Certificate", True), ("issuers", "Issuer", True),
                                ("clusterissuers", "ClusterIssuer", False)],
    ("monitoring.coreos.com", "v1"): [("servicemonitors", "ServiceMonitor", True),
                                       ("prometheusrules", "PrometheusRule", True)],
}


class FakeApi:
    """Objects by URL path, and the order in which they were created."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objects = {}
        self.created = []
        self.counter = 0

    def reset(self):
        with self.lock:
            self.objects.clear()
            self.created.clear()


API = FakeApi()


def resource_list(group, version):
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
        "resources": [{"name": plural, "singularName": kind.lower(), "namespaced": ns, "kind": kind,
                       "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                      for plural, kind, ns in RESOURCES[(group, version)]],
    }


def group_list():
    groups = {}
    for (group, version) in RESOURCES:
        if group:
            groups.setdefault(group, []).append(version)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
         "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        """The request's object; None for a protobuf body (only Helm's own release record comes that way)."""
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length)
        if "protobuf" in (self.headers.get("Content-Type") or ""):
            return None
        return json.loads(data or b"{}")

    def opaque(self, code):
        """Answers a protobuf write with a bare object of the route's kind."""
        r = self.route()
        kind = self.kind_of(r[0], r[1], r[2]) if r else None
        name = (r[4] if r else None) or "release"
        return self.reply(code, {"kind": kind or "Secret", "apiVersion": "v1", "type": "helm.sh/release.v1",
                                 "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": "1"}})

    def route(self):
        """(group, version, plural, namespace, name, subresource) of a resource path, or None."""
        parts = [p for p in urlparse(self.path).path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return (group, version, None, None, None, None)
        return (group, version, rest[0], namespace, rest[1] if len(rest) > 1 else None,
                rest[2] if len(rest) > 2 else None)

    def kind_of(self, group, version, plural):
        for p, kind, _ in RESOURCES.get((group, version), []):
            if p == plural:
                return kind
        return None

    def do_GET(self):
        path = urlparse(self.path).path.rstrip("/")
        if path == "/version":
            return self.reply(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64"})
        if path == "/api":
            return self.reply(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        if path == "/apis":
            return self.reply(200, group_list())
        r = self.route()
        if r is None:
            return self.reply(404, status(404, "NotFound", f"{path} not found"))
        group, version, plural, namespace, name, _ = r
        if (group, version) not in RESOURCES:
            return self.reply(404, status(404, "NotFound", f"{group}/{version} not served"))
        if plural is None:
            return self.reply(200, resource_list(group, version))
        kind = self.kind_of(group, version, plural)
        if name is None:
            with API.lock:
                prefix = path + "/"
                items = [o for k, o in API.objects.items() if k.startswith(prefix) and k.count("/") == prefix.count("/")]
            return self.reply(200, {"kind": f"{kind}List", "apiVersion": f"{group}/{version}".lstrip("/"),
                                    "metadata": {"resourceVersion": "1"}, "items": items})
        with API.lock:
            obj = API.objects.get(path)
        if obj is None:
            return self.reply(404, status(404, "NotFound", f"{plural} \"{name}\" not found"))
        return self.reply(200, obj)

    def store(self, path, obj, created):
        with API.lock:
            API.counter += 1
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", f"00000000-0000-0000-0000-{API.counter:012d}")
            meta["resourceVersion"] = str(API.counter)
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            if obj.get("kind") == "CustomResourceDefinition":
                # Established at once, for whoever waits on it.
                obj["status"] = {"conditions": [
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                    "acceptedNames": obj.get("spec", {}).get("names", {}), "storedVersions": []}
            API.objects[path] = obj
            if created:
                API.created.append(obj)

    def do_POST(self):
        r = self.route()
        obj = self.body()
        if obj is None:
            return self.opaque(201)
        if r is None or r[2] is None:
            return self.reply(404, status(404, "NotFound", "no such collection"))
        name = obj.get("metadata", {}).get("name")
        path = urlparse(self.path).path.rstrip("/") + f"/{name}"
        with API.lock:
            exists = path in API.objects
        if exists:
            return self.reply(409, status(409, "AlreadyExists", f"{name} already exists"))
        self.store(path, obj, True)
        return self.reply(201, obj)

    def do_PUT(self):
        path = urlparse(self.path).path.rstrip("/")
        obj = self.body()
        if obj is None:
            return self.opaque(200)
        self.store(path, obj, False)
        return self.reply(200, obj)

    def do_PATCH(self):
        path = urlparse(self.path).path.rstrip("/")
        with API.lock:
            obj = API.objects.get(path)
        if obj is None:
            return self.reply(404, status(404, "NotFound", "not found"))
        return self.reply(200, obj)

    def do_DELETE(self):
        path = urlparse(self.path).path.rstrip("/")
        with API.lock:
            obj = API.objects.pop(path, None)
        return self.reply(200, obj or status(404, "NotFound", "not found"))


def kubeconfig(port):
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "fake", "user": {"token": "fake"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": NAMESPACE}}],
    })


def is_release_record(obj):
    return obj.get("kind") == "Secret" and obj.get("type", "").startswith("helm.sh/release")


async def main(chart, out_dir):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.makedirs(out_dir, exist_ok=True)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        config_path = os.path.join(tmp, "kubeconfig")
        with open(config_path, "w") as f:
            f.write(kubeconfig(server.server_address[1]))
        os.environ["HELM_CACHE_HOME"] = os.path.join(tmp, "cache")
        os.environ["HELM_CONFIG_HOME"] = os.path.join(tmp, "config")
        os.environ["HELM_DATA_HOME"] = os.path.join(tmp, "data")
        config = helm_sdkpy.Configuration(namespace=NAMESPACE, kubeconfig=config_path)

        lint = await helm_sdkpy.Lint(config).run(chart)
        print("== helm lint", chart)
        print(json.dumps(lint, indent=2))
        # Helm's severities: 1 info, 2 warning, 3 error. Warnings fail the check too.
        serious = [m for m in lint.get("Messages") or [] if int(m.get("Severity", 0)) >= 2]
        if lint.get("Errors") or serious:
            print("lint reported warnings or errors", file=sys.stderr)
            failed = True

        for variant, values in VARIANTS.items():
            API.reset()
            try:
                await helm_sdkpy.Install(config).run(RELEASE, chart, values=values, wait=False, timeout=120)
            except helm_sdkpy.HelmError as e:
                print(f"== render {variant}: FAILED: {e}", file=sys.stderr)
                failed = True
                continue
            objects = [o for o in API.created if not is_release_record(o)]
            for o in objects:
                # Drop what the stand-in server added, so the files hold what Helm rendered.
                meta = o.get("metadata", {})
                for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
                    meta.pop(k, None)
                if o.get("kind") == "CustomResourceDefinition":
                    o.pop("status", None)
            path = os.path.join(out_dir, f"{variant}.json")
            with open(path, "w") as f:
                json.dump(objects, f, indent=1)
            kinds = {}
            for o in objects:
                kinds[o.get("kind")] = kinds.get(o.get("kind"), 0) + 1
            print(f"== render {variant}: {len(objects)} objects -> {path}: {json.dumps(kinds, sort_keys=True)}")
        for variant, values in INVALID.items():
            API.reset()
            try:
                await helm_sdkpy.Install(config).run(RELEASE, chart, values=values, wait=False, timeout=120)
            except helm_sdkpy.HelmError as e:
                print(f"== refused {variant}, as it should be: {str(e).splitlines()[0][:160]}")
                continue
            print(f"== render {variant}: the schema accepted values it must refuse: {values}", file=sys.stderr)
            failed = True
    server.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
