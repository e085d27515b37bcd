#!/usr/bin/python3
"""The remote tier from the command line, against a real S3 server: a Ceph
RADOS Gateway started by tests/with_rgw.sh, whose environment names it
(AMPHORA_TEST_S3_ENDPOINT, AMPHORA_TEST_S3_BUCKET and the test keys).

push and pull copy artifacts and names between two stores through the
bucket; boto3 (Debian's python3-boto3) reads what push wrote, as another
tool would, and the Python reader loads a store copied out of the bucket
with boto3 alone (the remote layout is the store layout, docs/FORMAT.md
§12); damaged objects in the bucket (a flipped byte, a deleted file) make
pull fail naming the file and publish nothing; keys no store would write
(with '..' or control characters) are refused, never followed; wrong
credentials fail without the secret in any message; a push killed at
random points is completed by the next. Between Amphora and the server, a
fault-injecting proxy (fault_proxy.py) answers 503 and 500, cuts
connections mid-response and stalls them: transfers finish with retries or
fail with a clear error, the bucket never shows a manifest whose files are
missing, and the local store never holds a partial artifact.

Run as:
    tests/with_rgw.sh DIR /usr/bin/python3 tests/python/test_remote.py --cli build/bin/amphora
"""

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_support as cs  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

from s3_support import BUCKET, ENDPOINT, require_gateway, s3_client  # noqa: E402
SECRET = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
WRITER = os.environ.get("AMPHORA_TEST_WRITER", "")  # tests/helpers/writer.cpp: the partial reads


