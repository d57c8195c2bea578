//! Running scenarios under both systems and collecting what differs.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::compare::{Difference, differences, state};
use super::kubelet::FakeNode;
use super::scenario::{Scenario, Step};
use super::sim;
use super::system::{System, THIRD_PARTY, Which, crds};

/// How long nothing may change before a system counts as quiet, and how long to wait for that at most.
const STILL: Duration = Duration::from_secs(3);
const QUIET_LIMIT: Duration = Duration::from_secs(90);

/// Feature gates given to Kueue's manager: every gate at its default, as Sluice runs, but its visibility server
/// off, which wants certificates this harness does not make (Sluice's visibility API is tested in the cluster
/// suite).
pub const KUEUE_GATES: &str = "VisibilityOnDemand=false";

/// One scenario's outcome.
pub struct Outcome {
    /// The scenario.
    pub name: String,
    /// The differences, each with the step after which it was seen.
    pub differences: Vec<(usize, String, Difference)>,
    /// Why it could not be compared (a system failed to start or never went quiet), if so.
    pub failure: Option<String>,
    /// What was left out of the comparison, and why.
    pub notes: Vec<String>,
    /// Wall time of its steps.
    pub seconds: f64,
    /// Time starting both systems (on fresh or kept control planes).
    pub start_seconds: f64,
}

/// All scenarios' outcomes.
pub struct Report {
    /// The Kueue release compared against.
    pub version: String,
    /// Per scenario.
    pub outcomes: Vec<Outcome>,
    /// Wall time of the whole run.
    pub seconds: f64,
}

impl Report {
    /// Scenarios that differ or could not be compared.
    pub fn differing(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| !o.differences.is_empty() || o.failure.is_some())
            .count()
    }

    /// The report as text; its last line is the summary.
    pub fn text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in &self.outcomes {
            if let Some(why) = &o.failure {
                writeln!(f, "{}: not compared: {why}", o.name)?;
            }
            for note in &o.notes {
                writeln!(f, "{}: note: {note}", o.name)?;
            }
            for (step, what, d) in &o.differences {
                writeln!(
                    f,
                    "{}: after step {} ({what}): {} {}: Kueue {:?}, Sluice {:?}",
                    o.name, step, d.object, d.field, d.kueue, d.sluice
                )?;
            }
        }
        let n = self.outcomes.len();
        let differ = self.differing();
        writeln!(
            f,
            "Kueue {} against Sluice, {:.0} s",
            self.version, self.seconds
        )?;
        write!(
            f,
            "kueue differential: {n} scenarios, {} identical, {differ} differ",
            n - differ
        )
    }
}

/// Kueue and Sluice started for one scenario, each on a control plane of its own (Err: why not, such as no control
/// plane built), and how long that took.
type Started = (Result<(System, System), String>, f64);

/// The third-party CRDs a scenario's planes get (a kept plane serves only scenarios with the same ones).
fn profile(s: &Scenario) -> String {
    let mut crds: Vec<&str> = THIRD_PARTY
        .iter()
        .filter(|t| s.applies_kind(t.kind))
        .flat_map(|t| t.crds.iter().copied())
        .collect();
    crds.sort();
    crds.dedup();
    crds.join(",")
}

async fn prepare(s: &Scenario) -> Started {
    let start = Instant::now();
    // Another project's CRDs only where its kinds are: each is most of a megabyte for each API server to take in.
    let mut third = Vec::new();
    for t in THIRD_PARTY.iter().filter(|t| s.applies_kind(t.kind)) {
        match tokio::task::block_in_place(|| crds(t)) {
            Ok(yaml) => third.push((t, yaml)),
            Err(e) => return (Err(format!("no CRD for its {}s: {e}", t.kind)), 0.0),
        }
    }
    if third.iter().any(|(t, _)| t.kind == "LeaderWorkerSet") && !super::lws::LwsController::built()
    {
        return (
            Err("LWS's controller is not built (run tests/lws/build)".into()),
            0.0,
        );
    }
    let profile = profile(s);
    let (kp, sp) = tokio::join!(
        System::plane(Which::Kueue, &s.name, &profile),
        System::plane(Which::Sluice, &s.name, &profile)
    );
    let (Some(kp), Some(sp)) = (kp, sp) else {
        return (
            Err("no control plane (run tests/control-plane/build)".into()),
            0.0,
        );
    };
    let config = s.config.as_deref();
    let systems = tokio::join!(
        System::start(Which::Kueue, kp, config, nodes(s), KUEUE_GATES, &third),
        System::start(Which::Sluice, sp, config, nodes(s), "", &third),
    );
    (Ok(systems), start.elapsed().as_secs_f64())
}

