#!/usr/bin/env python3
"""`lathe-engine k8s-manifest` against the Kubernetes API types, and its command for real.

Run with the test environment's Python (the `kubernetes` client, PyYAML, torchrun); argument:
lathe-engine.

  types     Every ConfigMap, Service and Job is checked against the `kubernetes` client's models
            (V1ConfigMap, V1Service, V1Job): every key is a field of its type, recursively, each
            value of its type, and the client's own deserializer accepts it (required fields).
            The Kubeflow PyTorchJob (a custom resource the client has no model for) is checked
            against the training operator's v1 API (kubeflow/training-operator,
            pkg/apis/kubeflow.org/v1: PyTorchJobSpec, ReplicaSpec, RunPolicy), its pod
            templates against V1PodTemplateSpec.
  config    The ConfigMap's config.json is the resolved config: `lathe-engine config` of the same
            arguments.
  command   Each pod runs `torchrun --no-python ... --rdzv-backend c10d` (the command
            test_launcher runs); here that very command runs on loopback, one process per node
            with the pod's environment (the endpoint and MASTER_* as Kubernetes would expand
            them), and the run finishes with every step logged.
  refusals  No --pvc and no s3:// save folder, a bad --kind, --cpu or --name: exit 2, naming it.

No Kubernetes cluster runs here: the objects are checked against the API's types, not applied.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes.client
import yaml
from kubernetes.client import models

ENGINE = sys.argv[1]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
FAILURES = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)


def engine(*args, env=None):
    return subprocess.run([ENGINE, *args], capture_output=True, text=True, env=env, timeout=300)


def conforms(value, type_name, path, errors):
    """Whether `value` (from YAML) is of the client's `type_name`, every key a known field."""
    if value is None:
        return
    m = re.fullmatch(r"[lL]ist\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: a list expected, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            conforms(item, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(([^,]+), (.+)\)|Dict\[([^,]+), (.+)\]", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: a map expected")
            return
        for k, v in value.items():
            conforms(v, m.group(2) or m.group(4), f"{path}.{k}", errors)
        return
    scalars = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
    if type_name in scalars:
        if type_name == "int" and isinstance(value, bool) or not isinstance(value, scalars[type_name]):
            errors.append(f"{path}: {type_name} expected, got {value!r}")
        return
    cls = getattr(models, type_name)
    if not isinstance(value, dict):
        errors.append(f"{path}: a {type_name} object expected")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for key, v in value.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: not a field of {type_name}")
            continue
        conforms(v, cls.openapi_types[by_json[key]], f"{path}.{key}", errors)


def check_object(obj, type_name, what):
    errors = []
    conforms(obj, type_name, obj.get("kind", type_name), errors)
    try:
        kubernetes.client.ApiClient()._ApiClient__deserialize(obj, type_name)
    except (ValueError, TypeError) as e:
        errors.append(f"the client refuses it: {e}")
    check(not errors, f"{what}: {obj.get('kind')} conforms to {type_name}" +
          ("" if not errors else ": " + "; ".join(errors[:5])))


# kubeflow/training-operator v1 (pytorch_types.go, common_types.go): the fields Lathe may use.
PYTORCHJOB_SPEC = {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}
REPLICA_SPEC = {"replicas", "template", "restartPolicy"}
RUN_POLICY = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
              "backoffLimit", "schedulingPolicy", "suspend", "managedBy"}
RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}


