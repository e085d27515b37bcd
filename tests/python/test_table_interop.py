#!/usr/bin/python3
"""Tables between pandas and the `amphora` CLI through CSV.

Run as:
    /usr/bin/python3 tests/python/test_table_interop.py --cli build/bin/amphora

CSV files written by pandas import with the expected column types; exports
read back with pandas.read_csv equal to the source; bad CSV is refused with
one line naming the line number.
"""

import json
import os
import sys
import unittest

import numpy as np
import pandas as pd

from cli_support import EXIT_OK, StoreTestCase, parse_args, write_bytes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import amphora_reader as reader  # noqa: E402


def sample_frame(n=500):
    rng = np.random.default_rng(5)
    words = np.array(["caf\u00e9", "\u6771\u4eac", "\U0001F680 launch", "a,b", 'say "hi"', "two\nlines", " pad "],
                     dtype=object)
    price = rng.standard_normal(n) * 1e3
    price[::7] = np.nan
    count = pd.array(rng.integers(-10**12, 10**12, n), dtype="Int64")
    count[::5] = pd.NA
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64) * 3 - 100,
        "price": price,
        "ok": rng.integers(0, 2, n).astype(bool),
        "word": words[rng.integers(0, len(words), n)],
        "count": count,
        "tiny": np.full(n, 5e-324),
        "whole": np.arange(n, dtype=np.float64),
        "when": pd.to_datetime(1_700_000_000_000_000_000 + rng.integers(-10**15, 10**15, n)).where(
            np.arange(n) % 9 != 4),
    })


class TableInteropTest(StoreTestCase):
    def show(self, ref):
        return json.loads(self.run_cli("show", ref, "--json", check=EXIT_OK).stdout)

    def test_pandas_csv_round_trips(self):
        df = sample_frame()
        src = self.path("in.csv")
        df.to_csv(src, index=False)
        self.run_cli("import", src, "--name", "t", check=EXIT_OK)
        meta = self.show("t")["meta"]
        self.assertEqual(meta["rows"], len(df))
        types = {c["name"]: c["type"] for c in meta["columns"]}
        self.assertEqual(types, {"id": "int64", "price": "float64", "ok": "bool", "word": "string",
                                 "count": "int64", "tiny": "float64", "whole": "float64",
                                 "when": "naive_timestamp[ns]"})
        nulls = {c["name"]: c["null_count"] for c in meta["columns"]}
        self.assertEqual(nulls["price"], int(df["price"].isna().sum()))
        self.assertEqual(nulls["count"], int(df["count"].isna().sum()))
        out = self.path("out.csv")
        self.run_cli("export", "t", out, check=EXIT_OK)
        got, want = pd.read_csv(out, parse_dates=["when"]), pd.read_csv(src, parse_dates=["when"])
        # pandas wrote the timestamps naive: they stay naive, on export too.
        self.assertIsNone(got["when"].dt.tz)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        pd.testing.assert_series_equal(want["when"], df["when"], check_names=False)

    def test_timestamps_keep_their_zone_or_its_absence(self):
        src = self.path("times.csv")
        with open(src, "w") as f:
            f.write("naive,utc,mixed\n2024-05-01 12:00:00,2024-05-01T12:00:00Z,2024-05-01\n"
                    "2024-05-02,2024-05-02T00:00:00.5+00:00,2024-05-02T00:00:00Z\n")
        self.run_cli("import", src, "--name", "times", check=EXIT_OK)
        types = {c["name"]: c["type"] for c in self.show("times")["meta"]["columns"]}
        # A column is UTC when any of its fields says so (the others are read as UTC).
        self.assertEqual(types, {"naive": "naive_timestamp[ns]", "utc": "timestamp[ns]", "mixed": "timestamp[ns]"})
        out = self.path("times-out.csv")
        self.run_cli("export", "times", out, check=EXIT_OK)
        with open(out) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[1], "2024-05-01T12:00:00.000000000,2024-05-01T12:00:00.000000000Z,"
                                   "2024-05-01T00:00:00.000000000Z")
        got = pd.read_csv(out, parse_dates=["naive", "utc"])
        self.assertIsNone(got["naive"].dt.tz)
        self.assertEqual(str(got["utc"].dt.tz), "UTC")
        shown = self.run_cli("show", "times", check=EXIT_OK).stdout
        self.assertIn('"min": "2024-05-01T12:00:00.000000000"', shown)
        self.assertIn('"max": "2024-05-02T00:00:00.500000000Z"', shown)
        frame = reader.load(self.store, "times")
        self.assertEqual(frame["naive"].iloc[0], pd.Timestamp("2024-05-01 12:00:00"))

    def test_a_large_dictionary_column(self):
        rng = np.random.default_rng(9)
        df = pd.DataFrame({"city": np.array(["Oslo", "Z\u00fcrich", "Lima"], dtype=object)[rng.integers(0, 3, 20000)],
                           "n": rng.integers(0, 100, 20000)})
        src = self.path("cities.csv")
        df.to_csv(src, index=False)
        self.run_cli("import", src, "--name", "cities", check=EXIT_OK)
        column = {c["name"]: c for c in self.show("cities")["meta"]["columns"]}["city"]
        self.assertEqual(column["encoding"], "dictionary")
        self.assertEqual(column["distinct"], 3)
        out = self.path("cities-out.csv")
        self.run_cli("export", "cities", out, check=EXIT_OK)
        pd.testing.assert_frame_equal(pd.read_csv(out), df, check_exact=True)

    def assert_refused(self, text, *mentions):
        path = self.path("bad.csv")
        write_bytes(path, text)
        proc = self.run_cli("import", path, "--name", "bad")
        self.assertNotEqual(proc.returncode, EXIT_OK)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("amphora: "), proc.stderr)
        for m in mentions:
            self.assertIn(m, lines[0])

    def test_bad_csv_names_the_line(self):
        self.assert_refused(b"a,b\n1,2\n3,4\n5\n", "bad.csv", "line 4 has 1 fields, the header has 2")
        self.assert_refused(b"a,b\n1,2\n3,\xc3\x28\n", "line 3, column 'b': not valid UTF-8")
        self.assert_refused(b"a\n\"open\n", "not closed")


if __name__ == "__main__":
    _, argv = parse_args(sys.argv[0])
    unittest.main(argv=argv)
