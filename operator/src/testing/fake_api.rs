//! An in-memory Kubernetes API server as a tower Service that `kube::Client` talks to.
//!
//! Objects are kept as JSON by collection (`apis/<group>/<version>/<plural>` or `api/v1/<plural>`), namespace
//! and name, with one resourceVersion counter. It serves get, list, watch (a streaming body fed as objects
//! change), create, replace, JSON merge patch, JSON patch and delete (finalizers honoured), with the `/status`
//! subresource splitting spec writes from status writes as the API server does for custom resources. A
//! resourceVersion in a replace or merge patch that is not the current one is answered with 409 Conflict.
//! Faults can be scripted per method and path, and every request is logged so tests can assert exactly what
//! was sent.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::FutureExt;
use futures::channel::mpsc;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Response body type of the fake server.
pub type FakeBody = UnsyncBoxBody<Bytes, Infallible>;

/// One request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// Which client sent it (the name given to [`FakeApi::client`]).
    pub client: String,
    /// HTTP method.
    pub method: Method,
    /// Path without the query string.
    pub path: String,
    /// Query string (empty when none).
    pub query: String,
    /// Content-Type header, when present.
    pub content_type: Option<String>,
    /// JSON body, when present.
    pub body: Option<Value>,
    /// Status code answered.
    pub status: u16,
}

impl RecordedRequest {
    /// Whether this request changed (or tried to change) state: not a GET.
    pub fn is_write(&self) -> bool {
        self.method != Method::GET
    }
}

/// A scripted failure: the next `times` requests matching `method` and containing `path_contains` are answered
/// with `status` instead of being served.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Method to match (any when None).
    pub method: Option<Method>,
    /// Substring of the path to match.
    pub path_contains: String,
    /// Status code to answer.
    pub status: u16,
    /// How many matching requests fail.
    pub times: u32,
}

/// Scripted latency: requests matching `method` and containing `path_contains` wait `delay` before they are
/// served, so a test can see how many a client keeps in flight at once.
#[derive(Clone, Debug)]
pub struct Latency {
    /// Method to match (any when None).
    pub method: Option<Method>,
    /// Substring of the path to match.
    pub path_contains: String,
    /// How long each matching request waits.
    pub delay: std::time::Duration,
}

struct Watcher {
    client: String,
    collection: String,
    namespace: Option<String>,
    selector: Vec<(String, Option<String>)>,
    tx: mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>,
}

struct HistoryEntry {
    rv: u64,
    collection: String,
    kind: &'static str,
    object: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    uid: u64,
    objects: BTreeMap<String, BTreeMap<(String, String), Value>>,
    history: Vec<HistoryEntry>,
    watchers: Vec<Watcher>,
    log: Vec<RecordedRequest>,
    faults: Vec<Fault>,
    latencies: Vec<Latency>,
    /// Delayed requests waiting now, and the most that ever waited at once.
    delayed_now: usize,
    delayed_max: usize,
    disconnected: Vec<String>,
    /// Group/versions whose discovery (`GET /apis/<group>/<version>`) is answered, as once a CRD is installed.
    served: Vec<(String, Vec<String>)>,
}

/// The fake API server. Cloning shares the state.
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

/// The path of a request split into what it addresses.
struct Target {
    collection: String,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (format!("api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(n.to_string()), None),
        [r, n, s] => (*r, Some(n.to_string()), Some(*s)),
        _ => return None,
    };
    Some(Target {
        collection: format!("{prefix}/{resource}"),
        namespace,
        name,
        status: sub == Some("status"),
    })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Equality label selectors (`a=b,c=d`); other forms match nothing.
/// A label selector's terms: `key=value` (or `key==value`) as the key and `Some(value)`, a bare `key` (the label
/// exists) as the key and `None`.
fn parse_selector(s: Option<String>) -> Vec<(String, Option<String>)> {
    s.map(|s| {
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.trim_start_matches('=').to_string())),
                None => (p.to_string(), None),
            })
            .collect()
    })
    .unwrap_or_default()
}

fn matches(obj: &Value, namespace: Option<&str>, selector: &[(String, Option<String>)]) -> bool {
    let ns_ok = namespace.is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns));
    ns_ok
        && selector.iter().all(|(k, v)| {
            let label = obj["metadata"]["labels"][k].as_str();
            match v {
                Some(v) => label == Some(v.as_str()),
                None => label.is_some(),
            }
        })
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

fn reason_of(code: u16) -> &'static str {
    match code {
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        _ => "Unknown",
    }
}

