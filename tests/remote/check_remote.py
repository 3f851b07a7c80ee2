#!/usr/bin/env python3
"""Remote checkpoint folders (label remote): lathe-engine against a real S3 server.

Run with the test environment's Python; argument: lathe-engine.

moto's S3 server runs on a loopback port with IAM authentication on, so every request must carry
a valid SigV4 signature from libcurl. Between it and Lathe sits a small HTTP proxy of this script
that injects faults by rule (a path fragment, an action, how many times): HTTP 500 answers,
connections cut without an answer (a server that died), and stalls. The storage code is not
mocked: Lathe talks S3 over HTTP.

  - Save to s3:// and resume from it, bitwise equal to an uninterrupted local run, at 1 rank and
    at 2 ranks (DDP); nothing but checkpoints goes to the bucket; no credential in the run folder.
  - Large files go up as multipart uploads and come back as ranged GETs.
  - Retention deletes remote checkpoints as it does local ones.
  - `inspect s3://...`: a checkpoint, a folder of them, and an incomplete one (no .metadata.json),
    which resume ignores and cleans up. A damaged one is set aside and the run falls back.
  - Faults: 500s and stalls are retried and the save succeeds; an upload cut off mid-way stops
    training with an error naming the checkpoint and the cause (max_failed_saves=0), or is
    outlived (max_failed_saves=1); earlier checkpoints verify afterwards and resume picks the
    newest complete one. Wrong credentials and a missing bucket get clear errors.
  - load_path over http:// from `python3 -m http.server`, and `inspect http://...`.
"""
import http.client
import http.server
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import boto3

ENGINE = sys.argv[1]
FAILURES = []
BIN = Path(sys.executable).parent


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not start")


