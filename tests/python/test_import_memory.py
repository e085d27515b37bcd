"""Importing a file larger than the memory the import may use: `amphora
import` of a CSV or JSON lines file streams it, so the importing process's
peak resident memory stays under a fixed bound whatever the file's size.

The file's size comes from $AMPHORA_IMPORT_TEST_MB (default 128; `make stress`
uses 1024). The bound is what an import may hold: the reader's block (and for
JSON lines a chunk of records in columns), a batch per column file, the
dictionaries of the string columns within their limits, the hashing
threads' buffers, and the program itself.

Wide files are bounded too: an import's memory grows by about 12 KiB per
column (its files' entries in the manifest, its plan and writer), the column
files' batches share 32 MiB, and a CSV of more than 16,384 columns or JSON
lines with more than 16,384 distinct places are refused; the open files stay
under the process's limit whatever the number of columns.
"""

import json
import os
import random
import resource
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_support as cs  # noqa: E402

FILE_MB = int(os.environ.get("AMPHORA_IMPORT_TEST_MB", "128"))
BOUND_MB = 96
MAX_COLUMNS = 16384


def wide_bound_mb(columns):
    """README: 128 MiB plus about 12 KiB per column."""
    return 128 + columns * 12 / 1024


def few_open_files():
    """Run in the child: an open-file limit far below the number of column files."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def peak_rss_mb(args, preexec_fn=None):
    """Runs the CLI with `args`; returns (exit status, stderr, peak RSS in MiB) of that process alone."""
    status, _, stderr, peak = cs.peak_rss_mb([cs.CLI, *args], preexec_fn=preexec_fn)
    return status, stderr, peak


def write_lines(path, target_bytes, header, line_of):
    """Writes `header`, then line_of(i) for i = 0, 1, ... until the file holds
    `target_bytes`; returns how many lines followed the header."""
    count = 0
    size = len(header)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(header)
        chunk = []
        while size < target_bytes:
            line = line_of(count)
            chunk.append(line)
            size += len(line)
            count += 1
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk))
    return count


def write_csv(path, target_bytes):
    """A CSV of every inferred type: integers, floats, bools, timestamps, words
    from a small vocabulary (dictionary-encoded), unique text (plain), and
    nulls. Returns the number of rows."""
    rng = random.Random(7)
    words = [f"word{i}" for i in range(5000)]

    def row(i):
        note = f'"note {i}, with ""quotes"""' if i % 97 == 0 else f"unique text {i * 7919}"
        maybe = "" if i % 5 == 0 else str(i % 1000)
        return (f"{i},{rng.random() * 1000:.3f},{'true' if i % 3 else 'false'},"
                f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z,{words[int(rng.paretovariate(1.2)) % len(words)]},"
                f"{note},{maybe}\n")

    return write_lines(path, target_bytes, "id,price,ok,when,word,note,maybe\n", row)


def write_jsonl(path, target_bytes):
    """COCO-style detection records: a unique file path, sizes, boxes as
    lists of four floats, labels from a small vocabulary, crowd flags, an
    optional caption and a field whose type varies. Returns the number of
    records."""
    rng = random.Random(11)
    labels = ["person", "car", "dog", "cat", "bicycle", "bus", "truck", "bird"]

    def record(i):
        n = rng.randrange(0, 6)
        rec = {"filepath": f"images/{i:08d}.jpg", "width": 640, "height": 480 + i % 7,
               "bboxes": [[round(rng.uniform(0, 600), 2), round(rng.uniform(0, 400), 2),
                           round(rng.uniform(10, 640), 2), round(rng.uniform(10, 480), 2)] for _ in range(n)],
               "labels": [rng.choice(labels) for _ in range(n)], "iscrowd": i % 11 == 0,
               "extra": i if i % 2 else str(i)}
        if i % 3 == 0:
            rec["caption"] = f"caption {i}"
        return json.dumps(rec) + "\n"

    return write_lines(path, target_bytes, "", record)


