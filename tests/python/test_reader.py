#!/usr/bin/python3
"""python/amphora_reader.py against artifacts the C++ side wrote.

Run as:
    AMPHORA_TEST_WRITER=build/bin/amphora_test_writer \
    /usr/bin/python3 tests/python/test_reader.py --cli build/bin/amphora

`amphora_test_writer kinds STORE` saves one value of every built-in kind;
the values below are the same ones (keep the two in step). Each is loaded
with the reader, mapped and read, with and without verification, and
compared exactly; damaged artifacts and bad refs raise the reader's errors.

HostileStoreTest runs every crafted store of hostile_corpus.CORPUS through
the CLI and the reader: both must refuse it (the CLI with its exit status,
the reader with exactly the documented class and a message saying what is
wrong), within a bounded amount of memory; `amphora export`, which verifies
and then loads the value as its C++ type, must refuse it with the same exit
status and leave nothing behind. LimitsTest puts the limits of
docs/FORMAT.md to both sides from each side of the line.
"""

import builtins
import math
import os
import re
import subprocess
import sys
import unittest

import numpy as np
import scipy.sparse as sp

import cli_support
import hostile_corpus
from cli_support import EXIT_OK, EXIT_USAGE, EXIT_CORRUPT, StoreTestCase, parse_args, read_bytes, write_bytes
from hostile_corpus import memory_budget

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import amphora_reader as reader  # noqa: E402

WRITER = os.environ.get("AMPHORA_TEST_WRITER", "")


def bfloat16(values):
    """float32 values rounded to bfloat16 (nearest, ties to even) and widened back."""
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype("<u4").view("<f4")


