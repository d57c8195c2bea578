#!/usr/bin/env python3
"""Regenerates nodes.yaml and trace.yaml of the bundled example (deterministic: fixed seed).

Run from this directory: python3 gen-trace.py
"""
import random

rng = random.Random(20261130)

nodes = []
for i in range(15):
    spot = i >= 9
    name = f"gpu-{'spot' if spot else 'od'}-{i:02d}"
    rack = f"rack-{i // 4}"
    # One on-demand node fails six hours in (failure injection: NodeFailures eviction and requeue).
    fail = "\n  annotations:\n    sluice.dev/fail-at: 6h" if i == 5 else ""
    taints = "\n  taints:\n  - key: sluice.dev/spot\n    value: \"true\"\n    effect: NoSchedule" if spot else ""
    nodes.append(f"""apiVersion: v1
kind: Node
metadata:
  name: {name}{fail}
  labels:
    kubernetes.io/hostname: {name}
    cloud.provider.com/topology-rack: {rack}
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    nvidia.com/gpu.count: "8"
    sluice.dev/capacity: {'spot' if spot else 'on-demand'}
spec:{taints or ' {}'}
status:
  allocatable:
    cpu: "128"
    memory: 1024Gi
    nvidia.com/gpu: "8"
    pods: "110"
  capacity:
    cpu: "128"
    memory: 1024Gi
    nvidia.com/gpu: "8"
    pods: "110\"""".replace('\\"', '"'))
with open("nodes.yaml", "w") as f:
    f.write("# 9 on-demand and 6 spot H100 nodes, 8 GPUs each.\n" + "\n---\n".join(nodes) + "\n")

# What each node's agent would publish: 8 GPUs in two NVLink islands of four.
reports = []
for i in range(15):
    name = f"gpu-{'spot' if i >= 9 else 'od'}-{i:02d}"
    gpus = "\n".join(
        f"  - {{index: {g}, uuid: GPU-{i:02d}{g:02d}0000-0000-0000-0000-000000000000, model: NVIDIA H100 80GB HBM3, "
        f"memoryMib: 81559, pciBusId: \"00000000:{0x18 + g * 0x10:02x}:00.0\", numaNode: {g // 4}, health: {{healthy: true}}}}"
        for g in range(8))
    reports.append(f"""apiVersion: sluice.dev/v1alpha1
kind: NodeGpuTopology
metadata:
  name: {name}
spec:
  nodeName: {name}
  driverVersion: "570.124.06"
  gpus:
{gpus}
  nvlinkIslands:
  - {{gpus: [0, 1, 2, 3]}}
  - {{gpus: [4, 5, 6, 7]}}""")
with open("gpu-topology.yaml", "w") as f:
    f.write("# NodeGpuTopology of every node, as `sluice node-agent --print` would report it.\n"
            + "\n---\n".join(reports) + "\n")

# (team, kind, weight): who submits what.
mix = [
    ("research", "train", 4), ("research", "exp", 4),
    ("nlp", "train", 4), ("nlp", "exp", 3),
    ("vision", "train", 2), ("vision", "exp", 4),
    ("inference", "serve", 2),
]
shapes = {
    # kind: (priority class, pods choices, gpus per pod, runtime minutes range)
    "train": ("training", [1, 1, 2, 4], 8, (30, 240)),
    "exp": ("experiment", [1], [1, 2, 4], (10, 60)),
    "serve": ("production", [1, 2], [1, 2], (60, 240)),
}
jobs = []
t = 0
for n in range(160):
    t += rng.expovariate(1 / 400)  # one arrival every ~7 minutes on average, over ~18 hours
    team, kind, _ = rng.choices(mix, weights=[m[2] for m in mix])[0]
    prio, pods_choices, gpus, (lo, hi) = shapes[kind]
    pods = rng.choice(pods_choices)
    gpu = gpus if isinstance(gpus, int) else rng.choice(gpus)
    runtime = rng.randint(lo, hi)
    name = f"{kind}-{n:03d}"
    min_par = f"\n    kueue.x-k8s.io/job-min-parallelism: \"1\"" if kind == "train" and pods > 1 and rng.random() < 0.3 else ""
    # Gangs prefer one rack; multi-GPU experiments need their GPUs inside one NVLink island.
    if kind == "train" and pods > 1:
        tpl = "\n    metadata:\n      annotations:\n        kueue.x-k8s.io/podset-preferred-topology: cloud.provider.com/topology-rack"
    elif kind == "exp" and gpu > 1:
        tpl = "\n    metadata:\n      annotations:\n        sluice.dev/podset-required-topology: nvlink"
    else:
        tpl = ""
    jobs.append(f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {team}
  labels:
    kueue.x-k8s.io/queue-name: default
    kueue.x-k8s.io/priority-class: {prio}
  annotations:
    sluice.dev/arrival-time: {int(t)}s
    sluice.dev/run-time: {runtime}m{min_par}
spec:
  parallelism: {pods}
  completions: {pods}
  template:{tpl}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.example/{team}/{kind}:latest
        resources:
          requests:
            cpu: "{gpu * 12}"
            memory: {gpu * 96}Gi
            nvidia.com/gpu: "{gpu}"
          limits:
            nvidia.com/gpu: "{gpu}\"""".replace('\\"', '"'))
with open("trace.yaml", "w") as f:
    f.write("# A mixed training / experiment / inference trace over about eighteen hours of virtual time.\n"
            "# sluice.dev/arrival-time: when the Job is submitted (from the start of the simulation);\n"
            "# sluice.dev/run-time: how long it runs once admitted.\n" + "\n---\n".join(jobs) + "\n")
