#!/usr/bin/python3
"""Record collections between Python's json module, the `amphora` CLI and
python/amphora_reader.py, through JSON lines.

Run as:
    /usr/bin/python3 tests/python/test_records_interop.py --cli build/bin/amphora

JSON lines written by `json.dumps` import; the reader loads the artifact to
the same records (types, key order, missing versus null); `export` writes
lines that `json.loads` reads back equal; bad lines are refused naming the
line; damage is found by the reader.
"""

import json
import os
import random
import sys
import unittest

from cli_support import EXIT_OK, StoreTestCase, parse_args, write_bytes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import amphora_reader as reader  # noqa: E402


def coco(n, seed=3):
    rng = random.Random(seed)
    labels = ["person", "car", "\u732b", "\U0001F436 dog", 'quote " and \\ slash', "tab\tnew\nline"]
    out = []
    for i in range(n):
        k = rng.randrange(0, 5)
        boxes = [[round(rng.uniform(0, 600), 2) for _ in range(4)] for _ in range(k)]
        r = {"filepath": f"images/{i:06d}.jpg", "width": rng.choice([640, 480, 1024]), "height": 480,
             "bboxes": boxes, "labels": [rng.choice(labels) for _ in range(k)],
             "areas": [round((b[2] - b[0]) * (b[3] - b[1]), 4) for b in boxes], "iscrowd": [0] * k}
        if i % 7 == 0:
            r["caption"] = None
        if i % 11 == 3:
            r = dict(reversed(list(r.items())))  # another key order
        if i % 13 == 5:
            del r["height"]
        out.append(r)
    return out


AWKWARD = [
    {"big": 2**64 - 1, "neg": -2**63, "beyond53": 2**53 + 1, "tiny": 5e-324, "huge": 1.7976931348623157e308,
     "third": 1 / 3, "negzero": -0.0, "whole": 3.0},
    {"mixed": "text", "nested": {"a": [[], [[1, 2], []], None], "b": {"c": {"d": [True, False, None]}}}},
    {"mixed": {"deep": [1, "two", None]}, "empty": {}, "list_of_empty": [{}, {}]},
    {"mixed": 5, "nums": [1, 2.5, -3]},
    None,
    {},
]


def typed(v):
    """The value with every number tagged by its type and dicts as ordered pairs,
    so equality also checks int versus float and key order."""
    if isinstance(v, dict):
        return ("dict", [(k, typed(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [typed(x) for x in v])
    if isinstance(v, float):
        return ("float", v.hex())
    return (type(v).__name__, v)


class RecordsInteropTest(StoreTestCase):

    def write_jsonl(self, name, records):
        text = "".join(json.dumps(r, ensure_ascii=(i % 2 == 0)) + "\n" for i, r in enumerate(records))
        write_bytes(self.path(name), text.encode())
        return self.path(name)

    def round_trip(self, records, name):
        src = self.write_jsonl(name + ".jsonl", records)
        self.run_cli("import", src, "--name", name, check=EXIT_OK)
        want = [typed(r) for r in records]
        for kw in ({}, {"verify": True}):
            got = reader.load(self.store, name, **kw)
            self.assertEqual([typed(r) for r in got], want)
        out = self.path(name + "-out.jsonl")
        self.run_cli("export", name, out, check=EXIT_OK)
        with open(out, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        self.assertEqual(lines[-1], "")
        self.assertEqual([typed(json.loads(line)) for line in lines[:-1]], want)
        return out

    def test_coco_records_round_trip(self):
        self.round_trip(coco(2000), "coco")
        meta = reader.open_artifact(self.store, "coco").meta
        fields = {f["name"]: f for f in meta["schema"]["fields"]}
        self.assertEqual(fields["bboxes"]["items"]["items"]["kind"], "float")
        self.assertEqual(fields["labels"]["items"]["kind"], "string")
        self.assertEqual(fields["height"]["optional"], True)
        self.assertEqual(meta["schema"]["key_order"], "per_record")

    def test_awkward_values_round_trip(self):
        self.round_trip(AWKWARD, "odd")
        fields = {f["name"]: f for f in reader.open_artifact(self.store, "odd").meta["schema"]["fields"]}
        self.assertEqual(fields["mixed"]["kind"], "json")
        self.assertEqual(fields["big"]["dtype"], "uint64")
        self.assertEqual(fields["nums"]["items"]["kind"], "json")  # ints and floats
        # Records that are not all objects: the whole collection is JSON text, still exact.
        self.round_trip(AWKWARD + [[1, "top level list"], "a top-level string", 7], "top")
        self.assertEqual(reader.open_artifact(self.store, "top").meta["schema"]["kind"], "json")

    def test_export_is_compact_json_in_record_order(self):
        out = self.round_trip([{"b": 1, "a": [1.5, 2]}, {"a": [], "b": -2}], "small")
        with open(out, encoding="utf-8") as fh:
            self.assertEqual(fh.read(), '{"b":1,"a":[1.5,2]}\n{"a":[],"b":-2}\n')

    def test_long_decimals_read_as_python_reads_them(self):
        # Written by hand (json.dumps would shorten them): decimals of 20 to
        # 130 digits, which Debian's simdjson 3.0 misreads when the integer
        # part is 0; each must be the float Python's own parser makes.
        rng = random.Random(5)
        texts = ["0.4444444444444444444444", "0.95000000000000000000", "0." + "4" * 129 + "1", "1e-400"]
        for _ in range(200):
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(15, 60)))
            texts.append(rng.choice(["0.", "-0.", "1.", "12345."]) + digits + rng.choice(["", "e-5", "e20", "e-300"]))
        src = self.path("long.jsonl")
        write_bytes(src, "".join('{"x": %s}\n' % t for t in texts).encode())
        self.run_cli("import", src, "--name", "long", check=EXIT_OK)
        got = [r["x"] for r in reader.load(self.store, "long")]
        self.assertEqual([repr(float(g)) for g in got], [repr(float(t)) for t in texts])

    def test_bad_lines_are_refused_naming_the_line(self):
        for text, what in ((b'{"a":1}\n{"a":\n', ":2, key \"a\":"), (b'{"a":1}\n\n{"a":1,"a":2}\n', "repeats the key"),
                           (b'{"a":NaN}\n', ":1, key \"a\": is not valid JSON"), (b'{"a":"\xff"}\n', ":1:"),
                           (b'1 2\n', ":1:")):
            with self.subTest(text=text):
                write_bytes(self.path("bad.jsonl"), text)
                proc = self.run_cli("import", self.path("bad.jsonl"), "--name", "bad")
                self.assertNotEqual(proc.returncode, EXIT_OK)
                self.assertIn(what, proc.stderr)
                self.assertEqual(proc.stderr.count("\n"), 1, proc.stderr)

    def test_reader_finds_damage(self):
        src = self.write_jsonl("d.jsonl", coco(50))
        self.run_cli("import", src, "--name", "d", check=EXIT_OK)
        art = reader.open_artifact(self.store, "d")
        # Shorten the first field's strings: the offsets then run past the bytes.
        victim = art.path("records/0.bytes")
        os.chmod(victim, 0o644)
        with open(victim, "r+b") as fh:
            fh.truncate(os.path.getsize(victim) - 3)
        with self.assertRaises(reader.CorruptData):
            reader.load(self.store, "d")
        with self.assertRaises(reader.CorruptData):
            reader.load(self.store, "d", verify=True)


if __name__ == "__main__":
    _, argv = parse_args(sys.argv[0])
    unittest.main(argv=argv)
