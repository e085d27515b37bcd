#!/usr/bin/python3
"""Pipelines sharing a remote as their action cache (docs/FORMAT.md §13.4),
with separate processes and separate local stores on one bucket of a real
S3 server: a Ceph RADOS Gateway started by tests/with_rgw.sh.

Two docfreq runners (and six of the test pipeline) started at once on a
fresh remote compute each step once between them and agree; a third with
an empty store computes nothing and copies only what it reads, in two
requests a step; a runner SIGKILLed while holding a step's remote lease is
taken over after the lease expires; a remote that fails mid-run (the fault
proxy) fails the run with a clear reason and a rerun completes; an entry
whose outputs left the bucket is a miss that says so; gc --keep-last on the
remote drops old results; `read` mode writes nothing to the bucket.

Run as:
    tests/with_rgw.sh DIR /usr/bin/python3 tests/python/test_remote_pipeline.py --cli build/bin/amphora \
        --docfreq build/bin/amphora_docfreq --pipeline build/bin/amphora_test_pipeline \
        --corpus examples/docfreq/corpus
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_support as cs  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

from s3_support import BUCKET, ENDPOINT, require_gateway, s3_client  # noqa: E402
DOCFREQ = PIPELINE = CORPUS = ""
DOCFREQ_STEPS = ("read", "tokenize", "count", "model", "report")
LINE = re.compile(r"  (ran|cached|failed|skipped)\s+[\d.]+ s  (\w+)(?:  \((.*?)\))?(?:  \[remote '(\w+)'\])?$")


def steps_of(output):
    """step name -> (status, reason, remote) from a run's per-step lines."""
    steps = {}
    for line in output.splitlines():
        m = LINE.match(line)
        if m:
            steps[m.group(2)] = (m.group(1), m.group(3) or "", m.group(4) or "")
    return steps


def artifacts_in(store):
    """The digests (hex) of the artifacts a local store holds."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(store, "objects", "sha256", "*", "*"))
                  if os.path.exists(os.path.join(p, "manifest.json")))


def run_records(store, pipeline):
    records = []
    for path in sorted(glob.glob(os.path.join(store, "runs", pipeline, "*.json"))):
        with open(path) as f:
            records.append(json.load(f))
    return records


def printed_after_run(output):
    """What a program printed after its run's summary line."""
    return output.split(" succeeded (", 1)[1].split("\n", 1)[1]


