#!/usr/bin/python3
"""The document-frequency demo (examples/docfreq, `make demo`): the demo
script's three runs, counts checked against an independent count in Python,
the stored model read back with NumPy, and edits to the corpus explained by
file.

Run as:
    /usr/bin/python3 tests/python/test_docfreq.py --cli build/bin/amphora \
        --docfreq build/bin/amphora_docfreq --demo scripts/demo.sh --corpus examples/docfreq/corpus
"""

import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import cli_support
from cli_support import EXIT_OK, EXIT_FAILURE

import numpy as np

DOCFREQ = DEMO = CORPUS = ""


def expected_counts(corpus):
    """In how many .txt files under `corpus` each word occurs, by the
    tokenize step's rules: runs of ASCII letters and apostrophes,
    lower-cased, at least 2 long."""
    df = collections.Counter()
    for path in glob.glob(os.path.join(corpus, "**", "*.txt"), recursive=True):
        with open(path, "rb") as f:
            text = f.read().decode("latin-1")
        df.update({w.lower() for w in re.findall(r"[A-Za-z']+", text) if len(w) >= 2})
    return dict(df)


def read_strings(directory, path):
    offsets = np.load(os.path.join(directory, path + ".offsets.npy"))
    with open(os.path.join(directory, path + ".bytes"), "rb") as f:
        data = f.read()
    return [data[offsets[i]:offsets[i + 1]].decode() for i in range(len(offsets) - 1)]


