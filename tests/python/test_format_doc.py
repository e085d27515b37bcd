#!/usr/bin/python3
"""Runs the code and worked examples in docs/FORMAT.md against real artifacts.

The spec's Python (the §3.5 verifier, the §5.6 LZ4 frame, block and row
readers) and its worked examples (the store marker, a manifest with its
digest, the .npy header template, the dtype table, the chunk index example)
are extracted from the Markdown and checked against what the `amphora` CLI
writes into temporary stores, so the document cannot drift from the
implementation unnoticed.

Run as:
    /usr/bin/python3 tests/python/test_format_doc.py --cli build/bin/amphora

(or set AMPHORA_CLI). A ```python block that does not run as written fails
the test, naming the block: the fix belongs in the document.
"""

import ast
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
import warnings

import numpy as np

from cli_support import le_c_bytes
from cli_support import read_bytes as read, write_bytes as write

CLI = os.environ.get("AMPHORA_CLI", "")
# The test helper that writes the composite worked example (tests/helpers/writer.cpp).
WRITER = os.environ.get("AMPHORA_TEST_WRITER", "")
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "FORMAT.md")

EXIT_OK, EXIT_CORRUPT = 0, 4

# The functions the tests call. Blocks are found by what they define, not by
# where they sit, so the document can be reorganised freely.
REQUIRED_FUNCTIONS = ("verify_artifact", "xxh32_short", "frame_header", "lz4_block_decode", "decode_frame",
                      "decode_zstd_frame", "undelta_chunk", "read_rows",
                      "decode", "read_records")


# ---------------------------------------------------------------------------
# The document


class Block:
    def __init__(self, line, info, text, heading):
        self.line, self.info, self.text, self.heading = line, info, text, heading
        self.defines = []
        self.error = None

    def describe(self):
        what = f"defines {', '.join(self.defines)}" if self.defines else "defines no function"
        return f"docs/FORMAT.md ```{self.info} block at line {self.line} (under '{self.heading}', {what})"


class Document:
    """FORMAT.md split into fenced blocks, each tagged with its heading; the
    ```python blocks executed in order in one namespace, as a reader pasting
    them into one file would."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as fh:
            self.text = fh.read()
        self.blocks = []
        heading, fence, start, body = "(top of file)", None, 0, []
        for number, line in enumerate(self.text.splitlines(keepends=True), 1):
            if fence is None:
                if line.startswith("#"):
                    heading = line.strip()
                elif line.startswith("```"):
                    fence, start, body = line[3:].strip(), number, []
            elif line.rstrip("\n") == "```":
                self.blocks.append(Block(start, fence, "".join(body), heading))
                fence = None
            else:
                body.append(line)
        if fence is not None:
            raise AssertionError(f"docs/FORMAT.md: the ``` block opened at line {start} is never closed")

        # The verifier reads manifest.json with open(...).read(); CPython closes
        # the file at once, so its ResourceWarning is noise, not a finding.
        warnings.filterwarnings("ignore", category=ResourceWarning, module="format_doc")
        self.namespace = {"__name__": "format_doc"}
        for b in self.python_blocks():
            try:
                tree = ast.parse(b.text, filename=f"FORMAT.md:{b.line}")
                b.defines = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
                # Line numbers in tracebacks then point into the document.
                ast.increment_lineno(tree, b.line)
                exec(compile(tree, os.path.abspath(path), "exec"), self.namespace)
            except Exception:
                b.error = traceback.format_exc(limit=3)

    def python_blocks(self):
        return [b for b in self.blocks if b.info == "python"]

    def broken(self):
        return [b for b in self.python_blocks() if b.error]

    def function(self, name):
        """The function `name` defined by a ```python block, or an AssertionError
        naming the block(s) at fault."""
        owners = [b for b in self.python_blocks() if name in b.defines]
        if not owners:
            raise AssertionError(
                f"no ```python block in docs/FORMAT.md defines {name}(); blocks found: "
                + "; ".join(b.describe() for b in self.python_blocks()))
        owner = owners[-1]
        # A block may use what earlier blocks define, so their failures count too.
        failed = [b for b in self.python_blocks() if b.error and b.line <= owner.line]
        if failed:
            raise AssertionError(
                f"{name}() cannot be used because a block does not run as written:\n"
                + "\n".join(f"{b.describe()}:\n{b.error}" for b in failed))
        return self.namespace[name]

    def section(self, title_start):
        """The text from the heading starting with `title_start` to the next heading of any level."""
        m = re.search(r"^#+ " + re.escape(title_start) + r".*?$(.*?)(?=^#)", self.text, re.S | re.M)
        if not m:
            raise AssertionError(f"docs/FORMAT.md has no heading starting '{title_start}'")
        return m.group(1)

    def blocks_under(self, heading_start):
        return [b for b in self.blocks if b.heading.lstrip("# ").startswith(heading_start)]


_doc = None


def doc():
    global _doc
    if _doc is None:
        _doc = Document(DOC)
    return _doc


# ---------------------------------------------------------------------------
# helpers