class FaultProxy:
    """Forwards HTTP to moto; `rules` inject faults: (fragment, action, times) where action is
    "500", "reset" (the connection is cut without an answer) or "stall" (no answer for 4 s)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.rules = []
        self.log = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                action = proxy.match(self.command, self.path, self.headers.get("Range", ""))
                if action == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                if action == "stall":
                    time.sleep(4)
                    self.close_connection = True
                    return
                if action == "500":
                    data = (b"<?xml version='1.0'?><Error><Code>InternalError</Code>"
                            b"<Message>injected</Message></Error>")
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items()}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "server", "date"):
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def match(self, method, path, range_header=""):
        with self.lock:
            self.log.append(f"{method} {path} {range_header}".strip())
            for rule in self.rules:
                fragment, action, times = rule
                if times != 0 and re.search(fragment, f"{method} {path}"):
                    if times > 0:
                        rule[2] = times - 1
                    return action
        return None

    def set(self, *rules):
        with self.lock:
            self.rules = [list(r) for r in rules]
            self.log = []


def main():
    work = Path(tempfile.mkdtemp(prefix="lathe-remote-"))
    moto_port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="4", MOTO_PORT=str(moto_port))
    moto = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=(work / "moto.log").open("w"),
                            env=env)
    http_server = None
    try:
        wait_port(moto_port, moto, "moto_server")
        endpoint = f"http://127.0.0.1:{moto_port}"
        anon = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                    aws_secret_access_key="setup")
        # The four requests moto takes without authentication: a user with a key and every right,
        # and the bucket. Everything after them is checked against that key.
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="lathe")
        key = iam.create_access_key(UserName="lathe")["AccessKey"]
        iam.put_user_policy(UserName="lathe", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        boto3.client("s3", **anon).create_bucket(Bucket="ckpt")
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=key["AccessKeyId"],
                          aws_secret_access_key=key["SecretAccessKey"])
        proxy = FaultProxy(moto_port)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        aws_env = dict(base_env, AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                       AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"], AWS_REGION="us-east-1",
                       AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}",
                       LATHE_RUNS_DIR=str(work / "runs"))

        def engine(*args, ok=True, env=aws_env, timeout=600):
            r = subprocess.run([ENGINE, *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)
            if ok and r.returncode != 0:
                print(f"lathe-engine {' '.join(map(str, args))} failed ({r.returncode}):\n"
                      f"{r.stderr[-3000:]}", file=sys.stderr)
                sys.exit(2)
            return r

        def keys(prefix):
            out = []
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket="ckpt", Prefix=prefix):
                out += [o["Key"] for o in page.get("Contents", [])]
            return sorted(out)

        def losses(run_folder):
            out = {}
            for line in (run_folder / "metrics.jsonl").read_text().splitlines():
                rec = json.loads(line)
                if "train/CE loss" in rec["values"]:
                    out[rec["step"]] = rec["values"]["train/CE loss"]
            return out

        common = ["launch.num_threads=1", "trainer.metrics_collect_interval=1",
                  "trainer.max_duration={value: 6, unit: steps}",
                  "trainer.callbacks.checkpointer.save_interval=2",
                  "trainer.callbacks.checkpointer.max_checkpoints=2",
                  "trainer.remote.retry_delay_s=0.05", "trainer.remote.stall_timeout_s=2",
                  "trainer.remote.part_size_mb=5", "trainer.remote.max_retries=4"]

        # ---- save and resume, 1 and 2 ranks ---------------------------------------------------
        for nproc in [1, 2]:
            tag = f"r{nproc}"
            layout = [f"launch.nproc={nproc}"]
            engine("train", "tiny", f"run_name=local{nproc}",
                   f"trainer.save_folder={work / f'local{nproc}'}", *common, *layout)
            want = losses(work / f"local{nproc}")
            proxy.set()
            engine("train", "tiny", f"run_name={tag}", f"trainer.save_folder=s3://ckpt/{tag}",
                   *common, *layout, "trainer.hard_stop={value: 4, unit: steps}")
            run = work / "runs" / tag
            saved = keys(f"{tag}/")
            check(f"{tag}/step4/.metadata.json" in saved and f"{tag}/step2/.metadata.json" in saved
                  and all(f"{tag}/step4/train/rank{k}.json" in saved for k in range(nproc))
                  and f"{tag}/step4/model_and_optim/rank0.lathe" in saved
                  and f"{tag}/step4/config.json" in saved,
                  f"{nproc} rank(s): the checkpoints are in the bucket, a train state per rank")
            check(not any(p.name.startswith("step") for p in run.iterdir())
                  and all(not k.startswith(f"{tag}/logs") and "metrics" not in k for k in saved),
                  f"{nproc} rank(s): the run folder keeps metrics and logs; the bucket only "
                  "checkpoints")
            config = json.loads((run / "config.json").read_text())
            check(config["trainer"]["save_folder"] == f"s3://ckpt/{tag}",
                  f"{nproc} rank(s): the run folder's config.json records where the checkpoints are")
            text = "".join(p.read_text(errors="replace") for p in run.rglob("*") if p.is_file())
            check(key["SecretAccessKey"] not in text and key["AccessKeyId"] not in text,
                  f"{nproc} rank(s): no credential in the run folder (logs, config, status)")
            proxy.set()
            r = engine("train", "tiny", f"run_name={tag}", f"trainer.save_folder=s3://ckpt/{tag}",
                       *common, *layout)
            check("loaded checkpoint s3://ckpt/" + tag + "/step4" in r.stderr + r.stdout,
                  f"{nproc} rank(s): the second start resumes from s3://ckpt/{tag}/step4")
            got = losses(run)
            check(got == want and len(want) == 6,
                  f"{nproc} rank(s): losses of the run saved and resumed through S3 equal the "
                  f"local run's bitwise ({got} vs {want})")
            saved = keys(f"{tag}/")
            steps = sorted({int(m.group(1)) for k in saved if (m := re.match(rf"{tag}/step(\d+)/", k))})
            check(steps == [0, 4, 6] or steps == [4, 6],
                  f"{nproc} rank(s): retention (max_checkpoints=2) deleted step2 remotely "
                  f"(left: {steps})")

        # ---- two nodes without a shared filesystem ------------------------------------------
        # Each "node" (a launcher on loopback) has its own runs folder. With the checkpoints in
        # the bucket that is enough: each node's first rank makes its own run folder for its
        # ranks' logs, and the run equals the 2-rank run on one node bitwise, resumed included.
        def nodes(*args, runs_env=None, hard_stop=None):
            port = free_port()
            procs = []
            for node in range(2):
                env = dict(aws_env, LATHE_RUNS_DIR=str(work / f"node{node}"), **(runs_env or {}))
                cmd = [ENGINE, "launch", "--nnodes", "2", "--node-rank", str(node), "--nproc", "1",
                       "--master-addr", "127.0.0.1", "--master-port", str(port), "tiny",
                       "run_name=nodes", *common, *args]
                if hard_stop:
                    cmd.append(f"trainer.hard_stop={{value: {hard_stop}, unit: steps}}")
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True, env=env))
            outs = [p.communicate(timeout=600)[0] for p in procs]
            return [p.returncode for p in procs], outs

        unshared = ["trainer.save_folder=s3://ckpt/nodes", "launch.shared_filesystem=false"]
        codes, outs = nodes(*unshared, hard_stop=4)
        saved = keys("nodes/")
        check(codes == [0, 0] and all(f"nodes/step4/train/rank{k}.json" in saved for k in (0, 1))
              and (work / "node1" / "nodes" / "logs" / "rank1.log").is_file()
              and (work / "node0" / "nodes" / "metrics.jsonl").is_file()
              and not (work / "node1" / "nodes" / "metrics.jsonl").exists(),
              "two nodes without a shared filesystem (launch.shared_filesystem=false) save to "
              "the bucket; node 1 keeps its rank's log in its own run folder "
              f"(exit codes {codes}{'' if codes == [0, 0] else ': ' + outs[0][-1500:] + outs[1][-1500:]})")
        codes, outs = nodes(*unshared)
        got = losses(work / "node0" / "nodes")
        check(codes == [0, 0] and "loaded checkpoint s3://ckpt/nodes/step4" in outs[0]
              and got == losses(work / "local2"),
              "they resume from s3://ckpt/nodes/step4, and the losses equal the 2-rank run's "
              f"on one node bitwise ({got})")
        # A local save folder is refused up front when the nodes do not share a filesystem.
        r = subprocess.run([ENGINE, "launch", "--nnodes", "2", "--node-rank", "0", "--nproc", "1",
                            "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                            "tiny", f"trainer.save_folder={work / 'unshared'}", *common],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(aws_env, OLMO_SHARED_FS="0"), timeout=120)
        check(r.returncode == 2 and f"trainer.save_folder {work / 'unshared'}" in r.stderr
              and "OLMO_SHARED_FS=0" in r.stderr and "s3://" in r.stderr
              and not (work / "unshared").exists(),
              "OLMO_SHARED_FS=0 with a local save folder across 2 nodes: refused before any "
              "work (exit 2), naming the folder and the fix: " + r.stderr.strip()[-300:])

        # ---- large files: a multipart upload, parallel ranged downloads ----------------------
        big = ["model.d_model=192", "launch.num_threads=1", "trainer.metrics_collect_interval=1",
               "trainer.max_duration={value: 2, unit: steps}", "trainer.remote.part_size_mb=5",
               "trainer.remote.retry_delay_s=0.05"]
        engine("train", "tiny", "run_name=bigl", f"trainer.save_folder={work / 'bigl'}", *big)
        proxy.set()
        engine("train", "tiny", "run_name=big", "trainer.save_folder=s3://ckpt/big", *big,
               "trainer.hard_stop={value: 1, unit: steps}")
        tensor_key = "big/step1/model_and_optim/rank0.lathe"
        size = s3.head_object(Bucket="ckpt", Key=tensor_key)["ContentLength"]
        parts = [l for l in proxy.log if tensor_key in l and "partNumber=" in l]
        check(size > 10 << 20 and len(parts) == -(-size // (5 << 20))
              and any(tensor_key in l and "uploads=" in l for l in proxy.log),
              f"a {size / 2**20:.1f} MiB tensor file goes up as a multipart upload of "
              f"{len(parts)} parts of 5 MiB")
        proxy.set()
        engine("train", "tiny", "run_name=big", "trainer.save_folder=s3://ckpt/big", *big)
        ranged = [l for l in proxy.log if l.startswith("GET") and tensor_key in l and "bytes=" in l]
        check(len(ranged) == len(parts) and losses(work / "runs" / "big") == losses(work / "bigl"),
              f"it comes back as {len(ranged)} ranged GETs, and the resumed run's losses equal "
              "the local run's bitwise")

        # ---- inspect --------------------------------------------------------------------------
        r = engine("inspect", "--verify", "s3://ckpt/r1/step6")
        info = json.loads(r.stdout)
        check(info["complete"] and info["verified"] and info["global_step"] == 6
              and info["remote"] and any(f["file"] == "model_and_optim/rank0.lathe"
                                         for f in info["files"]),
              "inspect --verify s3://.../step6: complete, verified, step 6, its files")
        s3.put_object(Bucket="ckpt", Key="r1/step8/train/rank0.json", Body=b"{}")
        r = engine("inspect", "s3://ckpt/r1")
        info = json.loads(r.stdout)
        partial = [c for c in info["checkpoints"] if not c["complete"]]
        check(len(info["checkpoints"]) >= 3 and len(partial) == 1
              and "upload did not finish" in partial[0].get("problem", ""),
              "inspect s3://ckpt/r1 lists the checkpoints and says step8 is an unfinished upload")
        r = engine("train", "tiny", "run_name=r1", "trainer.save_folder=s3://ckpt/r1", *common,
                   "trainer.max_duration={value: 7, unit: steps}")
        check("loaded checkpoint s3://ckpt/r1/step6" in r.stderr + r.stdout
              and not any(k.startswith("r1/step8/") for k in keys("r1/")),
              "resume ignores the incomplete step8, picks step6, and the partial upload is removed")
        check(not (work / "runs" / "r1" / ".checkpoint-staging").exists(),
              "no .checkpoint-staging folder is left in the run folder after remote saves and loads")

        # A damaged remote checkpoint (its tensor file cut short): set aside as unusable, and
        # the run falls back to the next older complete one.
        tensor = "r2/step6/model_and_optim/rank0.lathe"
        data = s3.get_object(Bucket="ckpt", Key=tensor)["Body"].read()
        s3.put_object(Bucket="ckpt", Key=tensor, Body=data[: len(data) // 2])
        r = engine("train", "tiny", "run_name=r2", "trainer.save_folder=s3://ckpt/r2", *common,
                   "launch.nproc=2", "trainer.max_duration={value: 7, unit: steps}")
        saved = keys("r2/")
        check("set aside as step6.unusable" in r.stderr + r.stdout
              and "loaded checkpoint s3://ckpt/r2/step4" in r.stderr + r.stdout
              and "r2/step6.unusable/unusable.json" in saved
              and "r2/step7/.metadata.json" in saved,
              "a damaged remote checkpoint is set aside as step6.unusable (with its reason) and "
              "the run falls back to step4")

        # ---- faults ---------------------------------------------------------------------------
        fault_common = [*common, "trainer.max_duration={value: 4, unit: steps}"]
        proxy.set(("PUT .*/f1/step2/", "500", 3), ("PUT .*/f1/step4/train", "stall", 1))
        r = engine("train", "tiny", "run_name=f1", "trainer.save_folder=s3://ckpt/f1",
                   *fault_common)
        answered = [l for l in proxy.log if "/f1/step2/" in l and l.startswith("PUT")]
        check(r.returncode == 0 and "f1/step2/.metadata.json" in keys("f1/")
              and "f1/step4/.metadata.json" in keys("f1/") and len(answered) >= 4,
              "three 500 answers and a stalled upload are retried and the saves complete")

        # An upload cut off in the middle: training stops, naming the checkpoint and the cause.
        proxy.set(("PUT .*/f2/step4/model_and_optim", "reset", -1))
        r = engine("train", "tiny", "run_name=f2", "trainer.save_folder=s3://ckpt/f2",
                   *fault_common, ok=False)
        check(r.returncode != 0 and "s3://ckpt/f2/step4" in r.stderr
              and "after 4 retries" in r.stderr,
              "an upload the server keeps cutting off stops training with an error naming "
              "s3://ckpt/f2/step4 and the cause: " + (r.stderr.strip().splitlines() or [""])[-1][:300])
        proxy.set()
        r = engine("inspect", "--verify", "s3://ckpt/f2/step2")
        check(json.loads(r.stdout)["verified"] and "f2/step4/.metadata.json" not in keys("f2/"),
              "the earlier checkpoint step2 still verifies; the failed step4 never became complete")
        r = engine("train", "tiny", "run_name=f2", "trainer.save_folder=s3://ckpt/f2",
                   *fault_common)
        check("loaded checkpoint s3://ckpt/f2/step2" in r.stderr + r.stdout
              and "f2/step4/.metadata.json" in keys("f2/"),
              "resume picks the newest complete checkpoint (step2) and trains to the end")

        # max_failed_saves=1: the same failure is logged and training goes on.
        proxy.set(("PUT .*/f3/step2/model_and_optim", "reset", -1))
        r = engine("train", "tiny", "run_name=f3", "trainer.save_folder=s3://ckpt/f3",
                   *fault_common, "trainer.callbacks.checkpointer.max_failed_saves=1")
        check(r.returncode == 0 and "saving checkpoint s3://ckpt/f3/step2 failed" in r.stderr + r.stdout
              and "f3/step4/.metadata.json" in keys("f3/")
              and "f3/step2/.metadata.json" not in keys("f3/"),
              "with max_failed_saves=1 a failed save is logged and training goes on to step4"
              + ("" if r.returncode == 0 else f" (exit {r.returncode}: {r.stderr[-1500:]})"))
        proxy.set()

        # Wrong credentials, a missing bucket.
        r = engine("train", "tiny", "run_name=bad", "trainer.save_folder=s3://ckpt/bad",
                   *fault_common, ok=False,
                   env=dict(aws_env, AWS_SECRET_ACCESS_KEY="wrong" + key["SecretAccessKey"][5:]))
        check(r.returncode != 0 and ("SignatureDoesNotMatch" in r.stderr or "403" in r.stderr)
              and "check the credentials" in r.stderr and "wrong" not in r.stderr,
              "a wrong secret key: a clear error without the key: " +
              (r.stderr.strip().splitlines() or [""])[-1][:300])
        r = engine("train", "tiny", "run_name=nob", "trainer.save_folder=s3://no-such-bucket/x",
                   *fault_common, ok=False)
        check(r.returncode != 0 and "NoSuchBucket" in r.stderr
              and "no-such-bucket" in r.stderr,
              "a missing bucket: a clear error naming it: " +
              (r.stderr.strip().splitlines() or [""])[-1][:300])

        # Keys from a profile of ~/.aws/credentials, region and endpoint from ~/.aws/config.
        (work / "aws").mkdir()
        (work / "aws" / "credentials").write_text(
            f"[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n"
            f"[lathe]\naws_access_key_id = {key['AccessKeyId']}\n"
            f"aws_secret_access_key = {key['SecretAccessKey']}\n")
        (work / "aws" / "config").write_text(
            f"[profile lathe]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:{proxy.port}\n")
        profile_env = dict(base_env, AWS_PROFILE="lathe",
                           AWS_SHARED_CREDENTIALS_FILE=str(work / "aws" / "credentials"),
                           AWS_CONFIG_FILE=str(work / "aws" / "config"))
        r = engine("inspect", "s3://ckpt/r1/step6", env=profile_env, ok=False)
        check(r.returncode == 0 and json.loads(r.stdout)["complete"],
              "AWS_PROFILE: keys from its credentials file, region and endpoint from its config")

        # load_strategy=always with an empty remote folder: an error naming it.
        r = engine("train", "tiny", "run_name=always", "trainer.save_folder=s3://ckpt/empty",
                   "trainer.load_strategy=always", "launch.num_threads=1", ok=False)
        check(r.returncode != 0 and "no checkpoint was found in s3://ckpt/empty" in r.stderr,
              "load_strategy=always with an empty remote folder stops with an error naming it")

        # ---- http:// --------------------------------------------------------------------------
        http_port = free_port()
        http_server = subprocess.Popen([sys.executable, "-m", "http.server", str(http_port),
                                        "--bind", "127.0.0.1", "-d", str(work)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(http_port, http_server, "http.server")
        web = f"http://127.0.0.1:{http_port}"
        url = f"{web}/local1/step6"
        r = engine("inspect", "--verify", url, env=base_env)
        info = json.loads(r.stdout)
        check(info["complete"] and info["verified"] and info["global_step"] == 6,
              "inspect --verify over http://: complete, verified, step 6")
        r = engine("train", "tiny", "run_name=web", f"trainer.save_folder={work / 'web'}",
                   f"trainer.load_path={url}", "launch.num_threads=1",
                   "trainer.max_duration={value: 7, unit: steps}", env=base_env)
        check(f"loaded checkpoint {url}" in r.stderr + r.stdout
              and losses(work / "web") and min(losses(work / "web")) == 7,
              "load_path over http:// starts a run from step 6 and it trains step 7")
        r = engine("train", "tiny", "run_name=webw", f"trainer.save_folder=http://127.0.0.1:{http_port}/x",
                   "launch.num_threads=1", env=base_env, ok=False)
        check(r.returncode != 0 and "read only" in r.stderr,
              "an http:// save folder is refused: HTTP folders are read only")

        # ---- export, import and generate with remote folders -----------------------------------
        engine("export", "s3://ckpt/r1", work / "hf")  # the folder's newest complete checkpoint
        hf_config = json.loads((work / "hf" / "config.json").read_text())
        check((work / "hf" / "model.safetensors").exists() and hf_config["hidden_size"] == 64,
              "export s3://ckpt/r1 writes a Hugging Face folder from its newest checkpoint")
        engine("import", f"{web}/hf", "s3://ckpt/imported/step0")
        info = json.loads(engine("inspect", "--verify", "s3://ckpt/imported/step0").stdout)
        check(info["complete"] and info["verified"] and info["metadata"].get("model_only")
              and keys("imported/step0/")[-1] != "imported/step0/.metadata.json",
              "import from an http:// Hugging Face folder into s3://: complete, verified, "
              "model only")
        r = engine("generate", "s3://ckpt/imported/step0", "--prompt-ids", "1,2,3",
                   "--max-new-tokens", "4", "--json")
        local = engine("generate", work / "hf", "--prompt-ids", "1,2,3", "--max-new-tokens", "4",
                       "--json")
        newest = engine("generate", "s3://ckpt/r1", "--prompt-ids", "1,2,3", "--max-new-tokens",
                        "4", "--json")
        first = [x.stdout.splitlines()[0] if x.stdout.strip() else "" for x in (r, local, newest)]
        check(first[0] == first[1] == first[2] != ""
              and '"model":"s3://ckpt/imported/step0"' in r.stdout,
              "generate from the imported s3:// checkpoint, from s3://ckpt/r1 (its newest) and "
              "from the exported folder give the same ids")
        r = engine("train", "tiny", "run_name=fromimport",
                   f"trainer.save_folder={work / 'fromimport'}", "launch.num_threads=1",
                   "trainer.load_path=s3://ckpt/imported/step0", "trainer.load_strategy=always",
                   "trainer.max_duration={value: 1, unit: steps}", ok=False)
        check(r.returncode == 0 and "loaded checkpoint s3://ckpt/imported/step0" in r.stderr + r.stdout,
              "load_path=s3://... of an imported model starts a run from its weights")
        # A Hugging Face folder in a bucket is a model source too (hf_convert.h ModelSource).
        for f in sorted((work / "hf").iterdir()):
            s3.put_object(Bucket="ckpt", Key=f"hfmodel/{f.name}", Body=f.read_bytes())
        r = engine("train", "tiny", "run_name=fromhf", f"trainer.save_folder={work / 'fromhf'}",
                   "launch.num_threads=1", "trainer.load_path=s3://ckpt/hfmodel",
                   "trainer.max_duration={value: 1, unit: steps}", ok=False)
        check(r.returncode == 0
              and "loaded the weights of Hugging Face model s3://ckpt/hfmodel" in r.stderr + r.stdout,
              "load_path=s3://... of a Hugging Face folder starts a run from its weights")
    finally:
        for p in [moto, http_server]:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:", *FAILURES, sep="\n  ")
        sys.exit(1)
    print("all remote checks passed")


if __name__ == "__main__":
    main()
