"""Read Amphora artifacts from Python, without the C++ library.

One file: the standard library plus NumPy; SciPy is used for sparse matrices
when present, and the `lz4` module for LZ4-compressed tensors. Written from
docs/FORMAT.md, not from the C++ code.

    import amphora_reader
    emb = amphora_reader.load(".amphora", "emb@2")          # numpy.ndarray
    graph = amphora_reader.load(".amphora", "graph")        # scipy.sparse matrix
    model = amphora_reader.load(".amphora", "models", verify=True)

`load(store_dir, ref)` takes the refs the CLI takes (NAME, NAME@N,
sha256:HEX, a hex prefix of 8 or more digits) and returns:

  amphora.tensor         numpy.ndarray (mapped read-only unless mmap=False;
                         bfloat16 widened exactly to float32)
  amphora.sparse         a scipy.sparse csr/csc/coo matrix, or without SciPy a
                         dict {"format", "shape", "data", "indices", "indptr"}
                         (or "row", "col")
  amphora.table          a pandas DataFrame (nullable columns as pandas' masked
                         arrays, strings as objects with None for null), or
                         without pandas a dict of arrays (numpy masked arrays
                         for nullable ones)
  amphora.string         str, or bytes when not valid UTF-8
  amphora.json           the JSON value
  amphora.strings        list of str (bytes for any that are not UTF-8)
  amphora.list           list, each item loaded recursively
  amphora.map            dict
  amphora.optional       the value, or None
  amphora.tensor_list    list of numpy.ndarray
  amphora.records        list of the records (dicts, or any JSON value), keys
                         in each record's order, ints as int, floats as float
  amphora.record_list    list of dicts, one per record
  a declared struct      dict of its members (AMPHORA_MATERIALIZE types)

Every size, offset and structure is checked before use; damage raises
CorruptData naming the artifact. verify=True also re-hashes every payload
file of the artifact and its children against the manifests.
"""

import hashlib
import io
import json
import os
import re
import stat

import numpy as np

__all__ = ["load", "resolve", "open_artifact", "verify", "AmphoraError", "NotFound", "CorruptData", "Unsupported"]

MANIFEST_MAX = 64 << 20
RECORD_MAX = 1 << 20
MAX_DEPTH = 64
HEX = re.compile(r"[0-9a-f]+\Z")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")


class AmphoraError(Exception):
    """Base of the errors this module raises."""


class NotFound(AmphoraError):
    pass


class CorruptData(AmphoraError):
    pass


class Unsupported(AmphoraError):
    pass


# ---------------------------------------------------------------------------
# the store: refs and manifests