class ImportMemoryTest(cs.StoreTestCase):
    def import_within_bound(self, path, count, what, bound=BOUND_MB, preexec_fn=None):
        """Imports `path` as "big", checks the peak RSS against the bound and
        returns the artifact's metadata."""
        size_mb = os.path.getsize(path) / (1 << 20)
        status, stderr, peak = peak_rss_mb(["--store", self.store, "import", path, "--name", "big"], preexec_fn)
        self.assertEqual(status, cs.EXIT_OK, stderr)
        print(f"{what}: {size_mb:.2f} MiB, {count} imported with a peak RSS of {peak:.1f} MiB "
              f"(bound {bound:.0f} MiB)", file=sys.stderr)
        self.assertLess(peak, bound, f"importing {size_mb:.2f} MiB of {what} peaked at {peak:.1f} MiB")
        self.run_cli("verify", "big", check=cs.EXIT_OK)
        return json.loads(self.run_cli("show", "big", "--json", check=cs.EXIT_OK).stdout)["meta"]

    def test_csv_import_stays_within_bound(self):
        path = self.path("big.csv")
        rows = write_csv(path, FILE_MB << 20)
        meta = self.import_within_bound(path, rows, "CSV")
        self.assertEqual(meta["rows"], rows)
        self.assertEqual([c["type"] for c in meta["columns"]],
                         ["int64", "float64", "bool", "timestamp[ns]", "string", "string", "int64"])
        self.assertEqual([c["encoding"] for c in meta["columns"][4:6]], ["dictionary", "plain"])
        self.assertEqual(meta["columns"][6]["null_count"], (rows + 4) // 5)

    def test_jsonl_import_stays_within_bound(self):
        path = self.path("big.jsonl")
        records = write_jsonl(path, FILE_MB << 20)
        meta = self.import_within_bound(path, records, "JSON lines")
        self.assertEqual(meta["count"], records)
        fields = {f["name"]: f for f in meta["schema"]["fields"]}
        self.assertEqual(fields["extra"]["kind"], "json")
        self.assertEqual(fields["bboxes"]["items"]["items"]["kind"], "float")
        self.assertEqual(fields["caption"]["missing_count"], records - (records + 2) // 3)

    def test_widest_csv_stays_within_bound(self):
        # Two rows of nothing but commas: every column an empty string column.
        path = self.path("wide.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("," * (MAX_COLUMNS - 1) + "\n" + "," * (MAX_COLUMNS - 1) + "\n")
        meta = self.import_within_bound(path, MAX_COLUMNS, "CSV of empty columns", wide_bound_mb(MAX_COLUMNS),
                                        few_open_files)
        self.assertEqual(len(meta["columns"]), MAX_COLUMNS)
        self.assertEqual(meta["columns"][-1]["name"], f"column {MAX_COLUMNS}")
        self.assertEqual(meta["columns"][-1]["null_count"], 1)

    def test_jsonl_of_distinct_keys_stays_within_bound(self):
        # Each record its own key: every record has a slot in every column.
        keys = int(os.environ.get("AMPHORA_IMPORT_TEST_KEYS", "6000"))
        path = self.path("keys.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({f"k{i}": i}) + "\n" for i in range(keys))
        meta = self.import_within_bound(path, keys, "JSON lines of distinct keys", wide_bound_mb(keys), few_open_files)
        fields = meta["schema"]["fields"]
        self.assertEqual(len(fields), keys)
        self.assertEqual(fields[-1]["name"], f"k{keys - 1}")
        self.assertEqual(fields[-1]["missing_count"], keys - 1)
        out = self.path("keys_out.jsonl")
        self.run_cli("export", "big", out, check=cs.EXIT_OK)
        with open(out, encoding="utf-8") as f:
            self.assertEqual([json.loads(line) for line in f], [{f"k{i}": i} for i in range(keys)])

    def test_more_columns_than_the_cap_are_refused(self):
        path = self.path("too_wide.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("," * MAX_COLUMNS + "\n")
        status, stderr, peak = peak_rss_mb(["--store", self.store, "import", path, "--name", "w"])
        self.assertEqual(status, cs.EXIT_USAGE, stderr)
        self.assertIn(f"line 1: the header has {MAX_COLUMNS + 1} columns; a CSV file imports with at most {MAX_COLUMNS}",
                      stderr)
        path = self.path("too_many_keys.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({f"k{i}": i}) + "\n" for i in range(MAX_COLUMNS + 10))
        status, stderr, peak = peak_rss_mb(["--store", self.store, "import", path, "--name", "w"])
        self.assertEqual(status, cs.EXIT_USAGE, stderr)
        self.assertIn(f"too_many_keys.jsonl:{MAX_COLUMNS}, key \"k{MAX_COLUMNS - 1}\": brings the distinct fields and "
                      f"lists, nested ones included, past {MAX_COLUMNS}", stderr)
        self.assertLess(peak, BOUND_MB)
        self.assertIn("no names", self.run_cli("ls", check=cs.EXIT_OK).stdout)


if __name__ == "__main__":
    _, argv = cs.parse_args(sys.argv[0])
    unittest.main(argv=argv, verbosity=2)
