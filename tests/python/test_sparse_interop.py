#!/usr/bin/python3
"""Sparse matrices between SciPy and the `amphora` CLI.

Run as:
    /usr/bin/python3 tests/python/test_sparse_interop.py --cli build/bin/amphora

Files written by scipy.sparse.save_npz import; exports open with
scipy.sparse.load_npz; the stored payload files zipped together are an .npz
SciPy loads; damaged archives and invalid matrices are refused with one line.
"""

import io
import json
import os
import struct
import sys
import unittest
import zipfile

import numpy as np
import scipy.sparse as sp

from cli_support import EXIT_OK, StoreTestCase, parse_args, read_bytes, write_bytes


def random_matrix(fmt, rows, cols, density, dtype, seed, index_dtype=None):
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=density, format=fmt, random_state=seed, dtype=np.float64)
    if np.dtype(dtype).kind == "c":
        m.data = (m.data + 1j * rng.standard_normal(m.data.size)).astype(dtype)
    elif np.dtype(dtype).kind in "iu":
        m.data = rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, m.data.size).astype(dtype)
    elif np.dtype(dtype).kind == "b":
        m.data = np.ones(m.data.size, dtype=bool)
    else:
        m.data = m.data.astype(dtype)
    if index_dtype is not None:
        if fmt == "coo":
            m.row, m.col = m.row.astype(index_dtype), m.col.astype(index_dtype)
        else:
            m.indices, m.indptr = m.indices.astype(index_dtype), m.indptr.astype(index_dtype)
    return m