def check_pytorchjob(obj, nodes, what):
    errors = []
    if obj.get("apiVersion") != "kubeflow.org/v1":
        errors.append(f"apiVersion {obj.get('apiVersion')}")
    if set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
        errors.append(f"top-level fields {set(obj) - {'apiVersion', 'kind', 'metadata', 'spec'}}")
    conforms(obj.get("metadata"), "V1ObjectMeta", "metadata", errors)
    spec = obj.get("spec", {})
    if set(spec) - PYTORCHJOB_SPEC:
        errors.append(f"spec fields {set(spec) - PYTORCHJOB_SPEC}")
    if not isinstance(spec.get("nprocPerNode", ""), str):
        errors.append("spec.nprocPerNode must be a string")
    if set(spec.get("runPolicy", {})) - RUN_POLICY:
        errors.append(f"runPolicy fields {set(spec['runPolicy']) - RUN_POLICY}")
    replicas = spec.get("pytorchReplicaSpecs", {})
    if set(replicas) - {"Master", "Worker"} or "Master" not in replicas:
        errors.append(f"replica types {sorted(replicas)}")
    for rtype, r in replicas.items():
        if set(r) - REPLICA_SPEC:
            errors.append(f"{rtype} fields {set(r) - REPLICA_SPEC}")
        if r.get("restartPolicy") not in RESTART_POLICIES:
            errors.append(f"{rtype}.restartPolicy {r.get('restartPolicy')}")
        conforms(r.get("template"), "V1PodTemplateSpec", f"{rtype}.template", errors)
        try:
            kubernetes.client.ApiClient()._ApiClient__deserialize(r["template"], "V1PodTemplateSpec")
        except (ValueError, TypeError, KeyError) as e:
            errors.append(f"{rtype}.template refused: {e}")
    want = {"Master": 1, **({"Worker": nodes - 1} if nodes > 1 else {})}
    got = {k: v.get("replicas") for k, v in replicas.items()}
    if got != want:
        errors.append(f"replicas {got}, want {want}")
    check(not errors, f"{what}: PyTorchJob conforms to kubeflow.org/v1" +
          ("" if not errors else ": " + "; ".join(errors[:5])))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pod_template(objects):
    for o in objects:
        if o["kind"] == "Job":
            return o["spec"]["template"]
        if o["kind"] == "PyTorchJob":
            return o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    raise AssertionError("no pods")


def run_pods_command(objects, nodes, what):
    """The pods' own command, one process per node, on loopback."""
    container = pod_template(objects)["spec"]["containers"][0]
    config = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.json"]
    work = Path(tempfile.mkdtemp(prefix="lathe-k8s-"))
    (work / "config.json").write_text(config)
    port = free_port()
    kube_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    env = dict(os.environ)
    for e in container.get("env", []):
        env[e["name"]] = e["value"]
    env["LATHE_RUNS_DIR"] = str(work / "runs")  # the volume's mount point, here
    command = []
    for arg in container["command"]:
        arg = re.sub(r"\$\((\w+)\)", lambda m: kube_env[m.group(1)], arg)  # as kubelet expands
        arg = re.sub(r"^[\w-]+-0\.[\w-]+:(\d+)$", f"127.0.0.1:{port}", arg)  # NAME-0.NAME
        if arg == "torchrun":
            arg = TORCHRUN
        elif arg == "lathe-engine":
            arg = ENGINE
        elif arg == "/lathe/config/config.json":
            arg = str(work / "config.json")
        command.append(arg)
    check(command[1:3] == ["--no-python", "--nnodes"] and "c10d" in command,
          f"{what}: the pods run torchrun --no-python with c10d rendezvous")
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(nodes)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    ok = all(p.returncode == 0 for p in procs)
    run = json.loads(config)["run_name"]
    status = work / "runs" / run / "status.json"
    state = json.loads(status.read_text())["state"] if status.exists() else "none"
    check(ok and state == "finished",
          f"{what}: the pods' command trains on {nodes} node(s) (state {state})" +
          ("" if ok else ": " + outs[0][-2000:]))


def manifest(args):
    r = engine("k8s-manifest", *args)
    if r.returncode != 0:
        check(False, f"k8s-manifest {' '.join(args)}: {r.stderr}")
        return []
    return [o for o in yaml.safe_load_all(r.stdout) if o]