/// The scenarios not started yet (index, scenario, attempt): a plane is kept only for one of them.
type Pending = std::sync::Arc<std::sync::Mutex<Vec<(usize, Scenario, u32)>>>;

/// One scenario start to end: its systems started, its steps compared, its planes given back for a scenario still
/// to come with the same CRDs.
async fn scenario(s: Scenario, pending: Pending) -> Outcome {
    let started = prepare(&s).await;
    let (outcome, systems) = run_one(&s, started).await;
    if let Some((kueue, sluice)) = systems {
        let profile = profile(&s);
        // A failed scenario's planes may hold what made it fail: not kept.
        let wanted = outcome.failure.is_none()
            && pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|(_, p, _)| self::profile(p) == profile);
        let (kp, sp) = (kueue.stop(), sluice.stop());
        tokio::join!(
            super::pool::give(Which::Kueue, &profile, kp, wanted),
            super::pool::give(Which::Sluice, &profile, sp, wanted)
        );
    }
    outcome
}

/// How many scenarios run at once (SLUICE_DIFF_JOBS, default 3): a scenario mostly waits for quiet, so on two cores
/// three fill them (all 78 in 737 s against 995 s two at a time, on 2026-12-07).
fn jobs() -> usize {
    std::env::var("SLUICE_DIFF_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .filter(|j| *j > 0)
        .unwrap_or(3)
}

/// The next scenario to start: the first whose planes wait idle, else the first that needs no other project's CRDs
/// or whose CRDs no running scenario has (it would start planes a running one gives back soon), else the first.
fn pick(
    pending: &mut Vec<(usize, Scenario, u32)>,
    running: &[String],
) -> Option<(usize, Scenario, u32)> {
    let at = pending
        .iter()
        .position(|(_, s, _)| super::pool::ready(&profile(s)))
        .or_else(|| {
            pending.iter().position(|(_, s, _)| {
                let p = profile(s);
                p.is_empty() || !running.contains(&p)
            })
        })
        .or((!pending.is_empty()).then_some(0))?;
    Some(pending.remove(at))
}

/// Runs every scenario under both systems side by side, [`jobs`] scenarios at a time, on control planes kept
/// between scenarios ([`super::pool`]). A scenario whose task panicked (a lost connection to a loaded API server)
/// runs once more, and says so; a second panic is its outcome.
pub async fn run_all(version: &str, scenarios: &[Scenario]) -> Report {
    let wall = Instant::now();
    // libtest has printed "test NAME ... " without a newline: the progress lines start on lines of their own (the
    // differential script picks them out by their start).
    eprintln!();
    let mut outcomes: Vec<Option<Outcome>> = scenarios.iter().map(|_| None).collect();
    let pending: Pending = std::sync::Arc::new(std::sync::Mutex::new(
        scenarios
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, s)| (i, s, 1))
            .collect(),
    ));
    // The profile of each running scenario, by index.
    let mut running_profiles: std::collections::BTreeMap<usize, String> = Default::default();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < jobs() {
            let next = {
                let busy: Vec<String> = running_profiles.values().cloned().collect();
                pick(
                    &mut pending.lock().unwrap_or_else(|e| e.into_inner()),
                    &busy,
                )
            };
            let Some((i, s, attempt)) = next else {
                break;
            };
            running_profiles.insert(i, profile(&s));
            let pending = pending.clone();
            running.spawn(async move {
                let task = tokio::spawn(scenario(s.clone(), pending));
                (i, s, attempt, task.await)
            });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let (i, s, attempt, result) = done.expect("the scenario's supervisor");
        running_profiles.remove(&i);
        let o = match result {
            Ok(o) => o,
            Err(e) => {
                let why = panic_message(e);
                if attempt == 1 {
                    eprintln!("{}: its run panicked ({why}); running it again", s.name);
                    pending
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(0, (i, s, 2));
                    continue;
                }
                failed(&s.name, format!("its run panicked twice, last: {why}"))
            }
        };
        eprintln!(
            "{}: {} ({:.0} s, and {:.0} s starting{})",
            o.name,
            match (&o.failure, o.differences.len()) {
                (Some(_), _) => "not compared".to_string(),
                (None, 0) => "identical".to_string(),
                (None, n) => format!("{n} differences"),
            },
            o.seconds,
            o.start_seconds,
            if attempt > 1 { ", second run" } else { "" }
        );
        outcomes[i] = Some(o);
    }
    super::pool::clear();
    Report {
        version: version.to_string(),
        outcomes: outcomes.into_iter().flatten().collect(),
        seconds: wall.elapsed().as_secs_f64(),
    }
}