class SparseInteropTest(StoreTestCase):
    maxDiff = 4000

    def show(self, ref):
        return json.loads(self.run_cli("show", ref, "--json", check=EXIT_OK).stdout)

    def assert_same_matrix(self, want, got, what):
        self.assertEqual(got.format, want.format, what)
        self.assertEqual(got.shape, want.shape, what)
        self.assertEqual(got.dtype, want.dtype, what)
        self.assertEqual(got.nnz, want.nnz, what)
        if want.format == "coo":
            for name in ("row", "col", "data"):
                self.assertTrue(np.array_equal(getattr(got, name), getattr(want, name)), f"{what}: {name}")
        else:
            for name in ("indices", "indptr", "data"):
                self.assertTrue(np.array_equal(getattr(got, name), getattr(want, name)), f"{what}: {name}")
        self.assertEqual((got != want).nnz, 0, what)

    def test_scipy_files_import_and_export_equal(self):
        cases = []
        for fmt in ("csr", "csc", "coo"):
            for compressed in (False, True):
                for dtype in ("float64", "float32", "int16", "uint8", "complex128", "bool"):
                    cases.append((fmt, compressed, dtype, None))
            cases.append((fmt, False, "float64", np.int64))
        for n, (fmt, compressed, dtype, index) in enumerate(cases):
            what = f"{fmt} {dtype} compressed={compressed} index={index}"
            with self.subTest(what):
                m = random_matrix(fmt, 60, 45, 0.1, dtype, n, index)
                src = self.path(f"in{n}.npz")
                sp.save_npz(src, m, compressed=compressed)
                self.run_cli("import", src, "--name", f"m{n}", check=EXIT_OK)
                shown = self.show(f"m{n}")
                self.assertEqual(shown["materializer"]["name"], "amphora.sparse")
                meta = shown["meta"]
                self.assertEqual(meta["format"], fmt)
                self.assertEqual(meta["shape"], [60, 45])
                self.assertEqual(meta["nnz"], m.nnz)
                self.assertEqual(meta["dtype"], np.dtype(dtype).name)
                self.assertEqual(meta["index_dtype"], "int64" if index is np.int64 else "int32")
                out = self.path(f"out{n}.npz")
                self.run_cli("export", f"m{n}", out, check=EXIT_OK)
                self.assert_same_matrix(m, sp.load_npz(out), what)

    def test_stored_payload_zips_into_an_npz(self):
        for fmt in ("csr", "csc", "coo"):
            with self.subTest(fmt):
                m = random_matrix(fmt, 30, 70, 0.2, "float32", 9, np.int64)
                src = self.path(f"{fmt}.npz")
                sp.save_npz(src, m, compressed=False)
                self.run_cli("import", src, "--name", fmt, check=EXIT_OK)
                digest = self.show(fmt)["digest"]
                obj = os.path.join(self.store, "objects", "sha256", digest[7:9], digest[7:])
                zipped = io.BytesIO()
                with zipfile.ZipFile(zipped, "w") as z:
                    for name in sorted(os.listdir(obj)):
                        if name.endswith(".npy"):
                            z.write(os.path.join(obj, name), name)
                zipped.seek(0)
                self.assert_same_matrix(m, sp.load_npz(zipped), fmt)
                for name in os.listdir(obj):
                    if name.endswith(".npy"):
                        np.load(os.path.join(obj, name), mmap_mode="r")  # every payload opens in place

    def test_empty_matrices(self):
        for fmt in ("csr", "csc", "coo"):
            for shape in ((0, 0), (5, 0), (7, 9)):
                with self.subTest(fmt=fmt, shape=shape):
                    m = sp.random(*shape, density=0, format=fmt)
                    src = self.path("e.npz")
                    sp.save_npz(src, m)
                    self.run_cli("import", src, "--name", "e", check=EXIT_OK)
                    out = self.path("e-out.npz")
                    self.run_cli("export", "e", out, check=EXIT_OK)
                    self.assert_same_matrix(m, sp.load_npz(out), f"{fmt} {shape}")

    def assert_refused(self, path, *mentions):
        proc = self.run_cli("import", path, "--name", "bad")
        self.assertNotEqual(proc.returncode, EXIT_OK, proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("amphora: "), proc.stderr)
        for m in mentions:
            self.assertIn(m, lines[0])
        self.assertEqual(self.run_cli("ls").stdout.count("bad"), 0)

    def write_npz(self, name, arrays, compressed=False):
        path = self.path(name)
        (np.savez_compressed if compressed else np.savez)(path, **arrays)
        return path

    def test_invalid_matrices_are_refused(self):
        base = dict(format=np.array(b"csr"), shape=np.array([2, 3]), data=np.array([1.0, 2.0, 3.0]))
        self.assert_refused(self.write_npz("down.npz", dict(base, indices=np.array([0, 1, 2], np.int32),
                                                            indptr=np.array([0, 2, 1], np.int32))),
                            "down.npz", "indptr[2] = 1 is less than indptr[1] = 2")
        self.assert_refused(self.write_npz("out.npz", dict(base, indices=np.array([0, 7, 2], np.int32),
                                                           indptr=np.array([0, 2, 3], np.int32))),
                            "indices[1] = 7 is outside the 3 columns")
        self.assert_refused(self.write_npz("short.npz", dict(base, indices=np.array([0, 1], np.int32),
                                                             indptr=np.array([0, 2, 3], np.int32))),
                            "'indices' holds 2 entries")
        self.assert_refused(self.write_npz("bsr.npz", dict(base, format=np.array(b"bsr"))), "bsr", ".tocsr()")
        self.assert_refused(self.write_npz("none.npz", dict(data=np.zeros(3))), "no 'format.npy' member")

    def test_damaged_archives_are_refused(self):
        m = random_matrix("csr", 200, 300, 0.05, "float64", 3)
        good = self.path("good.npz")
        sp.save_npz(good, m, compressed=True)
        raw = read_bytes(good)
        for keep in (len(raw) - 1, len(raw) // 2, 20):
            cut = self.path(f"cut{keep}.npz")
            write_bytes(cut, raw[:keep])
            self.assert_refused(cut, f"cut{keep}.npz")
        flipped = bytearray(raw)
        flipped[len(raw) // 3] ^= 0x40
        bad = self.path("flip.npz")
        write_bytes(bad, bytes(flipped))
        self.assert_refused(bad, "flip.npz")
        text = self.path("text.npz")
        write_bytes(text, b"not a zip archive at all")
        self.assert_refused(text, "text.npz", "not a readable .npz")

    def test_zip_bomb_is_refused_before_inflating(self):
        # A deflated member of a few hundred bytes whose sizes claim 4 GB:
        # far beyond deflate's ~1032:1, so refused before memory is set aside.
        m = random_matrix("csr", 10, 10, 0.3, "float64", 4)
        src = self.path("small.npz")
        sp.save_npz(src, m, compressed=True)
        raw = bytearray(read_bytes(src))
        with zipfile.ZipFile(src) as z:
            info = z.getinfo("data.npy")
        claimed = 0xFFFFFFFE  # the largest size without a zip64 field
        struct.pack_into("<I", raw, info.header_offset + 22, claimed)  # local header
        pos = 0
        while True:
            pos = raw.find(b"PK\x01\x02", pos)
            self.assertNotEqual(pos, -1)
            name_len = struct.unpack_from("<H", raw, pos + 28)[0]
            if raw[pos + 46: pos + 46 + name_len] == b"data.npy":  # central directory entry
                struct.pack_into("<I", raw, pos + 24, claimed)
                break
            pos += 4
        bomb = self.path("bomb.npz")
        write_bytes(bomb, bytes(raw))
        self.assert_refused(bomb, "bomb.npz", "zip bomb")


if __name__ == "__main__":
    _, argv = parse_args(sys.argv[0])
    unittest.main(argv=argv)
