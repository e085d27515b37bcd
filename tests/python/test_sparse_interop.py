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

    def test_duplicates_beyond_the_cells_are_refused_before_inflating(self):
        # A valid 1 x 1 CSR of millions of duplicate zeros deflates about
        # 1000:1, under the ratio check: the shape bounds what the members may
        # hold, and the data member's declared size is refused before it is
        # inflated (the whole import stays small).
        n = 4_000_000
        bomb = self.write_npz("dups.npz", dict(format=np.array(b"csr"), shape=np.array([1, 1]),
                                                data=np.zeros(n), indices=np.zeros(n, np.int32),
                                                indptr=np.array([0, n], np.int32)), compressed=True)
        self.assertLess(os.path.getsize(bomb), n * 12 // 500)
        self.assertEqual(sp.load_npz(bomb).nnz, n)  # SciPy reads it: duplicates are allowed there
        self.assert_refused(bomb, "dups.npz: member 'data.npy': declares 32000128 bytes, more than the 65552 that "
                                  "the 1 cells of a 1 x 1 matrix need (a decompression bomb?)")
        # Stored entries past the cells are refused even when small.
        few = self.write_npz("few.npz", dict(format=np.array(b"csr"), shape=np.array([1, 2]), data=np.ones(3),
                                             indices=np.zeros(3, np.int32), indptr=np.array([0, 3], np.int32)))
        self.assert_refused(few, "few.npz: holds 3 stored entries for a 1 x 2 matrix, more than its cells")
        # Up to the cells, duplicates are taken as SciPy takes them.
        two = self.write_npz("two.npz", dict(format=np.array(b"csr"), shape=np.array([1, 2]), data=np.ones(2),
                                             indices=np.zeros(2, np.int32), indptr=np.array([0, 2], np.int32)))
        self.run_cli("import", two, "--name", "two", check=EXIT_OK)
        out = self.path("two_out.npz")
        self.run_cli("export", "two", out, check=EXIT_OK)
        self.assertEqual(sp.load_npz(out).toarray().tolist(), [[2.0, 0.0]])

    def test_concatenated_archives_are_refused(self):
        # SciPy reads the second matrix of two concatenated archives; a reader
        # taking the first would store another matrix: refused as ambiguous.
        first, second = self.path("a.npz"), self.path("b.npz")
        sp.save_npz(first, sp.csr_matrix(np.array([[1.0]])), compressed=False)
        sp.save_npz(second, sp.csr_matrix(np.array([[2.0]])), compressed=True)
        both = self.path("ab.npz")
        write_bytes(both, read_bytes(first) + read_bytes(second))
        self.assertEqual(sp.load_npz(both).toarray().tolist(), [[2.0]])
        self.assert_refused(both, "ab.npz: its central directory ends at byte", "two archives are concatenated")
        # Bytes before a single archive are the same ambiguity.
        prefixed = self.path("prefixed.npz")
        write_bytes(prefixed, b"#!junk\n" + read_bytes(second))
        self.assert_refused(prefixed, "prefixed.npz", "bytes come before the archive")
        self.run_cli("import", second, "--name", "b", check=EXIT_OK)

    def test_a_member_longer_than_declared_and_an_unknown_format_are_named(self):
        path = self.write_npz("long.npz", dict(format=np.array(b"csr"), shape=np.array([1, 4]), data=np.ones(4),
                                               indices=np.arange(4, dtype=np.int32),
                                               indptr=np.array([0, 4], np.int32)), compressed=True)
        raw = bytearray(read_bytes(path))
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("data.npy")
        declared = info.file_size - 8  # one element fewer than the stream inflates to
        struct.pack_into("<I", raw, info.header_offset + 22, declared)
        pos = raw.find(b"PK\x01\x02")
        while raw[pos + 46: pos + 46 + 8] != b"data.npy":
            pos = raw.find(b"PK\x01\x02", pos + 4)
        struct.pack_into("<I", raw, pos + 24, declared)
        write_bytes(path, bytes(raw))
        self.assert_refused(path, "long.npz: member 'data.npy': the member holds more than the "
                                  f"{declared} bytes its directory entry declares")
        odd = self.write_npz("odd.npz", dict(format=np.array(b"cs\x00r"), shape=np.array([1, 1]), data=np.ones(1),
                                             indices=np.zeros(1, np.int32), indptr=np.array([0, 1], np.int32)))
        self.assert_refused(odd, "odd.npz: member 'format.npy' names the sparse format 'cs\\x00r', not csr, csc or coo")


if __name__ == "__main__":
    _, argv = parse_args(sys.argv[0])
    unittest.main(argv=argv)