/// What a panicked task said.
fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into()),
        Err(e) => e.to_string(),
    }
}

/// The outcome of a scenario that could not be run.
fn failed(name: &str, why: String) -> Outcome {
    Outcome {
        name: name.to_string(),
        differences: Vec::new(),
        failure: Some(why),
        notes: Vec::new(),
        seconds: 0.0,
        start_seconds: 0.0,
    }
}

/// Nodes for the fake kubelet: the scenario's own (`nodes.yaml`), else one roomy node per ResourceFlavor (its node
/// labels and taints); and one plain node, so every admitted Pod can run.
fn nodes(s: &Scenario) -> Vec<FakeNode> {
    let mut nodes = vec![roomy("node-plain")];
    if !s.nodes.is_empty() {
        nodes.extend(s.nodes.iter().map(declared));
        return nodes;
    }
    for step in &s.steps {
        let Step::Apply { yaml, .. } = step else {
            continue;
        };
        for doc in serde_yaml::Deserializer::from_str(yaml) {
            let Ok(v) = Value::deserialize(doc) else {
                continue;
            };
            if v["kind"] != "ResourceFlavor" {
                continue;
            }
            let mut node = roomy(&format!(
                "node-{}",
                v["metadata"]["name"].as_str().unwrap_or("flavor")
            ));
            for (k, val) in v["spec"]["nodeLabels"].as_object().into_iter().flatten() {
                node.labels
                    .insert(k.clone(), val.as_str().unwrap_or_default().to_string());
            }
            if let Some(taints) = v["spec"]["nodeTaints"].as_array() {
                node.taints =
                    serde_json::from_value(Value::from(taints.clone())).unwrap_or_default();
            }
            nodes.push(node);
        }
    }
    nodes
}

/// A Node of `nodes.yaml` as the fake kubelet runs it (room for 110 pods unless its capacity says otherwise).
fn declared(node: &Value) -> FakeNode {
    let mut n = FakeNode::new(node["metadata"]["name"].as_str().unwrap_or_default(), 0, 0);
    n.capacity.clear();
    n.capacity.insert("pods".into(), "110".into());
    for (k, v) in node["status"]["capacity"].as_object().into_iter().flatten() {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        n.capacity.insert(k.clone(), v);
    }
    for (k, v) in node["metadata"]["labels"].as_object().into_iter().flatten() {
        n.labels
            .insert(k.clone(), v.as_str().unwrap_or_default().to_string());
    }
    if let Some(taints) = node["spec"]["taints"].as_array() {
        n.taints = serde_json::from_value(Value::from(taints.clone())).unwrap_or_default();
    }
    n
}

fn roomy(name: &str) -> FakeNode {
    let mut n = FakeNode::new(name, 512, 64);
    n.capacity.insert("memory".into(), "4Ti".into());
    n.capacity.insert("pods".into(), "1000".into());
    n
}

/// Whether `d` is the fair share of a ClusterQueue or Cohort other than those whose quota a step changed: Kueue
/// rewrites a ClusterQueue's status only when it or its workloads change, so after a sibling's quota change its
/// `weightedShare` stays as it was, though Kueue means it as a live value (kubernetes-sigs/kueue#2258,
/// docs/compatibility.md); Sluice keeps every share current.
fn stale_share(patched: &[String], d: &Difference) -> bool {
    let object = d.object.trim_start_matches("simulate: ");
    !patched.is_empty()
        && d.field == "status.fairSharing.weightedShare"
        && !patched.iter().any(|p| p == object)
}