def _read_regular(path, limit, what):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise NotFound(f"{what}: {path} does not exist")
    except OSError as e:
        raise CorruptData(f"{what}: cannot open {path} ({e.strerror})")
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptData(f"{what}: {path} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CorruptData(f"{what}: {path} is larger than {limit} bytes")
    return data


def _no_links(store, relative, what):
    """Raises CorruptData when a component of `relative` below the store is a
    symbolic link or not a directory: nothing inside a store may lead out of it."""
    here = store
    for part in relative.split(os.sep):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            raise NotFound(f"{what}: {here} does not exist")
        if not stat.S_ISDIR(st.st_mode):
            raise CorruptData(f"{what}: {here} is a symbolic link or not a directory")


def _versions(store, name):
    d = os.path.join(store, "names", name)
    if not os.path.lexists(d):
        return []
    _no_links(store, os.path.join("names", name), f"name '{name}'")
    entries = os.listdir(d)
    return sorted(int(e[:-5]) for e in entries if re.fullmatch(r"[1-9][0-9]*\.json", e))


def _record_digest(store, name, version):
    path = os.path.join(store, "names", name, f"{version}.json")
    try:
        record = json.loads(_read_regular(path, RECORD_MAX, f"name record {name}@{version}"))
    except ValueError as e:
        raise CorruptData(f"name record {name}@{version} is not JSON: {e}")
    digest = record.get("digest") if isinstance(record, dict) else None
    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71 or \
            not HEX.match(digest[7:]):
        raise CorruptData(f"name record {name}@{version} holds no valid digest")
    return digest


def _object_dir(store, hexd):
    return os.path.join(store, "objects", "sha256", hexd[:2], hexd)


def _by_prefix(store, prefix):
    if len(prefix) < 8:
        raise NotFound(f"a digest prefix needs at least 8 hex digits, '{prefix}' has {len(prefix)}")
    if len(prefix) == 64:
        if os.path.isfile(os.path.join(_object_dir(store, prefix), "manifest.json")):
            return "sha256:" + prefix
        raise NotFound(f"no artifact sha256:{prefix}")
    fan = os.path.join(store, "objects", "sha256", prefix[:2])
    matches = sorted(e for e in (os.listdir(fan) if os.path.isdir(fan) else [])
                     if len(e) == 64 and HEX.match(e) and e.startswith(prefix)
                     and os.path.isfile(os.path.join(fan, e, "manifest.json")))
    if not matches:
        raise NotFound(f"no artifact matches sha256:{prefix}")
    if len(matches) > 1:
        raise AmphoraError(f"digest prefix {prefix} is ambiguous: " + ", ".join("sha256:" + m for m in matches[:5]))
    return "sha256:" + matches[0]


def resolve(store_dir, ref):
    """The digest ("sha256:...") that `ref` names, resolved as docs/FORMAT.md §1.6 says."""
    store = os.fspath(store_dir)
    if not os.path.isfile(os.path.join(store, "amphora-store.json")):
        raise NotFound(f"{store} is not an Amphora store (no amphora-store.json)")
    if not ref:
        raise AmphoraError("empty ref")
    if "@" in ref:
        name, _, n = ref.partition("@")
        if not NAME.match(name):
            raise AmphoraError(f"invalid name '{name}'")
        if not n.isdigit() or int(n) < 1:
            raise AmphoraError(f"invalid version '{n}' in '{ref}'")
        if int(n) not in _versions(store, name):
            raise NotFound(f"no version {n} of name '{name}'")
        return _record_digest(store, name, int(n))
    if ref.startswith("sha256:"):
        hexd = ref[7:]
        if not HEX.match(hexd) or not 8 <= len(hexd) <= 64:
            raise AmphoraError(f"'{ref}' is not sha256: followed by 8 to 64 lower-case hex digits")
        return _by_prefix(store, hexd)
    if NAME.match(ref):
        versions = _versions(store, ref)
        if versions:
            return _record_digest(store, ref, versions[-1])
    if HEX.match(ref) and len(ref) >= 4:
        return _by_prefix(store, ref)
    if not NAME.match(ref):
        raise AmphoraError(f"invalid name '{ref}'")
    raise NotFound(f"no name or artifact '{ref}'")


class Artifact:
    """One artifact: its digest, parsed manifest and directory."""

    def __init__(self, store, digest, depth=0, label=None, loaded=None):
        self.store, self.digest, self.depth = store, digest, depth
        # Values already loaded in this load, by digest, shared with the
        # children: a child listed under many parents is read once.
        self.loaded = {} if loaded is None else loaded
        self.dir = _object_dir(store, digest[7:])
        self.label = label or f"artifact {digest[:19]}…"
        _no_links(store, os.path.relpath(self.dir, store), self.label)
        raw = _read_regular(os.path.join(self.dir, "manifest.json"), MANIFEST_MAX, self.label)
        if "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
            raise CorruptData(f"{self.label}: manifest.json does not hash to its digest")
        try:
            m = json.loads(raw)
        except ValueError as e:
            raise CorruptData(f"{self.label}: manifest.json is not JSON: {e}")
        version = m.get("manifest_version") if isinstance(m, dict) else None
        if not isinstance(version, int) or version < 1:
            raise CorruptData(f"{self.label}: manifest_version is missing or invalid")
        if version > 2:
            raise Unsupported(f"{self.label}: manifest version {version} was written by a newer Amphora")
        mat = m.get("materializer")
        if not isinstance(mat, dict) or not isinstance(mat.get("name"), str) or not isinstance(mat.get("version"), int):
            raise CorruptData(f"{self.label}: the manifest names no materializer")
        self.materializer, self.version = mat["name"], mat["version"]
        self.meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
        self.files = {f["path"]: f for f in m.get("files", [])}
        self.children = {c["role"]: c["digest"] for c in m.get("children", [])}

    # -- payload files -------------------------------------------------------

    def path(self, name):
        """The checked path of payload file `name`: listed, no link on the way, the listed size."""
        entry = self.files.get(name)
        if entry is None:
            raise CorruptData(f"{self.label}: the manifest lists no file '{name}'")
        parts = name.split("/")
        if any(p in ("", ".", "..") or p.startswith(".") for p in parts) or name == "manifest.json":
            raise CorruptData(f"{self.label}: invalid payload path '{name}'")
        here = self.dir
        for p in parts:
            here = os.path.join(here, p)
            try:
                st = os.lstat(here)
            except FileNotFoundError:
                raise CorruptData(f"{self.label}: payload file '{name}' is missing")
            if stat.S_ISLNK(st.st_mode):
                raise CorruptData(f"{self.label}: '{name}' passes through a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise CorruptData(f"{self.label}: '{name}' is not a regular file")
        if st.st_size != entry["size"]:
            raise CorruptData(f"{self.label}: '{name}' holds {st.st_size} bytes, the manifest says {entry['size']}")
        return here

    def has(self, name):
        return name in self.files

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def array(self, name, mmap=True, dtype=None, ndim=None):
        """A .npy payload as an array, checked against the expected dtype and dimensions."""
        path = self.path(name)
        try:
            a = np.load(path, mmap_mode="r" if mmap and self.files[name]["size"] > 0 else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise CorruptData(f"{self.label}: '{name}' is not a valid .npy file: {e}")
        recipes = self.meta.get("encodings")
        if isinstance(recipes, dict) and name in recipes:  # written with an ArrayEncoding (§6.4)
            recipe = recipes[name]
            decoded = _decode(self, f"'{name}'", recipe, a)
            rshape = recipe.get("shape")
            if not isinstance(rshape, list) or any(not isinstance(d, int) or d < 0 for d in rshape) or \
                    int(np.prod(rshape, dtype=object)) != decoded.size:
                raise CorruptData(f"{self.label}: the recipe of '{name}' has an invalid shape")
            a = decoded.reshape(rshape)
        if dtype is not None and a.dtype != np.dtype(dtype):
            raise CorruptData(f"{self.label}: '{name}' holds {a.dtype}, expected {np.dtype(dtype)}")
        if ndim is not None and a.ndim != ndim:
            raise CorruptData(f"{self.label}: '{name}' has {a.ndim} dimensions, expected {ndim}")
        return a

    def strings(self, name, decode=True):
        """Merged strings (offsets + bytes, §6.3) as a list."""
        offsets = self.array(name + ".offsets.npy", mmap=False, dtype="<i8", ndim=1)
        data = self.read(name + ".bytes")
        if len(offsets) < 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(data):
            raise CorruptData(f"{self.label}: the offsets of '{name}' do not run from 0 to the end of its bytes")
        o = offsets.tolist()
        out = [data[o[i]:o[i + 1]] for i in range(len(o) - 1)]
        return [_text(s) for s in out] if decode else out

    def meta_value(self, key, kind):
        if key not in self.meta or not isinstance(self.meta[key], kind) or \
                (kind is int and isinstance(self.meta[key], bool)):
            raise CorruptData(f"{self.label}: metadata '{key}' is missing or of the wrong type")
        return self.meta[key]

    # -- children -----------------------------------------------------------

    def child(self, role):
        if role not in self.children:
            raise CorruptData(f"{self.label}: no child '{role}'")
        if self.depth + 1 > MAX_DEPTH:
            raise CorruptData(f"{self.label}: children nest deeper than {MAX_DEPTH} levels")
        digest = self.children[role]
        if not isinstance(digest, str) or not digest.startswith("sha256:") or not HEX.match(digest[7:]) \
                or len(digest) != 71:
            raise CorruptData(f"{self.label}: child '{role}' has an invalid digest")
        return Artifact(self.store, digest, self.depth + 1, f"{self.label} / {role}", self.loaded)


def _text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(b)


def open_artifact(store_dir, ref):
    """The Artifact `ref` names (manifest checked against its digest)."""
    store = os.fspath(store_dir)
    return Artifact(store, resolve(store, ref), label=f"artifact {ref}")


# ---------------------------------------------------------------------------
# verification (docs/FORMAT.md §3.4)


def _verify(art, seen):
    if art.digest in seen:
        return
    seen.add(art.digest)
    for name, entry in art.files.items():
        piece = entry["piece_size"]
        want = entry["sha256"]
        got = []
        with open(art.path(name), "rb") as f:
            while True:
                block = f.read(piece)
                if not block:
                    break
                got.append(hashlib.sha256(block).hexdigest())
        if not got:
            got = [hashlib.sha256(b"").hexdigest()]
        if got != want:
            raise CorruptData(f"{art.label}: '{name}' does not match its digests")
    for role in art.children:
        _verify(art.child(role), seen)


def verify(store_dir, ref):
    """Re-hashes every payload file of `ref` and its children; raises CorruptData on a mismatch."""
    _verify(open_artifact(store_dir, ref), set())


# ---------------------------------------------------------------------------
# tensors (§5)

DTYPES = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "bfloat16": "<u2", "float32": "<f4", "float64": "<f8",
    "complex64": "<c8", "complex128": "<c16",
}
CHUNK = 1 << 20
HEADER = 4096


def _np_dtype(art, name):
    if name not in DTYPES:
        raise Unsupported(f"{art.label}: unknown dtype '{name}'")
    return np.dtype(DTYPES[name])


def _widen_bfloat16(a):
    """bfloat16 words (uint16) as float32, exactly: a bfloat16 is the top half of a float32."""
    return (np.asarray(a, dtype="<u2").astype("<u4") << 16).view("<f4")


def _lz4_frames(art, data, index, nbytes):
    """The .npy bytes held in tensor.npy.lz4, checked against its chunk index (§5.6)."""
    chunks = 1 + -(-nbytes // CHUNK)
    if index.dtype != np.dtype("<u8") or index.shape != (chunks + 1, 2):
        raise CorruptData(f"{art.label}: the chunk index has shape {index.shape}, expected ({chunks + 1}, 2)")
    packed, raw = [int(x) for x in index[:, 0]], [int(x) for x in index[:, 1]]
    if packed[0] != 0 or raw[0] != 0 or packed[-1] != len(data):
        raise CorruptData(f"{art.label}: the chunk index does not span tensor.npy.lz4")
    out = bytearray()
    for k in range(chunks):
        lo, hi = packed[k], packed[k + 1]
        size = raw[k + 1] - raw[k]
        if hi < lo + 23 or size < 1 or size > CHUNK + HEADER:
            raise CorruptData(f"{art.label}: chunk {k} of the index is invalid")
        frame = data[lo:hi]
        if frame[:4] != b"\x04\x22\x4d\x18" or frame[4] != 0x68 or frame[5] != 0x60 or \
                int.from_bytes(frame[6:14], "little") != size or frame[-4:] != b"\0\0\0\0":
            raise CorruptData(f"{art.label}: frame {k} is not the LZ4 frame the index announces")
        word = int.from_bytes(frame[15:19], "little")
        s = word & 0x7FFFFFFF
        if len(frame) != 23 + s:
            raise CorruptData(f"{art.label}: frame {k} has a bad block size")
        block = frame[19:19 + s]
        if word & 0x80000000:
            if s != size:
                raise CorruptData(f"{art.label}: stored frame {k} holds {s} bytes, not {size}")
            out += block
            continue
        try:
            import lz4.block
        except ImportError:
            raise Unsupported(f"{art.label} is LZ4-compressed: install the lz4 Python module "
                              "(Debian: python3-lz4) to read it")
        try:
            chunk = lz4.block.decompress(block, uncompressed_size=size)
        except Exception as e:  # lz4 raises its own LZ4BlockError
            raise CorruptData(f"{art.label}: frame {k} does not decompress: {e}")
        if len(chunk) != size:
            raise CorruptData(f"{art.label}: frame {k} decompresses to {len(chunk)} bytes, not {size}")
        out += chunk
    return bytes(out)


def _tensor(art, mmap):
    dtype_name = art.meta_value("dtype", str)
    shape = tuple(art.meta_value("shape", list))
    dtype = _np_dtype(art, dtype_name)
    encoding = art.meta_value("encoding", str)
    recipe = None
    stored_dtype, stored_shape = dtype, shape
    if encoding.startswith("encoded."):  # the payload holds the elements after the recipe's transforms
        encoding = encoding[len("encoded."):]
        recipe = art.meta_value("recipe", dict)
        stored_dtype = _np_dtype(art, recipe.get("stored_dtype"))
        stored_shape = (recipe.get("count"),)
    if encoding == "npy":
        a = art.array("tensor.npy", mmap=mmap)
    elif encoding == "npy.lz4":
        if art.meta.get("chunk_bytes") != CHUNK:
            raise CorruptData(f"{art.label}: chunk_bytes is not {CHUNK}")
        nbytes = stored_dtype.itemsize * int(np.prod(stored_shape, dtype=np.int64))
        npy = _lz4_frames(art, art.read("tensor.npy.lz4"), art.array("tensor.chunks.npy", mmap=False), nbytes)
        try:
            a = np.load(io.BytesIO(npy), allow_pickle=False)
        except ValueError as e:
            raise CorruptData(f"{art.label}: the decompressed .npy is invalid: {e}")
    else:
        raise Unsupported(f"{art.label}: unknown tensor encoding '{encoding}'")
    if a.dtype != stored_dtype or a.shape != stored_shape:
        raise CorruptData(f"{art.label}: the payload holds {a.dtype} {a.shape}, the metadata says "
                          f"{stored_dtype} {stored_shape}")
    if recipe is not None:
        if recipe.get("dtype") != dtype_name:
            raise CorruptData(f"{art.label}: the recipe's dtype is not the tensor's")
        a = _decode(art, "tensor payload", recipe, a)
        if a.size != int(np.prod(shape, dtype=object)):
            raise CorruptData(f"{art.label}: the recipe's count does not match the shape")
        a = a.reshape(shape)
    return _widen_bfloat16(a).reshape(shape) if dtype_name == "bfloat16" else a


def _decode(art, what, recipe, stored):
    """The array `stored` holds after the transforms of `recipe` (docs/FORMAT.md §6.4), 1-d."""
    where = f"{art.label}: {what}"
    if not isinstance(recipe, dict):
        raise CorruptData(f"{where}: the encoding recipe is not an object")
    dtype, kept = _np_dtype(art, recipe.get("dtype")), _np_dtype(art, recipe.get("stored_dtype"))
    count, transforms = recipe.get("count"), recipe.get("transforms")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise CorruptData(f"{where}: the recipe's count is invalid")
    order = ["decimal", "delta", "squeeze", "shuffle"]
    if not isinstance(transforms, list) or any(t not in order for t in transforms) or \
            [order.index(t) for t in transforms] != sorted({order.index(t) for t in transforms}):
        raise CorruptData(f"{where}: the recipe's transforms are unknown, repeated or out of order")
    if stored.dtype != kept or stored.shape != (count,):
        raise CorruptData(f"{where}: stored {stored.dtype} {stored.shape}, the recipe says {kept} ({count},)")
    integer = dtype.kind in "iu"
    decimal = "decimal" in transforms
    if decimal:
        digits = recipe.get("decimal_digits")
        if dtype != np.dtype("<f8") or "delta" in transforms or not isinstance(digits, int) or \
                isinstance(digits, bool) or not 0 <= digits <= 15:
            raise CorruptData(f"{where}: decimal needs float64 without delta and decimal_digits in [0, 15]")
    if ("delta" in transforms or "squeeze" in transforms) and not integer and not decimal:
        raise CorruptData(f"{where}: delta and squeeze apply to integers, not {dtype}")
    before = np.dtype("<i8") if decimal else np.dtype(f"<u{dtype.itemsize}") if "delta" in transforms else dtype
    if "squeeze" in transforms:
        if kept.kind not in "iu" or kept.itemsize > before.itemsize:
            raise CorruptData(f"{where}: stored dtype {kept} cannot be squeezed from {before}")
    elif kept != before:
        raise CorruptData(f"{where}: stored dtype {kept} does not follow from {dtype}")
    a = np.asarray(stored)
    if "shuffle" in transforms:  # byte planes back to elements
        w = kept.itemsize
        a = np.ascontiguousarray(a.view(np.uint8).reshape(w, count).T).view(kept).reshape(count)
    if "squeeze" in transforms:
        if count and (int(a.min()) < np.iinfo(before).min or int(a.max()) > np.iinfo(before).max):
            raise CorruptData(f"{where}: a squeezed value does not fit {before}")
        a = a.astype(before)
    if "delta" in transforms:
        first = recipe.get("first")
        if not isinstance(first, int) or isinstance(first, bool) or \
                not np.iinfo(dtype).min <= first <= np.iinfo(dtype).max:
            raise CorruptData(f"{where}: the recipe's first value is missing or outside {dtype}")
        with np.errstate(over="ignore"):
            a = (np.cumsum(a, dtype=before) + before.type(first % (1 << (8 * dtype.itemsize)))).view(dtype)
    if decimal:  # d / 10^k, correctly rounded: the double the decimal's text parses to
        if count and (int(a.min()) <= -(1 << 53) or int(a.max()) >= 1 << 53):
            raise CorruptData(f"{where}: a decimal element is not below 2^53 in magnitude")
        a = a.astype(np.float64) / 10.0 ** digits
    return a


# ---------------------------------------------------------------------------
# sparse matrices (§8)


def _sparse(art, mmap):
    fmt = art.meta_value("format", str)
    if fmt not in ("csr", "csc", "coo"):
        raise Unsupported(f"{art.label}: unknown sparse format '{fmt}'")
    shape_meta = art.meta_value("shape", list)
    if len(shape_meta) != 2 or not all(isinstance(d, int) and d >= 0 for d in shape_meta):
        raise CorruptData(f"{art.label}: metadata shape {shape_meta} is not two dimensions")
    rows, cols = shape_meta
    dtype_name = art.meta_value("dtype", str)
    index = art.meta_value("index_dtype", str)
    if index not in ("int32", "int64"):
        raise CorruptData(f"{art.label}: index_dtype '{index}' is not int32 or int64")
    data = art.array("data.npy", mmap, _np_dtype(art, dtype_name), 1)
    if dtype_name == "bfloat16":
        data = _widen_bfloat16(data)
    names = ("row", "col") if fmt == "coo" else ("indices", "indptr")
    first = art.array(names[0] + ".npy", mmap, DTYPES[index], 1)
    second = art.array(names[1] + ".npy", mmap, DTYPES[index], 1)
    shape = art.array("shape.npy", False, "<i8", 1)
    if shape.tolist() != [rows, cols]:
        raise CorruptData(f"{art.label}: shape.npy disagrees with the metadata")
    nnz = len(data)
    bad = None
    if len(first) != nnz:
        bad = f"'{names[0]}' holds {len(first)} entries, 'data' {nnz}"
    elif fmt == "coo":
        if len(second) != nnz:
            bad = f"'col' holds {len(second)} entries, not {nnz}"
        elif nnz and (first.min() < 0 or first.max() >= rows or second.min() < 0 or second.max() >= cols):
            bad = "an index is outside the shape"
    else:
        major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
        if len(second) != major + 1:
            bad = f"'indptr' holds {len(second)} entries, not {major + 1}"
        elif second[0] != 0 or np.any(np.diff(second) < 0) or second[-1] != nnz:
            bad = "indptr does not run from 0 to nnz without decreasing"
        elif nnz and (first.min() < 0 or first.max() >= minor):
            bad = "an index is outside the shape"
    if bad:
        raise CorruptData(f"{art.label}: invalid sparse matrix: {bad}")
    try:
        import scipy.sparse as sp
    except ImportError:
        return {"format": fmt, "shape": (rows, cols), "data": data, names[0]: first, names[1]: second}
    if fmt == "coo":
        return sp.coo_matrix((data, (first, second)), shape=(rows, cols))
    make = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return make((data, first, second), shape=(rows, cols))


# ---------------------------------------------------------------------------
# tables (§9)

COLUMN_DTYPES = dict(DTYPES, **{"bool": "|b1", "timestamp[ns]": "<i8"})


def _table(art, mmap):
    rows = _count(art, art.meta_value("rows", int))
    schema = art.meta_value("columns", list)
    columns = {}
    for k, c in enumerate(schema):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("type"), str) or \
                not isinstance(c.get("nullable"), bool):
            raise CorruptData(f"{art.label}: column {k} of the schema lacks a name, type or nullable flag")
        name, kind, path = c["name"], c["type"], f"columns/{k}"
        if name in columns:
            raise CorruptData(f"{art.label}: two columns are named '{name}'")
        valid = _bitmap(art, path + ".valid.npy", rows, f"{art.label}: column '{name}'") if c["nullable"] else None
        if kind == "string":
            encoding = c.get("encoding")
            if encoding == "plain":
                values = art.strings(path)
            elif encoding == "dictionary":
                words = art.strings(path + ".dict")
                codes = art.array(path + ".codes.npy", False, "<u4", 1)
                if len(codes) and int(codes.max()) >= len(words):
                    raise CorruptData(f"{art.label}: column '{name}': a code lies past the dictionary")
                values = [words[i] for i in codes.tolist()]
            else:
                raise Unsupported(f"{art.label}: column '{name}' has unknown string encoding {encoding!r}")
            values = np.array(values + [None], dtype=object)[:-1]  # the None keeps numpy from making a 2-d array
        elif kind in COLUMN_DTYPES and kind != "bfloat16" and kind != "float16" and not kind.startswith("complex"):
            values = art.array(path + ".npy", mmap, COLUMN_DTYPES[kind], 1)
        else:
            raise Unsupported(f"{art.label}: column '{name}' has unknown type '{kind}'")
        if len(values) != rows:
            raise CorruptData(f"{art.label}: column '{name}' holds {len(values)} values for {rows} rows")
        columns[name] = (kind, values, valid)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    out = {}
    for name, (kind, values, valid) in columns.items():
        if kind == "timestamp[ns]":
            values = values.view("datetime64[ns]")
        if pd is None:
            if kind == "string":
                values = values.copy()
                if valid is not None:
                    values[~valid] = None
                out[name] = values
            else:
                out[name] = values if valid is None else np.ma.masked_array(values, mask=~valid)
            continue
        if valid is None:
            out[name] = values if kind != "string" else values
        elif kind == "string":
            values = values.copy()
            values[~valid] = None
            out[name] = values
        elif kind == "bool":
            out[name] = pd.arrays.BooleanArray(np.asarray(values), ~valid)
        elif kind == "timestamp[ns]":
            values = np.array(values)
            values[~valid] = np.datetime64("NaT")
            out[name] = values
        elif kind.startswith("float"):
            out[name] = pd.arrays.FloatingArray(np.asarray(values), ~valid)
        else:
            out[name] = pd.arrays.IntegerArray(np.asarray(values), ~valid)
    return out if pd is None else pd.DataFrame(out, index=pd.RangeIndex(rows))


# ---------------------------------------------------------------------------
# record collections (§10)

_MISSING = object()
_RECORD_KINDS = ("null", "bool", "int", "float", "string", "list", "object", "json")


def _bitmap(art, name, slots, where):
    """An LSB-first bitmap of `slots` bits (§9.2, §10.2) as a bool array, its size checked."""
    bits = art.array(name, False, "|u1", 1)
    if len(bits) != (slots + 7) // 8:
        raise CorruptData(f"{where}: '{name}' holds {len(bits)} bytes for {slots} slots")
    return np.unpackbits(bits, bitorder="little")[:slots].astype(bool)


def _record_column(art, node, path, slots, may_be_missing, depth):
    """Every slot of one place of the schema, as Python values (_MISSING for a missing key)."""
    where = f"{art.label}: records column '{path}'"
    if depth > MAX_DEPTH:
        raise CorruptData(f"{where} nests too deep")
    if not isinstance(node, dict) or not isinstance(node.get("kind"), str) or \
            not isinstance(node.get("nullable"), bool) or not isinstance(node.get("optional"), bool):
        raise CorruptData(f"{where} has a schema entry without a kind, nullable or optional flag")
    kind = node["kind"]
    if kind not in _RECORD_KINDS:
        raise Unsupported(f"{where} has unknown kind '{kind}'")
    if slots > (1 << 48):
        raise CorruptData(f"{where} claims {slots} slots")
    if node["optional"] and not may_be_missing:
        raise CorruptData(f"{where} is marked optional, but only an object's fields can be missing")
    fields = node.get("fields") if kind == "object" else None
    if kind == "object" and not isinstance(fields, list):
        raise CorruptData(f"{where} is an object without 'fields'")
    if (kind == "null" or (kind == "object" and not fields)) and not node["nullable"]:
        raise CorruptData(f"{where} lacks the validity bitmap its kind requires")
    valid = _bitmap(art, path + ".valid.npy", slots, where).tolist() if node["nullable"] else None
    missing = _bitmap(art, path + ".missing.npy", slots, where).tolist() if node["optional"] else None

    def sized(values, what):
        if len(values) != slots:
            raise CorruptData(f"{where} holds {len(values)} {what} where the schema has {slots}")
        return values

    if kind == "null":
        values = [None] * slots
    elif kind in ("bool", "int", "float"):
        dtype = {"bool": "|b1", "float": "<f8"}.get(kind)
        if kind == "int":
            dtype = {"int64": "<i8", "uint64": "<u8"}.get(node.get("dtype"))
            if dtype is None:
                raise CorruptData(f"{where} has integer dtype {node.get('dtype')!r}")
        values = sized(art.array(path + ".npy", False, dtype, 1), "values").tolist()
    elif kind == "string":
        encoding = node.get("encoding")
        if encoding == "plain":
            values = sized(art.strings(path), "strings")
        elif encoding == "dictionary":
            words = art.strings(path + ".dict")
            codes = sized(art.array(path + ".codes.npy", False, "<u4", 1), "codes")
            if len(codes) and int(codes.max()) >= len(words):
                raise CorruptData(f"{where}: a code lies past the dictionary of {len(words)} strings")
            values = [words[c] for c in codes.tolist()]
        else:
            raise Unsupported(f"{where} has unknown string encoding {encoding!r}")
        if any(isinstance(v, bytes) for v in values):
            raise CorruptData(f"{where} holds a string that is not UTF-8")
    elif kind == "json":
        texts = sized(art.strings(path, decode=False), "texts")
        values = []
        for i, t in enumerate(texts):
            hidden = (missing is not None and missing[i]) or (valid is not None and not valid[i])
            try:
                values.append(None if hidden else json.loads(t.decode("utf-8")))
            except (ValueError, UnicodeDecodeError):
                raise CorruptData(f"{where}: slot {i} is not JSON")
    elif kind == "list":
        offsets = art.array(path + ".offsets.npy", False, "<i8", 1)
        if len(offsets) != slots + 1:
            raise CorruptData(f"{where} holds {len(offsets)} offsets for {slots} slots")
        if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            raise CorruptData(f"{where}: the list offsets do not start at 0 and never decrease")
        if "items" not in node:
            raise CorruptData(f"{where} is a list without 'items'")
        items = _record_column(art, node["items"], path + "/items", int(offsets[-1]), False, depth + 1)
        o = offsets.tolist()
        values = [items[o[i]:o[i + 1]] for i in range(slots)]
    else:
        names, columns = [], []
        for k, f in enumerate(fields):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or f["name"] in names:
                raise CorruptData(f"{where}: field {k} has no name, or a repeated one")
            names.append(f["name"])
            columns.append(_record_column(art, f, f"{path}/{k}", slots, True, depth + 1))
        key_order = node.get("key_order", "schema")
        if key_order == "schema":
            values = [{names[k]: columns[k][i] for k in range(len(names)) if columns[k][i] is not _MISSING}
                      for i in range(slots)]
        elif key_order == "per_record":
            codes = sized(art.array(path + ".order.npy", False, "<u4", 1), "key orders").tolist()
            orders = []
            for j, text in enumerate(art.strings(path + ".orders", decode=False)):
                if len(text) % 4:
                    raise CorruptData(f"{where}: key order {j} is not whole uint32s")
                order = np.frombuffer(text, "<u4").tolist()
                if len(set(order)) != len(order) or any(k >= len(names) for k in order):
                    raise CorruptData(f"{where}: key order {j} names a field twice or past the fields")
                orders.append(order)
            values = []
            for i in range(slots):
                if codes[i] >= len(orders):
                    raise CorruptData(f"{where}: slot {i} has key order {codes[i]} of {len(orders)}")
                order = orders[codes[i]]
                present = [k for k in range(len(names)) if columns[k][i] is not _MISSING]
                if sorted(order) != present:
                    raise CorruptData(f"{where}: the key order of slot {i} disagrees with its fields")
                values.append({names[k]: columns[k][i] for k in order})
        else:
            raise Unsupported(f"{where} has unknown key_order {key_order!r}")
    out = values
    if valid is not None or missing is not None or kind == "null":
        out = []
        for i, v in enumerate(values):
            if missing is not None and missing[i]:
                out.append(_MISSING)
            elif kind == "null" or (valid is not None and not valid[i]):
                out.append(None)
            else:
                out.append(v)
    return out


def _records(art):
    count = _count(art, art.meta_value("count", int))
    return _record_column(art, art.meta.get("schema"), "records", count, False, 0)


# ---------------------------------------------------------------------------
# everyday materializers (§7)


def _count(art, n):
    if n < 0 or n > (1 << 40):
        raise CorruptData(f"{art.label}: count {n} is invalid")
    return n


def _map(art, mmap):
    keys = art.strings("keys")
    if _count(art, art.meta_value("count", int)) != len(keys):
        raise CorruptData(f"{art.label}: count disagrees with the number of keys")
    raw = art.strings("keys", decode=False)
    if any(raw[i] >= raw[i + 1] for i in range(len(raw) - 1)):
        raise CorruptData(f"{art.label}: keys are not sorted and unique")
    kind = art.meta_value("values", str)
    if kind == "array":
        values = _load(art.child("values"), mmap).tolist()
    elif kind == "strings":
        values = art.strings("values")
    elif kind == "json":
        values = json.loads(art.read("values.json"))
    elif kind == "children":
        values = [_load(art.child(f"values/{i}"), mmap) for i in range(len(keys))]
    else:
        raise Unsupported(f"{art.label}: unknown map values '{kind}'")
    if len(values) != len(keys):
        raise CorruptData(f"{art.label}: {len(values)} values for {len(keys)} keys")
    return dict(zip(keys, values))


def _tensor_list(art, mmap):
    index = json.loads(art.read("index.json"))
    if not isinstance(index, list) or _count(art, art.meta_value("count", int)) != len(index):
        raise CorruptData(f"{art.label}: index.json disagrees with count")
    size = art.files["data.bin"]["size"]
    data = np.memmap(art.path("data.bin"), mode="r") if mmap and size else np.frombuffer(art.read("data.bin"), np.uint8)
    out = []
    for i, item in enumerate(index):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[1], list) and isinstance(item[2], int)):
            raise CorruptData(f"{art.label}: index entry {i} is not [dtype, shape, offset]")
        dtype, shape, offset = _np_dtype(art, item[0]), tuple(item[1]), item[2]
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise CorruptData(f"{art.label}: item {i} has an invalid shape")
        count = int(np.prod(shape, dtype=object))
        if offset % 64 or offset < 0 or offset + count * dtype.itemsize > size:
            raise CorruptData(f"{art.label}: item {i} lies outside data.bin or is misaligned")
        a = np.frombuffer(data, dtype, count=count, offset=offset).reshape(shape)
        out.append(_widen_bfloat16(a).reshape(shape) if item[0] == "bfloat16" else a)
    return out