class RemotePipelineTest(cs.StoreTestCase):
    @classmethod
    def setUpClass(cls):
        require_gateway()
        cls.s3 = s3_client()

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()

    def setUp(self):
        super().setUp()
        self.prefix = "pipe-" + uuid.uuid4().hex[:12]
        self.url = f"s3://{BUCKET}/{self.prefix}"
        self.corpus = self.path("corpus")
        shutil.copytree(CORPUS, self.corpus)
        self.env = dict(os.environ, AMPHORA_S3_ATTEMPTS="2")

    def local_store(self, name, endpoint=None):
        store = self.path(name)
        self.assertEqual(cs.run("--store", store, "init").returncode, 0)
        proc = cs.run("--store", store, "remote", "add", "team", self.url, "--endpoint", endpoint or ENDPOINT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return store

    def keys(self):
        keys = set()
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + "/"):
            keys |= {o["Key"][len(self.prefix) + 1:] for o in page.get("Contents", [])}
        return keys

    def docfreq(self, store, *args):
        return subprocess.Popen([DOCFREQ, "--store", store, "--corpus", self.corpus, *args], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)

    def pipeline(self, store, *args, env=None, check=0):
        proc = subprocess.run([PIPELINE, "--store", store, *args], text=True, capture_output=True,
                              env=env or self.env, timeout=300)
        if check is not None:
            self.assertEqual(proc.returncode, check, proc.stdout + proc.stderr)
        return proc

    def finished(self, proc):
        out, err = proc.communicate(timeout=600)
        self.assertEqual(proc.returncode, 0, out + err)
        return out

    def test_runners_at_once_compute_each_step_once_and_a_third_computes_nothing(self):
        a, b = self.local_store("a"), self.local_store("b")
        first, second = self.docfreq(a), self.docfreq(b)
        out_a, out_b = self.finished(first), self.finished(second)
        steps_a, steps_b = steps_of(out_a), steps_of(out_b)
        self.assertEqual(set(steps_a), set(DOCFREQ_STEPS), out_a)
        self.assertEqual(set(steps_b), set(DOCFREQ_STEPS), out_b)
        for step in DOCFREQ_STEPS:
            statuses = sorted([steps_a[step][0], steps_b[step][0]])
            self.assertEqual(statuses, ["cached", "ran"], f"{step}: {out_a}\n{out_b}")
        # Both say the same, from the same outputs.
        record_a, record_b = run_records(a, "docfreq")[-1], run_records(b, "docfreq")[-1]
        digests = lambda r: {s["name"]: s["output_digests"] for s in r["steps"]}  # noqa: E731
        self.assertEqual(digests(record_a), digests(record_b))
        self.assertEqual(printed_after_run(out_a), printed_after_run(out_b))
        self.assertIn("1000 words from 60 documents", printed_after_run(out_a))
        # The bucket holds both runs' records, each naming its host.
        shared_runs = sorted(k for k in self.keys() if k.startswith("runs/docfreq/"))
        self.assertEqual(shared_runs, sorted(f"runs/docfreq/{r['run']}.json" for r in (record_a, record_b)))
        self.assertTrue(record_a["host"])

        # A third machine: nothing computed, and only the report it prints copied.
        c = self.local_store("c")
        out_c = self.finished(self.docfreq(c))
        self.assertEqual(steps_of(out_c), {s: ("cached", "", "team") for s in DOCFREQ_STEPS}, out_c)
        self.assertIn("(0 ran, 5 cached)", out_c)
        report = digests(record_a)["report"]["report"].split(":")[1]
        self.assertEqual(artifacts_in(c), [report])
        self.assertEqual(printed_after_run(out_c), printed_after_run(out_a))
        self.assertEqual(cs.run("--store", c, "verify").returncode, 0)
        # Its names resolve, without copying what they name.
        shown = cs.run("--store", c, "show", "docfreq.model.model")
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertEqual(artifacts_in(c), [report])
        # Lineage follows the provenance the entries carried, back to the corpus.
        lineage = json.loads(cs.run("--store", c, "lineage", "docfreq.report.report", "--json").stdout)
        self.assertEqual([n.get("step") for n in lineage], ["report", "model", "count", "tokenize", "read"])
        self.assertEqual({n["run"] for n in lineage} <= {record_a["run"], record_b["run"]}, True)
        # Any machine lists the runs every machine shared, with their hosts.
        listed = cs.run("--store", c, "runs", "--remote", "team")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        lines = listed.stdout.splitlines()
        self.assertEqual(len(lines), 3, listed.stdout)
        for record in (record_a, record_b):
            self.assertIn(record["run"], listed.stdout)
        self.assertTrue(all(line.endswith(" on " + record_a["host"]) for line in lines), listed.stdout)
        why = cs.run("--store", c, "why", record_b["run"], "--remote", "team")
        self.assertEqual(why.returncode, 0, why.stderr)
        self.assertIn(f"run {record_b['run']} of docfreq: succeeded on {record_a['host']}", why.stdout)
        self.assertEqual(why.stdout.count("[remote 'team']"), sum(1 for s in record_b["steps"] if s.get("cache") == "team"))
        here = cs.run("--store", c, "why", "docfreq")
        self.assertEqual(here.stdout.count("[remote 'team']"), 5, here.stdout)

    def test_six_runners_at_once_compute_each_step_once_between_them(self):
        stores = [self.local_store(f"r{k}") for k in range(6)]
        log = self.path("log")
        # `numbers` takes a moment, so every runner asks for it while one computes it.
        env = dict(self.env, AMPHORA_TEST_LOG=log, AMPHORA_TEST_DELAY="0.5")
        runners = [subprocess.Popen([PIPELINE, "--store", s], text=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env) for s in stores]
        outputs = [self.finished(r) for r in runners]
        with open(log) as f:
            self.assertEqual(sorted(f.read().split()), ["numbers", "square", "total"])
        ran = [step for out in outputs for step, (status, _, _) in steps_of(out).items() if status == "ran"]
        self.assertEqual(sorted(ran), ["numbers", "square", "total"], outputs)
        # Every runner ends with the same total, most of them served by the remote.
        totals = {run_records(s, "testpipe")[-1]["steps"][2]["output_digests"]["out"] for s in stores}
        self.assertEqual(len(totals), 1)
        self.assertTrue(all("succeeded" in out for out in outputs))

    def test_a_runner_killed_holding_the_remote_lease_is_taken_over_after_expiry(self):
        a, b = self.local_store("a"), self.local_store("b")
        log, marker = self.path("log"), self.path("marker")
        env = dict(self.env, AMPHORA_LEASE_SECONDS="3", AMPHORA_TEST_LOG=log)
        holder = subprocess.Popen([PIPELINE, "--store", a], env=dict(env, AMPHORA_TEST_DELAY="120", AMPHORA_TEST_MARKER=marker),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while not os.path.exists(marker) and time.time() < deadline:
                time.sleep(0.05)
            self.assertTrue(os.path.exists(marker), "the first runner never started its step")
            self.assertIn("leases/step-", " ".join(self.keys()))
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        # The lease object is left behind; the next runner waits it out.
        proc = self.pipeline(b, env=env)
        self.assertIn("numbers: waiting for another run computing the same result", proc.stdout)
        self.assertEqual(steps_of(proc.stdout)["numbers"][0], "ran", proc.stdout)
        with open(log) as f:
            self.assertEqual(f.read().split(), ["numbers", "square", "total"])
        # The killed runner's store, run again, is served by the remote: once, not twice.
        again = self.pipeline(a, env=env)
        self.assertEqual(steps_of(again.stdout), {s: ("cached", "", "team") for s in ("numbers", "square", "total")})
        with open(log) as f:
            self.assertEqual(f.read().split(), ["numbers", "square", "total"])

    def test_a_remote_that_fails_mid_run_fails_it_clearly_and_a_rerun_completes(self):
        host, port = ENDPOINT[len("http://"):].split(":")
        proxy = FaultProxy(host, int(port))
        try:
            a = self.local_store("a", endpoint=proxy.endpoint)
            # Every cache entry written to the bucket is refused.
            proxy.fail(500, times=10**6, match=f"PUT /{BUCKET}/{self.prefix}/cache/")
            proc = self.pipeline(a, check=1)
            self.assertIn("step 'numbers' failed: its outputs are saved and cached here, but sharing them on remote "
                          "'team' failed", proc.stderr)
            self.assertIn("HTTP 500", proc.stderr)
            self.assertNotIn(os.environ["AWS_SECRET_ACCESS_KEY"], proc.stdout + proc.stderr)
            self.assertEqual(steps_of(proc.stdout)["square"][0], "skipped")
            self.assertEqual(cs.run("--store", a, "verify").returncode, 0)
            self.assertFalse(any(k.startswith("cache/") for k in self.keys()))
            proxy.clear()
            again = self.pipeline(a)
            self.assertEqual(steps_of(again.stdout)["numbers"][:2], ("cached", ""))
            self.assertEqual(steps_of(again.stdout)["total"][0], "ran")
            self.assertEqual(cs.run("--store", a, "verify").returncode, 0)
        finally:
            proxy.close()

    def test_a_run_served_by_the_remote_costs_two_requests_a_step(self):
        host, port = ENDPOINT[len("http://"):].split(":")
        proxy = FaultProxy(host, int(port))
        try:
            self.pipeline(self.local_store("a"))
            c = self.local_store("c", endpoint=proxy.endpoint)
            proxy.reset_counts()
            proc = self.pipeline(c)
            self.assertIn("(0 ran, 3 cached)", proc.stdout)
            requests = list(proxy.requests)
            # Per step its entry and its output's manifest; per run the store's
            # marker, one listing and the run record. No payload is fetched.
            self.assertLessEqual(len(requests), 2 * 3 + 3, "\n".join(requests))
            self.assertEqual(sum("/cache/" in r for r in requests), 3, requests)
            fetched = [r for r in requests if "/objects/" in r]
            self.assertEqual(len(fetched), 3, requests)
            self.assertTrue(all(r.split()[1].endswith("/manifest.json") for r in fetched), requests)
            self.assertEqual(artifacts_in(c), [])
        finally:
            proxy.close()

    def test_an_entry_whose_outputs_left_the_remote_is_a_miss_that_says_so(self):
        a, b = self.local_store("a"), self.local_store("b")
        first = self.pipeline(a)
        record = run_records(a, "testpipe")[-1]
        square = next(s for s in record["steps"] if s["name"] == "square")["output_digests"]["out"].split(":")[1]
        self.s3.delete_object(Bucket=BUCKET, Key=f"{self.prefix}/objects/sha256/{square[:2]}/{square}/manifest.json")
        log = self.path("log")
        proc = self.pipeline(b, env=dict(self.env, AMPHORA_TEST_LOG=log))
        steps = steps_of(proc.stdout)
        self.assertEqual(steps["numbers"], ("cached", "", "team"))
        self.assertEqual(steps["square"][0], "ran")
        self.assertIn("output `out` of the cache entry on remote 'team' is not there (sha256:" + square[:8],
                      steps["square"][1])
        self.assertEqual(steps["total"][0], "cached")
        with open(log) as f:
            self.assertEqual(f.read().split(), ["square"])
        self.assertIn(f"objects/sha256/{square[:2]}/{square}/manifest.json", self.keys())
        self.assertIn("3 ran", first.stdout)

    def test_gc_keep_last_on_the_remote_drops_old_results_which_are_then_computed_again(self):
        a, b = self.local_store("a"), self.local_store("b")
        self.pipeline(a)
        self.pipeline(a, "--set", "total.offset=5")
        gc = cs.run("--store", a, "gc", "--remote", "team", "--keep-last", "1", "--grace", "0")
        self.assertEqual(gc.returncode, 0, gc.stderr)
        self.assertIn("dropped 1 name version older than the last 1 and 1 cache entry only they reached", gc.stdout)
        log = self.path("log")
        proc = self.pipeline(b, env=dict(self.env, AMPHORA_TEST_LOG=log))
        steps = steps_of(proc.stdout)
        self.assertEqual(steps["square"], ("cached", "", "team"))
        self.assertEqual(steps["total"], ("ran", "no cache entry", ""))
        with open(log) as f:
            self.assertEqual(f.read().split(), ["total"])
        self.assertEqual(cs.run("--store", a, "verify").returncode, 0)

    def test_read_mode_writes_nothing_and_off_ignores_the_remote(self):
        a, b = self.local_store("a"), self.local_store("b")
        self.pipeline(a)
        before = self.keys()
        log = self.path("log")
        env = dict(self.env, AMPHORA_TEST_LOG=log)
        proc = self.pipeline(b, "--remote-cache", "read", "--set", "total.offset=5", env=env)
        self.assertEqual(steps_of(proc.stdout)["square"], ("cached", "", "team"))
        self.assertEqual(steps_of(proc.stdout)["total"][0], "ran")
        self.assertEqual(self.keys(), before)
        proc = self.pipeline(b, "--no-remote-cache", env=env)
        self.assertEqual(steps_of(proc.stdout)["numbers"][0], "ran")
        with open(log) as f:
            self.assertEqual(f.read().split(), ["total", "numbers", "square", "total"])
        self.assertEqual(self.keys(), before)
        self.assertEqual(run_records(b, "testpipe")[-1]["remote_cache"], "off")
        bad = self.pipeline(b, "--remote-cache", "sometimes", check=2)
        self.assertIn("--remote-cache", bad.stderr)
        # Without credentials the run says how to go on without the remote.
        bare = {k: v for k, v in self.env.items() if not k.startswith("AWS_")}
        bare["AWS_SHARED_CREDENTIALS_FILE"] = self.path("no-credentials")
        bare["HOME"] = self.tmp
        refused = self.pipeline(b, env=bare, check=2)
        self.assertIn("give --no-remote-cache", refused.stderr)
        self.assertEqual(self.pipeline(b, "--no-remote-cache", env=bare).returncode, 0)


if __name__ == "__main__":
    for flag in ("--docfreq", "--pipeline", "--corpus"):
        if flag in sys.argv:
            i = sys.argv.index(flag)
            globals()[flag[2:].upper()] = os.path.abspath(sys.argv[i + 1])
            del sys.argv[i:i + 2]
    _, argv = cs.parse_args("test_remote_pipeline.py")
    if not (DOCFREQ and PIPELINE and CORPUS):
        sys.exit("usage: test_remote_pipeline.py --cli PATH --docfreq PATH --pipeline PATH --corpus DIR")
    unittest.main(argv=argv)
