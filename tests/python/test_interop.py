#!/usr/bin/python3
"""Interoperability tests for the `amphora` CLI against NumPy, hashlib, lz4 and zstd.

Run as:
    /usr/bin/python3 tests/python/test_interop.py --cli build/bin/amphora

(or set AMPHORA_CLI). Uses only the standard library, numpy and the `lz4` and `zstd`
command-line tools. Every test works in a fresh temporary store.
"""

import glob
import hashlib
import io
import json
import math
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

from cli_support import le_c_bytes

CLI = os.environ.get("AMPHORA_CLI", "")

HEADER_BYTES = 4096
PAGE_ALIGNED_BYTES = 64 << 10  # smaller tensors are 64-byte aligned
MIN_PIECE = 2 * 1024 * 1024  # writers' piece size, doubled until a file has at most 256 pieces (docs/FORMAT.md)
MAX_PIECES = 256
SPLIT_ABOVE = 256 * 1024  # files above this and up to MIN_PIECE are cut into at most four pieces


def expected_piece_size(size):
    """FORMAT.md section 3.4: a file of more than 256 KiB and at most 2 MiB
    gets the smallest power-of-two pieces that make at most four; otherwise
    2 MiB pieces, doubled until at most 256."""
    if SPLIT_ABOVE < size <= MIN_PIECE:
        piece = 1
        while -(-size // piece) > 4:
            piece *= 2
        return piece
    piece = MIN_PIECE
    while max(1, -(-size // piece)) > MAX_PIECES:
        piece *= 2
    return piece
AUTO_MIN_BYTES = 64 << 10
LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# --compress choice -> (encoding, payload file, frame magic, the standard tool that decodes it)
# encoding, payload file, frame magic, the tool that decompresses it, the chunk size the writer cuts
CODECS = {
    "lz4": ("npy.lz4", "tensor.npy.lz4", LZ4_MAGIC, "lz4", 1 << 20),
    "zstd": ("npy.zst", "tensor.npy.zst", ZSTD_MAGIC, "zstd", 256 << 10),
}

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CORRUPT = 0, 1, 2, 3, 4

ALL_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
SHAPE_CLASSES = {
    "0d": (),
    "empty": (0, 3),
    "1d": (70_000,),        # complex128: 1.12 MB -> two data chunks, the last partial
    "3d": (5, 60, 70),
}


# ---------------------------------------------------------------------------
# helpers


def run_cli(*args, check=None):
    """Runs the CLI; retries briefly if the binary is being rebuilt."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if not os.path.exists(CLI):
                raise FileNotFoundError(CLI)
            proc = subprocess.run([CLI, *[str(a) for a in args]], capture_output=True, text=True, timeout=120)
            break
        except (FileNotFoundError, PermissionError, OSError) as e:  # missing, or ETXTBSY during a relink
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot run {CLI}: {e}")
            time.sleep(1)
    if check is not None and proc.returncode != check:
        raise AssertionError(
            f"amphora {' '.join(map(str, args))}: exit {proc.returncode}, expected {check}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def le_dtype(dt):
    dt = np.dtype(dt)
    return dt.newbyteorder("<") if dt.byteorder == ">" else dt


def data_offset(arr):
    """Where Amphora's .npy for `arr` starts its data: byte 4096 from 64 KiB of
    data, else the next multiple of 64 after the header (docs/FORMAT.md 5.4)."""
    if arr.nbytes >= PAGE_ALIGNED_BYTES:
        return HEADER_BYTES
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (le_dtype(arr.dtype).str, tuple(arr.shape))
    return -(-(10 + len(text) + 1) // 64) * 64


def npy_header_info(raw):
    """(major, minor, data_offset, header dict) of .npy bytes."""
    assert raw[:6] == b"\x93NUMPY", raw[:10]
    major, minor = raw[6], raw[7]
    if major == 1:
        hlen = struct.unpack("<H", raw[8:10])[0]
        off = 10 + hlen
    else:
        hlen = struct.unpack("<I", raw[8:12])[0]
        off = 12 + hlen
    import ast
    header = ast.literal_eval(raw[off - hlen:off].decode("latin1"))
    return major, minor, off, header


def special_floats(dtype):
    """NaN (quiet, with payload, negative), +-inf, +-0.0, extremes and subnormals of a float dtype."""
    dt = np.dtype(dtype)
    fi = np.finfo(dt)
    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, fi.max, fi.min, fi.tiny,
                     fi.tiny / 4, -fi.tiny / 8, fi.eps], dtype=dt)
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    bits = dt.itemsize * 8
    mant = {2: 10, 4: 23, 8: 52}[dt.itemsize]
    exp_all = ((1 << (bits - 1 - mant)) - 1) << mant
    payload_nan = np.array([exp_all | 1 | (1 << (mant - 1)), exp_all | (1 << bits - 1) | (1 << (mant - 1)) | 5,
                            exp_all | 3],  # the last one is a signalling NaN
                           dtype=itype).view(dt)
    return np.concatenate([vals, payload_nan])


def make_array(dtype, shape, rng, repetitive=None):
    """Random values of dtype covering its extremes (and NaN/inf/-0.0 for floats).

    repetitive (default: for 1-d arrays) makes the tail a repeat of the first 1000
    values so that the array compresses; otherwise it is noise LZ4 cannot shrink."""
    if repetitive is None:
        repetitive = len(shape) == 1
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
        ext = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dt)
        flat[: min(n, len(ext))] = ext[: min(n, len(ext))]
    elif dt.kind == "f":
        flat = (rng.standard_normal(n) * 1000).astype(dt)
        sp = special_floats(dt)
        flat[: min(n, len(sp))] = sp[: min(n, len(sp))]
    elif dt.kind == "c":
        part = np.dtype("f4") if dt.itemsize == 8 else np.dtype("f8")
        re = (rng.standard_normal(n) * 1000).astype(part)
        im = (rng.standard_normal(n) * 1000).astype(part)
        sp = special_floats(part)
        k = min(n, len(sp))
        re[:k] = sp[:k]
        im[:k] = sp[::-1][:k]
        flat = np.empty(n, dt)
        flat.real = re
        flat.imag = im
        # write raw bits so NaN payloads survive (assignment through .real may canonicalise)
        pair = flat.view(part).reshape(-1, 2) if n else flat.view(part).reshape(0, 2)
        pair[:, 0] = re
        pair[:, 1] = im
    else:
        raise ValueError(dtype)
    if repetitive and n > 4000:
        # make the tail repetitive so that large arrays compress (auto chooses lz4 for them)
        flat[4000:] = np.resize(flat[:1000], n - 4000)
    return flat.reshape(shape)


class StoreTestCase(unittest.TestCase):
    maxDiff = 4000

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="amphora-interop-")
        self.tmp = self._tmp.name
        self.store = os.path.join(self.tmp, "store")
        self.amphora("init", check=EXIT_OK)

    def tearDown(self):
        # stored objects may be read-only: make everything writable before cleanup
        for root, dirs, files in os.walk(self.tmp):
            for d in dirs:
                try:
                    os.chmod(os.path.join(root, d), 0o755)
                except OSError:
                    pass
        self._tmp.cleanup()

    # -- CLI wrappers --------------------------------------------------------

    def amphora(self, *args, check=None):
        return run_cli("--store", self.store, *args, check=check)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def save(self, arr, name, **kw):
        p = self.path(name)
        np.save(p, arr, **kw)
        return p

    def import_file(self, path, name, compress=None):
        args = ["import", path, "--name", name]
        if compress is not None:
            args += ["--compress", compress]
        self.amphora(*args, check=EXIT_OK)
        return self.show(name)

    def show(self, ref):
        return json.loads(self.amphora("show", ref, "--json", check=EXIT_OK).stdout)

    def export(self, ref, name):
        out = self.path(name)
        self.amphora("export", ref, out, check=EXIT_OK)
        return out

    def object_dir(self, digest):
        self.assertTrue(digest.startswith("sha256:"), digest)
        hexd = digest[len("sha256:"):]
        d = os.path.join(self.store, "objects", "sha256", hexd[:2], hexd)
        self.assertTrue(os.path.isdir(d), d)
        return d

    def object_dirs(self):
        return sorted(glob.glob(os.path.join(self.store, "objects", "sha256", "*", "*")))

    def make_writable(self, path):
        os.chmod(os.path.dirname(path), os.stat(os.path.dirname(path)).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR | stat.S_IRUSR)

    # -- assertions ----------------------------------------------------------

    def assert_same_array(self, original, got, what=""):
        """got (loaded from an exported or stored file) equals original bit for bit, in C order, little-endian."""
        self.assertEqual(got.shape, original.shape, what)
        self.assertEqual(got.dtype, le_dtype(original.dtype), what)
        self.assertTrue(got.dtype.byteorder in ("<", "|", "="), f"{what}: {got.dtype.str}")
        self.assertTrue(np.array_equal(got, original, equal_nan=True), f"{what}: values differ")
        self.assertEqual(le_c_bytes(got), le_c_bytes(original), f"{what}: bytes differ")

    def assert_npy_file(self, path, original, what=""):
        """path is a .npy v1.0, data at data_offset(original), C order, that numpy loads and equals original."""
        with open(path, "rb") as f:
            raw = f.read()
        major, minor, off, header = npy_header_info(raw)
        start = data_offset(original)
        self.assertEqual((major, minor), (1, 0), what)
        self.assertEqual(struct.unpack("<H", raw[8:10])[0] + 10, start, what)
        self.assertEqual(off, start, what)
        self.assertEqual(raw[start - 1:start], b"\n", what)
        self.assertFalse(header["fortran_order"], what)
        self.assertEqual(tuple(header["shape"]), original.shape, what)
        self.assertEqual(np.dtype(header["descr"]), le_dtype(original.dtype), what)
        self.assertEqual(len(raw), start + original.nbytes, what)
        self.assertEqual(raw[start:], le_c_bytes(original), f"{what}: data bytes differ")
        got = np.load(path)
        self.assert_same_array(original, got, what)
        return raw

    def assert_error(self, proc, code, *mentions):
        self.assertEqual(proc.returncode, code, f"stdout={proc.stdout!r} stderr={proc.stderr!r}")
        err = proc.stderr
        self.assertTrue(err.startswith("amphora: "), repr(err))
        self.assertTrue(err.endswith("\n"), repr(err))
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, f"expected a one-line message, got {err!r}")
        for m in mentions:
            self.assertIn(m, lines[0])
        self.assertNotIn("Traceback", err)
        return lines[0]


# ---------------------------------------------------------------------------
# 1. round trip for every dtype and shape class


class RoundTripTest(StoreTestCase):
    def round_trip(self, compress):
        rng = np.random.default_rng(1234)
        for dtype in ALL_DTYPES:
            for cls, shape in SHAPE_CLASSES.items():
                with self.subTest(dtype=dtype, shape=cls, compress=compress):
                    arr = make_array(dtype, shape, rng)
                    if cls == "0d":
                        kind = np.dtype(dtype).kind
                        if kind == "f":  # float32: -0.0; float16/64: a negative NaN with a payload
                            arr = np.array(special_floats(dtype)[3 if dtype == "float32" else -2])
                        elif kind == "c":
                            arr = np.array(complex(-0.0, np.inf), dtype=dtype)
                        else:
                            arr = np.array(5).astype(dtype)
                        self.assertEqual(arr.shape, ())
                    name = f"{dtype}-{cls}"
                    src = self.save(arr, f"{name}.npy")
                    info = self.import_file(src, name, compress)
                    meta = info["meta"]
                    self.assertEqual(info["materializer"], {"name": "amphora.tensor", "version": 1})
                    self.assertEqual(info["names"], [f"{name}@1"])
                    self.assertEqual(meta["dtype"], dtype)
                    self.assertEqual(meta["shape"], list(shape))
                    if compress == "none":
                        self.assertEqual(meta["encoding"], "npy")
                        self.assertEqual([f["path"] for f in info["files"]], ["tensor.npy"])
                    elif compress in CODECS:
                        encoding, payload, _, _, chunk = CODECS[compress]
                        self.assertEqual(meta["encoding"], encoding)
                        self.assertEqual(meta["chunk_bytes"], chunk)
                        self.assertEqual(meta["chunks"], 1 + -(-arr.nbytes // chunk))
                        self.assertEqual(sorted(f["path"] for f in info["files"]),
                                         ["tensor.chunks.npy", payload])
                    else:
                        self.assertIn(meta["encoding"], ("npy", "npy.lz4"))
                        if arr.nbytes < AUTO_MIN_BYTES:
                            self.assertEqual(meta["encoding"], "npy", "auto must not compress tensors under 64 KiB")
                    self.assertEqual(info["payload_bytes"], sum(f["size"] for f in info["files"]))
                    self.check_stats(arr, meta["stats"])
                    out = self.export(name, f"{name}.out.npy")
                    self.assert_npy_file(out, arr, f"{dtype} {cls} {compress}")
                    # and by digest
                    out2 = self.export(info["digest"], f"{name}.out2.npy")
                    with open(out, "rb") as a, open(out2, "rb") as b:
                        self.assertEqual(a.read(), b.read())

    def check_stats(self, arr, stats):
        dt = arr.dtype
        if arr.size == 0 or dt.kind == "c":
            self.assertIsNone(stats)
            return
        self.assertIsInstance(stats, dict)

        def num(v):
            return float(v) if isinstance(v, str) else v

        if dt.kind == "b":
            self.assertEqual(stats["min"], int(arr.min()))
            self.assertEqual(stats["max"], int(arr.max()))
            self.assertTrue(math.isclose(stats["mean"], arr.mean(), rel_tol=1e-12))
        elif dt.kind in "iu":
            self.assertEqual(stats["min"], int(arr.min()))
            self.assertEqual(stats["max"], int(arr.max()))
            exact = sum(int(x) for x in arr.reshape(-1).tolist()) / arr.size
            self.assertTrue(math.isclose(stats["mean"], exact, rel_tol=1e-12), (stats["mean"], exact))
        else:
            nan = int(np.isnan(arr).sum())
            self.assertEqual(stats["nan_count"], nan)
            if nan < arr.size:
                self.assertEqual(num(stats["min"]), float(np.nanmin(arr)))
                self.assertEqual(num(stats["max"]), float(np.nanmax(arr)))

    def test_round_trip_compress_none(self):
        self.round_trip("none")

    def test_round_trip_compress_lz4(self):
        self.round_trip("lz4")

    def test_round_trip_compress_zstd(self):
        self.round_trip("zstd")

    def test_round_trip_compress_auto(self):
        self.round_trip("auto")

    def test_auto_policy(self):
        rng = np.random.default_rng(7)
        cases = {
            "tiny": (np.zeros(100, "<f8"), "npy"),                           # < 64 KiB, compressible
            "random": (rng.standard_normal(200_000), "npy"),                 # 1.6 MB of noise
            "zeros": (np.zeros(200_000, "<f8"), "npy.lz4"),                  # 1.6 MB, compresses ~255:1
            # a slow int32 ramp with noise: the planes of its differences take far fewer bytes than it does
            "ramp": ((np.arange(1_000_000) // 64 + rng.integers(0, 4, 1_000_000)).astype("<i4"), "delta.shuffled.npy.lz4"),
            # float32 weights at half precision's 10 mantissa bits: byte planes, and floats have no delta
            "weights": (((0.05 * rng.standard_normal(1_000_000)).astype("<f4").view("<u4")
                         & np.uint32(0xFFFFE000)).view("<f4"), "shuffled.npy.lz4"),
        }
        for name, (arr, expect) in cases.items():
            with self.subTest(name=name):
                info = self.import_file(self.save(arr, f"{name}.npy"), name)  # default is auto
                self.assertEqual(info["meta"]["encoding"], expect)
                self.assert_npy_file(self.export(name, f"{name}.out.npy"), arr, name)
                # show says what auto chose and what the sample showed
                shown = self.amphora("show", name, check=EXIT_OK).stdout
                line = next(l for l in shown.splitlines() if l.startswith("encoding"))
                self.assertIn(expect, line)
                if arr.nbytes >= AUTO_MIN_BYTES:
                    sample = info["meta"]["auto"]
                    self.assertIn(f"LZ4 took a 512 KiB sample to {100 * sample['lz4'] / sample['sample_bytes']:.0f}%",
                                  line)
                    self.assertEqual(sample["sample_bytes"], 8 * 65536)
                    self.assertEqual("delta_lz4" in sample, arr.dtype.kind in "iu")
                    if "delta_lz4" in sample:
                        self.assertIn(f"its differences to {100 * sample['delta_lz4'] / sample['sample_bytes']:.0f}%",
                                      line)
                else:
                    self.assertNotIn("auto", info["meta"])
                    self.assertNotIn("chosen by auto", line)


# ---------------------------------------------------------------------------
# 2. numpy opens stored payload files in place


class NumpyLoadsPayloadTest(StoreTestCase):
    def test_np_load_stored_tensor_npy(self):
        rng = np.random.default_rng(2)
        arrays = {
            "f32-3d": make_array("float32", (4, 5, 6), rng),
            "i64-1d": make_array("int64", (1000,), rng),
            "bool-2d": make_array("bool", (7, 9), rng),
            "c128-2d": make_array("complex128", (3, 11), rng),
            "f16-1d": make_array("float16", (50,), rng),
            "scalar": np.array(5),
            "empty": np.zeros((0, 3), "<f8"),
        }
        for name, arr in arrays.items():
            with self.subTest(name=name):
                info = self.import_file(self.save(arr, f"{name}.npy"), name, "none")
                d = self.object_dir(info["digest"])
                payload = os.path.join(d, "tensor.npy")
                with open(payload, "rb") as f:
                    head = f.read(12)
                self.assertEqual(head[:8], b"\x93NUMPY\x01\x00")
                self.assertEqual(10 + struct.unpack("<H", head[8:10])[0], data_offset(arr))
                self.assert_npy_file(payload, arr, name)
                with open(payload, "rb") as f:
                    version = np.lib.format.read_magic(f)
                    self.assertEqual(version, (1, 0))
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                    self.assertEqual(f.tell(), data_offset(arr))
                self.assertEqual(shape, arr.shape)
                self.assertFalse(fortran)
                self.assertEqual(dtype, arr.dtype)
                mm = np.load(payload, mmap_mode="r")  # empty arrays included (docs/FORMAT.md 5.4)
                self.assertIsInstance(mm, np.memmap)
                self.assertEqual(mm.offset, data_offset(arr))
                self.assertEqual(mm.shape, arr.shape)
                self.assertTrue(mm.flags["C_CONTIGUOUS"])
                self.assertEqual(np.asarray(mm).tobytes(), le_c_bytes(arr))
                self.assertTrue(np.array_equal(mm, arr, equal_nan=True))
                del mm

    def test_np_load_mmaps_empty_and_0d_payloads(self):
        # numpy memory-maps from the page holding the data offset: data at 4096
        # in a 4096-byte file made it map zero bytes and fail.
        for dtype in ALL_DTYPES:
            for shape in ((0,), (0, 3), (3, 0, 2), ()):
                with self.subTest(dtype=dtype, shape=shape):
                    arr = np.zeros(shape, dtype) if shape else np.array(1).astype(dtype)
                    name = f"{dtype}-{len(shape)}-{0 in shape}"
                    info = self.import_file(self.save(arr, f"{name}.npy"), name, "none")
                    payload = os.path.join(self.object_dir(info["digest"]), "tensor.npy")
                    self.assertEqual(os.path.getsize(payload), data_offset(arr) + arr.nbytes)
                    self.assertLess(data_offset(arr), HEADER_BYTES)
                    self.assertEqual(data_offset(arr) % 64, 0)
                    mm = np.load(payload, mmap_mode="r")
                    self.assertIsInstance(mm, np.memmap)
                    self.assertEqual(mm.dtype, le_dtype(arr.dtype))
                    self.assertEqual(mm.shape, arr.shape)
                    self.assertEqual(np.asarray(mm).tobytes(), le_c_bytes(arr))
                    del mm
                    # the export follows the same rule, so it maps too
                    out = self.export(name, f"{name}.out.npy")
                    self.assert_npy_file(out, arr, name)
                    self.assertEqual(np.load(out, mmap_mode="r").shape, arr.shape)


# ---------------------------------------------------------------------------
# 3. files numpy writes import correctly


class NumpyWrittenFilesTest(StoreTestCase):
    def check_import(self, arr, name, writer=None):
        """Imports arr (as written by `writer` or np.save) with none and lz4 and compares everything."""
        src = self.path(f"{name}.npy")
        if writer is None:
            np.save(src, arr)
        else:
            with open(src, "wb") as f:
                writer(f, arr)
        # numpy reads back what it wrote
        self.assertEqual(le_c_bytes(np.load(src)), le_c_bytes(arr))
        for compress in ("none", "lz4", "zstd"):
            ref = f"{name}-{compress}"
            info = self.import_file(src, ref, compress)
            self.assertEqual(info["meta"]["dtype"], le_dtype(arr.dtype).name)
            self.assertEqual(info["meta"]["shape"], list(arr.shape))
            if compress == "none":
                stored = os.path.join(self.object_dir(info["digest"]), "tensor.npy")
                self.assert_npy_file(stored, arr, f"{name} stored")
            out = self.export(ref, f"{ref}.out.npy")
            self.assert_npy_file(out, arr, f"{name} {compress}")
        # the same values written in native form dedup to the same artifact
        native = arr.astype(le_dtype(arr.dtype), order="C")
        self.assertEqual(native.shape, arr.shape)
        self.assertEqual(le_c_bytes(native), le_c_bytes(arr))
        info_native = self.import_file(self.save(native, f"{name}-native.npy"), f"{name}-native", "none")
        self.assertEqual(info_native["digest"], self.show(f"{name}-none")["digest"])

    def test_big_endian(self):
        rng = np.random.default_rng(3)
        for dt in (">f8", ">i4", ">c8", ">u2", ">f4", ">f2", ">i8", ">c16", ">u8"):
            with self.subTest(dtype=dt):
                le = make_array(np.dtype(dt).newbyteorder("<"), (6, 7), rng)
                be = le.astype(dt) if np.dtype(dt).kind != "f" else le.byteswap().view(le.dtype.newbyteorder(">"))
                self.assertEqual(be.dtype.str, dt)
                self.assertEqual(be.byteswap().tobytes(), le.tobytes())  # truly big-endian bytes
                self.check_import(be, "be-" + dt[1:])

    def test_fortran_order(self):
        rng = np.random.default_rng(4)
        cases = {
            "f2d-f8": np.asfortranarray(make_array("float64", (13, 17), rng)),
            "f3d-i2": np.asfortranarray(make_array("int16", (3, 4, 5), rng)),
            "f3d-c8": np.asfortranarray(make_array("complex64", (2, 3, 4), rng)),
            "f3d-be-i4": np.asfortranarray(make_array("int32", (4, 3, 2), rng).astype(">i4")),
            "f2d-bool": np.asfortranarray(make_array("bool", (5, 8), rng)),
        }
        for name, arr in cases.items():
            with self.subTest(name=name):
                self.assertTrue(arr.flags["F_CONTIGUOUS"] and not arr.flags["C_CONTIGUOUS"])
                buf = io.BytesIO()
                np.save(buf, arr)
                _, _, _, header = npy_header_info(buf.getvalue())
                self.assertTrue(header["fortran_order"])
                self.check_import(arr, name)

    def test_header_versions(self):
        rng = np.random.default_rng(5)
        for version in ((1, 0), (2, 0), (3, 0)):
            for dtype, shape in (("float32", (3, 4, 5)), ("uint16", (100,)), ("float64", ())):
                with self.subTest(version=version, dtype=dtype):
                    arr = make_array(dtype, shape, rng) if shape else np.array(np.float64(np.nan))
                    name = f"v{version[0]}-{dtype}"
                    src = self.path(f"{name}.npy")
                    with open(src, "wb") as f:
                        np.lib.format.write_array(f, arr, version=version)
                    with open(src, "rb") as f:
                        self.assertEqual(tuple(f.read(8)[6:8]), version)
                    self.check_import(arr, name,
                                      writer=lambda f, a, v=version: np.lib.format.write_array(f, a, version=v))
        # version 2.0 with a Fortran-ordered big-endian array
        arr = np.asfortranarray(make_array("float64", (6, 5), rng)).astype(">f8", order="F")
        self.check_import(arr, "v2-fortran-be",
                          writer=lambda f, a: np.lib.format.write_array(f, a, version=(2, 0)))

    def test_unaligned_hand_written_header(self):
        # A minimal header (no 64-byte padding): data starts at an odd-ish offset.
        arr = np.array([1.5, -0.0, np.nan, np.inf, 3.25], "<f8")
        text = "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"
        header = text + " " * (3 - (10 + len(text) + 1) % 3) + "\n"  # offset not a multiple of 8
        raw = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + arr.tobytes()
        self.assertNotEqual((10 + len(header)) % 8, 0)
        src = self.path("unaligned.npy")
        with open(src, "wb") as f:
            f.write(raw)
        self.assertEqual(np.load(src).tobytes(), arr.tobytes())
        self.import_file(src, "unaligned", "none")
        self.assert_npy_file(self.export("unaligned", "unaligned.out.npy"), arr, "unaligned")


# ---------------------------------------------------------------------------
# 4. lz4 -d and zstd -d of a packed payload


class CodecToolInteropTest(StoreTestCase):
    """Each codec's payload is standard frames: its own command-line tool restores the .npy."""

    def decompress(self, tool, data):
        proc = subprocess.run([tool, "-d", "-c"], input=data, capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def test_lz4_cli_decompresses_payload(self):
        self.tool_decompresses_payload("lz4")

    def test_zstd_cli_decompresses_payload(self):
        self.tool_decompresses_payload("zstd")

    def test_lz4_empty_and_scalar(self):
        self.empty_and_scalar("lz4")

    def test_delta_chunks_decode_with_the_tool_and_a_running_sum(self):
        # Ids that mostly rise, with falls: --encode delta with zstd codes
        # each chunk's differences; zstd -d gives them, and a running sum per
        # chunk of the zigzag-decoded differences (wrapping, as docs/FORMAT.md
        # §5.6 says) gives the values.
        rng = np.random.default_rng(3)
        n = 700_000
        ids = np.arange(n, dtype=np.int64) * 5 // 2 + rng.integers(0, 4, n)
        falls = rng.integers(0, n, 700)
        ids[falls] = rng.integers(0, 1 << 40, falls.size)
        src = self.save(ids, "ids.npy")
        for encode, expect in (("delta", "delta.npy.zst"), ("delta,shuffle", "delta.shuffled.npy.zst")):
            with self.subTest(encode=encode):
                name = encode.replace(",", "-")
                self.amphora("import", src, "--name", name, "--compress", "zstd", "--encode", encode, check=EXIT_OK)
                info = self.show(name)
                self.assertEqual(info["meta"]["encoding"], expect)
                self.assertNotIn("recipe", info["meta"])
                self.assert_npy_file(self.export(name, f"{name}.out.npy"), ids, name)
                shown = self.amphora("show", name, check=EXIT_OK).stdout
                self.assertIn("differences of integers chunk by chunk", shown)
                # Shuffled chunks are frames with a zstd block per byte plane
                # (FORMAT.md §5.7): still standard frames the tool decodes.
                with open(os.path.join(self.object_dir(info["digest"]), "tensor.npy.zst"), "rb") as f:
                    decoded = self.decompress("zstd", f.read())
                offset = data_offset(ids)
                def elements_of(chunk_bytes):  # byte planes back to elements, when shuffled
                    if "shuffle" not in encode:
                        return chunk_bytes
                    return np.frombuffer(chunk_bytes, np.uint8).reshape(8, -1).T.tobytes()
                def values_of(z):  # zigzag back to differences, then a running sum
                    d = (z >> np.uint64(1)) ^ ((z & np.uint64(1)) * np.iinfo(np.uint64).max)
                    return np.cumsum(d, dtype="<u8")
                chunk = info["meta"]["chunk_bytes"]
                self.assertEqual(chunk, CODECS["zstd"][4])
                values = np.concatenate([values_of(np.frombuffer(elements_of(decoded[k:k + chunk]), "<u8"))
                                         for k in range(offset, len(decoded), chunk)]).view("<i8")
                self.assertTrue(np.array_equal(values, ids))
        # Smaller than the same ids without delta.
        self.amphora("import", src, "--name", "plain", "--compress", "zstd", "--encode", "shuffle", check=EXIT_OK)
        sizes = {name: next(f["size"] for f in self.show(name)["files"] if f["path"] == "tensor.npy.zst")
                 for name in ("plain", "delta-shuffle")}
        self.assertLess(sizes["delta-shuffle"], 0.8 * sizes["plain"])

    def test_zstd_empty_and_scalar(self):
        self.empty_and_scalar("zstd")

    def tool_decompresses_payload(self, compress):
        encoding, payload, magic, tool, chunk = CODECS[compress]
        # ~3 MB that LZ4 compresses well (period of 4000 bytes, inside the 64 KiB window)
        arr = np.tile(np.arange(1000, dtype="<i4"), 750)
        self.assertEqual(arr.nbytes, 3_000_000)
        src = self.save(arr, "arr.npy")
        packed = self.import_file(src, "packed", compress)
        raw = self.import_file(src, "raw", "none")
        self.assertNotEqual(packed["digest"], raw["digest"])
        meta = packed["meta"]
        n_data = -(-arr.nbytes // chunk)
        self.assertEqual(meta["encoding"], encoding)
        self.assertEqual(meta["chunk_bytes"], chunk)
        self.assertEqual(meta["chunks"], 1 + n_data)

        pdir = self.object_dir(packed["digest"])
        rdir = self.object_dir(raw["digest"])
        payload_path = os.path.join(pdir, payload)
        with open(payload_path, "rb") as f:
            packed_bytes = f.read()
        with open(os.path.join(rdir, "tensor.npy"), "rb") as f:
            raw_npy = f.read()
        self.assertLess(len(packed_bytes), arr.nbytes // 4, "a periodic array should compress well")

        # lz4 -d of the whole file == tensor.npy of the uncompressed import, byte for byte
        decoded = self.decompress(tool, packed_bytes)
        self.assertEqual(len(decoded), data_offset(arr) + arr.nbytes)
        self.assertEqual(decoded, raw_npy)
        out = self.path("decoded.npy")
        with open(out, "wb") as f:
            f.write(decoded)
        self.assert_npy_file(out, arr, f"{tool} -d output")

        # also through the tool's file mode
        out2 = self.path("decoded2.npy")
        proc = subprocess.run([tool, "-d", "-f", "-q", payload_path, "-o", out2] if tool == "zstd"
                              else [tool, "-d", "-f", "-q", payload_path, out2], capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out2, "rb") as f:
            self.assertEqual(f.read(), raw_npy)

        # the chunk index describes the frames exactly
        index_path = os.path.join(pdir, "tensor.chunks.npy")
        index = np.load(index_path)
        self.assertEqual(index.dtype, np.dtype("<u8"))
        self.assertEqual(index.shape, (meta["chunks"] + 1, 2))
        packed_off = [int(x) for x in index[:, 0]]
        raw_off = [int(x) for x in index[:, 1]]
        self.assertEqual(packed_off[0], 0)
        self.assertEqual(raw_off[0], 0)
        self.assertEqual(packed_off[-1], len(packed_bytes))
        self.assertEqual(packed_off[-1], os.path.getsize(payload_path))
        self.assertEqual(raw_off[-1], data_offset(arr) + arr.nbytes)
        self.assertEqual(raw_off[-1], len(raw_npy))
        self.assertTrue(all(a < b for a, b in zip(packed_off, packed_off[1:])), packed_off)
        self.assertTrue(all(a < b for a, b in zip(raw_off, raw_off[1:])), raw_off)
        expect_raw = [0, data_offset(arr)] + [min(data_offset(arr) + k * chunk, data_offset(arr) + arr.nbytes)
                                          for k in range(1, n_data + 1)]
        self.assertEqual(raw_off, expect_raw)
        for k in range(meta["chunks"]):
            frame = packed_bytes[packed_off[k]:packed_off[k + 1]]
            self.assertEqual(frame[:4], magic, f"frame {k} does not start with the {tool} magic")
            self.assertEqual(self.decompress(tool, frame), raw_npy[raw_off[k]:raw_off[k + 1]], f"frame {k}")

        # and exporting either artifact gives identical files
        with open(self.export("packed", "p.npy"), "rb") as a, open(self.export("raw", "r.npy"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def empty_and_scalar(self, compress):
        _, payload, _, tool, _ = CODECS[compress]
        for name, arr in (("empty", np.zeros((0, 3), "<f4")), ("scalar", np.array(7, "<i8"))):
            with self.subTest(name=name):
                info = self.import_file(self.save(arr, f"{name}.npy"), name, compress)
                d = self.object_dir(info["digest"])
                with open(os.path.join(d, payload), "rb") as f:
                    decoded = self.decompress(tool, f.read())
                out = self.path(f"{name}.dec.npy")
                with open(out, "wb") as f:
                    f.write(decoded)
                self.assert_npy_file(out, arr, name)
                index = np.load(os.path.join(d, "tensor.chunks.npy"))
                self.assertEqual(index.shape, (info["meta"]["chunks"] + 1, 2))
                self.assertEqual(int(index[-1, 1]), data_offset(arr) + arr.nbytes)
                self.assertEqual(int(index[-1, 0]), os.path.getsize(os.path.join(d, payload)))


# ---------------------------------------------------------------------------
# 5. digests recomputed with hashlib


class DigestTest(StoreTestCase):
    def test_recompute_all_digests(self):
        rng = np.random.default_rng(6)
        imports = [
            ("small-raw", make_array("float32", (10, 10), rng), "none"),
            ("small-lz4", make_array("int16", (300,), rng), "lz4"),
            ("big-raw", np.arange(3_000_000, dtype="<i4"), "none"),                     # 12 MB: 6 pieces
            ("mid-raw", np.arange(200_000, dtype="<i4"), "none"),                       # 800 KB: 4 pieces of 256 KiB
            ("big-lz4", rng.standard_normal(1_500_000).astype("<f8"), "lz4"),            # 12 MB incompressible
            ("compressible-lz4", np.tile(np.arange(1000, dtype="<i4"), 750), "lz4"),
            ("empty", np.zeros((0, 3), "<u1"), "none"),
        ]
        shown = {}
        for name, arr, compress in imports:
            shown[name] = self.import_file(self.save(arr, f"{name}.npy"), name, compress)
        by_digest = {info["digest"]: info for info in shown.values()}
        dirs = self.object_dirs()
        self.assertEqual(len(dirs), len(imports))
        multi_piece_files = 0
        for d in dirs:
            hexd = os.path.basename(d)
            with self.subTest(artifact=hexd):
                self.assertEqual(os.path.basename(os.path.dirname(d)), hexd[:2])
                with open(os.path.join(d, "manifest.json"), "rb") as f:
                    mbytes = f.read()
                self.assertEqual(hashlib.sha256(mbytes).hexdigest(), hexd)
                digest = "sha256:" + hexd
                self.assertIn(digest, by_digest)
                info = by_digest[digest]
                self.assertEqual(self.show(digest)["digest"], digest)
                manifest = json.loads(mbytes)
                # canonical form: sorted keys, no whitespace
                canon = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                self.assertEqual(canon.encode(), mbytes)
                self.assertEqual(sorted(manifest), ["children", "files", "manifest_version", "materializer", "meta"])
                self.assertEqual(manifest["manifest_version"], 2)
                self.assertEqual(manifest["children"], [])
                self.assertEqual(manifest["materializer"], {"name": "amphora.tensor", "version": 1})
                self.assertEqual(manifest["meta"], info["meta"])
                self.assertEqual(manifest["files"], info["files"])
                present = sorted(os.listdir(d))
                self.assertEqual(present, sorted(["manifest.json"] + [f["path"] for f in manifest["files"]]))
                for entry in manifest["files"]:
                    p = os.path.join(d, entry["path"])
                    with open(p, "rb") as f:
                        data = f.read()
                    self.assertEqual(len(data), entry["size"])
                    piece = entry["piece_size"]
                    if entry["path"] != "tensor.npy.lz4":  # a stream's piece size follows its size hint
                        self.assertEqual(piece, expected_piece_size(len(data)), entry["path"])
                    pieces = [hashlib.sha256(data[i:i + piece]).hexdigest()
                              for i in range(0, len(data), piece)] or [hashlib.sha256(b"").hexdigest()]
                    self.assertEqual(entry["sha256"], pieces, entry["path"])
                    self.assertEqual(len(entry["sha256"]), max(1, -(-len(data) // piece)))
                    if len(data) <= piece:
                        # sha256sum-style: the whole file's hash is the single piece
                        self.assertEqual(hashlib.sha256(data).hexdigest(), entry["sha256"][0])
                    else:
                        multi_piece_files += 1
                        self.assertNotEqual(hashlib.sha256(data).hexdigest(), entry["sha256"][0])
        self.assertEqual(multi_piece_files, 3, "big-raw, mid-raw and big-lz4 should each have a multi-piece file")
        self.assertEqual(len(shown["big-raw"]["files"][0]["sha256"]), 6)
        self.assertEqual(shown["mid-raw"]["files"][0]["piece_size"], 256 * 1024)
        self.assertEqual(len(shown["mid-raw"]["files"][0]["sha256"]), 4)

        # name records point at the digests show reports
        for name, info in shown.items():
            with open(os.path.join(self.store, "names", name, "1.json")) as f:
                record = json.load(f)
            self.assertEqual(record["digest"], info["digest"])
            self.assertEqual(record["version"], 1)
        self.amphora("verify", check=EXIT_OK)


# ---------------------------------------------------------------------------
# 6. bad input


class BadInputTest(StoreTestCase):
    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def npy_bytes(self, arr):
        b = io.BytesIO()
        np.save(b, arr)
        return b.getvalue()

    def hand_header(self, text, version=1):
        prefix = 10 if version == 1 else 12
        header = text + " " * (63 - (prefix + len(text)) % 64) + "\n"
        self.assertEqual((prefix + len(header)) % 64, 0)
        length = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
        return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode()

    def assert_nothing_stored(self):
        self.assertEqual(self.object_dirs(), [])
        self.assertEqual(json.loads(self.amphora("ls", "--json", check=EXIT_OK).stdout), [])

    def test_truncated_npy(self):
        full = self.npy_bytes(np.arange(1000, dtype="<f8"))
        p = self.write("truncated.npy", full[: len(full) - 3001])  # cut mid-data, mid-element
        proc = self.amphora("import", p, "--name", "t")
        self.assert_error(proc, EXIT_CORRUPT, "truncated.npy")
        self.assert_nothing_stored()

    def test_header_claims_more_data(self):
        data = np.arange(100, dtype="<i4").tobytes()
        p = self.write("short.npy", self.hand_header("{'descr': '<i4', 'fortran_order': False, 'shape': (1000,), }")
                       + data)
        with self.assertRaises(Exception):  # numpy agrees the file is bad
            np.load(p)
        proc = self.amphora("import", p, "--name", "short")
        self.assert_error(proc, EXIT_CORRUPT, "short.npy")
        self.assert_nothing_stored()

    def test_header_length_beyond_file(self):
        p = self.write("hlen.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", 5000) + b"{'descr': '<i4'")
        self.assert_error(self.amphora("import", p, "--name", "hlen"), EXIT_CORRUPT, "hlen.npy")

    def test_unsupported_dtypes(self):
        cases = {
            "unicode.npy": np.array(["a", "b"]),                                   # '<U1'
            "struct.npy": np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")]),        # structured
            "object-free-bytes.npy": np.array([b"ab", b"cd"]),                     # '|S2'
            "datetime.npy": np.array(["2020-01-01"], dtype="datetime64[D]"),
            "longdouble.npy": np.zeros(3, dtype=np.longdouble),
        }
        for fname, arr in cases.items():
            with self.subTest(file=fname):
                p = self.path(fname)
                np.save(p, arr)
                self.assertEqual(np.load(p).dtype, arr.dtype)  # a well-formed file numpy reads back
                # well formed but of a dtype Amphora does not handle: Unsupported, exit 1
                self.assert_error(self.amphora("import", p, "--name", "u"), EXIT_FAILURE, fname, "not supported"
                                  if fname == "struct.npy" else "unsupported dtype")
        self.assert_nothing_stored()

    def test_structured_dtype_is_unsupported_not_corrupt(self):
        p = self.path("struct.npy")
        np.save(p, np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")]))
        self.assert_error(self.amphora("import", p, "--name", "s"), EXIT_FAILURE, "struct.npy")

    def test_headers_numpy_refuses(self):
        # Each header is one numpy.load refuses; amphora must refuse it too, always as damaged input.
        u1 = "{'descr': '|u1', 'fortran_order': False, 'shape': %s, }"
        cases = {
            "huge-times-zero": (u1 % "(9223372036854775807, 9223372036854775807, 0)", "non-zero dimensions"),
            "not-a-tuple": (u1 % "(3)", "trailing comma"),
            "leading-zero": (u1 % "(03,)", "leading zero"),
            "empty-element": (u1 % "(,)", "non-negative integer"),
            "double-comma": (u1 % "(3,,)", "non-negative integer"),
            "list-shape": (u1 % "[3]", "not a tuple"),
            "no-keys": ("{}", "lacks 'descr', 'fortran_order', 'shape'"),
            "missing-key": ("{'descr': '|u1', 'shape': (3,)}", "lacks 'fortran_order'"),
            "extra-key": ("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), 'x': 1}", "unexpected key 'x'"),
            "empty-dict-item": ("{'descr': '|u1', 'fortran_order': False, 'shape': (3,),, }", "expected a string"),
            "int-order": ("{'descr': '|u1', 'fortran_order': 0, 'shape': (3,)}", "neither True nor False"),
            "newline-in-string": ("{'descr': '|u\n1', 'fortran_order': False, 'shape': (3,)}", "line break"),
        }
        for name, (text, reason) in cases.items():
            with self.subTest(case=name):
                p = self.write(f"{name}.npy", self.hand_header(text) + b"abc")
                with self.assertRaises(Exception, msg=f"numpy accepted {text!r}"):
                    np.load(p)
                self.assert_error(self.amphora("import", p, "--name", "h"), EXIT_CORRUPT, f"{name}.npy", reason)
        # numpy filters a Python 2 'L' out of 1.0 and 2.0 headers only
        text = u1 % "(3L,)"
        v3 = self.write("long-v3.npy", self.hand_header(text, version=3) + b"abc")
        with self.assertRaises(Exception):
            np.load(v3)
        self.assert_error(self.amphora("import", v3, "--name", "h"), EXIT_CORRUPT, "long-v3.npy", "Python 2")
        self.assert_nothing_stored()
        for version in (1, 2):
            p = self.write(f"long-v{version}.npy", self.hand_header(text, version=version) + b"abc")
            self.assertEqual(np.load(p).shape, (3,))
            self.assertEqual(self.import_file(p, f"long{version}")["meta"]["shape"], [3])

    def test_trailing_bytes_refused_on_purpose(self):
        p = self.write("tail.npy", self.npy_bytes(np.arange(4, dtype="<i4")) + b"\0\0")
        self.assertEqual(np.load(p).tolist(), [0, 1, 2, 3])  # numpy ignores the extra bytes
        self.assert_error(self.amphora("import", p, "--name", "t"), EXIT_CORRUPT, "tail.npy",
                          "2 unexpected bytes after the array data (NumPy would ignore them")
        self.assert_nothing_stored()

    def test_bool_bytes_other_than_0_or_1(self):
        p = self.write("bools.npy", self.hand_header("{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }")
                       + bytes([1, 0, 1, 2, 0]))
        self.assert_error(self.amphora("import", p, "--name", "b"), EXIT_CORRUPT, "bools.npy",
                          "bool element 3 holds the byte 2")
        self.assert_nothing_stored()

    def test_fifo_is_refused_at_once(self):
        fifo = self.path("pipe.npy")
        os.mkfifo(fifo)
        start = time.monotonic()
        try:
            proc = subprocess.run([CLI, "--store", self.store, "import", fifo, "--name", "p"],
                                  capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("amphora import of a FIFO blocked waiting for a writer")
        self.assertLess(time.monotonic() - start, 10)
        self.assert_error(proc, EXIT_USAGE, "pipe.npy is not a regular file (a FIFO)")
        self.assert_nothing_stored()

    def test_file_truncated_during_import(self):
        # The input shrinking under the reader must end in a clean error (or a
        # complete import of what was read first), never in SIGBUS.
        big = np.arange(25_000_000, dtype="<i8")  # 200 MB
        src = self.path("big.npy")
        for attempt, delay in enumerate((0.02, 0.1, 0.25, 0.5)):
            np.save(src, big)
            proc = subprocess.Popen([CLI, "--store", self.store, "import", src, "--name", f"big{attempt}",
                                     "--compress", "none"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            os.truncate(src, 1 << 20)
            try:
                out, err = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                self.fail("amphora import hung on a truncated file")
            with self.subTest(delay=delay):
                self.assertGreaterEqual(proc.returncode, 0, f"killed by signal {-proc.returncode}: {err!r}")
                self.assertIn(proc.returncode, (EXIT_OK, EXIT_CORRUPT), err)
                if proc.returncode == EXIT_CORRUPT:
                    self.assertTrue(err.startswith("amphora: ") and err.count("\n") == 1, err)
                    self.assertIn("big.npy", err)
        # whatever was stored is a complete, valid copy of the original
        for row in json.loads(self.amphora("ls", "--json", check=EXIT_OK).stdout):
            self.assertEqual(row["payload_bytes"], data_offset(big) + big.nbytes)
        self.amphora("verify", check=EXIT_OK)
        os.remove(src)

    def test_not_npy_at_all(self):
        p = self.write("random.npy", np.random.default_rng(8).integers(0, 256, 5000, dtype=np.uint8).tobytes())
        self.assert_error(self.amphora("import", p, "--name", "r"), EXIT_CORRUPT, "random.npy")
        p = self.write("empty.npy", b"")
        self.assert_error(self.amphora("import", p, "--name", "r"), EXIT_CORRUPT, "empty.npy")
        self.assert_nothing_stored()

    def test_shape_overflow(self):
        p = self.write("overflow.npy", self.hand_header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }") + b"\0" * 64)
        self.assert_error(self.amphora("import", p, "--name", "o"), EXIT_CORRUPT, "overflow.npy")
        # a single dimension past 2^63 bytes
        p = self.write("overflow1.npy", self.hand_header(
            "{'descr': '<c16', 'fortran_order': False, 'shape': (9223372036854775807,), }"))
        self.assert_error(self.amphora("import", p, "--name", "o"), EXIT_CORRUPT, "overflow1.npy")
        self.assert_nothing_stored()

    def test_unknown_refs(self):
        self.import_file(self.save(np.arange(5), "a.npy"), "a")
        for ref, mention in (("nosuch", "nosuch"), ("a@2", "'a'"), ("sha256:" + "0" * 64, "0" * 64),
                             ("deadbeef00", "deadbeef00")):
            with self.subTest(ref=ref):
                self.assert_error(self.amphora("show", ref, "--json"), EXIT_NOT_FOUND, mention)
                self.assert_error(self.amphora("export", ref, self.path("x.npy")), EXIT_NOT_FOUND, mention)
                self.assertFalse(os.path.exists(self.path("x.npy")))
        self.assertEqual(self.amphora("verify", "nosuch").returncode, EXIT_NOT_FOUND)

    def test_bad_name(self):
        p = self.save(np.arange(5), "a.npy")
        for bad in ("bad/name", "../escape", "", "-dash"):
            with self.subTest(name=bad):
                proc = self.amphora("import", p, "--name", bad)
                self.assertEqual(proc.returncode, EXIT_USAGE, proc.stderr)
                self.assertTrue(proc.stderr.startswith("amphora: "), proc.stderr)
        self.assert_error(self.amphora("import", p, "--name", "bad/name"), EXIT_USAGE, "bad/name")
        self.assert_nothing_stored()

    def test_import_without_name(self):
        p = self.save(np.arange(5), "a.npy")
        proc = self.amphora("import", p)
        self.assertEqual(proc.returncode, EXIT_USAGE)
        first = proc.stderr.splitlines()[0]
        self.assertTrue(first.startswith("amphora: "), proc.stderr)
        self.assertIn("--name", first)
        self.assert_nothing_stored()

    def test_usage_errors_are_one_line(self):
        p = self.save(np.arange(5), "a.npy")
        self.assert_error(self.amphora("import", p), EXIT_USAGE, "--name")
        self.assert_error(self.amphora("import", p, "--name", "x", "--bogus"), EXIT_USAGE, "--bogus")

    def test_bad_compress_value(self):
        p = self.save(np.arange(5), "a.npy")
        proc = self.amphora("import", p, "--name", "x", "--compress", "brotli")
        self.assertEqual(proc.returncode, EXIT_USAGE, proc.stderr)
        self.assertTrue(proc.stderr.startswith("amphora: "))
        self.assertIn("brotli", proc.stderr.splitlines()[0])
        self.assert_nothing_stored()

    def test_bad_level(self):
        p = self.save(np.arange(5), "a.npy")
        for args, says in ((("--compress", "zstd", "--level", "20"), "--level"),
                           (("--compress", "zstd", "--level", "0"), "--level"),
                           (("--level", "3"), "--compress"),
                           (("--compress", "lz4", "--level", "3"), "zstd only")):
            with self.subTest(args=args):
                proc = self.amphora("import", p, "--name", "x", *args)
                self.assertNotEqual(proc.returncode, EXIT_OK, proc.stderr)
                self.assertTrue(proc.stderr.startswith("amphora: "), proc.stderr)
                self.assertIn(says, proc.stderr.splitlines()[0])
        self.assert_nothing_stored()
        self.assertEqual(self.amphora("import", p, "--name", "x", "--compress", "zstd", "--level", "7").returncode,
                         EXIT_OK)
        self.assertEqual(self.show("x")["meta"]["zstd_level"], 7)
        self.assertIn("npy.zst (zstd in 256 KiB chunks at level 7)", self.amphora("show", "x", check=EXIT_OK).stdout)
        self.assertEqual(self.amphora("import", p, "--name", "y", "--compress", "lz4").returncode, EXIT_OK)
        self.assertIn("npy.lz4 (LZ4 in 1 MiB chunks)", self.amphora("show", "y", check=EXIT_OK).stdout)

    # -- damage inside the store ------------------------------------------

    def damage(self, path, fn):
        self.make_writable(path)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        data = fn(data)
        with open(path, "wb") as f:
            f.write(data)

    def assert_verify_names(self, proc, digest, fname):
        self.assertEqual(proc.returncode, EXIT_CORRUPT, proc.stdout + proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertTrue(line.startswith("amphora: "), line)
        text = proc.stderr
        self.assertIn(digest[len("sha256:"):], text)
        self.assertIn(fname, text)

    def test_flipped_byte_in_raw_payload(self):
        arr = np.arange(10_000, dtype="<i8")
        info = self.import_file(self.save(arr, "a.npy"), "a", "none")
        other = self.import_file(self.save(arr + 1, "b.npy"), "b", "none")
        self.amphora("verify", check=EXIT_OK)
        payload = os.path.join(self.object_dir(info["digest"]), "tensor.npy")

        def flip(d):
            d[data_offset(arr) + 12345] ^= 0x01
            return d

        self.damage(payload, flip)
        self.assert_verify_names(self.amphora("verify"), info["digest"], "tensor.npy")
        self.assert_verify_names(self.amphora("verify", "a"), info["digest"], "tensor.npy")
        proc = self.amphora("verify", "b")
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        self.assertNotIn(other["digest"][7:], self.amphora("verify").stderr)

    def test_truncated_raw_payload(self):
        arr = np.arange(10_000, dtype="<f4")
        info = self.import_file(self.save(arr, "a.npy"), "a", "none")
        payload = os.path.join(self.object_dir(info["digest"]), "tensor.npy")
        self.damage(payload, lambda d: d[: len(d) - 1000])
        self.assert_verify_names(self.amphora("verify"), info["digest"], "tensor.npy")
        out = self.path("out.npy")
        proc = self.amphora("export", "a", out)
        self.assert_error(proc, EXIT_CORRUPT, "tensor.npy")
        self.assertIn(info["digest"][7:19], proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_corrupt_lz4_compressed_frame(self):
        arr = np.tile(np.arange(1000, dtype="<i4"), 750)  # compresses: every data frame is an LZ4 block
        info = self.import_file(self.save(arr, "a.npy"), "a", "lz4")
        self.assertEqual(info["meta"].get("stored_chunks", 0), 0)
        d = self.object_dir(info["digest"])
        packed = os.path.join(d, "tensor.npy.lz4")
        index = np.load(os.path.join(d, "tensor.chunks.npy"))
        lo, hi = int(index[2, 0]), int(index[3, 0])  # frame 2: the second data chunk

        def flip(data):
            mid = (lo + hi) // 2
            for i in range(mid, mid + 8):
                data[i] ^= 0xFF
            return data

        self.damage(packed, flip)
        out = self.path("out.npy")
        proc = self.amphora("export", "a", out)
        self.assert_error(proc, EXIT_CORRUPT, "tensor.npy.lz4")
        self.assertFalse(os.path.exists(out))
        self.assert_verify_names(self.amphora("verify"), info["digest"], "tensor.npy.lz4")

    def test_corrupt_lz4_stored_frame(self):
        arr = np.arange(750_000, dtype="<i4")  # the array the brief suggests; LZ4 cannot shrink most chunks
        info = self.import_file(self.save(arr, "a.npy"), "a", "lz4")
        d = self.object_dir(info["digest"])
        packed = os.path.join(d, "tensor.npy.lz4")

        def flip(data):
            mid = len(data) // 2
            for i in range(mid, mid + 8):
                data[i] ^= 0xFF
            return data

        self.assertGreater(info["meta"]["stored_chunks"], 0)
        index = np.load(os.path.join(d, "tensor.chunks.npy"))
        with open(packed, "rb") as f:
            before = f.read()
        mid = len(before) // 2
        k = int(np.searchsorted(index[:, 0], mid, side="right")) - 1
        start = int(index[k, 0])
        self.assertTrue(1 <= k < info["meta"]["chunks"] and start + 19 < mid < int(index[k + 1, 0]) - 4)
        block_word = struct.unpack("<I", before[start + 15:start + 19])[0]
        self.assertTrue(block_word & 0x80000000, "precondition: the damaged frame holds a stored block")

        self.damage(packed, flip)
        self.assert_verify_names(self.amphora("verify"), info["digest"], "tensor.npy.lz4")
        out = self.path("out.npy")
        proc = self.amphora("export", "a", out)
        if proc.returncode == 0:
            self.assertTrue(np.array_equal(np.load(out), arr),
                            "export exited 0 but wrote data that differs from the imported array")
        self.assert_error(proc, EXIT_CORRUPT, "tensor.npy.lz4")

    def test_corrupt_lz4_truncated_and_header(self):
        arr = np.tile(np.arange(1000, dtype="<i4"), 750)
        info = self.import_file(self.save(arr, "a.npy"), "a", "lz4")
        d = self.object_dir(info["digest"])
        packed = os.path.join(d, "tensor.npy.lz4")
        with open(packed, "rb") as f:
            original = f.read()
        # damaged header frame (frame 0) magic
        self.damage(packed, lambda data: bytearray(b"\0\0\0\0") + data[4:])
        self.assert_error(self.amphora("export", "a", self.path("o1.npy")), EXIT_CORRUPT)
        self.assertEqual(self.amphora("verify").returncode, EXIT_CORRUPT)
        # truncated file
        self.damage(packed, lambda data: bytearray(original[: len(original) // 2]))
        self.assert_error(self.amphora("export", "a", self.path("o2.npy")), EXIT_CORRUPT)
        self.assertEqual(self.amphora("verify").returncode, EXIT_CORRUPT)
        # restored: everything is fine again
        self.damage(packed, lambda data: bytearray(original))
        self.amphora("verify", check=EXIT_OK)
        self.assert_npy_file(self.export("a", "o3.npy"), arr)


# ---------------------------------------------------------------------------
# 7. dedup, versions, refs, gc


class DedupVersionsTest(StoreTestCase):
    def test_dedup_versions_refs_gc(self):
        arr = np.linspace(-1, 1, 5000, dtype="<f8")
        src = self.save(arr, "a.npy")
        self.amphora("import", src, "--name", "emb", check=EXIT_OK)
        second = self.amphora("import", src, "--name", "emb", check=EXIT_OK)
        self.assertIn("emb@2", second.stdout)
        digest = self.show("emb")["digest"]
        self.assertEqual(len(self.object_dirs()), 1)
        self.assertEqual(os.path.basename(self.object_dirs()[0]), digest[7:])

        rows = json.loads(self.amphora("ls", "emb", "--json", check=EXIT_OK).stdout)
        self.assertEqual([r["version"] for r in rows], [1, 2])
        for r in rows:
            self.assertEqual(r["name"], "emb")
            self.assertEqual(r["digest"], digest)
            self.assertEqual(r["materializer"], "amphora.tensor")
            self.assertEqual(r["payload_bytes"], data_offset(arr) + arr.nbytes)
            self.assertNotIn("versions", r)
        top = json.loads(self.amphora("ls", "--json", check=EXIT_OK).stdout)
        self.assertEqual(len(top), 1)
        self.assertEqual((top[0]["name"], top[0]["version"], top[0]["versions"], top[0]["digest"]),
                         ("emb", 2, 2, digest))

        hexd = digest[7:]
        for ref in ("emb", "emb@1", "emb@2", digest, hexd, hexd[:12], hexd[:8]):
            with self.subTest(ref=ref):
                info = self.show(ref)
                self.assertEqual(info["digest"], digest)
                self.assertEqual(sorted(info["names"]), ["emb@1", "emb@2"])
                self.assert_npy_file(self.export(ref, "ref.npy"), arr, ref)
        # 7 hex digits are too short for a prefix: the ref is taken as a (missing) name
        self.assert_error(self.amphora("show", hexd[:7]), EXIT_NOT_FOUND, hexd[:7])

        # a second name with different content, then make it unreachable
        other = self.import_file(self.save(arr * 2, "b.npy"), "other", "lz4")
        self.assertEqual(len(self.object_dirs()), 2)

        dry = self.amphora("gc", "--dry-run", check=EXIT_OK)
        self.assertIn("would remove 0 artifacts", dry.stdout)
        self.assertEqual(len(self.object_dirs()), 2)
        real = self.amphora("gc", check=EXIT_OK)
        self.assertIn("removed 0 artifacts", real.stdout)
        self.assertEqual(len(self.object_dirs()), 2)
        self.amphora("verify", check=EXIT_OK)

        os.remove(os.path.join(self.store, "names", "other", "1.json"))
        young = self.amphora("gc", "--dry-run", check=EXIT_OK)
        self.assertIn("would remove 0 artifacts", young.stdout)
        self.assertIn("1 unnamed, saved less than 60 s ago", young.stdout)
        dry = self.amphora("gc", "--dry-run", "--grace", "0", check=EXIT_OK)
        self.assertIn("would remove 1 artifact", dry.stdout)
        self.assertIn(other["digest"], dry.stdout)
        self.assertNotIn(digest, dry.stdout)
        self.assertEqual(len(self.object_dirs()), 2, "--dry-run must not delete")
        real = self.amphora("gc", "--grace=0", check=EXIT_OK)
        self.assertIn("removed 1 artifact", real.stdout)
        self.assertEqual([os.path.basename(d) for d in self.object_dirs()], [hexd])
        for ref in ("emb@1", "emb@2", digest):
            self.assert_npy_file(self.export(ref, "after-gc.npy"), arr, ref)
        self.assertEqual(self.amphora("show", other["digest"]).returncode, EXIT_NOT_FOUND)
        self.amphora("verify", check=EXIT_OK)

    def test_same_content_different_source_layout_dedups(self):
        # big-endian Fortran file and a native C file with the same values share one artifact
        rng = np.random.default_rng(9)
        arr = make_array("float32", (20, 30), rng)
        d1 = self.import_file(self.save(arr, "c.npy"), "x", "none")["digest"]
        d2 = self.import_file(self.save(np.asfortranarray(arr.astype(">f4")), "f.npy"), "x", "none")["digest"]
        self.assertEqual(d1, d2)
        self.assertEqual(len(self.object_dirs()), 1)
        rows = json.loads(self.amphora("ls", "x", "--json", check=EXIT_OK).stdout)
        self.assertEqual([(r["version"], r["digest"]) for r in rows], [(1, d1), (2, d1)])


# ---------------------------------------------------------------------------


def main():
    global CLI
    argv = [sys.argv[0]]
    args = sys.argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--cli" and i + 1 < len(args):
            CLI = args[i + 1]
            i += 2
            continue
        if a.startswith("--cli="):
            CLI = a[len("--cli="):]
            i += 1
            continue
        argv.append(a)
        i += 1
    if not CLI:
        sys.exit("usage: test_interop.py --cli PATH_TO_AMPHORA [unittest args] (or set AMPHORA_CLI)")
    CLI = os.path.abspath(CLI)
    deadline = time.monotonic() + 60  # the binary may be mid-rebuild: give it a moment to appear
    while not os.access(CLI, os.X_OK):
        if time.monotonic() > deadline:
            sys.exit(f"{CLI} is not an executable file")
        time.sleep(1)
    if shutil.which("lz4") is None:
        sys.exit("the lz4 command-line tool is required")
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