def _columns(art, files, prefix, n, mmap):
    """The values of record-list column `prefix` (§7.10) for `n` records."""
    if prefix + ".valid.npy" in files:
        valid = art.array(prefix + ".valid.npy", mmap, "|b1", 1)
        values = _plain_column(art, files, prefix, n, mmap)
        if len(valid) != n:
            raise CorruptData(f"{art.label}: column '{prefix}.valid.npy' holds {len(valid)} entries, not {n}")
        return [v if ok else None for v, ok in zip(values, valid.tolist())]
    return _plain_column(art, files, prefix, n, mmap)


def _plain_column(art, files, prefix, n, mmap):
    if prefix + ".npy" in files:
        values = art.array(prefix + ".npy", mmap, ndim=1).tolist()
    elif prefix + ".json.offsets.npy" in files:
        values = [json.loads(t) for t in art.strings(prefix + ".json", decode=False)]
    elif prefix + ".bytes" in files:
        values = art.strings(prefix)
    elif prefix + ".offsets.npy" in files:
        offsets = art.array(prefix + ".offsets.npy", False, "<i8", 1)
        if len(offsets) != n + 1 or (n and (offsets[0] != 0 or np.any(np.diff(offsets) < 0))):
            raise CorruptData(f"{art.label}: the offsets of column '{prefix}' are invalid")
        total = int(offsets[-1]) if len(offsets) else 0
        flat = _columns(art, files, prefix + ".values", total, mmap)
        o = offsets.tolist()
        values = [flat[o[i]:o[i + 1]] for i in range(n)]
    else:
        members = sorted({p[len(prefix) + 1:].split("/")[0].split(".")[0]
                          for p in files if p.startswith(prefix + "/")} if prefix else
                         {p.split("/")[0].split(".")[0] for p in files})
        if not members:
            raise CorruptData(f"{art.label}: no files for column '{prefix}'")
        cols = {m: _columns(art, files, f"{prefix}/{m}" if prefix else m, n, mmap) for m in members}
        values = [{m: cols[m][i] for m in members} for i in range(n)]
    if len(values) != n:
        raise CorruptData(f"{art.label}: column '{prefix}' holds {len(values)} entries, not {n}")
    return values