def run_cli(*args, check=None):
    proc = subprocess.run([CLI, *[str(a) for a in args]], capture_output=True, text=True, timeout=600)
    if check is not None and proc.returncode != check:
        raise AssertionError(f"amphora {' '.join(map(str, args))}: exit {proc.returncode}, expected {check}\n"
                             f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def append(path, data):
    with open(path, "ab") as fh:
        fh.write(data)


def flip(path, offset):
    b = bytearray(read(path))
    b[offset] ^= 0x5A
    write(path, bytes(b))


class Store:
    """A temporary store driven through the CLI."""

    def __init__(self, root):
        self.root = root
        self.dir = os.path.join(root, "store")
        run_cli("--store", self.dir, "init", check=EXIT_OK)

    def cli(self, *args, check=None):
        return run_cli("--store", self.dir, *args, check=check)

    def put(self, arr, name, compress):
        src = os.path.join(self.root, name + ".npy")
        np.save(src, arr)
        self.cli("import", src, "--name", name, "--compress", compress, check=EXIT_OK)
        return json.loads(self.cli("show", name, "--json", check=EXIT_OK).stdout)["digest"]

    def artifact(self, digest):
        hexd = digest[len("sha256:"):]
        return os.path.join(self.dir, "objects", "sha256", hexd[:2], hexd)


def chunk_index(art):
    """(packed, raw) columns of an artifact's chunk index, as Python ints."""
    index = np.load(os.path.join(art, "tensor.chunks.npy"))
    assert index.dtype == np.dtype("<u8") and index.ndim == 2 and index.shape[1] == 2, (index.dtype, index.shape)
    # The doc's reader does arithmetic mixing Python ints with the columns;
    # with numpy uint64 elements that promotes to float, so hand it ints.
    return [int(x) for x in index[:, 0]], [int(x) for x in index[:, 1]]


def doc_page_aligned_bytes():
    """From §5.4: the least nbytes whose data starts at byte 4096."""
    m = re.search(r"data\s+starts\s+at\s+byte\s+4096\s+when\s+the\s+tensor\s+holds\s+at\s+least\s+(\d+)\s+bytes",
                  doc().section("5.4"))
    if not m:
        raise AssertionError("§5.4 of docs/FORMAT.md no longer says from how many bytes data starts at 4096")
    return int(m.group(1))


def doc_tensor_header(descr, shape, nbytes):
    """The header §5.4 says a tensor of `nbytes` bytes is written with."""
    return doc_npy_header(descr, shape, 4096 if nbytes >= doc_page_aligned_bytes() else 64)


def doc_npy_header(descr, shape, total):
    """The .npy header §5.4 describes, from the template the document shows:
    `total` bytes long, or with total == 64 the shortest multiple of 64 (the
    header of a small tensor)."""
    templates = [b for b in doc().blocks_under("5.4") if "'fortran_order'" in b.text]
    if len(templates) != 1:
        raise AssertionError("expected one dictionary template block under §5.4 of docs/FORMAT.md, found "
                             + str(len(templates)))
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = templates[0].text.strip().replace("<DESCR>", descr).replace("<SHAPE>", dims)
    if total == 64:
        total = -(-(10 + len(text) + 1) // 64) * 64
    body_len = total - 10
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", body_len) + (text.ljust(body_len - 1) + "\n").encode("ascii")


def doc_dtype_table():
    """§5.2 as {dtype: (itemsize, descr)}."""
    table = {}
    for m in re.finditer(r"^\|\s*`(\w+)`\s*\|\s*(\d+)\s*\|\s*`([^`]+)`", doc().section("5.2"), re.M):
        table[m.group(1)] = (int(m.group(2)), m.group(3).replace("\\|", "|"))
    if len(table) < 10:
        raise AssertionError(f"could not read the dtype table of §5.2 in docs/FORMAT.md (got {table})")
    return table


# The arrays the reader tests store: every shape class (0-d, empty, a zero
# inner dimension, 1-d, N-d), random data (LZ4 keeps stored blocks) and
# compressible data (LZ4 blocks), and rows that straddle 1 MiB chunks.
def sample_arrays():
    rng = np.random.default_rng(20240611)

    def rand(dtype, shape):
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        raw = rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
        a = np.frombuffer(raw, dtype=dt.newbyteorder("<")).reshape(shape)
        return (a != 0) if dt == np.bool_ else a

    return {
        "zerod_f32": np.array(np.float32(-2.5)),
        "zerod_bool": np.array(True),
        "empty_i16": np.zeros((0, 3), dtype=np.int16),
        "zero_inner_f64": np.zeros((5, 0), dtype=np.float64),
        "small_u8": rand("u1", (17,)),
        "cube_c64": rand("c8", (4, 5, 6)),
        "rand_f16": rand("<f2", (1100, 700)),                                   # 1.5 MB: 2 stored data chunks
        "ramp_i32": (np.arange(700 * 1000, dtype=np.int32) // 64).reshape(700, 1000),  # 2.8 MB, compresses
        "wide_c128": rand("<c16", (3000, 31)),                                  # 496-byte rows across chunk edges
        "long_f64": np.cumsum(rng.standard_normal(300_001)).astype(np.float64),  # 2.4 MB: two pieces
        "big_endian_u32": rand(">u4", (333, 1001)),
    }


# ---------------------------------------------------------------------------


class FormatDocTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="amphora-format-doc-")
        cls.store = Store(cls.tmp)
        cls.arrays = sample_arrays()
        cls.digests = {}  # (name, compress) -> digest
        cls.zstd_digests = {}  # name -> digest
        for name, arr in cls.arrays.items():
            for compress in ("none", "lz4"):
                cls.digests[name, compress] = cls.store.put(arr, f"{name}-{compress}", compress)
            cls.zstd_digests[name] = cls.store.put(arr, f"{name}-zstd", "zstd")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def scratch(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    # -- the code blocks -----------------------------------------------------

    def test_every_python_block_runs_as_written(self):
        blocks = doc().python_blocks()
        self.assertTrue(blocks, "docs/FORMAT.md has no ```python blocks")
        broken = doc().broken()
        if broken:
            self.fail("python blocks in docs/FORMAT.md that do not run as written:\n"
                      + "\n".join(f"{b.describe()}:\n{b.error}" for b in broken))
        for name in REQUIRED_FUNCTIONS:
            self.assertTrue(callable(doc().function(name)), name)

    # -- §3.5 verifier -------------------------------------------------------

    def test_verifier_accepts_every_real_artifact(self):
        verify_artifact = doc().function("verify_artifact")
        for (name, compress), digest in self.digests.items():
            with self.subTest(array=name, compress=compress):
                art = self.store.artifact(digest)
                m = verify_artifact(art)
                self.assertEqual(m["meta"]["encoding"], "npy" if compress == "none" else "npy.lz4")
                # With the digest given explicitly, from a directory of any name.
                elsewhere = os.path.join(self.scratch(), "copy")
                shutil.copytree(art, elsewhere, symlinks=True)
                self.assertEqual(verify_artifact(elsewhere, digest), m)
        self.store.cli("verify", check=EXIT_OK)

    def corruptions(self):
        """(label, artifact-to-copy, how) for damage the verifier must reject."""
        multi = self.digests["long_f64", "none"]   # tensor.npy of two 2 MiB pieces
        packed = self.digests["ramp_i32", "lz4"]   # tensor.chunks.npy + tensor.npy.lz4
        outside = lambda art: os.path.join(os.path.dirname(os.path.dirname(art)), "outside")

        def symlink_payload(art, rel="tensor.npy"):
            p = os.path.join(art, rel)
            shutil.copyfile(p, outside(art))  # same bytes: only the link itself is wrong
            os.remove(p)
            os.symlink(outside(art), p)

        def symlink_manifest(art):
            p = os.path.join(art, "manifest.json")
            shutil.copyfile(p, outside(art))
            os.remove(p)
            os.symlink(outside(art), p)

        def payload_dir(art):
            os.remove(os.path.join(art, "tensor.npy"))
            os.mkdir(os.path.join(art, "tensor.npy"))

        def extra_in_subdir(art):
            os.mkdir(os.path.join(art, "sub"))
            write(os.path.join(art, "sub", "x"), b"")

        return [
            ("byte flipped in payload piece 0", multi, lambda a: flip(os.path.join(a, "tensor.npy"), 4096 + 5)),
            ("byte flipped in payload piece 1", multi, lambda a: flip(os.path.join(a, "tensor.npy"), (2 << 20) + 77)),
            ("byte flipped in last byte", multi, lambda a: flip(os.path.join(a, "tensor.npy"),
                                                                 os.path.getsize(os.path.join(a, "tensor.npy")) - 1)),
            ("byte flipped in the chunk index", packed, lambda a: flip(os.path.join(a, "tensor.chunks.npy"), 140)),
            ("byte flipped in an LZ4 payload", packed, lambda a: flip(os.path.join(a, "tensor.npy.lz4"), 1000)),
            ("byte flipped in manifest.json", multi, lambda a: flip(os.path.join(a, "manifest.json"), 30)),
            ("payload truncated", multi, lambda a: os.truncate(os.path.join(a, "tensor.npy"), (2 << 20) + 1)),
            ("payload truncated to zero", packed, lambda a: os.truncate(os.path.join(a, "tensor.chunks.npy"), 0)),
            ("payload extended by a byte", multi, lambda a: append(os.path.join(a, "tensor.npy"), b"\0")),
            ("extra file", multi, lambda a: write(os.path.join(a, "extra.bin"), b"x")),
            ("extra hidden file", packed, lambda a: write(os.path.join(a, ".hidden"), b"")),
            ("extra file in a sub-directory", multi, extra_in_subdir),
            ("extra FIFO", multi, lambda a: os.mkfifo(os.path.join(a, "fifo"))),
            ("extra dangling symlink", multi, lambda a: os.symlink("nowhere", os.path.join(a, "dangling"))),
            ("extra symlink to a listed payload", multi, lambda a: os.symlink("tensor.npy", os.path.join(a, "alias"))),
            ("extra symlink to a directory", multi, lambda a: os.symlink("..", os.path.join(a, "up"))),
            ("symlinked payload (same bytes)", multi, symlink_payload),
            ("symlinked LZ4 payload (same bytes)", packed, lambda a: symlink_payload(a, "tensor.npy.lz4")),
            ("missing payload", multi, lambda a: os.remove(os.path.join(a, "tensor.npy"))),
            # tensor.npy of an empty tensor is a header alone, smaller than a directory.
            ("payload replaced by a directory", self.digests["empty_i16", "none"], payload_dir),
            ("symlinked manifest.json (same bytes)", multi, symlink_manifest),
        ]

    def damaged_copy(self, digest, how):
        """A copy of the store with one artifact damaged; returns (store dir, artifact dir)."""
        root = self.scratch()
        store = os.path.join(root, "store")
        shutil.copytree(self.store.dir, store, symlinks=True)
        hexd = digest[len("sha256:"):]
        art = os.path.join(store, "objects", "sha256", hexd[:2], hexd)
        for dirpath, _, files in os.walk(art):
            os.chmod(dirpath, 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o644)
        how(art)
        return store, art

    def test_verifier_rejects_damaged_artifacts(self):
        verify_artifact = doc().function("verify_artifact")
        for label, digest, how in self.corruptions():
            with self.subTest(damage=label):
                _, art = self.damaged_copy(digest, how)
                try:
                    verify_artifact(art)
                except ValueError:
                    pass
                except Exception as e:  # the docstring promises ValueError for anything not intact
                    self.fail(f"{doc_function_block('verify_artifact')}: for '{label}' verify_artifact raised "
                              f"{type(e).__name__}: {e}, not ValueError as its docstring promises")
                else:
                    self.fail(f"{doc_function_block('verify_artifact')} accepted an artifact with damage: {label}")

    def test_cli_verify_agrees_with_the_document(self):
        # Every damage the doc verifier must reject, `amphora verify` must
        # report too (§2: any unlisted file or symbolic link is "unexpected").
        for label, digest, how in self.corruptions():
            with self.subTest(damage=label):
                store, _ = self.damaged_copy(digest, how)
                proc = run_cli("--store", store, "verify")
                self.assertEqual(proc.returncode, EXIT_CORRUPT,
                                 f"amphora verify exit {proc.returncode} for damage '{label}'\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
                self.assertIn(digest[len("sha256:"):], proc.stdout, f"the report of '{label}' names no artifact")

    # -- §5.6 readers --------------------------------------------------------

    def test_lz4_reader_reproduces_every_stored_npy(self):
        decode_frame = doc().function("decode_frame")
        kinds = set()
        for name, arr in self.arrays.items():
            with self.subTest(array=name):
                art = self.store.artifact(self.digests[name, "lz4"])
                data = read(os.path.join(art, "tensor.npy.lz4"))
                packed, raw = chunk_index(art)
                out = bytearray()
                for k in range(len(packed) - 1):
                    frame = data[packed[k]:packed[k + 1]]
                    kinds.add("stored" if struct.unpack_from("<I", frame, 15)[0] >> 31 else "compressed")
                    out += decode_frame(frame, raw[k + 1] - raw[k])
                want = le_c_bytes(arr)
                # Data starts at 4096, or for a small tensor right after its
                # header padded to 64 bytes (§5.4).
                start = raw[1]
                descr = np.dtype(arr.dtype).newbyteorder("<").str if arr.dtype.itemsize > 1 else arr.dtype.str
                self.assertEqual(start, len(doc_tensor_header(descr, list(arr.shape), len(want))))
                self.assertEqual(len(out), start + len(want))
                self.assertEqual(bytes(out[start:]), want, "decoded data differ from the array")
                self.assertEqual(bytes(out), read(os.path.join(self.store.artifact(self.digests[name, "none"]),
                                                               "tensor.npy")),
                                 "decoded .npy differs from the uncompressed artifact's tensor.npy")
                exported = os.path.join(self.scratch(), "e.npy")
                self.store.cli("export", f"{name}-lz4", exported, check=EXIT_OK)
                self.assertEqual(bytes(out), read(exported), "decoded .npy differs from `amphora export`")
                back = np.load(exported)
                self.assertEqual(back.shape, arr.shape)
                self.assertEqual(back.dtype, arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype)
        self.assertEqual(kinds, {"stored", "compressed"}, "the samples must exercise both block kinds")

    def test_zstd_reader_reproduces_every_stored_npy(self):
        decode_zstd_frame = doc().function("decode_zstd_frame")
        for name, arr in self.arrays.items():
            with self.subTest(array=name):
                art = self.store.artifact(self.zstd_digests[name])
                data = read(os.path.join(art, "tensor.npy.zst"))
                packed, raw = chunk_index(art)
                out = bytearray()
                for k in range(len(packed) - 1):
                    out += decode_zstd_frame(data[packed[k]:packed[k + 1]], raw[k + 1] - raw[k])
                self.assertEqual(bytes(out), read(os.path.join(self.store.artifact(self.digests[name, "none"]),
                                                               "tensor.npy")),
                                 "decoded .npy differs from the uncompressed artifact's tensor.npy")
                # The document's decoder refuses what the C++ reader refuses.
                frame = data[packed[1]:packed[2]] if len(packed) > 2 else data[packed[0]:packed[1]]
                size = raw[2] - raw[1] if len(packed) > 2 else raw[1]
                for label, bad, n in (("truncated", frame[:-3], size), ("followed by a byte", frame + b"\0", size),
                                      ("wrong size", frame, size + 1), ("checksum", frame[:-1] + bytes([frame[-1] ^ 1]), size)):
                    with self.assertRaises(ValueError, msg=label):
                        decode_zstd_frame(bad, n)

    def test_delta_chunks_decode_as_the_document_says(self):
        # Integer samples imported with --encode delta (and delta,shuffle):
        # frames, unshuffle, the document's undelta_chunk give the .npy.
        decode_zstd_frame = doc().function("decode_zstd_frame")
        undelta_chunk = doc().function("undelta_chunk")
        tried = 0
        for name, arr in self.arrays.items():
            if arr.dtype.kind not in "iu":
                continue
            for encode in ("delta", "delta,shuffle"):
                with self.subTest(array=name, encode=encode):
                    src = os.path.join(self.scratch(), "a.npy")
                    np.save(src, arr)
                    label = f"{name}-{encode.replace(',', '-')}"
                    self.store.cli("import", src, "--name", label, "--compress", "zstd", "--encode", encode,
                                   check=EXIT_OK)
                    digest = json.loads(self.store.cli("show", label, "--json", check=EXIT_OK).stdout)["digest"]
                    art = self.store.artifact(digest)
                    data = read(os.path.join(art, "tensor.npy.zst"))
                    packed, raw = chunk_index(art)
                    w = arr.dtype.itemsize
                    out = bytearray(decode_zstd_frame(data[packed[0]:packed[1]], raw[1]))
                    for k in range(1, len(packed) - 1):
                        chunk = decode_zstd_frame(data[packed[k]:packed[k + 1]], raw[k + 1] - raw[k])
                        if "shuffle" in encode:
                            chunk = np.frombuffer(chunk, np.uint8).reshape(w, len(chunk) // w).T.tobytes()
                        out += undelta_chunk(chunk, w)
                    self.assertEqual(bytes(out), read(os.path.join(self.store.artifact(self.digests[name, "none"]),
                                                                   "tensor.npy")))
                    tried += 1
        self.assertGreaterEqual(tried, 4)

    def test_shuffled_lz4_chunks_that_hardly_shrink_are_stored_planes(self):
        # §5.6: uniform float32 planes shrink by about 8% under LZ4, less than
        # the tenth the writer's samples ask for, so every data chunk is a
        # stored block of byte planes; the document's decoder and an unshuffle
        # give the values back.
        decode_frame = doc().function("decode_frame")
        arr = np.random.default_rng(3).uniform(-1, 1, 600_000).astype("<f4")
        src = os.path.join(self.scratch(), "uniform.npy")
        np.save(src, arr)
        self.store.cli("import", src, "--name", "uniform", "--compress", "lz4", "--encode", "shuffle", check=EXIT_OK)
        shown = json.loads(self.store.cli("show", "uniform", "--json", check=EXIT_OK).stdout)
        self.assertEqual(shown["meta"]["encoding"], "shuffled.npy.lz4")
        art = self.store.artifact(shown["digest"])
        data = read(os.path.join(art, "tensor.npy.lz4"))
        packed, raw = chunk_index(art)
        self.assertEqual(len(packed) - 2, 3)
        self.assertEqual(shown["meta"]["stored_chunks"], 3)
        values = bytearray()
        for k in range(1, len(packed) - 1):
            frame = data[packed[k]:packed[k + 1]]
            self.assertTrue(struct.unpack_from("<I", frame, 15)[0] & 0x80000000, f"chunk {k} is not a stored block")
            planes = decode_frame(frame, raw[k + 1] - raw[k])
            values += np.frombuffer(planes, np.uint8).reshape(4, len(planes) // 4).T.tobytes()
        self.assertEqual(bytes(values), arr.tobytes())

    def test_lz4_block_decoder_rejects_bad_offsets(self):
        lz4_block_decode = doc().function("lz4_block_decode")
        # token: 1 literal, match length 4+0; literal 'a'; then offset 0 / 2 (only 1 byte produced).
        for offset in (0, 2):
            with self.subTest(offset=offset):
                with self.assertRaises(ValueError):
                    lz4_block_decode(bytes([0x10, ord("a"), offset, 0, 0x00]), 6)
        # A valid overlapping match: 'a' then 4 more copies one byte back, then a final literal 'b'.
        self.assertEqual(lz4_block_decode(bytes([0x10, ord("a"), 1, 0, 0x10, ord("b")]), 6), b"aaaaab")
        with self.assertRaises(ValueError):
            lz4_block_decode(bytes([0x10, ord("a"), 1, 0, 0x10, ord("b")]), 7)

    def test_decode_frame_rejects_damaged_frames(self):
        decode_frame = doc().function("decode_frame")
        art = self.store.artifact(self.digests["ramp_i32", "lz4"])
        data = read(os.path.join(art, "tensor.npy.lz4"))
        packed, raw = chunk_index(art)
        frame, size = data[packed[1]:packed[2]], raw[2] - raw[1]
        decode_frame(frame, size)
        damaged = {
            "content size off by one": (frame, size - 1),
            "header byte flipped": (frame[:6] + bytes([frame[6] ^ 1]) + frame[7:], size),
            "truncated": (frame[:-1], size),
            "extra byte": (frame + b"\0", size),
            "end mark nonzero": (frame[:-1] + b"\1", size),
        }
        # §5.6: "the frame is ≥ 23 bytes" is the first check a reader MUST apply.
        for n in (0, 4, 14, 15, 18, 19, 22):
            damaged[f"only {n} bytes"] = (frame[:n], size)
        for label, (f, n) in damaged.items():
            with self.subTest(damage=label):
                try:
                    decode_frame(f, n)
                except ValueError:
                    pass
                except Exception as e:
                    self.fail(f"{doc_function_block('decode_frame')}: a frame with damage '{label}' raised "
                              f"{type(e).__name__}: {e}, not ValueError")
                else:
                    self.fail(f"{doc_function_block('decode_frame')} accepted a frame with damage '{label}'")

    def test_corrupt_lz4_blocks_raise_value_error(self):
        # A frame has no checksum, so a flipped byte may decode to other bytes
        # of the right length (the piece digests catch that); anything else
        # must be the ValueError the readers raise for corrupt data, not a
        # stray IndexError from reading past the block.
        decode_frame = doc().function("decode_frame")
        rng = np.random.default_rng(11)
        others = {}
        # Every byte of each header frame (small), and a sample of one 1 MiB
        # data frame: the pure-Python decoder takes a while per megabyte.
        frames = []
        for name in self.arrays:
            art = self.store.artifact(self.digests[name, "lz4"])
            data = read(os.path.join(art, "tensor.npy.lz4"))
            packed, raw = chunk_index(art)
            frames.append((name, 0, data[packed[0]:packed[1]], raw[1] - raw[0], None))
            if name == "ramp_i32":
                frames.append((name, 1, data[packed[1]:packed[2]], raw[2] - raw[1], 12))
        for name, k, frame, size, sample in frames:
            if struct.unpack_from("<I", frame, 15)[0] >> 31:
                continue  # stored block: nothing to decode
            body = range(19, len(frame) - 4)
            positions = body if sample is None else sorted(int(x) for x in rng.choice(body, sample, replace=False))
            for pos in positions:
                for bit in (0x01, 0x10, 0x80):
                    damaged = bytearray(frame)
                    damaged[pos] ^= bit
                    try:
                        out = decode_frame(bytes(damaged), size)
                        self.assertEqual(len(out), size)
                    except ValueError:
                        pass
                    except Exception as e:
                        others.setdefault(type(e).__name__, []).append((name, k, pos, bit))
        if others:
            self.fail(f"{doc_function_block('decode_frame')}: corrupt LZ4 blocks raised exceptions other than "
                      "ValueError: " + "; ".join(f"{kind} x{len(v)} (e.g. array {v[0][0]}, frame {v[0][1]}, "
                                                  f"byte {v[0][2]} ^ {v[0][3]:#x})" for kind, v in others.items()))

    def row_ranges(self, n, row, rng):
        C = 1 << 20
        ranges = {(0, 0), (0, n), (n, n)}
        if n:
            ranges |= {(0, 1), (n - 1, n), (n // 3, (2 * n) // 3), (n // 2, n // 2)}
        if row:
            # Rows ending just before, at and just after each chunk boundary.
            for b in range(C, n * row, C):
                for i in {b // row - 1, b // row, b // row + 1, -(-b // row)}:
                    if 0 <= i <= n:
                        ranges |= {(i, min(n, i + 1)), (max(0, i - 2), min(n, i + 3)), (0, i), (i, n)}
        for _ in range(6):
            i, j = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
            ranges.add((i, j))
        return sorted(ranges)

    def test_row_reader_reproduces_numpy_slices(self):
        read_rows = doc().function("read_rows")
        rng = np.random.default_rng(7)
        checked = 0
        for name, arr in self.arrays.items():
            if arr.ndim == 0:
                continue  # §5.6: row reads need at least one dimension
            art = self.store.artifact(self.digests[name, "lz4"])
            data = read(os.path.join(art, "tensor.npy.lz4"))
            packed, raw = chunk_index(art)
            row = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
            for i, j in self.row_ranges(arr.shape[0], row, rng):
                with self.subTest(array=name, rows=(i, j)):
                    self.assertEqual(read_rows(packed, raw, data, row, i, j), le_c_bytes(arr[i:j]))
                    checked += 1
        self.assertGreater(checked, 50)

    # -- worked examples ------------------------------------------------------

    def test_worked_manifest_examples_recompute(self):
        verify_artifact = doc().function("verify_artifact")
        examples = 0
        for b in doc().blocks:
            try:
                parsed = json.loads(b.text)
            except ValueError:
                continue
            if not isinstance(parsed, dict) or "manifest_version" not in parsed:
                continue
            examples += 1
            with self.subTest(block=b.describe()):
                shown = b.text.rstrip("\n").encode("utf-8")
                before = self.text_before(b)
                after = self.text_after(b)
                size = re.search(r"\((\d+) bytes", before)
                digest = re.search(r"digest is `(sha256:[0-9a-f]{64})`", after)
                if "written by `amphora_test_writer example`" in before:
                    self.check_composite_example(b, shown, int(size.group(1)), digest.group(1))
                    continue
                expr = re.search(r"manifest of `([^`]+)`", before)
                self.assertTrue(size and digest and expr,
                                f"{b.describe()}: expected 'manifest of `EXPR`', '(N bytes' before it and "
                                "'digest is `sha256:...`' after it")
                self.assertEqual(len(shown), int(size.group(1)), f"{b.describe()}: stated size")
                self.assertEqual("sha256:" + hashlib.sha256(shown).hexdigest(), digest.group(1),
                                 f"{b.describe()}: the stated digest is not the SHA-256 of the manifest shown")
                # §3.3: Python's canonical dump reproduces these bytes.
                self.assertEqual(json.dumps(parsed, sort_keys=True, separators=(",", ":"),
                                            ensure_ascii=False).encode(), shown)
                # The same value imported by the CLI gives exactly these bytes.
                arr = eval(expr.group(1), {"np": np})
                store = Store(self.scratch())
                got = store.put(arr, "example", "none")
                self.assertEqual(got, digest.group(1), f"{b.describe()}: `amphora import` of {expr.group(1)}")
                self.assertEqual(read(os.path.join(store.artifact(got), "manifest.json")), shown)
                verify_artifact(store.artifact(got))
        self.assertGreater(examples, 0, "docs/FORMAT.md shows no manifest example any more; extraction rule broken?")

    def check_composite_example(self, block, shown, size, digest):
        """§3.6: the composite the test writer saves has exactly the manifest
        shown, its children are artifacts the §3.5 verifier accepts, and its
        keys read back with the §6.3 reader."""
        self.assertTrue(WRITER, "pass --writer PATH (amphora_test_writer) to check the composite example")
        self.assertEqual(len(shown), size, f"{block.describe()}: stated size")
        self.assertEqual("sha256:" + hashlib.sha256(shown).hexdigest(), digest)
        verify_artifact = doc().function("verify_artifact")
        read_strings = doc().function("read_strings")
        store = Store(self.scratch())
        root = store.dir
        got = subprocess.run([WRITER, "example", root], capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(got, digest, f"{block.describe()}: the writer saved another digest")
        parent = store.artifact(got)
        self.assertEqual(read(os.path.join(parent, "manifest.json")), shown)
        m = verify_artifact(parent)
        children = {c["role"]: c["digest"] for c in m["children"]}
        self.assertEqual(sorted(children), ["values/0", "values/1"])
        self.assertEqual(children["values/0"], children["values/1"], "equal values are one artifact")
        lst = verify_artifact(store.artifact(children["values/0"]))
        self.assertEqual(lst["materializer"]["name"], "amphora.list")
        tensor_dir = store.artifact(lst["children"][0]["digest"])
        verify_artifact(tensor_dir)
        self.assertEqual(np.load(os.path.join(tensor_dir, "tensor.npy")).tolist(), [1.5, 2.5])
        self.assertEqual(read_strings(parent, "keys"), [b"a", b"b"])
        # Three artifacts in all: nothing stored twice.
        count = sum(len(os.listdir(os.path.join(root, "objects", "sha256", fan)))
                    for fan in os.listdir(os.path.join(root, "objects", "sha256")))
        self.assertEqual(count, 3)

    # -- §6.4 decoder and §10.3 records reader --------------------------------

    def test_records_reader_reproduces_imported_lines(self):
        read_records = doc().function("read_records")
        store = Store(self.scratch())
        records = [{"name": "a", "n": 1, "xs": [1.5, 2.25], "tags": ["x", "y"], "m": 1},
                   {"n": 2, "name": "b", "xs": [], "tags": [], "m": "text", "o": None},
                   {"name": None, "n": -3, "xs": [0.1], "tags": ["x"], "m": {"k": [1, None]}}] * 40
        src = os.path.join(store.root, "r.jsonl")
        write(src, "".join(json.dumps(r) + "\n" for r in records).encode())
        store.cli("import", src, "--name", "r", check=EXIT_OK)
        art = store.artifact(json.loads(store.cli("show", "r", "--json", check=EXIT_OK).stdout)["digest"])
        meta = json.loads(read(os.path.join(art, "manifest.json")))["meta"]
        self.assertTrue(meta["encodings"], "the example should exercise the decoder")
        # Same values, key order and int/float types.
        self.assertEqual(json.dumps(read_records(art, meta)), json.dumps(records))

    def text_before(self, block):
        lines = doc().text.splitlines()
        return "\n".join(lines[max(0, block.line - 4):block.line - 1])

    def text_after(self, block):
        lines = doc().text.splitlines()
        end = block.line + block.text.count("\n") + 1
        return "\n".join(lines[end:end + 3])

    def test_store_marker_matches_the_document(self):
        shown = [b for b in doc().blocks_under("1.1") if b.info == "json"]
        self.assertEqual(len(shown), 1, "one ```json block expected under §1.1")
        store = Store(self.scratch())
        self.assertEqual(read(os.path.join(store.dir, "amphora-store.json")).decode(), shown[0].text)

    def test_real_tensor_manifests_are_python_canonical(self):
        # §3.3: json.dumps(sort_keys, compact, ensure_ascii=False) reproduces the
        # bytes except for floats in [1e15, 1e16) and rare Grisu2 cases, which
        # these fixed samples avoid.
        for (name, compress), digest in self.digests.items():
            with self.subTest(array=name, compress=compress):
                raw = read(os.path.join(self.store.artifact(digest), "manifest.json"))
                m = json.loads(raw)
                self.assertEqual(json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(), raw)

    def test_npy_headers_and_dtype_table_match_the_document(self):
        table = doc_dtype_table()
        self.assertEqual(table.get("bfloat16"), (2, "<u2"))
        for dtype, (size, descr) in table.items():
            if dtype == "bfloat16":
                continue
            with self.subTest(dtype=dtype):
                dt = np.dtype(dtype)
                self.assertEqual(dt.itemsize, size)
                self.assertEqual(dt.newbyteorder("<").str if size > 1 else dt.str, descr)
        header_len = re.search(r"HEADER_LEN, uint16 LE = (\d+)", doc().section("5.4"))
        self.assertTrue(header_len, "§5.4 no longer states HEADER_LEN")
        self.assertEqual(int(header_len.group(1)), 4096 - 10)
        index_header = re.search(r"HEADER_LEN (\d+), data at byte (\d+)", doc().text)
        self.assertTrue(index_header, "§5.6 no longer states the chunk index's HEADER_LEN")
        for (name, compress), digest in self.digests.items():
            with self.subTest(array=name, compress=compress):
                art = self.store.artifact(digest)
                m = json.loads(read(os.path.join(art, "manifest.json")))
                shape, descr = m["meta"]["shape"], table[m["meta"]["dtype"]][1]
                nbytes = int(np.prod(shape, dtype=np.int64)) * table[m["meta"]["dtype"]][0]
                want = doc_tensor_header(descr, shape, nbytes)
                if compress == "none":
                    got = read(os.path.join(art, "tensor.npy"))[:len(want)]
                else:
                    data = read(os.path.join(art, "tensor.npy.lz4"))
                    packed, raw = chunk_index(art)
                    got = doc().function("decode_frame")(data[packed[0]:packed[1]], len(want))
                    index = read(os.path.join(art, "tensor.chunks.npy"))
                    hl, start = int(index_header.group(1)), int(index_header.group(2))
                    self.assertEqual(index[:start], doc_npy_header("<u8", [len(packed), 2], start))
                    self.assertEqual(struct.unpack_from("<H", index, 8)[0], hl)
                    self.assertEqual(len(index), start + 16 * len(packed))
                self.assertEqual(got, want)

    def test_chunk_index_example_recomputes(self):
        sec = doc().section("The chunk index")
        m = re.search(r"Example, (\w+) tensor of shape \((\d+), (\d+)\)", sec)
        self.assertTrue(m, "the chunk index example in §5.6 no longer names its tensor")
        rows = [tuple(int(x) for x in r) for r in
                re.findall(r"^\|\s*(\d+)(?: \(sentinel\))?\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", sec, re.M)]
        self.assertTrue(rows, "could not read the chunk index example table")
        self.assertEqual([r[0] for r in rows], list(range(len(rows))))
        dtype, shape = np.dtype(m.group(1)), (int(m.group(2)), int(m.group(3)))
        nbytes = dtype.itemsize * shape[0] * shape[1]
        chunks = 1 + -(-nbytes // (1 << 20))
        self.assertEqual(len(rows), chunks + 1)
        for k, _, raw_k in rows:  # rule 2 of the index checks
            self.assertEqual(raw_k, 0 if k == 0 else min(4096 + (k - 1) * (1 << 20), 4096 + nbytes), f"raw_{k}")
        # The document does not say which values it stored; its figures are
        # those of np.arange (the stats of §3.3's examples agree).
        arr = np.arange(shape[0] * shape[1], dtype=dtype).reshape(shape)
        store = Store(self.scratch())
        packed, raw = chunk_index(store.artifact(store.put(arr, "example", "lz4")))
        self.assertEqual([(k, p, r) for k, (p, r) in enumerate(zip(packed, raw))], rows,
                         "the §5.6 chunk index example does not match np.arange data stored with --compress lz4")

    def test_empty_piece_digest(self):
        m = re.search(r"SHA-256 of empty input\s*\(`([0-9a-f]{64})`\)", doc().text)
        self.assertTrue(m, "§3.4 no longer quotes the empty-input SHA-256")
        self.assertEqual(m.group(1), hashlib.sha256(b"").hexdigest())


def doc_function_block(name):
    owners = [b for b in doc().python_blocks() if name in b.defines]
    return owners[-1].describe() if owners else f"the block defining {name}()"


# ---------------------------------------------------------------------------


def main():
    global CLI, WRITER
    argv, args, i = [sys.argv[0]], sys.argv[1:], 0
    while i < len(args):
        if args[i] == "--cli" and i + 1 < len(args):
            CLI = args[i + 1]
            i += 2
        elif args[i] == "--writer" and i + 1 < len(args):
            WRITER = os.path.abspath(args[i + 1])
            i += 2
        elif args[i].startswith("--cli="):
            CLI = args[i][len("--cli="):]
            i += 1
        else:
            argv.append(args[i])
            i += 1
    if not CLI:
        sys.exit("usage: test_format_doc.py --cli PATH_TO_AMPHORA [unittest args] (or set AMPHORA_CLI)")
    CLI = os.path.abspath(CLI)
    deadline = time.monotonic() + 60  # a concurrent rebuild may be relinking it
    while not os.access(CLI, os.X_OK):
        if time.monotonic() > deadline:
            sys.exit(f"{CLI} is not an executable file")
        time.sleep(1)
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