/// The note saying why a difference is left out of the comparison, when Kueue's value is one it is known to leave
/// stale ([`stale_share`], [`stale_pending`]), the simulator's retry ([`simulated_retry`]) or a readiness race
/// ([`raced_readiness`]); None for a difference that counts.
fn left_out(
    patched: &[String],
    suspended: &[String],
    kueue: &[(String, Value)],
    step: usize,
    d: &Difference,
) -> Option<String> {
    if stale_share(patched, d) {
        return Some(stale_note(step, d));
    }
    if raced_readiness(suspended, d) {
        return Some(format!(
            "after step {step}: {} {} not compared: a step suspended its admitted Job, and whether the Job \
             controller deleted the pods before the queue manager resumed the Job is a race in Kueue as in Sluice \
             (ready again after pods were lost reads Recovered): Kueue {:?}, Sluice {:?}",
            d.object, d.field, d.kueue, d.sluice
        ));
    }
    if simulated_retry(d) {
        return Some(format!(
            "after step {step}: {} {} not compared: the simulator tried the workload again from Kueue's state \
             before the step, Kueue last tried it earlier (both found no room): Kueue {:?}, simulator {:?}",
            d.object, d.field, d.kueue, d.sluice
        ));
    }
    stale_pending(kueue, d).map(|pending| stale_pending_note(step, d, pending))
}

/// Whether `d` is the PodsReady reason, Started against Recovered, of the Workload of a Job whose `spec.suspend` a
/// step patched (`suspended` holds such Jobs as `namespace/name`). Kueue and Sluice both resume an admitted Job a
/// user suspended at once (Kueue's job reconciler, step 7); the Job controller reacts to the same patch, and
/// whether it deletes the pods first decides whether PodsReady passes through WaitForRecovery (then Recovered) or
/// stays Started. Neither system can order the two, so either reason is right.
fn raced_readiness(suspended: &[String], d: &Difference) -> bool {
    const READY: [&str; 2] = ["Started", "Recovered"];
    d.field == "status.conditions[PodsReady].reason"
        && d.kueue != d.sluice
        && READY.contains(&d.kueue.as_str())
        && READY.contains(&d.sluice.as_str())
        && suspended.iter().any(|job| {
            job.split_once('/')
                .is_some_and(|(ns, name)| d.object == format!("Workload {ns}/job-{name}-#####"))
        })
}

/// The simulator's message for a workload that Kueue and the simulator both leave pending for want of room, where
/// the two differ. The simulator starts from Kueue's state before a step and tries every pending workload again, as
/// a Kueue that just started would; a running Kueue keeps a workload it found no room for aside with the message
/// of its last try, written against the usage of that moment (before admissions later in the same step, or in an
/// earlier step), until an event requeues it. The operator's messages are still compared in full.
fn simulated_retry(d: &Difference) -> bool {
    const NO_ROOM: &str = "couldn't assign flavors to pod set ";
    d.object.starts_with("simulate: Workload ")
        && d.field == "status.conditions[QuotaReserved].message"
        && d.kueue.starts_with(NO_ROOM)
        && d.sluice.starts_with(NO_ROOM)
}

/// The note for a share left out by `stale_share`.
fn stale_note(step: usize, d: &Difference) -> String {
    format!(
        "after step {step}: {} {} not compared: Kueue's {} was not rewritten after another queue's quota changed, \
         Sluice's says {}",
        d.object, d.field, d.kueue, d.sluice
    )
}