def _struct(art, mmap):
    fields = art.meta.get("fields")
    if not isinstance(fields, dict):
        raise Unsupported(f"{art.label}: materializer '{art.materializer}' is not one this reader knows")
    out = dict(fields)
    for role in art.children:
        out[role] = _load(art.child(role), mmap)
    return out


def _load(art, mmap):
    # Once per distinct artifact, as the C++ load: a list whose items are
    # one shared child, nested 30 deep, is 31 loads, not 2**30. The value is
    # then shared too (the same Python object wherever the child appears).
    key = (art.digest, mmap)
    if key not in art.loaded:
        art.loaded[key] = _load_artifact(art, mmap)
    return art.loaded[key]


def _load_artifact(art, mmap):
    m = art.materializer
    if m == "amphora.tensor":
        return _tensor(art, mmap)
    if m == "amphora.sparse":
        return _sparse(art, mmap)
    if m == "amphora.table":
        return _table(art, mmap)
    if m == "amphora.records":
        return _records(art)
    if m == "amphora.string":
        data = art.read("string.bin")
        if art.meta_value("bytes", int) != len(data):
            raise CorruptData(f"{art.label}: meta.bytes disagrees with string.bin")
        return _text(data)
    if m == "amphora.json":
        return json.loads(art.read("value.json"))
    if m == "amphora.strings":
        values = art.strings("strings")
        if art.meta_value("count", int) != len(values):
            raise CorruptData(f"{art.label}: count disagrees with the strings")
        return values
    if m == "amphora.list":
        return [_load(art.child(f"items/{i}"), mmap) for i in range(_count(art, art.meta_value("count", int)))]
    if m == "amphora.map":
        return _map(art, mmap)
    if m == "amphora.optional":
        engaged = art.meta_value("engaged", bool)
        if engaged != ("value" in art.children) or len(art.children) != int(engaged):
            raise CorruptData(f"{art.label}: 'engaged' disagrees with the children")
        return _load(art.child("value"), mmap) if engaged else None
    if m == "amphora.tensor_list":
        return _tensor_list(art, mmap)
    if m == "amphora.record_list":
        return _columns(art, sorted(art.files), "", _count(art, art.meta_value("count", int)), mmap) \
            if art.files else [{} for _ in range(art.meta_value("count", int))]
    return _struct(art, mmap)


def load(store_dir, ref, verify=False, mmap=True):
    """Loads the artifact `ref` names as a Python value (see the module docstring).
    verify=True re-hashes its files and its children's first; mmap=False reads
    arrays into memory instead of mapping them. A child listed under several
    parents is loaded once: the same Python object stands at each place."""
    art = open_artifact(store_dir, ref)
    if verify:
        _verify(art, set())
    return _load(art, mmap)