EXPECTED = {
    "tensor_f32": np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.5),
    "tensor_lz4": (np.arange(300000, dtype=np.int32) // 100).reshape(3000, 100),
    "tensor_zstd": (np.arange(300000, dtype=np.int32) // 100).reshape(3000, 100),
    "tensor_zstd_wide": ((np.arange(428 * 700) % 977) * 0.25).reshape(428, 700),
    "tensor_shuffled_zstd": ((np.arange(428 * 700) % 977) * 0.25).reshape(428, 700),
    "tensor_bf16": bfloat16([1.0, -2.5, 0.15625, 3e38]),
    "tensor_bool": np.array([True, False, True]),
    "tensor_empty": np.zeros((0, 2), dtype=np.complex64),
    "tensor_encoded": (-1000 + 7 * np.arange(5000, dtype=np.int64) + np.arange(5000) % 3).reshape(50, 100),
    "tensor_delta_falling": np.where(np.arange(3000) % 7 == 0, -30000 + np.arange(3000), 3 * np.arange(3000)).astype(np.int16),
    "tensor_decimal_rows": ((np.arange(3000 * 700) % 20011 - 5000) / 100).reshape(3000, 700),
    "tensor_decimal_rows_raw": ((np.arange(3000 * 700) % 20011 - 5000) / 100).reshape(3000, 700),
    "tensor_delta_chunks": np.where(np.arange(1120000) % 997 == 0, -5 * np.arange(1120000),
                                    3 * np.arange(1120000) + np.arange(1120000) % 4).astype(np.int32).reshape(1600, 700),
    "tensor_delta_chunks_lz4": np.where(np.arange(1120000) % 997 == 0, -5 * np.arange(1120000),
                                        3 * np.arange(1120000) + np.arange(1120000) % 4).astype(np.int32).reshape(1600, 700),
    "tensor_shuffled": np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.5),
    "sparse_csr": sp.csr_matrix((np.array([1.0, 2, 3, 4]), np.array([0, 2, 1, 3], np.int32),
                                 np.array([0, 2, 2, 4], np.int32)), shape=(3, 4)),
    "sparse_csc": sp.csc_matrix((np.array([5, 6], np.float32), np.array([2, 0], np.int64),
                                 np.array([0, 1, 1, 2, 2], np.int64)), shape=(3, 4)),
    "sparse_coo": sp.coo_matrix((np.array([7, -8, 9], np.int16), (np.array([0, 1, 1], np.int32),
                                                                   np.array([1, 0, 1], np.int32))), shape=(2, 2)),
    "string_utf8": "h\u00e9llo, w\u4e16rld",
    "string_bytes": b"\xff\x00binary",
    "json": {"lr": 0.001, "layers": [64, 32], "name": "mlp", "big": 9007199254740993},
    "strings": ["alpha", "", "\u03b2\u03b3"],
    "list": [np.array([1.5, 2.5], np.float32), np.array([], np.float32), np.array([-1.0], np.float32)],
    "map_array": {"a": 1, "b": -2},
    "map_strings": {"k": "v", "x": "yz"},
    "map_json": {"j": [1, "two"], "n": None},
    "map_children": {"w": np.array([0.25, 4.0])},
    "optional_some": "present",
    "optional_none": None,
    "tensor_list": [np.array([[1, 2], [3, 4]], np.uint8), np.array([0.5, 1.5, 2.5], np.float32)],
    "tensor_list_zstd": [np.array([[1, 2], [3, 4]], np.uint8), np.array([0.5, 1.5, 2.5], np.float32)],
    "struct": {"name": "tiny", "epochs": 3, "config": {"act": "relu"}, "weights": np.array([0.5, -0.5], np.float32),
               "vocab": ["a", "b"], "dropout": None},
    "fixed_array": np.array([1.5, -2.0, 3.25], np.float32),
    "fixed_rows": np.array([[0.5, 1.5], [2.5, 3.5]]),
    "pair": ("w", np.array([0.5, 1.0], np.float32)),
    "tuple": (3, None, ["x", "y"], math.inf),
    "variant_int": -7,
    "variant_none": None,
    "variant_tensor": np.array([[1, 2], [3, 4]], np.uint8),
    "nested_records": [
        {"pixels": np.array([[1, 2, 3], [4, 5, 6]], np.uint8),
         "landmarks": np.array([[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]], np.float32),
         "bbox": np.array([0, 1, 2, 3], np.float32), "scores": {"conf": 0.25, "iou": 0.5},
         "source": ("cam0", 100), "mask": np.array([True, False])},
        {"pixels": np.array([-1.0], np.float32), "landmarks": np.zeros((0, 2), np.float32),
         "bbox": np.zeros(4, np.float32), "scores": {}, "source": ("", -1), "mask": None},
    ],
    "fallback_list": [{"name": "a", "seed": 42}, {"name": "b", "seed": "random"}],
    "record_list": [
        {"path": "img/0.jpg", "width": 640, "boxes": [1.0, 2.0, 3.0, 4.0], "labels": ["cat"], "score": 0.75,
         "extra": {"iscrowd": 0}, "main": {"x": 0.5, "y": 1.5, "label": "head"},
         "regions": [{"x": 1.0, "y": 2.0, "label": "l"}, {"x": 3.0, "y": 4.0, "label": "r"}]},
        {"path": "img/1.jpg", "width": 320, "boxes": [], "labels": [], "score": None, "extra": None,
         "main": {"x": 0.0, "y": 0.0, "label": ""}, "regions": []},
    ],
}


def expected_table():
    import pandas as pd
    i = np.arange(300)
    has = i % 7 != 0
    city = np.array([["Z\u00fcrich", "\u6771\u4eac", ""][k % 3] for k in i], dtype=object)
    city[~has] = None
    when = (1_600_000_000_000_000_000 + i * 1_000_000_007).astype("datetime64[ns]")
    when[~has] = np.datetime64("NaT")
    return pd.DataFrame({
        "city": city,
        "count": pd.arrays.IntegerArray((i * i - 100).astype(np.int64), ~has),
        "when": when,
        "score": i / 8.0,
        "ok": pd.arrays.BooleanArray(i % 2 == 0, ~has),
        "id": np.array([f"id-{k * 31}" for k in i], dtype=object),
    })