/// What a LocalQueue's or ClusterQueue's `status.pendingWorkloads` should say by Kueue's own Workloads, where
/// Kueue's count says otherwise and Sluice's agrees with its Workloads. Kueue counts a queue's items while its
/// scheduler has the head popped (`Manager.heads` takes it out of the LocalQueue for the cycle), and rewrites the
/// count only on the next event for that queue: when a Workload's arrival wakes the scheduler as the LocalQueue
/// reconciler counts, and the head goes back with its status unchanged, Kueue's count stays one short until
/// something else touches the queue. Likewise a ClusterQueue's count once a LocalQueue of it is deleted (its
/// workloads leave the ClusterQueue, its status is not rewritten). Sluice is then compared with the count Kueue's
/// Workloads give.
fn stale_pending(kueue: &[(String, Value)], d: &Difference) -> Option<usize> {
    if d.field != "status.pendingWorkloads" {
        return None;
    }
    let object = d.object.trim_start_matches("simulate: ");
    let (kind, name) = object.split_once(' ')?;
    let is_true = |w: &Value, t: &str| {
        w["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == t && c["status"] == "True")
    };
    // The LocalQueues (namespace, name) whose Workloads count.
    let local_queues: Vec<(&str, &str)> = kueue
        .iter()
        .filter(|(k, _)| k == "LocalQueue")
        .map(|(_, q)| {
            (
                q["metadata"]["namespace"].as_str().unwrap_or_default(),
                q["metadata"]["name"].as_str().unwrap_or_default(),
                q["spec"]["clusterQueue"].as_str().unwrap_or_default(),
            )
        })
        .filter(|(ns, lq, cq)| match kind {
            "LocalQueue" => name == format!("{ns}/{lq}"),
            "ClusterQueue" => name == *cq,
            _ => false,
        })
        .map(|(ns, lq, _)| (ns, lq))
        .collect();
    // A ClusterQueue none of whose LocalQueues exists any more has nothing pending (Kueue's DeleteLocalQueue takes
    // a LocalQueue's workloads out of its ClusterQueue, and the status is rewritten only on the ClusterQueue's next
    // event).
    if local_queues.is_empty() && kind != "ClusterQueue" {
        return None;
    }
    let pending = kueue
        .iter()
        .filter(|(k, _)| k == "Workload")
        .map(|(_, w)| w)
        .filter(|w| {
            let at = (
                w["metadata"]["namespace"].as_str().unwrap_or_default(),
                w["spec"]["queueName"].as_str().unwrap_or_default(),
            );
            local_queues.contains(&at)
                && w["metadata"]["deletionTimestamp"].is_null()
                && w["spec"]["active"] != Value::Bool(false)
                && !is_true(w, "QuotaReserved")
                && !is_true(w, "Finished")
        })
        .count();
    (d.kueue != pending.to_string() && d.sluice == pending.to_string()).then_some(pending)
}

/// With `SLUICE_DIFF_DUMP=1`, writes both systems' objects after step `n` to
/// `target/kueue-differential/dump/<scenario>/step-<n>-{kueue,sluice}.json`, to read a difference at leisure.
fn dump(scenario: &str, n: usize, kueue: &[(String, Value)], sluice: &[(String, Value)]) {
    if !std::env::var("SLUICE_DIFF_DUMP").is_ok_and(|v| v == "1") {
        return;
    }
    let dir = super::plane::repo_root()
        .join("target/kueue-differential/dump")
        .join(scenario);
    let _ = std::fs::create_dir_all(&dir);
    for (system, objects) in [("kueue", kueue), ("sluice", sluice)] {
        let all: Vec<&Value> = objects.iter().map(|(_, o)| o).collect();
        let text = serde_json::to_string_pretty(&all).unwrap_or_default();
        let _ = std::fs::write(dir.join(format!("step-{n}-{system}.json")), text);
    }
}

/// The note for a count left out by `stale_pending`.
fn stale_pending_note(step: usize, d: &Difference, pending: usize) -> String {
    format!(
        "after step {step}: {} {}: Kueue's {} was not recounted (counted while its scheduler held the head, or \
         before a LocalQueue was deleted); its Workloads say {pending}, as Sluice's does",
        d.object, d.field, d.kueue
    )
}

/// How the note saying a scenario's simulator predictions were left out begins.
const NOT_SIMULATED: &str = "the simulator was not compared";

/// Runs one scenario's steps; returns its outcome and its systems (to stop and give back).
async fn run_one(s: &Scenario, started: Started) -> (Outcome, Option<(System, System)>) {
    let start = Instant::now();
    let mut outcome = Outcome {
        name: s.name.clone(),
        differences: Vec::new(),
        failure: None,
        notes: Vec::new(),
        seconds: 0.0,
        start_seconds: started.1,
    };
    let config = s.config.as_deref();
    let (kueue, sluice) = match started.0 {
        Ok(systems) => systems,
        Err(why) => {
            outcome.failure = Some(why);
            return (outcome, None);
        }
    };
    // ClusterQueues and Cohorts whose quota a step changed.
    let mut patched: Vec<String> = Vec::new();
    // Jobs whose `spec.suspend` a step changed, as `namespace/name`.
    let mut suspended: Vec<String> = Vec::new();
    // The cluster as Kueue left it before each step: the simulator's input.
    let mut before: Vec<(String, Value)> = Vec::new();
    // The simulator's input kinds, with those of the scenario's third-party kinds (a TrainJob's runtimes).
    let mut inputs = sim::INPUT_KINDS.to_vec();
    for t in THIRD_PARTY.iter().filter(|t| s.applies_kind(t.kind)) {
        inputs.extend(t.sim_inputs.iter().copied());
    }
    // A scenario's own nodes are what topology-aware placement reads: the simulator gets them (and the Topologies).
    if !s.nodes.is_empty() {
        inputs.extend(sim::TOPOLOGY_INPUTS.iter().copied());
    }
    let sim_dir = super::plane::repo_root()
        .join("target/kueue-differential/simulate")
        .join(&s.name);
    for (i, step) in s.steps.iter().enumerate() {
        let n = i + 1;
        let what = step.describe();
        let (ke, se) = tokio::join!(kueue.step(step), sluice.step(step));
        if ke != se {
            outcome.differences.push((
                n,
                what.clone(),
                Difference {
                    object: "(the API server's answer)".into(),
                    field: "errors".into(),
                    kueue: ke.join("; "),
                    sluice: se.join("; "),
                },
            ));
        }
        let (kq, sq) = tokio::join!(
            kueue.quiet(STILL, QUIET_LIMIT),
            sluice.quiet(STILL, QUIET_LIMIT)
        );
        if let Err(e) = kq.and(sq) {
            outcome.failure = Some(format!("after step {n} ({what}): {e}"));
            break;
        }
        if let Step::Patch { object, .. } = step
            && (object.kind == "ClusterQueue" || object.kind == "Cohort")
        {
            patched.push(format!("{} {}", object.kind, object.name));
        }
        if let Step::Patch { object, patch, .. } = step
            && object.kind == "Job"
            && !patch["spec"]["suspend"].is_null()
        {
            let ns = object.namespace.as_deref().unwrap_or_default();
            suspended.push(format!("{ns}/{}", object.name));
        }
        let (ko, so) = tokio::join!(kueue.objects(), sluice.objects());
        dump(&s.name, n, &ko, &so);
        for d in differences(&state(&ko), &state(&so)) {
            match left_out(&patched, &suspended, &ko, n, &d) {
                Some(note) => outcome.notes.push(note),
                None => outcome.differences.push((n, what.clone(), d)),
            }
        }
        if let Some(why) = &s.not_simulated {
            if !outcome.notes.iter().any(|n| n.starts_with(NOT_SIMULATED)) {
                outcome.notes.push(format!("{NOT_SIMULATED}: {why}"));
            }
            before = kueue.list(&inputs).await;
            continue;
        }
        // The simulator takes jobs as submitted (Kueue's Workloads stand for those of earlier steps), so a change to
        // a submitted job has nothing to apply to.
        if let Step::Patch { object, .. } = step
            && sim::JOB_KINDS.contains(&object.kind.as_str())
        {
            outcome.notes.push(format!(
                "after step {n}: the simulator was not compared: a change to a submitted {} is not in its input",
                object.kind
            ));
            before = kueue.list(&inputs).await;
            continue;
        }
        // What the simulator predicts from Kueue's state before the step, against what Kueue did.
        let input = sim::input(&inputs, &before, step, &ko);
        let dir = sim_dir.join(format!("step-{n}"));
        match tokio::task::block_in_place(|| sim::predict(&dir, config, input, &ko)) {
            Ok(diffs) => {
                for mut d in diffs {
                    d.object = format!("simulate: {}", d.object);
                    match left_out(&patched, &suspended, &ko, n, &d) {
                        Some(note) => outcome.notes.push(note),
                        None => outcome.differences.push((n, what.clone(), d)),
                    }
                }
            }
            // A feature the simulator says it does not model: no prediction to compare, said once.
            Err(e) if e.contains("is not simulated") => {
                if !outcome.notes.iter().any(|n| n.starts_with(NOT_SIMULATED)) {
                    outcome.notes.push(format!("{NOT_SIMULATED}: {e}"));
                }
            }
            Err(e) => outcome.differences.push((
                n,
                what.clone(),
                Difference {
                    object: "simulate".into(),
                    field: "(run)".into(),
                    kueue: "-".into(),
                    sluice: e,
                },
            )),
        }
        before = kueue.list(&inputs).await;
    }
    outcome.seconds = start.elapsed().as_secs_f64();
    (outcome, Some((kueue, sluice)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(name: &str, conditions: Value) -> (String, Value) {
        (
            "Workload".into(),
            json!({
                "metadata": {"namespace": "strict", "name": name},
                "spec": {"queueName": "queue"},
                "status": {"conditions": conditions},
            }),
        )
    }

    fn cluster() -> Vec<(String, Value)> {
        vec![
            (
                "LocalQueue".into(),
                json!({"metadata": {"namespace": "strict", "name": "queue"}, "spec": {"clusterQueue": "cq"}}),
            ),
            workload(
                "admitted",
                json!([{"type": "QuotaReserved", "status": "True"}]),
            ),
            workload(
                "head",
                json!([{"type": "QuotaReserved", "status": "False"}]),
            ),
            workload("behind", json!([])),
            workload("done", json!([{"type": "Finished", "status": "True"}])),
        ]
    }

    fn pending(object: &str, kueue: &str, sluice: &str) -> Difference {
        Difference {
            object: object.into(),
            field: "status.pendingWorkloads".into(),
            kueue: kueue.into(),
            sluice: sluice.into(),
        }
    }

    #[test]
    fn only_the_simulators_no_room_messages_may_differ() {
        let message = |object: &str, kueue: &str, sluice: &str| Difference {
            object: object.into(),
            field: "status.conditions[QuotaReserved].message".into(),
            kueue: kueue.into(),
            sluice: sluice.into(),
        };
        let k = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 500m more needed";
        let s = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1500m more needed";
        assert!(left_out(&[], &[], &[], 5, &message("simulate: Workload ns/wl", k, s)).is_some());
        // The operator's are compared in full.
        assert!(left_out(&[], &[], &[], 5, &message("Workload ns/wl", k, s)).is_none());
        // As are the simulator's where one of them holds quota or is pending for another reason.
        let reserved = "Quota reserved in ClusterQueue cq";
        assert!(
            left_out(
                &[],
                &[],
                &[],
                5,
                &message("simulate: Workload ns/wl", reserved, s)
            )
            .is_none()
        );
        assert!(
            left_out(
                &[],
                &[],
                &[],
                5,
                &message("simulate: Workload ns/wl", k, "LocalQueue q is inactive")
            )
            .is_none()
        );
    }

    #[test]
    fn only_readiness_after_a_user_suspended_the_job_may_read_started_or_recovered() {
        let reason = |object: &str, kueue: &str, sluice: &str| Difference {
            object: object.into(),
            field: "status.conditions[PodsReady].reason".into(),
            kueue: kueue.into(),
            sluice: sluice.into(),
        };
        let suspended = ["team-a/paused".to_string()];
        let wl = "Workload team-a/job-paused-#####";
        assert!(raced_readiness(
            &suspended,
            &reason(wl, "Started", "Recovered")
        ));
        assert!(raced_readiness(
            &suspended,
            &reason(wl, "Recovered", "Started")
        ));
        assert!(left_out(&[], &suspended, &[], 3, &reason(wl, "Started", "Recovered")).is_some());
        // Not without the suspension, not another Job's Workload, not another reason or field.
        assert!(!raced_readiness(&[], &reason(wl, "Started", "Recovered")));
        let other = "Workload team-a/job-other-#####";
        assert!(!raced_readiness(
            &suspended,
            &reason(other, "Started", "Recovered")
        ));
        assert!(!raced_readiness(
            &suspended,
            &reason(wl, "Started", "WaitForRecovery")
        ));
        let mut message = reason(wl, "Started", "Recovered");
        message.field = "status.conditions[PodsReady].message".into();
        assert!(!raced_readiness(&suspended, &message));
    }

    #[test]
    fn a_pending_count_kueue_left_short_is_checked_against_its_workloads() {
        let objects = cluster();
        for object in ["LocalQueue strict/queue", "simulate: ClusterQueue cq"] {
            assert_eq!(stale_pending(&objects, &pending(object, "1", "2")), Some(2));
            // Sluice disagreeing with Kueue's Workloads stays a difference.
            assert_eq!(stale_pending(&objects, &pending(object, "1", "3")), None);
            assert_eq!(stale_pending(&objects, &pending(object, "2", "1")), None);
        }
        assert_eq!(
            stale_pending(&objects, &pending("LocalQueue other/queue", "1", "2")),
            None
        );
    }
}