class DocfreqTest(cli_support.StoreTestCase):
    def setUp(self):
        super().setUp()
        self.corpus = self.path("corpus")
        shutil.copytree(CORPUS, self.corpus)

    def docfreq(self, *args, check=EXIT_OK):
        proc = subprocess.run([DOCFREQ, "--store", self.store, "--init", "--corpus", self.corpus, *args], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if check is not None:
            self.assertEqual(proc.returncode, check, f"docfreq {args}: {proc.stdout}\n{proc.stderr}")
        return proc

    def step_lines(self, output):
        """step name -> (status, reason) from a run's per-step lines."""
        steps = {}
        for line in output.splitlines():
            m = re.match(r"  (ran|cached|failed|skipped)\s+[\d.]+ s  (\w+)(?:  \((.*)\))?$", line)
            if m:
                steps[m.group(2)] = (m.group(1), m.group(3) or "")
        return steps

    def test_demo_script_runs_cached_then_reruns_what_top_k_reaches(self):
        env = dict(os.environ, AMPHORA_STORE=self.store)
        build = os.path.dirname(os.path.dirname(DOCFREQ))
        proc = subprocess.run(["bash", DEMO, build], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        out = proc.stdout
        runs = out.split("\n== ")
        self.assertIn("(5 ran, 0 cached)", runs[1])
        second = self.step_lines(runs[2])
        self.assertEqual(second, {s: ("cached", "") for s in ("read", "tokenize", "count", "model", "report")})
        third = self.step_lines(runs[3])
        self.assertEqual(third["model"], ("ran", "parameter `top_k` changed from 1000 to 500"))
        self.assertEqual(third["report"], ("ran", "input `model` changed"))
        for step in ("read", "tokenize", "count"):
            self.assertEqual(third[step][0], "cached")
        self.assertIn("500 words from 60 documents", runs[3])
        # The size table: every layout, the stored one the smallest and well
        # under the JSON text.
        sizes = dict(re.findall(r"^  (JSON.*?|arrays.*?)\s+(\d+)\s+\d+%$", out, re.M))
        self.assertEqual(len(sizes), 5, out)
        json_bytes = int(sizes["JSON object {word: count}"])
        stored = int(sizes["arrays + sort(count) + delta + squeeze + lz4 (stored)"])
        self.assertEqual(min(int(v) for v in sizes.values()), stored)
        self.assertLess(stored, 0.8 * json_bytes)
        self.assertIn("made by step docfreq.read", out)
        self.assertIn("read outside the store: 60 entries: 01-harbour.txt", out)
        self.run_cli("verify", check=EXIT_OK)

    def test_demo_script_twice_on_a_kept_store(self):
        env = dict(os.environ, AMPHORA_STORE=self.store)
        build = os.path.dirname(os.path.dirname(DOCFREQ))
        for attempt in range(2):
            proc = subprocess.run(["bash", DEMO, build], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, timeout=600)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # The second time round every run is served from the cache.
        self.assertEqual(proc.stdout.count("(0 ran, 5 cached)"), 3)

    def test_a_corpus_path_is_taken_as_it_is(self):
        odd = self.path("it's a #corpus: [x]")
        shutil.copytree(self.corpus, odd)
        proc = subprocess.run([DOCFREQ, "--store", self.store, "--init", f"--corpus={odd}"], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        runs = self.run_cli("runs", "--json", check=EXIT_OK).stdout
        self.assertEqual(json.loads(runs)[-1]["overrides"]["read"]["corpus"], odd)

    def test_counts_and_model_match_an_independent_count(self):
        self.docfreq("--set", "model.top_k=300")
        want = expected_counts(self.corpus)
        df_dir = self.path("df")
        self.run_cli("export", "docfreq.count.df", df_dir, check=EXIT_OK)
        got = dict(zip(read_strings(df_dir, "keys"), np.load(os.path.join(df_dir, "values.npy")).tolist()))
        self.assertEqual(got, want)

        # The model, read with NumPy alone: words merged into bytes with
        # offsets, frequencies ascending.
        model_dir = self.path("model")
        self.run_cli("export", "docfreq.model.model", model_dir, check=EXIT_OK)
        data = np.load(os.path.join(model_dir, "words.npy")).tobytes()
        offsets = np.load(os.path.join(model_dir, "offsets.npy"))
        freqs = np.load(os.path.join(model_dir, "frequencies.npy"))
        words = [data[offsets[i]:offsets[i + 1]].decode() for i in range(len(offsets) - 1)]
        top = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:300][::-1]
        self.assertEqual(words, [w for w, _ in top])
        self.assertEqual(freqs.dtype, np.int64)
        self.assertEqual(freqs.tolist(), [n for _, n in top])

        # Stored sorted, delta-coded, squeezed and LZ4-compressed.
        shown = self.run_cli("show", "docfreq.model.model", check=EXIT_OK).stdout
        freq_child = re.search(r"^  frequencies\s+(sha256:\w+)", shown, re.M).group(1)
        child = self.run_cli("show", freq_child, check=EXIT_OK).stdout
        self.assertIn("tensor.npy.lz4", child)
        self.assertRegex(child, r'"delta"')
        self.assertRegex(child, r'"squeeze"')

    def test_corpus_edits_rerun_what_they_reach_and_say_which_file(self):
        self.docfreq()
        self.assertEqual(set(s for s, _ in self.step_lines(self.docfreq().stdout).values()), {"cached"})

        # Punctuation only: the text changed, its words did not. read and
        # tokenize rerun; tokenize's output is the same, so count stays cached.
        river = os.path.join(self.corpus, "03-river.txt")
        with open(river) as f:
            text = f.read()
        with open(river, "w") as f:
            f.write(text.replace(".", "!", 1))
        steps = self.step_lines(self.docfreq().stdout)
        self.assertEqual(steps["read"], ("ran", "external input `03-river.txt` changed"))
        self.assertEqual(steps["tokenize"], ("ran", "input `texts` changed"))
        for step in ("count", "model", "report"):
            self.assertEqual(steps[step], ("cached", ""), step)

        # A new document with new words reaches every step.
        with open(os.path.join(self.corpus, "99-new.txt"), "w") as f:
            f.write("Zebras and zeppelins, the zebras said.\n")
        steps = self.step_lines(self.docfreq().stdout)
        self.assertEqual(steps["read"], ("ran", "external input `99-new.txt` added"))
        self.assertEqual(steps["count"], ("ran", "input `docs` changed"))

        # Not a .txt file: not read, so nothing changes.
        with open(os.path.join(self.corpus, "notes.md"), "w") as f:
            f.write("ignored\n")
        self.assertEqual(set(s for s, _ in self.step_lines(self.docfreq().stdout).values()), {"cached"})

        # Back to an earlier corpus: every step's key is one it had before.
        os.remove(os.path.join(self.corpus, "99-new.txt"))
        self.assertEqual(set(s for s, _ in self.step_lines(self.docfreq().stdout).values()), {"cached"})
        self.assertEqual(self.run_cli("lineage", "docfreq.read.texts", check=EXIT_OK).stdout.count("99-new"), 0)

        os.remove(os.path.join(self.corpus, "01-harbour.txt"))
        steps = self.step_lines(self.docfreq().stdout)
        self.assertEqual(steps["read"], ("ran", "external input `01-harbour.txt` removed"))
        self.assertIn("external input `01-harbour.txt` removed", self.run_cli("why", "docfreq", check=EXIT_OK).stdout)

    def test_a_missing_or_empty_corpus_fails_the_read_step_by_name(self):
        shutil.rmtree(self.corpus)
        proc = self.docfreq(check=EXIT_FAILURE)
        self.assertIn("no file or directory", proc.stdout + proc.stderr)
        self.assertIn(self.corpus, proc.stdout + proc.stderr)
        os.mkdir(self.corpus)
        proc = self.docfreq(check=EXIT_FAILURE)
        self.assertIn("holds no .txt files", proc.stdout + proc.stderr)
        self.assertEqual(self.step_lines(proc.stdout)["tokenize"][0], "skipped")


if __name__ == "__main__":
    args = sys.argv[1:]
    for flag in ("--docfreq", "--demo", "--corpus"):
        if flag in sys.argv:
            i = sys.argv.index(flag)
            globals()[flag[2:].upper()] = os.path.abspath(sys.argv[i + 1])
            del sys.argv[i:i + 2]
    _, argv = cli_support.parse_args("test_docfreq.py")
    if not (DOCFREQ and DEMO and CORPUS):
        sys.exit("usage: test_docfreq.py --cli PATH --docfreq PATH --demo PATH --corpus DIR")
    unittest.main(argv=argv)