class ReaderTest(StoreTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(WRITER, "set AMPHORA_TEST_WRITER to the amphora_test_writer program")
        subprocess.run([WRITER, "kinds", self.store], check=True, timeout=120)

    def assert_same(self, want, got, where):
        if isinstance(want, np.ndarray):
            self.assertIsInstance(got, np.ndarray, where)
            self.assertEqual(got.dtype, want.dtype, where)
            self.assertEqual(got.shape, want.shape, where)
            self.assertEqual(got.tobytes(), want.tobytes(), where)
        elif sp.issparse(want):
            self.assertTrue(sp.issparse(got), where)
            self.assertEqual(got.format, want.format, where)
            self.assertEqual(got.dtype, want.dtype, where)
            self.assertEqual(got.shape, want.shape, where)
            names = ("row", "col", "data") if want.format == "coo" else ("indices", "indptr", "data")
            for n in names:
                self.assertEqual(getattr(got, n).dtype, getattr(want, n).dtype, f"{where}.{n}")
                self.assertTrue(np.array_equal(getattr(got, n), getattr(want, n)), f"{where}.{n}")
        elif isinstance(want, dict):
            self.assertIsInstance(got, dict, where)
            self.assertEqual(sorted(got), sorted(want), where)
            for k in want:
                self.assert_same(want[k], got[k], f"{where}.{k}")
        elif isinstance(want, (list, tuple)):
            self.assertIsInstance(got, type(want), where)
            self.assertEqual(len(got), len(want), where)
            for i, (w, g) in enumerate(zip(want, got)):
                self.assert_same(w, g, f"{where}[{i}]")
        else:
            self.assertEqual(type(got), type(want), where)
            self.assertEqual(got, want, where)

    def test_every_kind_loads_equal(self):
        for name, want in EXPECTED.items():
            for kw in ({}, {"mmap": False}, {"verify": True}):
                with self.subTest(name=name, **kw):
                    self.assert_same(want, reader.load(self.store, name, **kw), name)

    def test_members_come_in_declaration_order(self):
        self.assertEqual(list(reader.load(self.store, "struct")),
                         ["name", "epochs", "config", "weights", "vocab", "dropout"])
        records = reader.load(self.store, "record_list")
        self.assertEqual(list(records[0]),
                         ["path", "width", "boxes", "labels", "score", "extra", "main", "regions"])
        self.assertEqual(list(records[0]["main"]), ["x", "y", "label"])
        self.assertEqual(list(records[0]["regions"][0]), ["x", "y", "label"])
        self.assertEqual(list(reader.load(self.store, "nested_records")[0]),
                         ["pixels", "landmarks", "bbox", "scores", "source", "mask"])

    def test_tables_load_as_dataframes(self):
        import pandas as pd
        want = expected_table()
        for kw in ({}, {"mmap": False}, {"verify": True}):
            got = reader.load(self.store, "table", **kw)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
        meta = {c["name"]: c for c in reader.open_artifact(self.store, "table").meta["columns"]}
        self.assertEqual(meta["city"]["encoding"], "dictionary")
        self.assertEqual(meta["id"]["encoding"], "plain")

    def test_tables_without_pandas_are_dicts_of_arrays(self):
        real_import = builtins.__import__

        def no_pandas(name, *args, **kw):
            if name == "pandas" or name.startswith("pandas."):
                raise ImportError("no pandas")
            return real_import(name, *args, **kw)

        want = expected_table()
        builtins.__import__ = no_pandas
        try:
            got = reader.load(self.store, "table")
        finally:
            builtins.__import__ = real_import
        self.assertEqual(list(got), list(want.columns))
        self.assertIsInstance(got["count"], np.ma.MaskedArray)
        self.assertTrue(np.array_equal(got["count"].mask, want["count"].isna().to_numpy()))
        self.assertEqual(got["count"].compressed().tolist(), want["count"].dropna().tolist())
        self.assertEqual(got["city"].tolist(), want["city"].tolist())
        self.assertEqual(got["score"].tolist(), want["score"].tolist())
        self.assertEqual(got["when"].dtype, np.dtype("datetime64[ns]"))

    def test_encoded_toolkit_arrays_decode(self):
        art = reader.open_artifact(self.store, "encoded_columns")
        self.assertEqual(art.meta["encodings"]["ids.npy"]["stored_dtype"], "uint8")
        self.assertEqual(np.load(art.path("ids.npy")).dtype, np.uint8)  # numpy sees the stored elements
        self.assert_same(EXPECTED["tensor_encoded"].reshape(-1), art.array("ids.npy", dtype="<i8", ndim=1), "ids")
        self.assert_same(np.array([[1, 300], [65535, 7]], "<u2"), art.array("words.npy", mmap=False), "words")
        reader.verify(self.store, "encoded_columns")

    def test_refs_resolve_as_the_cli_does(self):
        digest = self.run_cli("show", "json", "--json", check=EXIT_OK).stdout
        digest = __import__("json").loads(digest)["digest"]
        for ref in ("json", "json@1", digest, digest[:15], digest[7:19]):
            with self.subTest(ref=ref):
                self.assertEqual(reader.resolve(self.store, ref), digest)
                self.assert_same(EXPECTED["json"], reader.load(self.store, ref), ref)
        for ref, error in (("json@2", reader.NotFound), ("nothing", reader.NotFound), ("abcd", reader.NotFound),
                           ("sha256:zz", reader.AmphoraError), ("../x", reader.AmphoraError),
                           ("", reader.AmphoraError)):
            with self.subTest(ref=ref):
                with self.assertRaises(error):
                    reader.load(self.store, ref)
        with self.assertRaises(reader.NotFound):
            reader.load(self.path("no-store"), "json")

    def object_dir(self, name):
        return reader.open_artifact(self.store, name).dir

    def damage(self, name, payload, offset, xor=0x40):
        path = os.path.join(self.object_dir(name), payload)
        os.chmod(os.path.dirname(path), 0o755)
        os.chmod(path, 0o644)
        raw = bytearray(read_bytes(path))
        raw[offset] ^= xor
        write_bytes(path, bytes(raw))

    def test_verify_finds_a_flipped_byte(self):
        self.damage("tensor_f32", "tensor.npy", -1)
        reader.load(self.store, "tensor_f32")  # structure intact: only hashing can tell
        with self.assertRaisesRegex(reader.CorruptData, "tensor.npy"):
            reader.load(self.store, "tensor_f32", verify=True)

    def test_verify_reaches_children(self):
        child = reader.open_artifact(self.store, "map_children").child("values/0")
        os.chmod(child.dir, 0o755)
        path = os.path.join(child.dir, "tensor.npy")
        os.chmod(path, 0o644)
        raw = bytearray(read_bytes(path))
        raw[-1] ^= 1
        write_bytes(path, bytes(raw))
        with self.assertRaisesRegex(reader.CorruptData, "values/0"):
            reader.load(self.store, "map_children", verify=True)

    def test_links_and_special_files_in_the_store_are_refused(self):
        outside = self.path("outside.npy")
        np.save(outside, EXPECTED["tensor_f32"])
        art = reader.open_artifact(self.store, "tensor_f32")
        os.chmod(art.dir, 0o755)
        payload = os.path.join(art.dir, "tensor.npy")
        os.rename(payload, payload + ".moved")
        os.symlink(outside, payload)  # a payload that leads out of the store
        with self.assertRaisesRegex(reader.CorruptData, "symbolic link"):
            reader.load(self.store, "tensor_f32")
        os.unlink(payload)
        os.mkfifo(payload)  # must be refused, not waited on
        with self.assertRaisesRegex(reader.CorruptData, "not a regular file"):
            reader.load(self.store, "tensor_f32")
        # A fan-out directory that is a link to elsewhere.
        fan = os.path.dirname(reader.open_artifact(self.store, "json").dir)
        os.rename(fan, self.path("fan"))
        os.symlink(self.path("fan"), fan)
        with self.assertRaisesRegex(reader.CorruptData, "symbolic link"):
            reader.load(self.store, "json")
        # A name directory that is a link.
        names = os.path.join(self.store, "names", "strings")
        os.rename(names, self.path("names-strings"))
        os.symlink(self.path("names-strings"), names)
        with self.assertRaisesRegex(reader.CorruptData, "symbolic link"):
            reader.load(self.store, "strings")

    def test_a_damaged_manifest_is_refused(self):
        self.damage("json", "manifest.json", 10)
        with self.assertRaisesRegex(reader.CorruptData, "does not hash to its digest"):
            reader.load(self.store, "json")

    def test_invalid_sparse_structure_is_refused(self):
        # indptr [0, 2, 2, 4] -> [0, 2, 2, 0]: decreasing at the end.
        path = os.path.join(self.object_dir("sparse_csr"), "indptr.npy")
        self.damage("sparse_csr", "indptr.npy", os.path.getsize(path) - 8, xor=2 ^ 6)
        with self.assertRaisesRegex(reader.CorruptData, "indptr"):
            reader.load(self.store, "sparse_csr")

    def test_a_shortened_payload_is_refused(self):
        art = reader.open_artifact(self.store, "strings")
        path = os.path.join(art.dir, "strings.bytes")
        os.chmod(art.dir, 0o755)
        os.chmod(path, 0o644)
        os.truncate(path, 2)
        with self.assertRaisesRegex(reader.CorruptData, "strings.bytes"):
            reader.load(self.store, "strings")

    def test_a_codec_without_its_module_says_what_to_install(self):
        real_import = builtins.__import__
        for tensor, modules, package in (("tensor_lz4", ("lz4", "lz4.block"), "python3-lz4"),
                                         ("tensor_zstd", ("zstandard",), "python3-zstandard")):
            def without(name, *args, **kw):
                if name in modules:
                    raise ImportError(f"no {name}")
                return real_import(name, *args, **kw)

            builtins.__import__ = without
            try:
                with self.subTest(tensor=tensor), self.assertRaisesRegex(reader.Unsupported, package):
                    reader.load(self.store, tensor)
            finally:
                builtins.__import__ = real_import

    def test_zstd_payloads_are_what_the_format_says(self):
        for name in ("tensor_zstd", "tensor_zstd_wide"):
            art = reader.open_artifact(self.store, name)
            self.assertEqual(art.meta["encoding"], "npy.zst")
            self.assertEqual(sorted(art.files), ["tensor.chunks.npy", "tensor.npy.zst"])
        self.assertEqual(reader.open_artifact(self.store, "tensor_zstd").meta["zstd_level"], 3)
        self.assertEqual(reader.open_artifact(self.store, "tensor_zstd_wide").meta["zstd_level"], 1)
        # Shuffle is done chunk by chunk inside a chunked codec: no recipe.
        self.assertEqual(reader.open_artifact(self.store, "tensor_shuffled_zstd").meta["encoding"], "shuffled.npy.zst")
        self.assertNotIn("recipe", reader.open_artifact(self.store, "tensor_shuffled_zstd").meta)
        # So is delta without squeeze.
        self.assertEqual(reader.open_artifact(self.store, "tensor_delta_chunks").meta["encoding"], "delta.shuffled.npy.zst")
        self.assertEqual(reader.open_artifact(self.store, "tensor_delta_chunks_lz4").meta["encoding"], "delta.npy.lz4")
        self.assertEqual(reader.open_artifact(self.store, "tensor_encoded").meta["encoding"], "encoded.shuffled.npy.lz4")
        for item in reader.open_artifact(self.store, "tensor_list_zstd").children.values():
            self.assertEqual(reader.open_artifact(self.store, item).meta["encoding"], "npy.zst")

    def test_rows_decode_only_their_chunks_and_equal_the_slice(self):
        chunk_rows = {"tensor_zstd_wide": (256 << 10) / (700 * 8),  # 46.8 rows a chunk: edges inside rows
                      "tensor_shuffled_zstd": (256 << 10) / (700 * 8),
                      "tensor_delta_chunks": (256 << 10) / (700 * 4),
                      "tensor_delta_chunks_lz4": (1 << 20) / (700 * 4),
                      "tensor_decimal_rows": (256 << 10) / (700 * 2)}  # int16 stored elements
        for name in ("tensor_lz4", "tensor_zstd", "tensor_zstd_wide", "tensor_shuffled_zstd", "tensor_f32",
                     "tensor_encoded", "tensor_delta_chunks", "tensor_delta_chunks_lz4", "tensor_decimal_rows",
                     "tensor_decimal_rows_raw",
                     "tensor_empty"):
            want = EXPECTED[name]
            n = want.shape[0]
            spans = {(0, n), (0, 0), (n, n), (n // 3, n // 2)} | ({(0, 1), (n - 1, n)} if n else set())
            if name in chunk_rows:
                edge = int(chunk_rows[name])
                spans |= {(edge, edge + 1), (edge - 1, edge + 2), (edge - 3, 2 * edge + 5)}
            for b, e in sorted(spans):
                with self.subTest(tensor=name, rows=(b, e)):
                    for verify in (False, True):
                        got = reader.load_rows(self.store, name, b, e, verify=verify)
                        self.assertEqual(got.dtype, want.dtype)
                        self.assertEqual(got.shape, want[b:e].shape)
                        self.assertEqual(got.tobytes(), want[b:e].tobytes())
        # Decimal + squeeze work element by element: only the rows' elements are decoded.
        counts = []
        decode = reader._decode
        def counting(art, what, recipe, stored):
            counts.append(recipe["count"])
            return decode(art, what, recipe, stored)
        reader._decode = counting
        try:
            for name in ("tensor_decimal_rows", "tensor_decimal_rows_raw"):
                got = reader.load_rows(self.store, name, 748, 751)
                self.assertEqual(got.tobytes(), EXPECTED[name][748:751].tobytes())
        finally:
            reader._decode = decode
        self.assertEqual(counts, [3 * 700, 3 * 700])
        for b, e in ((-1, 2), (5, 4), (0, 3001), (0.5, 2)):
            with self.subTest(bad_rows=(b, e)), self.assertRaisesRegex(ValueError, "outside"):
                reader.load_rows(self.store, "tensor_zstd", b, e)
        src = self.path("scalar.npy")
        np.save(src, np.array(3.5))
        self.run_cli("import", src, "--name", "scalar", "--compress", "zstd", check=EXIT_OK)
        with self.assertRaisesRegex(ValueError, "0-d"):
            reader.load_rows(self.store, "scalar", 0, 1)
        with self.assertRaisesRegex(reader.Unsupported, "not a tensor"):
            reader.load_rows(self.store, "strings", 0, 1)

    def test_files_imported_by_the_cli_read_back(self):
        a = np.arange(24, dtype=">i4").reshape(2, 3, 4)
        src = self.path("a.npy")
        np.save(src, a)
        for compress in ("none", "lz4", "zstd"):
            self.run_cli("import", src, "--name", "a" + compress, "--compress", compress, check=EXIT_OK)
            got = reader.load(self.store, "a" + compress, verify=True)
            self.assertTrue(np.array_equal(got, a))
            self.assertEqual(got.dtype, np.dtype("<i4"))
        m = sp.random(50, 40, density=0.2, format="csc", random_state=3)
        sp.save_npz(self.path("m.npz"), m)
        self.run_cli("import", self.path("m.npz"), "--name", "m", check=EXIT_OK)
        self.assertEqual((reader.load(self.store, "m") != m).nnz, 0)


class SharedChildrenTest(StoreTestCase):
    """A crafted store: lists whose two items are one shared child, nested."""

    def nested(self, levels):
        return cli_support.shared_lists(self.store, levels)

    def test_a_shared_child_is_loaded_once_however_many_paths_reach_it(self):
        # 30 levels: 31 artifacts, 2**30 paths. Loaded once each, it returns
        # at once; walked path by path it would not return at all.
        top = self.nested(30)
        got = reader.load(self.store, top)
        depth, node = 0, got
        while node:
            self.assertEqual(len(node), 2)
            self.assertIs(node[0], node[1])  # one value for one artifact
            node, depth = node[0], depth + 1
        self.assertEqual(depth, 30)
        verified = reader.load(self.store, top, verify=True)
        for _ in range(30):
            self.assertIs(verified[0], verified[1])
            verified = verified[0]
        self.assertEqual(verified, [])

    def test_the_nesting_limit_still_holds_along_the_deepest_path(self):
        with self.assertRaisesRegex(reader.CorruptData, "deeper than 64"):
            reader.load(self.store, self.nested(65))
        self.assertEqual(len(reader.load(self.store, self.nested(64))), 2)


def reader_outcome(call):
    """What `call()` raised (None if it returned), run within a memory budget."""
    with memory_budget():
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the class is what is under test
            return e
    return None


class HostileStoreTest(StoreTestCase):
    """Each case of hostile_corpus.CORPUS on a fresh store: the CLI's exit
    status, and the reader's exception class (exactly) and message. A test
    per case is added below the class."""

    def check(self, case):
        scratch = self.path("scratch")
        os.makedirs(scratch)
        ref = case.build(self.store, scratch)
        args = [a.replace("{ref}", ref) for a in case.cli]
        proc = self.run_cli(*args)
        self.assertEqual(proc.returncode, case.cli_exit,
                         f"amphora {' '.join(args)}: stdout={proc.stdout!r} stderr={proc.stderr!r}")
        if case.call == "resolve":
            raised = reader_outcome(lambda: reader.resolve(self.store, ref))
        else:
            raised = reader_outcome(lambda: reader.load(self.store, ref, **case.kwargs))
        self.assertIsNotNone(raised, f"the reader accepted {case.name}")
        self.assertIs(type(raised), getattr(reader, case.error), f"{type(raised).__name__}: {raised}")
        self.assertRegex(str(raised), case.message)
        if ref.startswith("sha256:") and case.call == "load":
            self.assertIn(f"artifact {ref}", str(raised))  # the message names the artifact
        if case.call == "load" and case.cli_exit != EXIT_OK:
            # export verifies first, then loads as the type: it refuses too,
            # and leaves nothing behind.
            out = self.path("exported")
            proc = self.run_cli("export", ref, out)
            wanted = re.search(r"use a '(\.\w+)' file", proc.stderr)
            if wanted:  # a file of its format's extension, not a directory
                out += wanted.group(1)
                proc = self.run_cli("export", ref, out)
            self.assertEqual(proc.returncode, case.cli_exit,
                             f"amphora export {ref}: stdout={proc.stdout!r} stderr={proc.stderr!r}")
            self.assertFalse(os.path.exists(out))


def _corpus_test(case):
    def test(self):
        self.check(case)
    test.__doc__ = f"hostile store: {case.name}"
    return test


for _case in hostile_corpus.CORPUS:
    setattr(HostileStoreTest, "test_" + _case.name, _corpus_test(_case))


class LimitsTest(StoreTestCase):
    """The limits of docs/FORMAT.md from both sides: what the CLI accepts the
    reader loads, what the CLI refuses the reader refuses."""

    def agree(self, ref, accepted, error=reader.CorruptData, message=None, cli=("verify",), **kw):
        proc = self.run_cli(*cli, ref)
        if accepted:
            self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
            return reader.load(self.store, ref, **kw)
        self.assertNotEqual(proc.returncode, EXIT_OK, proc.stdout)
        raised = reader_outcome(lambda: reader.load(self.store, ref, **kw))
        self.assertIs(type(raised), error, f"{ref}: {type(raised).__name__}: {raised}")
        if message:
            self.assertRegex(str(raised), message)
        return None

    def test_json_payloads_nest_64_levels(self):
        deepest = []
        for _ in range(63):
            deepest = [deepest]
        self.assertEqual(self.agree(hostile_corpus.put_json(self.store, hostile_corpus.nested(64)), True), deepest)
        self.agree(hostile_corpus.put_json(self.store, hostile_corpus.nested(65)), False,
                   message="nests deeper than 64 levels")

    def test_record_json_texts_nest_257_levels(self):
        def records(levels):
            files = hostile_corpus.strings_files("records", [hostile_corpus.nested(levels)])
            schema = {"kind": "json", "nullable": False, "optional": False}
            return hostile_corpus.put_artifact(self.store, "amphora.records",
                                               {"count": 1, "schema": schema, "encodings": {}}, files)
        self.assertEqual(len(self.agree(records(257), True)), 1)
        self.agree(records(258), False, message="slot 0 is not valid JSON")

    def test_json_numbers_read_as_the_cli_reads_them(self):
        # Beyond 64 bits an integer is a double, as nlohmann reads it; NaN,
        # infinities and a lone surrogate are no JSON.
        big = hostile_corpus.put_json(self.store, b"[18446744073709551616, -9223372036854775809]")
        self.assertEqual(self.agree(big, True), [18446744073709551616.0, -9223372036854775809.0])
        self.assertIs(type(reader.load(self.store, big)[0]), float)
        for text in (b"[1e400]", b"[NaN]", b"[-Infinity]", b'["\\ud800"]', b'["\xff"]'):
            with self.subTest(text=text):
                self.agree(hostile_corpus.put_json(self.store, text), False, message="is not valid JSON")

    def test_name_records_nest_64_levels(self):
        digest = hostile_corpus.put_string(self.store, "fine")

        def wrap(levels):  # a record whose deepest value is `levels` deep, the record itself counted
            return b'{"digest": "' + digest.encode() + b'", "x": ' + hostile_corpus.nested(levels - 1) + b"}"

        hostile_corpus.put_name(self.store, "ok", digest, raw=wrap(64))
        self.assertEqual(self.agree("ok", True, cli=("show",)), "fine")
        hostile_corpus.put_name(self.store, "deep", digest, raw=wrap(65))
        self.agree("deep", False, cli=("show",), message=r"name record deep@1 .*nests deeper than 64 levels")

    def test_piece_sizes_run_from_4096_to_2_40(self):
        def with_piece(piece):
            data = b"p" * 10000
            def edit(m):
                f = m["files"][0]
                f["piece_size"] = piece
                f["sha256"] = [hostile_corpus.sha256(data[k:k + piece]) for k in range(0, len(data), piece)]
            return hostile_corpus.put_artifact(self.store, "amphora.string", {"bytes": len(data), "utf8": True},
                                               {"string.bin": data}, edit=edit)
        for piece in (4096, 1 << 40):
            self.assertEqual(self.agree(with_piece(piece), True, verify=True), "p" * 10000)
        for piece in (4095, (1 << 40) + 1):
            self.agree(with_piece(piece), False, message=f"piece_size {piece} is outside")

    def test_only_the_store_directory_itself_may_be_a_link(self):
        digest = hostile_corpus.put_string(self.store, "through a link")
        hostile_corpus.put_name(self.store, "t", digest)
        link = self.path("store-link")
        os.symlink(self.store, link)
        proc = cli_support.run("--store", link, "show", "t")
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        self.assertEqual(reader.load(link, "t", verify=True), "through a link")
        # The same store, its marker a link to a copy of itself: refused by both.
        marker = os.path.join(self.store, "amphora-store.json")
        os.rename(marker, self.path("marker.json"))
        os.symlink(self.path("marker.json"), marker)
        proc = cli_support.run("--store", link, "show", "t")
        self.assertEqual(proc.returncode, EXIT_CORRUPT, proc.stderr)
        raised = reader_outcome(lambda: reader.load(link, "t"))
        self.assertIs(type(raised), reader.CorruptData, repr(raised))
        self.assertIn("amphora-store.json is a symbolic link", str(raised))

    def test_versions_are_ascii_digits_below_2_64(self):
        hostile_corpus.put_name(self.store, "t", hostile_corpus.put_string(self.store, "one"))
        self.assertEqual(self.agree("t@01", True, cli=("show",)), "one")  # from_chars takes leading zeros
        for ref in ("t@+1", "t@1 ", "t@\uff11", "t@18446744073709551616", "t@0"):
            with self.subTest(ref=ref):
                self.assertEqual(self.run_cli("show", ref).returncode, EXIT_USAGE)
                raised = reader_outcome(lambda: reader.resolve(self.store, ref))
                self.assertIs(type(raised), reader.AmphoraError, repr(raised))
                self.assertIn("invalid version", str(raised))


if __name__ == "__main__":
    _, argv = parse_args(sys.argv[0])
    unittest.main(argv=argv)
