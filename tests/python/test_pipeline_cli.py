#!/usr/bin/python3
"""Pipelines from the command line, with a real pipeline program
(tests/helpers/pipeline.cpp: numbers(n) -> square -> total).

Run as:
    /usr/bin/python3 tests/python/test_pipeline_cli.py --cli build/bin/amphora \
        --pipeline build/bin/amphora_test_pipeline
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

import cli_support
from cli_support import EXIT_OK, EXIT_FAILURE, EXIT_USAGE

PIPELINE = ""


class PipelineTestCase(cli_support.StoreTestCase):
    def setUp(self):
        super().setUp()
        self.log = self.path("executed.log")

    def env(self, **extra):
        env = dict(os.environ)
        env["AMPHORA_TEST_LOG"] = self.log
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def start(self, *args, **extra):
        return subprocess.Popen([PIPELINE, "--store", self.store, "--init", *map(str, args)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(**extra))

    def pipe(self, *args, check=EXIT_OK, **extra):
        proc = subprocess.run([PIPELINE, "--store", self.store, "--init", *map(str, args)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(**extra), timeout=120)
        if check is not None:
            self.assertEqual(proc.returncode, check, f"stdout={proc.stdout!r} stderr={proc.stderr!r}")
        return proc

    def executed(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().split()

    def runs(self):
        return json.loads(self.run_cli("runs", "--json", check=EXIT_OK).stdout)

    def total(self):
        import numpy as np
        out = self.path("total.npy")
        self.run_cli("export", "testpipe.total.out", out, "--force", check=EXIT_OK)
        return int(np.load(out))

    def statuses(self, run):
        return {s["name"]: s["status"] for s in run["steps"]}


class CachedRerunTest(PipelineTestCase):
    def test_second_run_is_served_from_the_cache(self):
        first = self.pipe()
        self.assertIn("ran", first.stdout)
        self.assertIn("(no cache entry)", first.stdout)
        self.assertEqual(self.executed(), ["numbers", "square", "total"])
        second = self.pipe()
        self.assertIn("3 cached", second.stdout)
        self.assertEqual(self.executed(), ["numbers", "square", "total"])
        runs = self.runs()
        self.assertEqual(len(runs), 2)
        self.assertEqual(self.statuses(runs[1]), {"numbers": "cached", "square": "cached", "total": "cached"})
        # Outputs are named PIPELINE.STEP.OUTPUT and listed by ls.
        names = [r["name"] for r in json.loads(self.run_cli("ls", "--json", check=EXIT_OK).stdout)]
        self.assertEqual(names, ["testpipe.numbers.out", "testpipe.square.out", "testpipe.total.out"])
        self.assertEqual(self.run_cli("verify", check=EXIT_OK).returncode, 0)

    def test_runs_json_has_the_documented_fields(self):
        self.pipe()
        self.pipe("--set", "numbers.n=12")
        runs = self.runs()
        self.assertEqual([r["pipeline"] for r in runs], ["testpipe", "testpipe"])
        self.assertLess(runs[0]["started_at"], runs[1]["started_at"])
        for run in runs:
            for field in ("run", "pipeline", "started_at", "ended_at", "status", "steps"):
                self.assertIn(field, run)
            self.assertEqual(run["status"], "succeeded")
            for step in run["steps"]:
                for field in ("name", "status", "reason", "duration", "outputs"):
                    self.assertIn(field, step)
                self.assertIn(step["status"], ("ran", "cached", "failed", "skipped"))
        last = {s["name"]: s for s in runs[1]["steps"]}
        self.assertEqual(last["numbers"]["reason"], "parameter `n` changed from 10 to 12")
        self.assertEqual(last["square"]["reason"], "input `out` changed")
        self.assertEqual(last["numbers"]["outputs"], {"out": "testpipe.numbers.out@2"})
        # The text listing: one line per run, newest last.
        lines = self.run_cli("runs", check=EXIT_OK).stdout.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn(runs[1]["run"], lines[1])
        self.assertIn("3 ran", lines[1])

    def test_why_and_explain_print_the_reasons(self):
        self.pipe()
        self.pipe("--set", "total.offset=5")
        out = self.run_cli("why", "testpipe", check=EXIT_OK).stdout
        self.assertIn("cached", out)
        self.assertIn("parameter `offset` changed from 0 to 5", out)
        self.assertEqual(out, self.run_cli("runs", "--explain", check=EXIT_OK).stdout)
        marked = self.run_cli("why", "testpipe.total.out", check=EXIT_OK).stdout
        self.assertIn("* ran", marked)
        run_id = self.runs()[0]["run"]
        first = self.run_cli("why", run_id, check=EXIT_OK).stdout
        self.assertIn("no cache entry", first)
        self.run_cli("why", "nothing-here", check=cli_support.EXIT_NOT_FOUND)
        self.assertEqual(self.executed().count("total"), 2)

    def test_config_file_and_overrides(self):
        config = self.path("run.yaml")
        with open(config, "w") as f:
            f.write("numbers:\n  n: 4\ntotal:\n  offset: 100\n")
        self.pipe("--config", config)
        self.assertEqual(self.total(), 0 + 1 + 4 + 9 + 100)
        self.pipe("--config", config, "--set", "total.offset=0")
        self.assertEqual(self.total(), 14)
        bad = self.pipe("--set", "numbers.top_k=3", check=EXIT_USAGE)
        self.assertIn("step 'numbers' has no parameter 'top_k' (it has n)", bad.stderr)
        bad = self.pipe("--set", "nosuch.n=3", check=EXIT_USAGE)
        self.assertIn("no step 'nosuch'", bad.stderr)

    def test_force(self):
        self.pipe()
        out = self.pipe("--force", "square").stdout
        self.assertIn("(forced)", out)
        self.assertEqual(self.executed(), ["numbers", "square", "total"] + ["square"])


class LineageTest(PipelineTestCase):
    def test_lineage_text_json_and_dot(self):
        self.pipe("--set", "numbers.n=5")
        text = self.run_cli("lineage", "testpipe.total.out", check=EXIT_OK).stdout
        self.assertIn("made by step testpipe.total", text)
        self.assertIn("made by step testpipe.numbers", text)
        self.assertIn('"n":5', text)
        chain = json.loads(self.run_cli("lineage", "testpipe.total.out", "--json", check=EXIT_OK).stdout)
        self.assertEqual([c["step"] for c in chain], ["total", "square", "numbers"])
        self.assertEqual(chain[1]["inputs"]["out"], chain[2]["digest"])
        dot = self.run_cli("lineage", "testpipe.total.out", "--dot", check=EXIT_OK).stdout
        self.assertTrue(dot.startswith("digraph lineage {"))
        self.assertIn("testpipe.numbers.out@1", dot)
        if shutil.which("dot"):
            svg = subprocess.run(["dot", "-Tsvg"], input=dot, text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            self.assertEqual(svg.returncode, 0, svg.stderr)
            self.assertIn("<svg", svg.stdout)
            self.assertIn("testpipe.total.out@1", svg.stdout)


class FailureTest(PipelineTestCase):
    def test_failure_then_resume(self):
        failed = self.pipe(check=EXIT_FAILURE, AMPHORA_TEST_FAIL="total")
        self.assertIn("step 'total' failed: asked to fail", failed.stderr)
        run = self.runs()[-1]
        self.assertEqual(run["status"], "failed")
        self.assertEqual(self.statuses(run), {"numbers": "ran", "square": "ran", "total": "failed"})
        resumed = self.pipe()
        self.assertEqual(self.statuses(self.runs()[-1]), {"numbers": "cached", "square": "cached", "total": "ran"})
        self.assertEqual(self.executed(), ["numbers", "square", "total"])

    def test_a_step_message_cannot_drive_the_terminal(self):
        message = "bad \x1b[2J\x1b]0;owned\x07 input\u009b"
        failed = self.pipe(check=EXIT_FAILURE, AMPHORA_TEST_FAIL="total", AMPHORA_TEST_FAIL_MESSAGE=message)
        for stream in (failed.stdout, failed.stderr):
            self.assertNotIn("\x1b", stream)
            self.assertNotIn("\x07", stream)
            self.assertNotIn("\u009b", stream)
        escaped = "bad \\x1b[2J\\x1b]0;owned\\x07 input\\u009b"
        self.assertIn("      error: " + escaped + "\n", failed.stdout)  # the step's line
        self.assertIn("step 'total' failed: " + escaped, failed.stderr)         # the run's verdict
        # The run record keeps the message as it was.
        self.assertEqual(self.runs()[-1]["error"], "step 'total' failed: " + message)


class ProgramOptionsTest(PipelineTestCase):
    def test_a_mistyped_store_is_refused_not_created(self):
        typo = self.path("stroe")
        proc = subprocess.run([PIPELINE, "--store", typo], text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=self.env(), timeout=120)
        self.assertEqual(proc.returncode, EXIT_USAGE, proc.stdout + proc.stderr)
        self.assertIn("stroe", proc.stderr)
        self.assertIn("give --init to create a store there", proc.stderr)
        self.assertFalse(os.path.exists(typo))
        self.assertEqual(self.executed(), [])
        # --init creates it; afterwards the store opens without it.
        subprocess.run([PIPELINE, "--store", typo, "--init", "-q"], check=True, env=self.env(), timeout=120)
        proc = subprocess.run([PIPELINE, "--store", typo], text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=self.env(), timeout=120)
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        self.assertIn("3 cached", proc.stdout)

    def test_the_default_store_is_created_without_init(self):
        work = self.path("work")
        os.mkdir(work)
        env = self.env()
        env.pop("AMPHORA_STORE", None)
        proc = subprocess.run([os.path.abspath(PIPELINE), "-q"], cwd=work, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, timeout=120)
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        self.assertTrue(os.path.isdir(os.path.join(work, ".amphora", "objects")))

    def test_help_lists_the_steps_and_their_parameters(self):
        proc = subprocess.run([PIPELINE, "--help"], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=60)
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        steps = proc.stdout[proc.stdout.index("Steps (set a parameter with --set STEP.PARAM=VALUE"):]
        self.assertEqual(steps.splitlines()[1:4], ["  numbers  n=10", "  square", "  total  offset=0"])
        self.assertIn("--init", proc.stdout)
        self.assertIn("--print", proc.stdout)

    def test_print_shows_a_steps_outputs(self):
        proc = self.pipe("--print", "total", "--print", "square", "--set", "numbers.n=4")
        self.assertIn("total.out = 14\n", proc.stdout)
        self.assertIn("square.out = [0,1,4,9]\n", proc.stdout)
        # With --quiet only the values are printed; a cached run prints them too.
        proc = self.pipe("--print", "total", "-q", "--set", "numbers.n=4")
        self.assertEqual(proc.stdout, "total.out = 14\n")
        proc = self.pipe("--print", "nosuch", check=EXIT_USAGE)
        self.assertIn("no step 'nosuch'", proc.stderr)


class OutputTest(PipelineTestCase):
    def test_output_that_cannot_be_written_fails_the_program(self):
        # A full disk behind standard output: the run itself is fine, the
        # program's report of it is lost, and the exit status says so.
        for args in ([], ["--quiet", "--force", "*"]):
            with open("/dev/full", "w") as full:
                proc = subprocess.run([PIPELINE, "--store", self.store, "--init", *args], text=True, stdout=full,
                                      stderr=subprocess.PIPE, env=self.env(), timeout=120)
            if args:
                self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)  # --quiet prints nothing to lose
                continue
            self.assertEqual(proc.returncode, EXIT_FAILURE, proc.stderr)
            self.assertIn("testpipe: cannot write to standard output: No space left on device", proc.stderr)
        self.assertEqual(self.statuses(self.runs()[0]), {"numbers": "ran", "square": "ran", "total": "ran"})
        # The command line says why, even when the failing write was long
        # before the end (runs --json of a dozen runs is tens of kilobytes).
        for _ in range(12):
            self.pipe("--quiet")
        with open("/dev/full", "w") as full:
            proc = self.run_cli("runs", "--json", stdout=full)
        self.assertEqual(proc.returncode, EXIT_FAILURE)
        self.assertIn("cannot write to standard output: No space left on device", proc.stderr)


class ConcurrencyTest(PipelineTestCase):
    def test_two_processes_compute_each_step_once(self):
        a = self.start(AMPHORA_TEST_DELAY="1.5")
        b = self.start(AMPHORA_TEST_DELAY="1.5")
        out_a, err_a = a.communicate(timeout=120)
        out_b, err_b = b.communicate(timeout=120)
        self.assertEqual(a.returncode, 0, err_a)
        self.assertEqual(b.returncode, 0, err_b)
        self.assertEqual(sorted(self.executed()), ["numbers", "square", "total"])
        self.assertIn("waiting for another run", out_a + out_b)
        self.assertEqual(self.run_cli("verify", check=EXIT_OK).returncode, 0)
        runs = self.runs()
        self.assertEqual(len(runs), 2)
        self.assertEqual(sorted(s["status"] for r in runs for s in r["steps"]), ["cached"] * 3 + ["ran"] * 3)

    def test_a_killed_lease_holder_does_not_block(self):
        marker = self.path("started")
        holder = self.start(AMPHORA_TEST_DELAY="600", AMPHORA_TEST_MARKER=marker)
        deadline = time.time() + 60
        while not os.path.exists(marker) and time.time() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(marker), "the first run never started its step")
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=60)
        started = time.time()
        second = self.pipe()
        self.assertLess(time.time() - started, 60)
        self.assertEqual(self.statuses(self.runs()[-1]), {"numbers": "ran", "square": "ran", "total": "ran"})
        self.assertEqual(self.run_cli("verify", check=EXIT_OK).returncode, 0)
        # The killed run's record says it never finished.
        self.assertEqual(self.runs()[0]["status"], "running")


class GcKeepLastTest(PipelineTestCase):
    def test_keep_last_drops_old_versions_and_what_only_they_reached(self):
        for n in (3, 4, 5):
            self.pipe("--set", f"numbers.n={n}")
        versions = json.loads(self.run_cli("ls", "testpipe.numbers.out", "--json", check=EXIT_OK).stdout)
        self.assertEqual(len(versions), 3)
        dry = self.run_cli("gc", "--keep-last", "1", "--grace", "0", "--dry-run", check=EXIT_OK).stdout
        self.assertIn("would drop 6 name versions", dry)
        self.assertIn("testpipe.numbers.out@1", dry)
        out = self.run_cli("gc", "--keep-last", "1", "--grace", "0", check=EXIT_OK).stdout
        self.assertIn("dropped 6 name versions older than the last 1 and 6 cache entries", out)
        self.assertIn("removed 6 artifacts", out)
        versions = json.loads(self.run_cli("ls", "testpipe.numbers.out", "--json", check=EXIT_OK).stdout)
        self.assertEqual([v["version"] for v in versions], [3])
        self.run_cli("verify", check=EXIT_OK)
        # The kept results are still cache hits; the dropped ones are misses.
        self.pipe("--set", "numbers.n=5")
        self.assertEqual(set(self.statuses(self.runs()[-1]).values()), {"cached"})
        self.pipe("--set", "numbers.n=3")
        self.assertEqual(self.statuses(self.runs()[-1])["numbers"], "ran")


class LargeHistoryTest(PipelineTestCase):
    """Run records are read one at a time and scanned, not built: listing
    runs, and explaining a miss from the history, stay near one record's
    size; a record over the 16 MiB limit is described, not read."""

    BOUND_MB = 160
    # Under a sanitizer the peak is the sanitizer's (tests/CMakeLists.txt).
    CHECK_MEMORY = not os.environ.get("AMPHORA_TEST_SANITIZED")

    def assert_peak_below(self, peak, bound):
        if self.CHECK_MEMORY:
            self.assertLess(peak, bound)

    def big_record(self, run_id, steps, started):
        """A run record of testpipe with `steps` steps (about 0.75 KB each, as a
        real step's weighs), every one 'ran' with well-formed ingredients."""
        ingredients = {"version": "1", "code": "c" * 64, "params": {"n": 10, "note": "x" * 400},
                       "inputs": {"in": "sha256:" + "0" * 64}}
        record = {"pipeline": "testpipe", "run": run_id, "status": "succeeded", "started_at": started,
                  "ended_at": started, "steps": [{"name": f"s{i}", "status": "ran", "duration": 0.5,
                                                  "ingredients": ingredients} for i in range(steps)]}
        folder = os.path.join(self.store, "runs", "testpipe")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, run_id + ".json")
        with open(path, "w") as f:
            json.dump(record, f, indent=1)
        return os.path.getsize(path)

    def test_runs_and_a_miss_read_the_history_one_record_at_a_time(self):
        self.pipe()  # a real run first: the store and one record
        sizes = [self.big_record(f"big{i}", 20000, f"2020-01-01T00:00:0{i}Z") for i in range(6)]
        self.assertTrue(all(12 << 20 < size < 16 << 20 for size in sizes), sizes)
        status, out, err, peak = cli_support.peak_rss_mb([cli_support.CLI, "--store", self.store, "runs"])
        self.assertEqual(status, EXIT_OK, err)
        print(f"runs over six records of {sizes[0] >> 20} MiB: peak RSS {peak:.0f} MiB", file=sys.stderr)
        self.assert_peak_below(peak, self.BOUND_MB)
        lines = out.splitlines()
        self.assertEqual(len(lines), 7)
        self.assertTrue(lines[0].startswith("big0  testpipe  succeeded  2020-01-01 00:00:00"), lines[0])
        self.assertIn("20000 ran, 0 cached", lines[0])
        # A miss is explained from the history (the newest record of the real
        # run first, then the big ones for a step they name).
        status, out, err, peak = cli_support.peak_rss_mb([PIPELINE, "--store", self.store, "--init", "--set", "numbers.n=12"],
                                                         env=self.env())
        self.assertEqual(status, EXIT_OK, err)
        print(f"a run explaining its misses over that history: peak RSS {peak:.0f} MiB", file=sys.stderr)
        self.assert_peak_below(peak, self.BOUND_MB)
        self.assertIn("parameter `n` changed from 10 to 12", out)
        # why over the big records finds the real runs' steps.
        self.assertIn("numbers", self.run_cli("why", "testpipe", check=EXIT_OK).stdout)

    def test_a_record_over_the_limit_is_described_not_read(self):
        self.pipe()
        size = self.big_record("huge", 23000, "2020-01-01T00:00:00Z")
        self.assertGreater(size, 16 << 20)
        status, out, err, peak = cli_support.peak_rss_mb([cli_support.CLI, "--store", self.store, "runs"])
        self.assertEqual(status, EXIT_OK, err)
        self.assertIn("huge.json", err)
        self.assertIn(str(16 << 20), err)
        self.assertEqual(len(out.splitlines()), 1)  # the real run alone
        self.assert_peak_below(peak, 64)
        self.assertEqual(len(self.runs()), 1)


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--pipeline" in args:
        i = args.index("--pipeline")
        PIPELINE = os.path.abspath(args[i + 1])
        del sys.argv[i + 1:i + 3]
    _, argv = cli_support.parse_args("test_pipeline_cli.py")
    if not PIPELINE:
        sys.exit("usage: test_pipeline_cli.py --cli PATH --pipeline PATH")
    unittest.main(argv=argv)