fn respond(code: u16, body: &Value) -> Response<FakeBody> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn error(code: u16, message: &str) -> (u16, Value) {
    (code, status_body(code, reason_of(code), message))
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

/// The collection path of a resource type, e.g. `apis/kueue.x-k8s.io/v1beta2/workloads`.
pub fn collection_of<K: Resource<DynamicType = ()>>() -> String {
    K::url_path(&(), None).trim_start_matches('/').to_string()
}

impl State {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(&mut self, collection: &str, kind: &'static str, object: Value) {
        let rv = self.rv;
        let line = json!({"type": kind, "object": object});
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        let bytes = Bytes::from(bytes);
        self.watchers.retain(|w| {
            if w.collection != collection || !matches(&object, w.namespace.as_deref(), &w.selector)
            {
                return !w.tx.is_closed();
            }
            w.tx.unbounded_send(Ok(Frame::data(bytes.clone()))).is_ok()
        });
        self.history.push(HistoryEntry {
            rv,
            collection: collection.to_string(),
            kind,
            object,
        });
    }

    /// Stores an object (new or changed), bumping its resourceVersion and telling watchers.
    fn store(
        &mut self,
        collection: &str,
        key: (String, String),
        mut obj: Value,
        added: bool,
    ) -> Value {
        // An object being deleted whose last finalizer went away is gone.
        let deleting = !obj["metadata"]["deletionTimestamp"].is_null();
        let no_finalizers = obj["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty());
        let rv = self.next_rv();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        if deleting && no_finalizers {
            if let Some(c) = self.objects.get_mut(collection) {
                c.remove(&key);
            }
            self.emit(collection, "DELETED", obj.clone());
            return obj;
        }
        self.objects
            .entry(collection.to_string())
            .or_default()
            .insert(key, obj.clone());
        self.emit(
            collection,
            if added { "ADDED" } else { "MODIFIED" },
            obj.clone(),
        );
        obj
    }
}

impl FakeApi {
    /// An empty server.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the state from the others.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A kube Client whose requests are logged under `name`.
    pub fn client(&self, name: &str) -> kube::Client {
        let api = self.clone();
        let name = name.to_string();
        let svc = tower::service_fn(move |req: Request<kube::client::Body>| {
            let api = api.clone();
            let name = name.clone();
            async move { Ok::<_, Infallible>(api.handle(&name, req).await) }.boxed()
        });
        kube::Client::new(svc, "default")
    }

    /// Answers discovery of `group_version` (e.g. `jobset.x-k8s.io/v1alpha2`) listing `resources`, as an API server
    /// does once their CRD is installed.
    pub fn serve_api(&self, group_version: &str, resources: &[&str]) {
        self.lock().served.push((
            group_version.to_string(),
            resources.iter().map(|r| r.to_string()).collect(),
        ));
    }

    /// Stores an object as if created by someone else (no request logged). Returns it as stored.
    pub fn put<K>(&self, obj: &K) -> Value
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
        v["apiVersion"] = json!(K::api_version(&()));
        v["kind"] = json!(K::kind(&()));
        let collection = collection_of::<K>();
        let mut st = self.lock();
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
        let key = (ns, name);
        let existing = st
            .objects
            .get(&collection)
            .and_then(|c| c.get(&key))
            .cloned();
        let added = existing.is_none();
        match existing {
            Some(old) => {
                for f in ["uid", "creationTimestamp", "generation"] {
                    if v["metadata"][f].is_null() {
                        v["metadata"][f] = old["metadata"][f].clone();
                    }
                }
            }
            None => {
                st.uid += 1;
                if v["metadata"]["uid"].is_null() {
                    v["metadata"]["uid"] = json!(format!("uid-{:08}", st.uid));
                }
                if v["metadata"]["creationTimestamp"].is_null() {
                    v["metadata"]["creationTimestamp"] = json!(now_rfc3339());
                }
                v["metadata"]["generation"] = json!(1);
            }
        }
        st.store(&collection, key, v, added)
    }

    /// Removes an object outright (as garbage collection would), telling watchers.
    pub fn remove<K: Resource<DynamicType = ()>>(&self, namespace: Option<&str>, name: &str) {
        let collection = collection_of::<K>();
        let mut st = self.lock();
        let key = (namespace.unwrap_or("").to_string(), name.to_string());
        if let Some(obj) = st.objects.get_mut(&collection).and_then(|c| c.remove(&key)) {
            st.next_rv();
            st.emit(&collection, "DELETED", obj);
        }
    }

    /// The stored object, decoded.
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let v = self.get_json::<K>(namespace, name)?;
        serde_json::from_value(v).ok()
    }

    /// The stored object as JSON.
    pub fn get_json<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let collection = collection_of::<K>();
        let key = (namespace.unwrap_or("").to_string(), name.to_string());
        self.lock()
            .objects
            .get(&collection)
            .and_then(|c| c.get(&key))
            .cloned()
    }

    /// Every stored object of a type, decoded (undecodable ones skipped).
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let collection = collection_of::<K>();
        self.lock()
            .objects
            .get(&collection)
            .map(|c| {
                c.values()
                    .filter_map(|v| serde_json::from_value(v.clone()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Scripts a failure.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// Scripts a latency.
    pub fn delay(&self, latency: Latency) {
        self.lock().latencies.push(latency);
    }

    /// The most requests held by a scripted latency at the same time.
    pub fn most_delayed_at_once(&self) -> usize {
        self.lock().delayed_max
    }

    /// Every request served so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().log.clone()
    }

    /// Cuts a client off: its open watches end and its later requests fail with 503 (a killed process).
    pub fn disconnect(&self, client: &str) {
        let mut st = self.lock();
        st.disconnected.push(client.to_string());
        st.watchers.retain(|w| w.client != client);
    }

    /// The current resourceVersion counter.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    async fn handle(&self, client: &str, req: Request<kube::client::Body>) -> Response<FakeBody> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let json_body: Option<Value> = if body.is_empty() {
            None
        } else {
            serde_json::from_slice(&body).ok()
        };
        let path = parts.uri.path().to_string();
        let query = parts.uri.query().unwrap_or("").to_string();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let delay = {
            let mut st = self.lock();
            let d = st
                .latencies
                .iter()
                .find(|l| {
                    l.method.as_ref().is_none_or(|m| *m == parts.method)
                        && path.contains(&l.path_contains)
                })
                .map(|l| l.delay);
            if d.is_some() {
                st.delayed_now += 1;
                st.delayed_max = st.delayed_max.max(st.delayed_now);
            }
            d
        };
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
            self.lock().delayed_now -= 1;
        }
        let mut st = self.lock();
        let mut record = RecordedRequest {
            client: client.to_string(),
            method: parts.method.clone(),
            path: path.clone(),
            query: query.clone(),
            content_type: content_type.clone(),
            body: json_body.clone(),
            status: 200,
        };
        if st.disconnected.iter().any(|c| c == client) {
            let (code, v) = error(503, "client disconnected");
            record.status = code;
            st.log.push(record);
            return respond(code, &v);
        }
        let fault = st.faults.iter_mut().find(|f| {
            f.times > 0
                && f.method.as_ref().is_none_or(|m| *m == parts.method)
                && path.contains(&f.path_contains)
        });
        if let Some(f) = fault {
            f.times -= 1;
            let (code, v) = error(f.status, "injected fault");
            st.faults.retain(|f| f.times > 0);
            record.status = code;
            st.log.push(record);
            return respond(code, &v);
        }
        if parts.method == Method::GET
            && let Some((gv, resources)) = st
                .served
                .iter()
                .find(|(gv, _)| path.trim_matches('/') == format!("apis/{gv}"))
        {
            let list = json!({
                "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources.iter().map(|r| json!({
                    "name": r, "singularName": "", "namespaced": true, "kind": r,
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]
                })).collect::<Vec<_>>()
            });
            st.log.push(record);
            return respond(200, &list);
        }
        let Some(target) = parse_path(&path) else {
            let (code, v) = error(404, &format!("no such path {path}"));
            record.status = code;
            st.log.push(record);
            return respond(code, &v);
        };
        if parts.method == Method::GET
            && target.name.is_none()
            && query_param(&query, "watch").is_some_and(|w| w == "true" || w == "1")
        {
            st.log.push(record);
            return Self::watch(&mut st, client, &target, &query);
        }
        let (code, v) = match parts.method {
            Method::GET => Self::read(&st, &target, &query),
            Method::POST => Self::create(&mut st, &target, json_body),
            Method::PUT => Self::replace(&mut st, &target, json_body),
            Method::PATCH => Self::patch(&mut st, &target, content_type.as_deref(), json_body),
            Method::DELETE => Self::delete(&mut st, &target),
            _ => error(405, "method not allowed"),
        };
        record.status = code;
        st.log.push(record);
        respond(code, &v)
    }

    fn key(target: &Target, name: &str) -> (String, String) {
        (
            target.namespace.clone().unwrap_or_default(),
            name.to_string(),
        )
    }

    fn read(st: &State, target: &Target, query: &str) -> (u16, Value) {
        let coll = st.objects.get(&target.collection);
        match &target.name {
            Some(name) => match coll.and_then(|c| c.get(&Self::key(target, name))) {
                Some(v) => (200, v.clone()),
                None => error(404, &format!("{} {name} not found", target.collection)),
            },
            None => {
                let selector = parse_selector(query_param(query, "labelSelector"));
                let items: Vec<Value> = coll
                    .map(|c| {
                        c.values()
                            .filter(|v| matches(v, target.namespace.as_deref(), &selector))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let kind = items
                    .first()
                    .and_then(|i| i["kind"].as_str())
                    .map(|k| format!("{k}List"))
                    .unwrap_or_else(|| "List".to_string());
                (
                    200,
                    json!({
                        "apiVersion": "v1",
                        "kind": kind,
                        "metadata": {"resourceVersion": st.rv.to_string()},
                        "items": items,
                    }),
                )
            }
        }
    }

    fn watch(st: &mut State, client: &str, target: &Target, query: &str) -> Response<FakeBody> {
        let (tx, rx) = mpsc::unbounded();
        let selector = parse_selector(query_param(query, "labelSelector"));
        let from: u64 = query_param(query, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let send = |kind: &str, obj: &Value| {
            let mut bytes =
                serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
            bytes.push(b'\n');
            let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from(bytes))));
        };
        if from == 0 {
            for v in st
                .objects
                .get(&target.collection)
                .into_iter()
                .flat_map(|c| c.values())
                .filter(|v| matches(v, target.namespace.as_deref(), &selector))
            {
                send("ADDED", v);
            }
        } else {
            for h in st.history.iter().filter(|h| {
                h.rv > from
                    && h.collection == target.collection
                    && matches(&h.object, target.namespace.as_deref(), &selector)
            }) {
                send(h.kind, &h.object);
            }
        }
        st.watchers.push(Watcher {
            client: client.to_string(),
            collection: target.collection.clone(),
            namespace: target.namespace.clone(),
            selector,
            tx,
        });
        let body = StreamBody::new(rx).boxed_unsync();
        let mut r = Response::new(body);
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        r
    }

    fn create(st: &mut State, target: &Target, body: Option<Value>) -> (u16, Value) {
        let Some(mut obj) = body else {
            return error(400, "missing body");
        };
        let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else {
            return error(422, "metadata.name: Required value");
        };
        let key = Self::key(target, &name);
        if st
            .objects
            .get(&target.collection)
            .is_some_and(|c| c.contains_key(&key))
        {
            return (
                409,
                status_body(409, "AlreadyExists", &format!("{name} already exists")),
            );
        }
        st.uid += 1;
        let uid = st.uid;
        let meta = &mut obj["metadata"];
        if let Some(ns) = &target.namespace {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(format!("uid-{uid:08}"));
        meta["creationTimestamp"] = json!(now_rfc3339());
        meta["generation"] = json!(1);
        if let Some(m) = meta.as_object_mut() {
            m.remove("resourceVersion");
        }
        (201, st.store(&target.collection.clone(), key, obj, true))
    }

    fn current(st: &State, target: &Target) -> Result<(String, Value), (u16, Value)> {
        let Some(name) = target.name.clone() else {
            return Err(error(405, "a name is required"));
        };
        match st
            .objects
            .get(&target.collection)
            .and_then(|c| c.get(&Self::key(target, &name)))
        {
            Some(v) => Ok((name, v.clone())),
            None => Err(error(
                404,
                &format!("{} {name} not found", target.collection),
            )),
        }
    }

    /// Keeps what the addressed endpoint may not change: status on the main resource, everything but status
    /// on `/status`; identity fields always.
    fn finish_write(target: &Target, old: &Value, mut new: Value) -> Value {
        if target.status {
            let mut out = old.clone();
            out["status"] = new["status"].take();
            return out;
        }
        new["status"] = old["status"].clone();
        if new["status"].is_null()
            && let Some(m) = new.as_object_mut()
        {
            m.remove("status");
        }
        for f in [
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "deletionTimestamp",
        ] {
            new["metadata"][f] = old["metadata"][f].clone();
            if new["metadata"][f].is_null()
                && let Some(m) = new["metadata"].as_object_mut()
            {
                m.remove(f);
            }
        }
        let spec_changed = {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                    m.remove("status");
                }
                v
            };
            strip(old) != strip(&new)
        };
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(if spec_changed {
            generation + 1
        } else {
            generation
        });
        new
    }

    /// The API server's update rules that the controllers must respect (found against a real kube-apiserver):
    /// a Job's pod template may change only while the Job was suspended and had not started
    /// (`status.startTime` unset), else 422 "field is immutable".
    fn refused_update(target: &Target, old: &Value, new: &Value) -> Option<(u16, Value)> {
        if target.status || !target.collection.ends_with("/jobs") {
            return None;
        }
        let template_changed = old["spec"]["template"] != new["spec"]["template"];
        let suspended = old["spec"]["suspend"] == json!(true);
        let started = !old["status"]["startTime"].is_null();
        (template_changed && (!suspended || started))
            .then(|| error(422, "spec.template: Invalid value: field is immutable"))
    }

    fn replace(st: &mut State, target: &Target, body: Option<Value>) -> (u16, Value) {
        let (name, old) = match Self::current(st, target) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let Some(new) = body else {
            return error(400, "missing body");
        };
        let given = new["metadata"]["resourceVersion"].as_str();
        if given.is_some_and(|rv| Some(rv) != old["metadata"]["resourceVersion"].as_str()) {
            return error(
                409,
                "the object has been modified; please apply your changes to the latest version and try again",
            );
        }
        let out = Self::finish_write(target, &old, new);
        if let Some(refused) = Self::refused_update(target, &old, &out) {
            return refused;
        }
        (
            200,
            st.store(
                &target.collection.clone(),
                Self::key(target, &name),
                out,
                false,
            ),
        )
    }

    fn patch(
        st: &mut State,
        target: &Target,
        content_type: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        if content_type == Some("application/apply-patch+yaml") {
            return Self::apply(st, target, body);
        }
        let (name, old) = match Self::current(st, target) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let Some(patch) = body else {
            return error(400, "missing body");
        };
        let mut new = old.clone();
        match content_type {
            Some("application/merge-patch+json")
            | Some("application/strategic-merge-patch+json") => {
                let given = patch["metadata"]["resourceVersion"].as_str();
                if given.is_some_and(|rv| Some(rv) != old["metadata"]["resourceVersion"].as_str()) {
                    return error(
                        409,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    );
                }
                json_patch::merge(&mut new, &patch);
            }
            Some("application/json-patch+json") => {
                let ops: json_patch::Patch = match serde_json::from_value(patch) {
                    Ok(p) => p,
                    Err(e) => return error(400, &format!("bad json patch: {e}")),
                };
                if let Err(e) = json_patch::patch(&mut new, &ops) {
                    return error(422, &format!("json patch failed: {e}"));
                }
            }
            other => return error(415, &format!("unsupported patch type {other:?}")),
        }
        let out = Self::finish_write(target, &old, new);
        if let Some(refused) = Self::refused_update(target, &old, &out) {
            return refused;
        }
        (
            200,
            st.store(
                &target.collection.clone(),
                Self::key(target, &name),
                out,
                false,
            ),
        )
    }

    /// Server-side apply by one field manager (the only one the tests use): creates the object when it is
    /// missing; otherwise each top-level field the manager applies replaces the stored one, and its labels and
    /// annotations are merged. Field ownership between several managers is not modelled.
    fn apply(st: &mut State, target: &Target, body: Option<Value>) -> (u16, Value) {
        let Some(mut applied) = body else {
            return error(400, "missing body");
        };
        let Some(name) = target.name.clone() else {
            return error(405, "a name is required");
        };
        if applied["metadata"]["name"].as_str() != Some(name.as_str()) {
            return error(400, "metadata.name must match the name in the path");
        }
        let key = Self::key(target, &name);
        let Some(old) = st
            .objects
            .get(&target.collection)
            .and_then(|c| c.get(&key))
            .cloned()
        else {
            if target.status {
                return error(404, &format!("{} {name} not found", target.collection));
            }
            return Self::create(st, target, Some(applied));
        };
        let mut new = old.clone();
        if let Some(fields) = applied.as_object_mut() {
            let meta = fields.remove("metadata");
            for (k, v) in std::mem::take(fields) {
                new[k.as_str()] = v;
            }
            for part in ["labels", "annotations"] {
                if let Some(m) = meta.as_ref().and_then(|m| m[part].as_object()) {
                    for (k, v) in m {
                        new["metadata"][part][k.as_str()] = v.clone();
                    }
                }
            }
        }
        let out = Self::finish_write(target, &old, new);
        (200, st.store(&target.collection.clone(), key, out, false))
    }

    fn delete(st: &mut State, target: &Target) -> (u16, Value) {
        let (name, mut old) = match Self::current(st, target) {
            Ok(x) => x,
            Err(e) => return e,
        };
        if old["metadata"]["deletionTimestamp"].is_null() {
            old["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
        }
        (
            200,
            st.store(
                &target.collection.clone(),
                Self::key(target, &name),
                old,
                false,
            ),
        )
    }
}
