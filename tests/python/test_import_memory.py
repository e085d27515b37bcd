"""Importing a file larger than the memory the import may use: `amphora
import` of a CSV streams it, so the importing process's peak resident memory
stays under a fixed bound whatever the file's size.

The file's size comes from $AMPHORA_IMPORT_TEST_MB (default 96; `make stress`
uses 1024). The bound is what an import may hold: the reader's block, a batch
per column file, the dictionaries of the string columns within their limits,
the hashing threads' buffers, and the program itself.
"""

import json
import os
import random
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_support as cs  # noqa: E402

FILE_MB = int(os.environ.get("AMPHORA_IMPORT_TEST_MB", "96"))
BOUND_MB = 80


def peak_rss_mb(args):
    """Runs the CLI with `args`; returns (exit status, stderr, peak RSS in MiB) of that process alone."""
    proc = subprocess.Popen([cs.CLI, *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    with proc.stderr:
        stderr = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, stderr, usage.ru_maxrss / 1024


def write_csv(path, target_bytes):
    """A CSV of every inferred type: integers, floats, bools, timestamps, words
    from a small vocabulary (dictionary-encoded), unique text (plain), and
    nulls. Returns the number of rows."""
    rng = random.Random(7)
    words = [f"word{i}" for i in range(5000)]
    rows = 0
    size = 0
    with open(path, "w", encoding="utf-8", newline="") as f:
        header = "id,price,ok,when,word,note,maybe\n"
        f.write(header)
        size += len(header)
        chunk = []
        while size < target_bytes:
            i = rows
            note = f'"note {i}, with ""quotes"""' if i % 97 == 0 else f"unique text {i * 7919}"
            maybe = "" if i % 5 == 0 else str(i % 1000)
            line = (f"{i},{rng.random() * 1000:.3f},{'true' if i % 3 else 'false'},"
                    f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z,{words[int(rng.paretovariate(1.2)) % len(words)]},"
                    f"{note},{maybe}\n")
            chunk.append(line)
            size += len(line)
            rows += 1
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))
    return rows


class ImportMemoryTest(cs.StoreTestCase):
    def test_csv_import_stays_within_bound(self):
        path = self.path("big.csv")
        rows = write_csv(path, FILE_MB << 20)
        size_mb = os.path.getsize(path) / (1 << 20)
        status, stderr, peak = peak_rss_mb(["--store", self.store, "import", path, "--name", "big"])
        self.assertEqual(status, cs.EXIT_OK, stderr)
        print(f"csv: {size_mb:.0f} MiB, {rows} rows imported with a peak RSS of {peak:.1f} MiB "
              f"(bound {BOUND_MB} MiB)", file=sys.stderr)
        self.assertLess(peak, BOUND_MB, f"importing a {size_mb:.0f} MiB CSV peaked at {peak:.1f} MiB")
        shown = self.run_cli("show", "big", "--json", check=cs.EXIT_OK)
        meta = json.loads(shown.stdout)["meta"]
        self.assertEqual(meta["rows"], rows)
        self.assertEqual([c["type"] for c in meta["columns"]],
                         ["int64", "float64", "bool", "timestamp[ns]", "string", "string", "int64"])
        self.assertEqual([c["encoding"] for c in meta["columns"][4:6]], ["dictionary", "plain"])
        self.assertEqual(meta["columns"][6]["null_count"], (rows + 4) // 5)
        self.run_cli("verify", "big", check=cs.EXIT_OK)


if __name__ == "__main__":
    _, argv = cs.parse_args(sys.argv[0])
    unittest.main(argv=argv, verbosity=2)