def self_check():
    """The type check itself finds a misspelt field and a wrong type (so that it can fail)."""
    errors = []
    conforms({"spec": {"template": {"spec": {"containers": [{"name": "x", "comand": []}]}}}},
             "V1Job", "Job", errors)
    conforms({"spec": {"completions": "2"}}, "V1Job", "Job", errors)
    check(len(errors) == 2 and "comand" in errors[0] and "completions" in errors[1],
          f"the type check finds a misspelt field and a string for an int: {errors}")


def main():
    self_check()
    base = ["tiny", "run_name=K8s_Run", "launch.num_threads=1", "trainer.max_duration=4steps"]
    cases = [
        ("pytorchjob, 2 nodes x 1 rank, PVC", 2,
         base + ["--image", "ghcr.io/lathe/lathe:0.1", "--nodes", "2", "--pvc", "runs",
                 "--cpu", "2", "--memory", "8Gi"]),
        ("pytorchjob, 1 node", 1,
         base + ["--image", "img", "--nodes", "1", "--pvc", "runs", "--gpus-per-node", "0"]),
        ("indexed job, 2 nodes x 1 rank, PVC", 2,
         base + ["--image", "img", "--nodes", "2", "--kind", "job", "--pvc", "runs"]),
        ("indexed job, 2 nodes x 1 rank, s3", 2,
         base + ["trainer.save_folder=s3://bucket/runs/k8s", "--image", "img", "--nodes", "2",
                 "--kind", "job", "--namespace", "ml"]),
    ]
    for what, nodes, args in cases:
        objects = manifest(args)
        if not objects:
            continue
        for o in objects:
            if o["kind"] == "PyTorchJob":
                check_pytorchjob(o, nodes, what)
            else:
                check_object(o, {"ConfigMap": "V1ConfigMap", "Service": "V1Service",
                                 "Job": "V1Job"}[o["kind"]], what)
        kinds = sorted(o["kind"] for o in objects)
        want = ["ConfigMap", "Job", "Service"] if "--kind" in args else ["ConfigMap", "PyTorchJob"]
        check(kinds == want, f"{what}: objects {kinds}")
        config_args = [a for a in args[:args.index("--image")]]
        resolved = json.loads(engine("config", *config_args).stdout)
        shipped = json.loads(next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.json"])
        check(shipped == resolved, f"{what}: the ConfigMap carries the resolved config")
        if "s3://" not in " ".join(args):  # no S3 server here: the PVC cases run for real
            run_pods_command(objects, nodes, what)
        if "--kind" in args:
            template = pod_template(objects)
            endpoint = template["spec"]["containers"][0]["command"]
            check(template["spec"].get("subdomain") == "k8s-run" and
                  "k8s-run-0.k8s-run:29500" in endpoint,
                  f"{what}: rank 0's pod is reached through the headless Service")
    gpus = manifest(base + ["--image", "img", "--nodes", "2", "--gpus-per-node", "8",
                            "--pvc", "runs"])
    limits = pod_template(gpus)["spec"]["containers"][0]["resources"]["limits"]
    check(limits.get("nvidia.com/gpu") == "8", f"GPUs are a limit per pod: {limits}")
    for args, needle in [
        (base + ["--image", "img", "--nodes", "2"], "--pvc"),
        (base + ["--image", "img", "--pvc", "r", "--kind", "deployment"], "--kind deployment"),
        (base + ["--image", "img", "--pvc", "r", "--cpu", "two"], "--cpu two"),
        (base + ["--image", "img", "--pvc", "r", "--name", "Bad_Name"], "--name Bad_Name"),
        (base + ["--pvc", "r"], "--image"),
        (["tiny", "model.d_model=0", "--image", "img", "--pvc", "r"], "model.d_model"),
    ]:
        r = engine("k8s-manifest", *args)
        check(r.returncode == 2 and needle in r.stderr + r.stdout,
              f"refused naming {needle} (exit {r.returncode})")
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
