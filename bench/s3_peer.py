#!/usr/bin/python3
"""The boto3 side of the remote section of the Amphora benchmark, against the
same S3 server in the same run (Debian's python3-boto3, default settings).

usage:
  s3_peer.py large REPEATS ENDPOINT BUCKET PREFIX FILE [--keep]
      upload_file then download_file of FILE (boto3's default transfer
      configuration: multipart over 8 MiB, 10 threads), REPEATS times.
  s3_peer.py small REPEATS ENDPOINT BUCKET PREFIX DIR [--keep]
      a loop of put_object over every file of DIR, then of get_object.
  s3_peer.py clear ENDPOINT BUCKET PREFIX
      removes every object under PREFIX.

The objects are removed after the repeats unless --keep is given (the C++
side alternates single repeats with its own and clears at the end). Dirty
pages are written out before each timed step, as the C++ side does, so
neither client pays for the other's writes. Credentials come from the
environment (AWS_ACCESS_KEY_ID, ...). Prints one JSON object: seconds per
repeat ("push_s", "pull_s") and the bytes moved.
"""
import json
import os
import sys
import time

import boto3
import botocore.config

from scratch import touch_scratch


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                        config=botocore.config.Config(s3={"addressing_style": "path"}))


def clear(s3, bucket, prefix):
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})


def settle():
    os.sync()
    touch_scratch()


def large(repeats, endpoint, bucket, prefix, path, keep=False):
    s3 = client(endpoint)
    out = {"push_s": [], "pull_s": [], "bytes": os.path.getsize(path)}
    target = path + ".boto3-copy"
    for r in range(repeats):
        key = f"{prefix}/large-{r}"
        settle()
        t0 = time.perf_counter()
        s3.upload_file(path, bucket, key)
        out["push_s"].append(time.perf_counter() - t0)
        settle()
        t0 = time.perf_counter()
        s3.download_file(bucket, key, target)
        out["pull_s"].append(time.perf_counter() - t0)
        if os.path.getsize(target) != out["bytes"]:
            raise SystemExit("s3_peer: the downloaded copy has the wrong size")
        os.unlink(target)
    for r in range(0 if keep else repeats):  # after the loop, as the C++ side removes its copies
        s3.delete_object(Bucket=bucket, Key=f"{prefix}/large-{r}")
    print(json.dumps(out), flush=True)


def small(repeats, endpoint, bucket, prefix, folder, keep=False):
    s3 = client(endpoint)
    files = sorted(os.listdir(folder))
    bodies = []
    for name in files:
        with open(os.path.join(folder, name), "rb") as f:
            bodies.append(f.read())
    out = {"push_s": [], "pull_s": [], "objects": len(files), "bytes": sum(map(len, bodies))}
    for r in range(repeats):
        base = f"{prefix}/small-{r}/"
        settle()
        t0 = time.perf_counter()
        for name, body in zip(files, bodies):
            s3.put_object(Bucket=bucket, Key=base + name, Body=body)
        out["push_s"].append(time.perf_counter() - t0)
        settle()
        t0 = time.perf_counter()
        got = 0
        for name in files:
            got += len(s3.get_object(Bucket=bucket, Key=base + name)["Body"].read())
        out["pull_s"].append(time.perf_counter() - t0)
        if got != out["bytes"]:
            raise SystemExit("s3_peer: the objects read back have the wrong size")
    for r in range(0 if keep else repeats):  # after the loop, as the C++ side removes its copies
        clear(s3, bucket, f"{prefix}/small-{r}/")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    keep = "--keep" in args
    args = [a for a in args if a != "--keep"]
    if len(args) == 4 and args[0] == "clear":
        clear(client(args[1]), args[2], args[3] + "/")
    elif len(args) == 6 and args[0] in ("large", "small"):
        (large if args[0] == "large" else small)(int(args[1]), *args[2:], keep=keep)
    else:
        raise SystemExit(__doc__)
