#!/usr/bin/env python3
"""How long training is blocked per save: a local folder against an S3 bucket (moto's server on
loopback), async and sync, runs alternating. Needs the test environment (moto[server], boto3):

    ~/.cache/lathe/torch-2.13.0/bin/python bench/remote_checkpoint.py build/release/bin/lathe-engine \
        [preset] [rounds]

Prints one line per run and the medians of `checkpoint_blocking_s` (lathe-engine bench
--checkpoint-every). The bucket is local, so this measures Lathe's side of a remote save (staging,
signing, the upload on loopback), not a network.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import boto3

ENGINE = sys.argv[1]
PRESET = sys.argv[2] if len(sys.argv) > 2 else "olmo2_14M"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    port = free_port()
    moto = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        keys = dict(aws_access_key_id="bench", aws_secret_access_key="bench")
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys).create_bucket(
            Bucket="bench")
        env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                   AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint)
        base = [ENGINE, "bench", PRESET, "--steps", "4", "--warmup", "1", "--checkpoint-every", "2",
                "launch.num_threads=1"]
        layouts = {
            "local, async": [],
            "s3, async": ["trainer.save_folder=s3://bench/run"],
            "local, sync": ["trainer.callbacks.checkpointer.save_async=false"],
            "s3, sync": ["trainer.save_folder=s3://bench/run",
                         "trainer.callbacks.checkpointer.save_async=false"],
        }
        results = {k: [] for k in layouts}
        for r in range(ROUNDS):
            for name, extra in layouts.items():
                out = subprocess.run(base + extra, env=env, stdout=subprocess.PIPE, text=True,
                                     check=True).stdout
                line = json.loads(out.strip().splitlines()[-1])
                results[name].append(line["checkpoint_blocking_s"])
                print(f"round {r + 1} {name}: {line['checkpoint_blocking_s']:.3f} s blocked per "
                      f"save, {line['step_time_s']:.3f} s per step", flush=True)
        print(f"\n{PRESET}, median blocked per save over {ROUNDS} rounds:")
        for name, values in results.items():
            print(f"  {name:14s} {statistics.median(values):.3f} s")
    finally:
        moto.send_signal(signal.SIGTERM)
        moto.wait(timeout=10)


if __name__ == "__main__":
    main()