class RemoteTest(cs.StoreTestCase):
    @classmethod
    def setUpClass(cls):
        require_gateway()
        cls.s3 = s3_client()

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()

    def setUp(self):
        super().setUp()
        self.prefix = "cli-" + uuid.uuid4().hex[:12]
        self.url = f"s3://{BUCKET}/{self.prefix}"
        self.run_cli("remote", "add", "team", self.url, "--endpoint", ENDPOINT, check=cs.EXIT_OK)
        self.other = self.path("other")
        cs.run("--store", self.other, "init")
        self.assertEqual(cs.run("--store", self.other, "remote", "add", "team", self.url, "--endpoint", ENDPOINT).returncode, 0)

    def other_cli(self, *args, check=None):
        proc = cs.run("--store", self.other, *args)
        if check is not None:
            self.assertEqual(proc.returncode, check, f"amphora {' '.join(map(str, args))}: {proc.stdout!r} {proc.stderr!r}")
        return proc

    def save_npy(self, name, array):
        path = self.path(name + ".npy")
        np.save(path, array)
        self.run_cli("import", path, "--name", name, check=cs.EXIT_OK)
        return path

    def keys(self):
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + "/"):
            out += [o["Key"][len(self.prefix) + 1:] for o in page.get("Contents", [])]
        return sorted(out)

    def digest_of(self, name, store=None):
        proc = cs.run("--store", store or self.store, "show", name, "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)["digest"]

    def test_push_then_pull_round_trips_values_and_names(self):
        big = np.random.default_rng(1).standard_normal((1 << 21) + 5).astype(np.float32)  # 8 MiB + 20 B: two parts
        small = np.arange(100, dtype=np.int64)
        self.save_npy("big", big)
        self.save_npy("small", small)
        self.save_npy("small", small * 2)
        pushed = json.loads(self.run_cli("push", "--json", check=cs.EXIT_OK).stdout)
        self.assertEqual(pushed["remote"], "team")
        self.assertEqual(pushed["location"], self.url)
        self.assertEqual(pushed["artifacts_copied"], 3)
        self.assertGreater(pushed["bytes_copied"], 8 << 20)
        self.assertEqual(sorted((n["name"], n["version"]) for n in pushed["named"]),
                         [("big", 1), ("small", 1), ("small", 2)])
        # Again: nothing sent.
        again = json.loads(self.run_cli("push", "--json", check=cs.EXIT_OK).stdout)
        self.assertEqual((again["artifacts_copied"], again["bytes_copied"], again["named"]), (0, 0, []))

        # The bucket holds the store layout: what boto3 lists.
        keys = self.keys()
        digest = self.digest_of("big")[len("sha256:"):]
        self.assertIn("amphora-store.json", keys)
        self.assertIn(f"objects/sha256/{digest[:2]}/{digest}/manifest.json", keys)
        self.assertIn("names/small/2.json", keys)
        record = json.loads(self.s3.get_object(Bucket=BUCKET, Key=f"{self.prefix}/names/small/2.json")["Body"].read())
        self.assertEqual(record["digest"], self.digest_of("small"))
        self.assertEqual(record["pushed_from"]["version"], 2)

        pulled = json.loads(self.other_cli("pull", "big", "small@1", "--json", check=cs.EXIT_OK).stdout)
        self.assertEqual(pulled["artifacts_copied"], 2)
        self.other_cli("verify", check=cs.EXIT_OK)
        out = self.path("big-out.npy")
        self.other_cli("export", "big", out, check=cs.EXIT_OK)
        np.testing.assert_array_equal(np.load(out), big)
        self.other_cli("export", "small", self.path("small-out.npy"), check=cs.EXIT_OK)
        np.testing.assert_array_equal(np.load(self.path("small-out.npy")), small)
        # The summary a person reads.
        text = self.other_cli("pull", "small", check=cs.EXIT_OK).stdout
        self.assertIn("pulled 1 artifact", text)
        self.assertIn("small@2", text)

    def test_the_bucket_reads_as_a_store_with_other_tools(self):
        values = np.linspace(0, 1, 5000).reshape(50, 100)
        self.save_npy("grid", values)
        self.run_cli("push", check=cs.EXIT_OK)
        # boto3 copies the prefix to a directory; the Python reader, which
        # knows nothing of S3, loads it as a store.
        copy = self.path("copied")
        for key in self.keys():
            target = os.path.join(copy, key)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self.s3.download_file(BUCKET, f"{self.prefix}/{key}", target)
        import amphora_reader
        np.testing.assert_array_equal(amphora_reader.load(copy, "grid", verify=True), values)
        # And the CLI opens the bucket itself as a store.
        store_url = f"{self.url}?endpoint={ENDPOINT}"
        proc = cs.run("--store", store_url, "verify")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("all intact", proc.stdout)
        self.assertIn("grid", cs.run("--store", store_url, "ls").stdout)

    def test_pieces_of_any_size_another_writer_chose_are_pushed_and_pulled(self):
        # Amphora's writers pick powers of two; another writer may not. A
        # piece size that is no multiple of 64 cannot share the SHA-NI pass
        # with the parts' signatures, and must still be checked and copied.
        import hostile_corpus as hc
        data = np.random.default_rng(9).bytes((20 << 20) + 3)  # three parts, three pieces
        piece = (9 << 20) + 4  # larger than a part, so a chunk starts on a part's edge
        digest = hc.put_artifact(self.store, "test.raw", {}, files={"blob.bin": data},
                                 edit=lambda m: m["files"][0].update(hc.file_entry("blob.bin", data, piece)))
        self.run_cli("push", digest, check=cs.EXIT_OK)
        self.other_cli("pull", digest, check=cs.EXIT_OK)
        with open(os.path.join(hc.object_dir(self.other, digest), "blob.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.other_cli("verify", check=cs.EXIT_OK)

    def test_damaged_objects_in_the_bucket_are_named_and_nothing_is_published(self):
        self.save_npy("t", np.random.default_rng(3).standard_normal(1 << 20))  # 8 MiB, four pieces, incompressible
        self.run_cli("push", check=cs.EXIT_OK)
        digest = self.digest_of("t")[len("sha256:"):]
        folder = f"{self.prefix}/objects/sha256/{digest[:2]}/{digest}/"
        manifest = json.loads(self.s3.get_object(Bucket=BUCKET, Key=folder + "manifest.json")["Body"].read())
        payload = manifest["files"][0]["path"]
        original = self.s3.get_object(Bucket=BUCKET, Key=folder + payload)["Body"].read()

        flipped = bytearray(original)
        flipped[(5 << 20) + 3] ^= 0x40
        self.s3.put_object(Bucket=BUCKET, Key=folder + payload, Body=bytes(flipped))
        proc = self.other_cli("pull", "t")
        self.assertEqual(proc.returncode, cs.EXIT_CORRUPT, proc.stderr)
        self.assertIn(f"file '{payload}' piece 2", proc.stderr)
        self.assertIn("does not match its SHA-256", proc.stderr)
        self.assertEqual(json.loads(self.other_cli("ls", "--json").stdout), [])
        self.other_cli("--no-remote", "show", "sha256:" + digest, check=cs.EXIT_NOT_FOUND)
        self.other_cli("verify", check=cs.EXIT_OK)

        self.s3.delete_object(Bucket=BUCKET, Key=folder + payload)
        proc = self.other_cli("pull", "t")
        self.assertEqual(proc.returncode, cs.EXIT_CORRUPT, proc.stderr)
        self.assertIn(f"lacks its file '{payload}'", proc.stderr)
        self.other_cli("--no-remote", "show", "sha256:" + digest, check=cs.EXIT_NOT_FOUND)

        # Put back, the pull completes.
        self.s3.put_object(Bucket=BUCKET, Key=folder + payload, Body=original)
        self.other_cli("pull", "t", check=cs.EXIT_OK)
        self.other_cli("verify", check=cs.EXIT_OK)

    def test_keys_no_store_writes_are_refused_never_followed(self):
        self.save_npy("good", np.ones(3))
        self.run_cli("push", check=cs.EXIT_OK)
        for key in ("names/../1.json", "names/evil\x01/1.json", "names/a/../../escape/1.json",
                    "objects/sha256/zz/../../x"):
            self.s3.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}", Body=b"{}")
        store_url = f"{self.url}?endpoint={ENDPOINT}"
        ls = cs.run("--store", store_url, "ls")
        self.assertEqual(ls.returncode, 0, ls.stderr)
        self.assertIn("good", ls.stdout)
        self.assertNotIn("escape", ls.stdout)
        proc = cs.run("--store", store_url, "verify")
        self.assertEqual(proc.returncode, cs.EXIT_CORRUPT, proc.stdout + proc.stderr)
        self.assertIn("not a valid", proc.stdout + proc.stderr)
        self.assertNotIn("\x01", proc.stdout + proc.stderr)
        # Pulling what is good still works.
        self.other_cli("pull", "good", check=cs.EXIT_OK)

    def test_wrong_credentials_fail_without_the_secret_in_any_message(self):
        self.save_npy("x", np.zeros(4))
        env = dict(os.environ, AWS_SECRET_ACCESS_KEY="wrong-secret-value-0123456789")
        proc = cs.run("--store", self.store, "push", env=env)
        self.assertEqual(proc.returncode, cs.EXIT_FAILURE, proc.stderr)
        self.assertIn("403", proc.stderr)
        self.assertIn("SignatureDoesNotMatch", proc.stderr)
        for secret in ("wrong-secret-value", SECRET):
            self.assertNotIn(secret, proc.stderr + proc.stdout)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["HOME"] = self.tmp  # no ~/.aws/credentials here
        proc = cs.run("--store", self.store, "push", env=env)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("AWS_ACCESS_KEY_ID", proc.stderr)
        # A bucket that does not exist is named as such.
        self.run_cli("remote", "add", "nowhere", f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}", "--endpoint", ENDPOINT,
                     check=cs.EXIT_OK)
        proc = self.run_cli("push", "--remote", "nowhere")
        self.assertEqual(proc.returncode, cs.EXIT_FAILURE, proc.stderr)
        self.assertIn("NoSuchBucket", proc.stderr)

    def test_a_push_killed_at_random_points_is_completed_by_the_next(self):
        values = np.random.default_rng(7).integers(0, 1 << 30, size=6 << 20, dtype=np.int32)  # 24 MiB
        self.save_npy("big", values)
        for k in range(3):
            self.save_npy(f"small{k}", np.arange(k + 10))
        rng = random.Random(11)
        kills = 0
        for _ in range(4):
            proc = subprocess.Popen([cs.CLI, "--store", self.store, "push", "-j", "2"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.02, 0.4))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait()
        self.run_cli("push", check=cs.EXIT_OK)
        store_url = f"{self.url}?endpoint={ENDPOINT}"
        proc = cs.run("--store", store_url, "verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.other_cli("pull", "big", check=cs.EXIT_OK)
        out = self.path("out.npy")
        self.other_cli("export", "big", out, check=cs.EXIT_OK)
        np.testing.assert_array_equal(np.load(out), values)
        print(f"(push killed {kills} times of 4)", file=sys.stderr)

    def test_gc_on_the_remote_keeps_what_names_reach_and_anything_young(self):
        self.save_npy("keep", np.arange(10))
        self.save_npy("drop", np.arange(20))
        self.run_cli("push", check=cs.EXIT_OK)
        store_url = f"{self.url}?endpoint={ENDPOINT}"
        self.assertEqual(cs.run("--store", store_url, "rm", "drop", "--yes").returncode, 0)
        # A multipart upload a killed writer left behind.
        upload = self.s3.create_multipart_upload(Bucket=BUCKET, Key=f"{self.prefix}/objects/sha256/ab/left-behind")
        # Everything is younger than the default grace of 7 days: nothing goes.
        text = self.run_cli("gc", "--remote", "team", "--dry-run", check=cs.EXIT_OK).stdout
        self.assertIn("would remove 0 artifacts", text)
        self.assertIn("unnamed, saved less than 7 d ago", text)
        text = self.run_cli("gc", "--remote", "team", "--grace", "1h", check=cs.EXIT_OK).stdout
        self.assertIn("removed 0 artifacts", text)
        self.assertIn("and 0 unfinished uploads", text)
        # With no grace, what no name reaches goes, and so does the upload.
        text = self.run_cli("gc", "--remote", "team", "--grace", "0", check=cs.EXIT_OK).stdout
        self.assertIn("removed 1 artifact", text)
        self.assertIn("1 unfinished upload", text)
        uploads = self.s3.list_multipart_uploads(Bucket=BUCKET, Prefix=self.prefix + "/").get("Uploads", [])
        self.assertNotIn(upload["UploadId"], [u["UploadId"] for u in uploads])
        proc = cs.run("--store", store_url, "verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.other_cli("pull", "keep", check=cs.EXIT_OK)
        self.assertEqual(self.other_cli("pull", "drop").returncode, cs.EXIT_NOT_FOUND)
        # Durations: seconds or a number with s, m, h or d.
        proc = self.run_cli("gc", "--remote", "team", "--grace", "7x")
        self.assertEqual(proc.returncode, cs.EXIT_USAGE)
        self.assertIn("is not a duration", proc.stderr)

    def test_reading_through_to_the_remote(self):
        self.save_npy("grid", np.arange(4096 * 16, dtype=np.int32).reshape(4096, 16))
        self.run_cli("push", check=cs.EXIT_OK)
        digest = self.digest_of("grid")
        # The other store lacks it: show reads the remote's manifest, copying nothing.
        shown = json.loads(self.other_cli("show", "grid", "--json", check=cs.EXIT_OK).stdout)
        self.assertEqual(shown["digest"], digest)
        self.assertEqual(json.loads(self.other_cli("ls", "--json").stdout), [])
        # --no-remote stays local.
        proc = cs.run("--store", self.other, "--no-remote", "show", "grid")
        self.assertEqual(proc.returncode, cs.EXIT_NOT_FOUND, proc.stderr)
        self.assertNotIn("remote", proc.stderr)
        proc = cs.run("--store", self.other, "show", "nowhere")
        self.assertEqual(proc.returncode, cs.EXIT_NOT_FOUND)
        self.assertIn("nor on its remote", proc.stderr)

    def test_usage_errors(self):
        proc = self.run_cli("pull")
        self.assertEqual(proc.returncode, cs.EXIT_USAGE)
        proc = self.run_cli("push", "--remote", "nope")
        self.assertEqual(proc.returncode, cs.EXIT_NOT_FOUND)
        self.assertIn("no remote named 'nope'", proc.stderr)
        proc = self.run_cli("remote", "add", "team", self.url)
        self.assertEqual(proc.returncode, cs.EXIT_USAGE)
        self.assertIn("already", proc.stderr)
        listed = json.loads(self.run_cli("remote", "list", "--json", check=cs.EXIT_OK).stdout)
        self.assertEqual(listed, [{"name": "team", "url": self.url, "endpoint": ENDPOINT, "region": ""}])
        self.run_cli("remote", "remove", "team", check=cs.EXIT_OK)
        self.assertEqual(self.run_cli("remote", "remove", "team").returncode, cs.EXIT_NOT_FOUND)
        proc = self.run_cli("pull", "x")
        self.assertEqual(proc.returncode, cs.EXIT_NOT_FOUND)
        self.assertIn("has no remote", proc.stderr)


class FaultTest(cs.StoreTestCase):
    """push and pull through the fault proxy."""

    @classmethod
    def setUpClass(cls):
        require_gateway()
        cls.s3 = s3_client()
        host, port = ENDPOINT[len("http://"):].split(":")
        cls.proxy = FaultProxy(host, int(port))

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        cls.s3.close()

    def setUp(self):
        super().setUp()
        self.proxy.clear()
        self.proxy.reset_counts()
        self.prefix = "faults-" + uuid.uuid4().hex[:12]
        self.url = f"s3://{BUCKET}/{self.prefix}"
        self.run_cli("remote", "add", "p", self.url, "--endpoint", self.proxy.endpoint, check=cs.EXIT_OK)
        self.other = self.path("other")
        cs.run("--store", self.other, "init")
        cs.run("--store", self.other, "remote", "add", "p", self.url, "--endpoint", self.proxy.endpoint)
        # Quick retries, and a stall cut after 2 s rather than 30.
        self.env = dict(os.environ, AMPHORA_S3_STALL_SECONDS="2", AMPHORA_S3_ATTEMPTS="4")
        values = np.random.default_rng(5).standard_normal(3 << 20)  # 24 MiB: three parts, twelve pieces
        np.save(self.path("v.npy"), values)
        self.values = values
        self.run_cli("import", self.path("v.npy"), "--name", "v", check=cs.EXIT_OK)
        for k in range(3):
            np.save(self.path(f"s{k}.npy"), np.arange(5 + k))
            self.run_cli("import", self.path(f"s{k}.npy"), "--name", f"s{k}", check=cs.EXIT_OK)

    def cli(self, store, *args):
        return cs.run("--store", store, *args, env=self.env, timeout=300)

    def assert_bucket_consistent(self):
        """Every manifest in the bucket has every file it lists (read without the proxy)."""
        keys = set()
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + "/"):
            keys |= {o["Key"] for o in page.get("Contents", [])}
        manifests = [k for k in keys if k.endswith("/manifest.json")]
        for key in manifests:
            manifest = json.loads(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
            folder = key[:-len("manifest.json")]
            for f in manifest["files"]:
                self.assertIn(folder + f["path"], keys, f"{key} lists a file the bucket lacks")
        return len(manifests)

    def assert_pulled_whole(self):
        self.assertEqual(self.cli(self.other, "verify").returncode, 0)
        out = self.path("out.npy")
        self.assertEqual(self.cli(self.other, "export", "v", out).returncode, 0)
        np.testing.assert_array_equal(np.load(out), self.values)

    def bucket_object(self, digest, path):
        hexdigest = digest.split(":", 1)[1]
        key = f"{self.prefix}/objects/sha256/{hexdigest[:2]}/{hexdigest}/{path}"
        return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def reader(self, *args):
        proc = subprocess.run([WRITER, *map(str, args)], text=True, capture_output=True, env=self.env, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def assert_fetched_at_most(self, allowed):
        # Each request and answer carries about a kilobyte of headers.
        overhead = 2048 * len(self.proxy.requests)
        self.assertLessEqual(self.proxy.bytes_down, allowed + overhead,
                             f"{self.proxy.bytes_down} bytes fetched by {self.proxy.requests}")

    @unittest.skipUnless(WRITER, "needs $AMPHORA_TEST_WRITER")
    def test_partial_reads_fetch_only_what_they_need(self):
        # A 32 MiB LZ4 tensor of 1 MiB frames (256 rows each), a table and a
        # record collection: the other store reads ten rows, one column and
        # one record through to the remote, fetching the manifest, the
        # indexes and the parts holding them, and copies nothing.
        grid = (np.arange(8192 * 1024, dtype=np.int32) % 1000).reshape(8192, 1024)
        np.save(self.path("grid.npy"), grid)
        self.assertEqual(self.cli(self.store, "import", self.path("grid.npy"), "--name", "grid").returncode, 0)
        rng = np.random.default_rng(9)
        with open(self.path("t.csv"), "w") as f:
            f.write("id,score,label\n")
            for i in range(50000):
                f.write(f"{i},{rng.standard_normal():.6f},label-{rng.integers(1 << 40)}\n")
        self.assertEqual(self.cli(self.store, "import", self.path("t.csv"), "--name", "t").returncode, 0)
        with open(self.path("r.jsonl"), "w") as f:
            for i in range(20000):
                f.write(json.dumps({"id": i, "tags": [f"t{i % 7}", f"x{i}"], "note": "n" * (i % 50),
                                    "v": {"a": i * 0.5, "b": None if i % 3 else i}}) + "\n")
        self.assertEqual(self.cli(self.store, "import", self.path("r.jsonl"), "--name", "r").returncode, 0)
        self.assertEqual(self.cli(self.store, "push", "grid", "t", "r").returncode, 0)

        grid_digest = self.digest_of_cli("grid")
        manifest = json.loads(self.bucket_object(grid_digest, "manifest.json"))
        files = {f["path"]: f["size"] for f in manifest["files"]}
        self.assertIn("tensor.npy.lz4", files)
        index = np.load(io.BytesIO(self.bucket_object(grid_digest, "tensor.chunks.npy")))
        largest_frame = int(np.diff(index[:, 0]).max())
        manifest_bytes = len(self.bucket_object(grid_digest, "manifest.json"))
        self.proxy.reset_counts()
        self.reader("rows", self.other, "grid", 1000, 1010, self.path("rows.npy"))
        np.testing.assert_array_equal(np.load(self.path("rows.npy")), grid[1000:1010])
        # The manifest, the index, the header frame and the frame holding the rows.
        self.assert_fetched_at_most(manifest_bytes + files["tensor.chunks.npy"] + 2 * largest_frame)
        self.assertLess(self.proxy.bytes_down, files["tensor.npy.lz4"] // 4)

        t_digest = self.digest_of_cli("t")
        t_files = {f["path"]: f["size"] for f in json.loads(self.bucket_object(t_digest, "manifest.json"))["files"]}
        score_bytes = sum(size for path, size in t_files.items() if path.startswith("columns/1"))
        self.assertGreater(score_bytes, 0, t_files)
        self.proxy.reset_counts()
        self.reader("column", self.other, "t", "score", self.path("score.csv"))
        table = np.genfromtxt(self.path("t.csv"), delimiter=",", skip_header=1, usecols=1)
        np.testing.assert_allclose(np.genfromtxt(self.path("score.csv"), skip_header=1), table)
        self.assert_fetched_at_most(len(self.bucket_object(t_digest, "manifest.json")) + score_bytes)

        r_digest = self.digest_of_cli("r")
        r_manifest = json.loads(self.bucket_object(r_digest, "manifest.json"))
        r_total = sum(f["size"] for f in r_manifest["files"])
        self.proxy.reset_counts()
        record = json.loads(self.reader("record", self.other, "r", 12345))
        self.assertEqual(record, {"id": 12345, "tags": ["t4", "x12345"], "note": "n" * 45,
                                  "v": {"a": 12345 * 0.5, "b": 12345 if 12345 % 3 == 0 else None}})
        # Its part of each column, a list's offsets whole, and of a dictionary the words it uses.
        self.assertLess(self.proxy.bytes_down, r_total // 8 + len(json.dumps(r_manifest)) + 2048 * len(self.proxy.requests))

        # Nothing was copied into the reading store.
        self.assertEqual(json.loads(self.cli(self.other, "ls", "--json").stdout), [])

    def digest_of_cli(self, name):
        return json.loads(self.cli(self.store, "show", name, "--json").stdout)["digest"]

    def test_503_and_500_answers_are_retried(self):
        self.proxy.fail(503, times=3, match="PUT")
        self.proxy.fail(500, times=2, match="GET")
        proc = self.cli(self.store, "push")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.proxy.injected, 5)
        self.assertEqual(self.assert_bucket_consistent(), 4)
        self.proxy.fail(503, times=3)
        proc = self.cli(self.other, "pull", "v", "s1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assert_pulled_whole()

    def test_a_server_that_keeps_failing_leaves_both_ends_consistent(self):
        # Every upload of a part fails: the push gives up with the server's answer.
        self.proxy.fail(500, times=10**6, match="partNumber")
        proc = self.cli(self.store, "push")
        self.assertEqual(proc.returncode, cs.EXIT_FAILURE, proc.stderr)
        self.assertIn("answered HTTP 500 InternalError", proc.stderr)
        self.assertNotIn(os.environ["AWS_SECRET_ACCESS_KEY"], proc.stderr)
        self.assert_bucket_consistent()
        self.proxy.clear()
        self.assertEqual(self.cli(self.store, "push").returncode, 0)
        self.assertEqual(self.assert_bucket_consistent(), 4)
        # Every ranged read fails: the pull gives up and publishes nothing of v.
        self.proxy.fail(503, times=10**6, match="GET /" + BUCKET + "/" + self.prefix + "/objects")
        proc = self.cli(self.other, "pull", "v")
        self.assertEqual(proc.returncode, cs.EXIT_FAILURE, proc.stderr)
        self.assertIn("SlowDown", proc.stderr)
        self.assertEqual(json.loads(self.cli(self.other, "ls", "--json").stdout), [])
        self.assertEqual(self.cli(self.other, "verify").returncode, 0)
        self.proxy.clear()
        self.assertEqual(self.cli(self.other, "pull", "v").returncode, 0)
        self.assert_pulled_whole()

    def test_connections_cut_midway_are_retried(self):
        self.assertEqual(self.cli(self.store, "push").returncode, 0)
        # Cut three responses of payload reads after 100 KiB of them.
        self.proxy.cut(100 << 10, times=3, match="GET /" + BUCKET + "/" + self.prefix + "/objects")
        proc = self.cli(self.other, "pull", "v")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertGreaterEqual(self.proxy.injected, 1)
        self.assert_pulled_whole()

    def test_a_cut_that_never_heals_fails_clearly_and_publishes_nothing(self):
        self.assertEqual(self.cli(self.store, "push").returncode, 0)
        self.proxy.cut(4096, times=10**6, match="GET /" + BUCKET + "/" + self.prefix + "/objects")
        proc = self.cli(self.other, "pull", "v")
        self.assertEqual(proc.returncode, cs.EXIT_FAILURE, proc.stderr)
        self.assertIn("failed after 4 tries", proc.stderr)
        self.assertEqual(json.loads(self.cli(self.other, "ls", "--json").stdout), [])
        self.assertEqual(self.cli(self.other, "verify").returncode, 0)

    def test_a_stalled_response_is_cut_and_retried(self):
        self.assertEqual(self.cli(self.store, "push").returncode, 0)
        self.proxy.stall(5, times=1, match="GET /" + BUCKET + "/" + self.prefix + "/objects")
        started = time.monotonic()
        proc = self.cli(self.other, "pull", "v")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.proxy.injected, 1)
        self.assertLess(time.monotonic() - started, 60)
        self.assert_pulled_whole()


if __name__ == "__main__":
    import unittest
    _, argv = cs.parse_args("test_remote.py")
    unittest.main(argv=argv, verbosity=2)
