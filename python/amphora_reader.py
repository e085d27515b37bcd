"""Read Amphora artifacts from Python, without the C++ library.

One file: the standard library plus NumPy; SciPy is used for sparse matrices
when present, the `lz4` module for LZ4-compressed tensors and `zstandard`
(Debian: python3-zstandard) for zstd-compressed ones. Written from
docs/FORMAT.md, not from the C++ code.

    import amphora_reader
    emb = amphora_reader.load(".amphora", "emb@2")          # numpy.ndarray
    graph = amphora_reader.load(".amphora", "graph")        # scipy.sparse matrix
    model = amphora_reader.load(".amphora", "models", verify=True)
    rows = amphora_reader.load_rows(".amphora", "emb", 1000, 1010)  # decodes only their chunks

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
  amphora.record_list    list of dicts, one per record, members in declaration
                         order: numbers as Python numbers, fixed-size arrays
                         and tensors as numpy.ndarray, lists of fixed-size
                         arrays as one (k, N) array, maps as dicts, pairs and
                         tuples as tuples
  amphora.tuple          tuple (std::pair, std::tuple)
  amphora.variant        the value it holds (None for std::monostate)
  a declared struct      dict of its members in declaration order
                         (AMPHORA_MATERIALIZE types, from plugins too)
  a registered name      what its reader function returns (Reader plugins,
                         below)

Inside a composite, a 0-d array (a number saved on its own) is the Python
number it holds.

Every check docs/FORMAT.md states is applied, as the C++ reader applies it:
the store marker and the store's own directories, every field of a manifest
(keys, types, ranges, piece counts, paths, order), every size, count, shape
and offset against the real size of the files before anything is allocated
for it, JSON nesting (64 levels; 257 for the JSON texts of record
collections), and no symbolic link anywhere below the store directory (the
store directory itself may be reached through one). Nothing recurses deeper
than the format's limits, so work and memory are bounded by what the files
really hold. verify=True also re-hashes every payload file of the artifact and
its children against the manifests and refuses files the manifests do not
list.

Errors. Everything this module raises reading a store is one of these
classes (AmphoraError and its subclasses), never another exception (only
register_reader raises ValueError or TypeError, for arguments it refuses):

  NotFound       the store, a name, a version or an artifact does not exist
  CorruptData    the store or an artifact is damaged or crafted: a manifest
                 that does not hash to its digest or breaks a rule of its
                 schema, a field of the wrong type (the message names the
                 field and the artifact), a size, count or offset the files do
                 not hold, JSON nested too deep, a symbolic link, FIFO or
                 device inside the store, a payload whose digests do not match
  Unsupported    written by a newer Amphora (store layout, manifest or
                 materializer version, or newer than a registered reader
                 reads), an unknown dtype, encoding or materializer (not
                 built in, not a declared struct and no reader registered),
                 or an LZ4 tensor without the lz4 module
  AmphoraError   itself: an invalid or ambiguous ref, or a file of the store
                 that the system refuses to read (permissions, I/O errors)

The one exception is MemoryError when an intact artifact holds more than the
machine can load: a crafted size never gets that far, as it is checked against
the files first.

Reader plugins. A materializer a plugin adds (a name outside "amphora.") is
loaded generically when its layout is the toolkit's: a declared struct (meta
"fields", member arrays MEMBER.npy, members as children) is a dict, whatever
the plugin. For any other layout, register a function that reads it:

    def read_setting(artifact, load_child):
        value = artifact.json_file("value.json")
        if artifact.version == 1:                  # format 1 stored a percentage
            value["rate"] = value.pop("rate_percent") / 100
        return value

    amphora_reader.register_reader("test.setting", read_setting, version=2)

register_reader(materializer, reader, version=1) makes `reader` load every
artifact of that materializer, its children included; `version` is the
newest format version the function reads, and an artifact stored with a
newer one raises Unsupported naming both versions. Registering a name again
replaces the function; a name starting with "amphora." (the built-in kinds)
raises ValueError. unregister_reader(materializer) removes it (no error when
none is registered) and readers() returns a copy of the registry,
{materializer: (reader, version)}. The registry is global to the process.

The function is called as reader(artifact, load_child) and returns the value.
load_child(role) loads the child `role` as load() would (through the same
dispatch, once per distinct artifact in one load, children nested at most 64
deep; a 0-d array as its number). `artifact` is an Artifact, whose public
surface is:

  label, digest          how messages name it ("artifact NAME / role"), and
                         "sha256:HEX"
  materializer, version  the materializer name and the format version stored
  meta                   the manifest's meta (a dict of JSON values)
  files, children        {path: {"path", "size", "piece_size", "sha256"}} of
                         the payload files; {role: digest} of the children
  mmap                   whether the load maps arrays (load(mmap=...))
  has(name)              whether the manifest lists payload file `name`
  read(name)             the bytes of payload file `name`
  array(name, mmap=None, dtype=None, ndim=None)
                         a .npy payload as a numpy array (mapped read-only
                         when mmap, by default as the load maps), its header
                         and size checked; with dtype or ndim, checked for them
  strings(name)          merged strings (NAME.offsets.npy + NAME.bytes), a list
  json_file(name)        a JSON payload, parsed with the nesting limit
  meta_value(key, kind)  meta[key], CorruptData unless present and a `kind`
                         (int: an unsigned 64-bit integer, or str, bool, ...)
  child(role)            the child `role` as an Artifact, not loaded

Those that read check what they read, and raise CorruptData naming the
artifact. An exception the function raises that is an AmphoraError passes
through as it is; any other (a KeyError on a missing key, say) becomes
CorruptData naming the artifact and its materializer, so load() keeps the
promise above.
"""

import hashlib
import json
import math
import os
import re
import stat
import struct

import numpy as np

__all__ = ["load", "resolve", "open_artifact", "verify", "register_reader", "unregister_reader", "readers",
           "Artifact", "AmphoraError", "NotFound", "CorruptData", "Unsupported"]

MANIFEST_MAX = 64 << 20
RECORD_MAX = 1 << 20
MARKER_MAX = 64 << 10
MAX_DEPTH = 64                # nesting of child artifacts (kMaxChildDepth)
JSON_DEPTH = 64               # JSON from disk: manifests, name records, the marker, JSON payloads
RECORD_JSON_DEPTH = 257       # the JSON text of a record collection's `json` slot
MAX_FILES = 1 << 20           # files, and children, per manifest
PIECE_MIN, PIECE_MAX = 4096, 1 << 40
MAX_DIMS = 32
NPY_HEADER_MAX = 1 << 20
LAYOUT_VERSION = 1
MANIFEST_VERSION = 2
FORMAT_VERSIONS = {  # materializer name -> the newest format version this reader reads
    "amphora.tensor": 1, "amphora.sparse": 1, "amphora.table": 1, "amphora.records": 1, "amphora.string": 1,
    "amphora.json": 1, "amphora.strings": 1, "amphora.list": 1, "amphora.map": 1, "amphora.optional": 1,
    "amphora.tensor_list": 1, "amphora.record_list": 1, "amphora.tuple": 1, "amphora.variant": 1,
}
HEX = re.compile(r"[0-9a-f]+\Z")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
DECIMAL = re.compile(r"[0-9]{1,20}\Z")  # ASCII digits only: str.isdigit() takes U+0661 and U+00B2 too
VERSION_FILE = re.compile(r"([1-9][0-9]{0,19})\.json\Z")
STORE_AREAS = ("objects", "names", "cache", "runs", "claims", "tmp", "locks")


class AmphoraError(Exception):
    """Base of the errors this module raises; raised itself for an invalid or
    ambiguous ref and for a file the system refuses to read."""


class NotFound(AmphoraError):
    pass


class CorruptData(AmphoraError):
    pass


class Unsupported(AmphoraError):
    pass


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_unsigned(v):
    return _is_int(v) and 0 <= v < (1 << 64)


# ---------------------------------------------------------------------------
# JSON from disk: nlohmann's verdicts, with the nesting bounded before parsing

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _nesting(raw, limit):
    """The deepest nesting of arrays and objects in the JSON text `raw`,
    brackets inside strings not counted, or any value up to `limit` once it is
    known to be at most that; stops as soon as it passes `limit`. Python's json
    module recurses once per level, so it must never see a document deeper
    than the limit. Linear, vectorised a block at a time (a quote is escaped
    when an odd run of backslashes precedes it), so no input makes it slow."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return 0
    data = np.frombuffer(raw, np.uint8)
    depth = deepest = 0
    quotes = 0  # parity of the unescaped quotes so far: 1 inside a string
    run = 0     # backslashes ending the previous block
    block = 1 << 18
    for at in range(0, len(data), block):
        a = data[at:at + block]
        idx = np.arange(len(a))
        backslash = a == 0x5C
        last = np.maximum.accumulate(np.where(backslash, -1, idx))  # last other byte at or before each one
        before = np.empty(len(a), np.int64)  # backslashes right before each byte
        before[0] = run
        before[1:] = np.where(last[:-1] >= 0, idx[1:] - 1 - last[:-1], idx[1:] + run)
        quote = (a == 0x22) & (before % 2 == 0)
        outside = (np.cumsum(quote) + quotes) % 2 == 0
        steps = np.where(outside & ((a == 0x5B) | (a == 0x7B)), 1, 0) - \
            np.where(outside & ((a == 0x5D) | (a == 0x7D)), 1, 0)
        levels = np.cumsum(steps) + depth
        deepest, depth = max(deepest, int(levels.max())), int(levels[-1])
        if deepest > limit:
            break
        quotes = (quotes + int(quote.sum())) % 2
        run = int(before[-1]) + 1 if backslash[-1] else 0
    return deepest


def _json_int(text, strict):
    v = int(text)
    if -(1 << 63) <= v < (1 << 64):
        return v
    if strict:
        raise ValueError(f"integer {text[:40]} does not fit in 64 bits")
    try:
        return float(v)  # as nlohmann reads an integer beyond 64 bits
    except OverflowError:
        raise ValueError(f"number overflow parsing '{text[:40]}'")


def _json_float(text):
    v = float(text)
    if math.isinf(v):
        raise ValueError(f"number overflow parsing '{text[:40]}'")
    return v


def _json_constant(name):
    raise ValueError(f"invalid literal {name}")


def _no_lone_surrogates(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            v.encode("utf-8")
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())


def _json(raw, what, limit=JSON_DEPTH, strict=False):
    """The JSON value of the bytes `raw`, as the C++ reader reads them: UTF-8,
    no NaN or infinities, no lone surrogates, at most `limit` levels deep, an
    integer beyond 64 bits read as a float (refused when `strict`, as simdjson
    refuses it, and so is a byte-order mark). CorruptData names `what`."""
    raw = bytes(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptData(f"{what} is not valid JSON (invalid UTF-8 at byte {e.start})")
    if text.startswith("\ufeff") and not strict:
        text = text[1:]
    if _nesting(raw, limit) > limit:
        raise CorruptData(f"{what} is not valid JSON (it nests deeper than {limit} levels)")
    try:
        value = json.loads(text, parse_int=lambda s: _json_int(s, strict), parse_float=_json_float,
                           parse_constant=_json_constant)
        if _SURROGATE_ESCAPE.search(text):
            _no_lone_surrogates(value)
    except RecursionError:
        raise CorruptData(f"{what} is not valid JSON (it nests too deep)")
    except UnicodeEncodeError:
        raise CorruptData(f"{what} is not valid JSON (a string holds a lone UTF-16 surrogate)")
    except ValueError as e:
        raise CorruptData(f"{what} is not valid JSON ({e})")
    return value


# ---------------------------------------------------------------------------
# the store directory: everything beneath it is reached one component at a
# time from a descriptor of it, with O_NOFOLLOW, as the C++ side reaches it

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _describe(mode):
    return {stat.S_IFREG: "a regular file", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link",
            stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "a special file")


def _refusal(dir_fd, name, shown, error, want):
    """The error for `name` in `dir_fd`, which could not be opened as `want`."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        return CorruptData(f"{shown} is a symbolic link")
    if st is not None and (stat.S_IFMT(st.st_mode) != stat.S_IFDIR if want == "directory" else
                           stat.S_IFMT(st.st_mode) in (stat.S_IFSOCK, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK)):
        return CorruptData(f"{shown} is {_describe(st.st_mode)}, not a {want}")
    return AmphoraError(f"cannot open {shown}: {error.strerror}")


class _Root:
    """An open descriptor of a store directory (which may itself be reached
    through a link), closed when the last artifact using it goes."""

    def __init__(self, path):
        self.path = path
        self.fd = -1
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"{path} is not an Amphora store (no such directory)")
        except OSError as e:
            raise AmphoraError(f"cannot open the store {path}: {e.strerror}")

    def __del__(self):
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except (OSError, TypeError, AttributeError):  # at interpreter exit os may be gone
                pass
            self.fd = -1

    def shown(self, parts):
        return os.path.join(self.path, *parts)

    def open_dir(self, parts):
        """A descriptor of the directory `parts` beneath the store: NotFound
        when missing, CorruptData when a component is a link or no directory."""
        fd = self.fd
        try:
            for k, part in enumerate(parts):
                try:
                    sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise NotFound(f"no directory {self.shown(parts[:k + 1])}")
                except OSError as e:
                    raise _refusal(fd, part, self.shown(parts[:k + 1]), e, "directory")
                if fd != self.fd:
                    os.close(fd)
                fd = sub
        except BaseException:
            if fd != self.fd:
                os.close(fd)
            raise
        return fd if fd != self.fd else os.dup(fd)

    def open_file(self, parts):
        """(descriptor, size) of the regular file `parts` beneath the store,
        opened without following links or blocking (a FIFO is refused, not
        waited on). NotFound when missing; CorruptData when it or a directory
        on the way is a link, or it is not a regular file."""
        shown = self.shown(parts)
        dir_fd = self.open_dir(parts[:-1])
        try:
            try:
                fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                raise NotFound(f"{shown} does not exist")
            except OSError as e:
                raise _refusal(dir_fd, parts[-1], shown, e, "regular file")
        finally:
            os.close(dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise CorruptData(f"{shown} is {_describe(st.st_mode)}, not a regular file")
        return fd, st.st_size

    def read_small(self, parts, limit):
        """The bytes of the regular file `parts`, refused when over `limit`."""
        fd, size = self.open_file(parts)
        with os.fdopen(fd, "rb") as f:
            if size > limit:
                raise CorruptData(f"{self.shown(parts)} is {size} bytes, more than the {limit} it may hold")
            try:
                data = f.read(limit + 1)
            except OSError as e:
                raise AmphoraError(f"cannot read {self.shown(parts)}: {e.strerror}")
        if len(data) > limit:
            raise CorruptData(f"{self.shown(parts)} is more than the {limit} bytes it may hold")
        return data

    def entry_kind(self, parts):
        """The file type of `parts` (its last component not followed), or None when missing."""
        dir_fd = self.open_dir(parts[:-1])
        try:
            return stat.S_IFMT(os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return None
        finally:
            os.close(dir_fd)

    def listdir(self, parts):
        fd = self.open_dir(parts)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)


def _open_store(store):
    """The store at `store`, its marker and its own directories checked (docs/FORMAT.md §1.1)."""
    root = _Root(store)
    marker = root.shown(["amphora-store.json"])
    try:
        raw = root.read_small(["amphora-store.json"], MARKER_MAX)
    except NotFound:
        raise NotFound(f"{store} is not an Amphora store (it has no amphora-store.json)")
    doc = _json(raw, marker)
    layout = doc.get("layout_version") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("format") != "amphora-store" or not _is_int(layout):
        raise CorruptData(f"{marker} is not an Amphora store marker")
    if layout > LAYOUT_VERSION:
        raise Unsupported(f"store {store} has layout version {layout}, newer than the version {LAYOUT_VERSION} "
                          "this build understands")
    if layout < 1:
        raise CorruptData(f"{marker} has an invalid layout_version {layout}")
    for area in STORE_AREAS:
        st = None
        try:
            st = os.stat(area, dir_fd=root.fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise AmphoraError(f"cannot look at {root.shown([area])}: {e.strerror}")
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise CorruptData(f"{store}: '{area}' is {_describe(st.st_mode)}, not a directory: the store is damaged")
    return root


# ---------------------------------------------------------------------------
# refs (docs/FORMAT.md §1.6)


def _versions(root, name):
    """The version numbers of `name`, ascending; [] when it has none."""
    try:
        entries = root.listdir(["names", name])
    except NotFound:
        return []
    return sorted(int(m.group(1)) for m in map(VERSION_FILE.match, entries) if m and int(m.group(1)) < (1 << 64))


def _record_digest(root, name, version):
    what = f"name record {name}@{version}"
    try:
        raw = root.read_small(["names", name, f"{version}.json"], RECORD_MAX)
    except CorruptData as e:
        raise CorruptData(f"{what}: {e}")
    record = _json(raw, f"{what} ({root.shown(['names', name, f'{version}.json'])})")
    if not isinstance(record, dict):
        raise CorruptData(f"{what} is not a JSON object")
    digest = record.get("digest")
    if not _is_digest(digest):
        raise CorruptData(f"{what} has no valid digest")
    return digest


def _is_digest(d):
    return isinstance(d, str) and len(d) == 71 and d.startswith("sha256:") and HEX.match(d[7:]) is not None


def _object_parts(hexd):
    return ["objects", "sha256", hexd[:2], hexd]


def _has(root, hexd):
    """Whether artifact `hexd` exists: its manifest.json a regular file reached without links."""
    try:
        fd, _ = root.open_file(_object_parts(hexd) + ["manifest.json"])
    except (NotFound, CorruptData):
        return False
    os.close(fd)
    return True


def _by_prefix(root, ref, prefix):
    fan = ["objects", "sha256", prefix[:2]]
    try:
        fd = root.open_dir(fan)  # a link here is refused: nothing behind it is read
    except NotFound:
        fd = None
    matches = []
    if fd is not None:
        try:
            for e in sorted(os.listdir(fd)):
                if len(e) == 64 and HEX.match(e) and e.startswith(prefix) and \
                        stat.S_ISDIR(os.stat(e, dir_fd=fd, follow_symlinks=False).st_mode) and _has(root, e):
                    matches.append(e)
        finally:
            os.close(fd)
    if not matches:
        raise NotFound(f"no artifact matches '{ref}' in store {root.path}")
    if len(matches) > 1:
        raise AmphoraError(f"ref '{ref}' is ambiguous: it matches {len(matches)} artifacts (" +
                           ", ".join("sha256:" + m for m in matches[:5]) + (", ..." if len(matches) > 5 else "") +
                           "); give more digits")
    return "sha256:" + matches[0]


def _resolve(root, ref):
    if not isinstance(ref, str):
        raise AmphoraError(f"a ref is a string, not {type(ref).__name__}")
    if not ref:
        raise AmphoraError("empty ref: give NAME, NAME@N, sha256:HEX or a hex prefix")
    if "@" in ref:
        name, _, n = ref.partition("@")
        if not NAME.match(name):
            raise AmphoraError(f"invalid name '{name}'")
        if not DECIMAL.match(n) or not 1 <= int(n) < (1 << 64):
            raise AmphoraError(f"invalid version in ref '{ref}': expected NAME@N with N >= 1")
        version = int(n)
        try:  # the record itself first, as the CLI does
            return _record_digest(root, name, version)
        except NotFound:
            pass
        versions = _versions(root, name)
        if not versions:
            raise NotFound(f"no name '{name}' in store {root.path}")
        if version not in versions:
            raise NotFound(f"name '{name}' has no version {version} (latest is {versions[-1]})")
        return _record_digest(root, name, version)
    if ref.startswith("sha256:"):
        hexd = ref[7:]
        if not HEX.match(hexd) or not 8 <= len(hexd) <= 64:
            raise AmphoraError(f"invalid digest ref '{ref}': expected sha256: and 8 to 64 lower-case hex digits")
        if len(hexd) == 64:
            if not _has(root, hexd):
                raise NotFound(f"no artifact {ref} in store {root.path}")
            return ref
        return _by_prefix(root, ref, hexd)
    valid_name = NAME.match(ref) is not None
    if valid_name:
        versions = _versions(root, ref)
        if versions:
            return _record_digest(root, ref, versions[-1])
    if HEX.match(ref) and 8 <= len(ref) <= 64:
        return _by_prefix(root, ref, ref)
    if HEX.match(ref) and 4 <= len(ref) < 8:
        raise NotFound(f"no name '{ref}' in store {root.path}, and '{ref}' is too short for a digest prefix: "
                       "give at least 8 hex digits")
    if not valid_name:
        raise AmphoraError(f"invalid name '{ref}'")
    raise NotFound(f"no name or artifact '{ref}' in store {root.path}")


def resolve(store_dir, ref):
    """The digest ("sha256:...") that `ref` names, resolved as docs/FORMAT.md §1.6 says."""
    return _guarded(f"ref {ref!r}", lambda: _resolve(_open_store(os.fspath(store_dir)), ref))


# ---------------------------------------------------------------------------
# manifests (docs/FORMAT.md §3.2)


def _path_problem(path):
    """What makes `path` no valid payload path (docs/FORMAT.md §2), or None."""
    if not path:
        return "empty"
    if len(path.encode("utf-8", "surrogatepass")) > 1024:
        return "longer than 1024 characters"
    if path[0] == "/":
        return "absolute"
    for part in path.split("/"):
        if not part:
            return "empty component"
        if part in (".", ".."):
            return f"'{part}' component"
        if part[0] == ".":
            return "hidden component"
        if any(c < " " or c == "\x7f" or c == "\\" for c in part):
            return "control character or backslash"
    if path == "manifest.json":
        return "reserved name"
    return None


def _parse_manifest(raw, label):
    """The manifest.json bytes `raw`, checked in the order and with the rules of
    Manifest::parse: (version, materializer name, materializer version, meta,
    files by path, children by role)."""
    def bad(what):
        return CorruptData(f"{label}: manifest.json {what}")

    def field(obj, key, context):
        if key not in obj:
            raise bad(f'{context} has no "{key}"')
        return obj[key]

    def unsigned(obj, key, context):
        v = field(obj, key, context)
        if not _is_unsigned(v):
            raise bad(f'{context} "{key}" is not a non-negative integer')
        return v

    def only(obj, keys, context):
        for k in obj:
            if k not in keys:
                raise bad(f'{context} has unknown field "{k}"')

    doc = _json(raw, f"{label}: manifest.json")
    if not isinstance(doc, dict):
        raise bad("is not a JSON object")
    version = field(doc, "manifest_version", "manifest")
    if not _is_int(version):
        raise bad('"manifest_version" is not an integer')
    if version > MANIFEST_VERSION:
        raise Unsupported(f"{label}: manifest version {version} was written by a newer Amphora; this reader "
                          f"reads versions 1 to {MANIFEST_VERSION}")
    if version < 1:
        raise bad(f"has invalid manifest_version {version}")
    keys = ("manifest_version", "materializer", "files", "meta") + (("children",) if version >= 2 else ())
    only(doc, keys, "manifest")
    mat = field(doc, "materializer", "manifest")
    if not isinstance(mat, dict):
        raise bad('"materializer" is not an object')
    only(mat, ("name", "version"), "materializer")
    name = field(mat, "name", "materializer")
    if not isinstance(name, str) or not name:
        raise bad("materializer name is not a non-empty string")
    mat_version = unsigned(mat, "version", "materializer")
    if not 1 <= mat_version <= 1_000_000:
        raise bad("materializer version is out of range")
    meta = field(doc, "meta", "manifest")
    if not isinstance(meta, dict):
        raise bad('"meta" is not an object')
    files = field(doc, "files", "manifest")
    if not isinstance(files, list):
        raise bad('"files" is not an array')
    if len(files) > MAX_FILES:
        raise bad(f"lists more than {MAX_FILES} files")
    entries = {}
    previous = None
    for f in files:
        if not isinstance(f, dict):
            raise bad("has a file entry that is not an object")
        only(f, ("path", "size", "piece_size", "sha256"), "file entry")
        path = field(f, "path", "file entry")
        if not isinstance(path, str):
            raise bad("has a file path that is not a string")
        problem = _path_problem(path)
        if problem:
            raise CorruptData(f"{label}: unsafe payload path '{path}': {problem}")
        context = f"file '{path}'"
        size = unsigned(f, "size", context)
        piece = unsigned(f, "piece_size", context)
        if not PIECE_MIN <= piece <= PIECE_MAX:
            raise bad(f"{context} piece_size {piece} is outside [4096, 2^40]")
        pieces = field(f, "sha256", context)
        if not isinstance(pieces, list):
            raise bad(f"{context} sha256 is not an array")
        count = 1 if size == 0 else (size - 1) // piece + 1
        if len(pieces) != count:
            raise bad(f"{context} lists {len(pieces)} piece digests, but {size} bytes make {count} pieces")
        for p in pieces:
            if not isinstance(p, str):
                raise bad(f"{context} has a non-string digest")
            if len(p) != 64 or not HEX.match(p):
                raise bad(f"{context}: '{p[:80]}' is not 64 lower-case hex digits")
        key = path.encode("utf-8", "surrogatepass")
        if previous is not None and not previous < key:
            raise bad(f"files are not sorted by path, or '{path}' is listed twice")
        previous = key
        entries[path] = {"path": path, "size": size, "piece_size": piece, "sha256": pieces}
    children = {}
    if version >= 2:
        listed = field(doc, "children", "manifest")
        if not isinstance(listed, list):
            raise bad('"children" is not an array')
        if len(listed) > MAX_FILES:
            raise bad(f"lists more than {MAX_FILES} children")
        previous = None
        for c in listed:
            if not isinstance(c, dict):
                raise bad("has a child entry that is not an object")
            only(c, ("role", "digest"), "child entry")
            role = field(c, "role", "child entry")
            if not isinstance(role, str):
                raise bad("has a child role that is not a string")
            problem = _path_problem(role)
            if problem:
                raise bad(f"has an invalid child role '{role}': {problem}")
            digest = field(c, "digest", f"child '{role}'")
            if not _is_digest(digest):
                raise bad(f"child '{role}' has no valid digest")
            key = role.encode("utf-8", "surrogatepass")
            if previous is not None and not previous < key:
                raise bad(f"children are not sorted by role, or role '{role}' is listed twice")
            previous = key
            children[role] = digest
    return name, mat_version, meta, entries, children


# ---------------------------------------------------------------------------
# .npy files (docs/FORMAT.md §5.4, §6.2)

_DESCR_CODES = {"b1": "|b1", "i1": "|i1", "i2": "<i2", "i4": "<i4", "i8": "<i8", "u1": "|u1", "u2": "<u2",
                "u4": "<u4", "u8": "<u8", "f2": "<f2", "f4": "<f4", "f8": "<f8", "c8": "<c8", "c16": "<c16"}
_HEADER_TOKEN = re.compile(r"[ \t\n\r]*")
_DIGITS = re.compile(r"[0-9]+")


class _NpyHeader:
    """What a .npy header says: the dtype (little-endian numpy dtype), whether
    the file holds it big-endian, Fortran order, the shape and the data offset."""

    def __init__(self, dtype, big_endian, fortran, shape, offset):
        self.dtype, self.big_endian, self.fortran, self.shape, self.offset = dtype, big_endian, fortran, shape, offset


def _parse_npy_header(head, size, where):
    """The header of a .npy file of `size` bytes starting with the bytes `head`
    (at least its first 12 bytes and its header, where the file has them);
    refuses what numpy.load refuses and the forms no writer produces, as
    parse_npy_header does."""
    def bad(why):
        return CorruptData(f"{where}: invalid .npy header: {why}")

    if size < 10 or head[:6] != b"\x93NUMPY":
        raise CorruptData(f"{where} is not a .npy file (magic string missing)")
    major, minor = head[6], head[7]
    if (major, minor) == (1, 0):
        width = 2
    elif major in (2, 3) and minor == 0:
        width = 4
    else:
        raise Unsupported(f"{where}: .npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)")
    if size < 8 + width:
        raise bad("file ends inside the header")
    header_len = int.from_bytes(head[8:8 + width], "little")
    if header_len > NPY_HEADER_MAX:
        raise bad(f"header claims {header_len} bytes")
    offset = 8 + width + header_len
    if offset > size:
        raise bad(f"header claims {header_len} bytes but the file holds only {size}")
    raw = head[8 + width:offset]
    if b"\0" in raw or (major < 3 and any(b >= 0x80 for b in raw)):
        raise bad("non-ASCII byte in header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("the header is not UTF-8")
    descr, fortran, shape = _parse_npy_dict(text, where, major < 3)
    if len(descr) < 3 or descr[0] not in "<>|=" or descr[1:] not in _DESCR_CODES or \
            (descr[0] == "|" and np.dtype(_DESCR_CODES[descr[1:]]).itemsize != 1):
        raise CorruptData(f"{where}: unsupported dtype '{descr}' (supported: bool, int8-64, uint8-64, "
                          "float16/32/64, complex64/128)")
    dtype = np.dtype(_DESCR_CODES[descr[1:]])
    return _NpyHeader(dtype, descr[0] == ">" and dtype.itemsize > 1, fortran, shape, offset)


def _parse_npy_dict(s, where, python2_longs):
    """{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } -> (descr, fortran, shape)."""
    i = 0
    seen = {}

    def bad(why):
        return CorruptData(f"{where}: invalid .npy header: {why}")

    def space():
        nonlocal i
        i = _HEADER_TOKEN.match(s, i).end()

    def expect(c):
        nonlocal i
        space()
        if s[i:i + 1] != c:
            raise bad(f"expected '{c}' at offset {i}")
        i += 1

    def string():
        nonlocal i
        space()
        quote = s[i:i + 1]
        if quote not in ("'", '"'):
            raise bad(f"expected a string at offset {i}")
        end = s.find(quote, i + 1)
        if end < 0:
            raise bad("unterminated string")
        body = s[i + 1:end]
        if "\\" in body:
            raise bad("escape sequences are not supported")
        if "\n" in body or "\r" in body:
            raise bad(f"the string at offset {i} runs over a line break")
        i = end + 1
        return body

    def continues(k):
        return k < len(s) and (s[k].isascii() and (s[k].isalnum() or s[k] in "_."))

    def boolean():
        nonlocal i
        space()
        for word, value in (("True", True), ("False", False)):
            if s.startswith(word, i) and not continues(i + len(word)):
                i += len(word)
                return value
        raise bad("fortran_order is neither True nor False")

    def dimension():
        nonlocal i
        space()
        m = _DIGITS.match(s, i)
        if not m:
            raise bad(f"shape holds something other than a non-negative integer at offset {i}")
        digits = m.group()
        significant = digits.lstrip("0")
        if significant and len(significant) < len(digits):
            raise bad(f"shape dimension '{digits[:40]}' has a leading zero, which Python 3 integer literals do not "
                      "allow")
        if len(significant) > 19 or int(significant or "0") >= (1 << 63):
            raise bad(f"shape dimension {digits[:40]} does not fit in 64 bits")
        i = m.end()
        if s[i:i + 1] == "L":
            if not python2_longs:
                raise bad(f"shape dimension {digits}L uses Python 2 syntax, which only version 1.0 and 2.0 "
                          "headers may hold")
            i += 1
        if continues(i):
            raise bad(f"shape holds something other than a non-negative integer at offset {m.start()}")
        return int(significant or "0")

    def shape_tuple():
        nonlocal i
        space()
        if s[i:i + 1] != "(":
            raise bad(f"shape is not a tuple (offset {i})")
        i += 1
        dims = []
        space()
        while s[i:i + 1] != ")":
            dims.append(dimension())
            if len(dims) > MAX_DIMS:
                raise bad(f"more than {MAX_DIMS} dimensions")
            space()
            if s[i:i + 1] == ")":
                if len(dims) == 1:
                    raise bad("shape is an integer in parentheses, not a tuple: a one-element tuple needs a "
                              f"trailing comma, as in ({dims[0]},)")
                break
            if s[i:i + 1] != ",":
                raise bad(f"expected ',' or ')' in the shape at offset {i}")
            i += 1
            space()
        i += 1
        return tuple(dims)

    expect("{")
    space()
    while s[i:i + 1] != "}":
        key = string()
        expect(":")
        if key not in ("descr", "fortran_order", "shape"):
            raise bad(f"unexpected key '{key}'")
        if key in seen:
            raise bad(f"key '{key}' appears twice (NumPy would use the last value; Amphora refuses an "
                      "ambiguous header)")
        if key == "descr":
            space()
            if s[i:i + 1] == "[":
                raise Unsupported(f"{where}: structured (record) dtypes are not supported")
            seen[key] = string()
        elif key == "fortran_order":
            seen[key] = boolean()
        else:
            seen[key] = shape_tuple()
        space()
        if s[i:i + 1] == "}":
            break
        if s[i:i + 1] != ",":
            raise bad(f"expected ',' or '}}' at offset {i}")
        i += 1
        space()
    i += 1
    space()
    if i < len(s):
        raise bad("trailing characters after the dictionary")
    missing = [f"'{k}'" for k in ("descr", "fortran_order", "shape") if k not in seen]
    if missing:
        raise bad("the dictionary lacks " + ", ".join(missing))
    return seen["descr"], seen["fortran_order"], seen["shape"]


def _element_count(shape, itemsize, where):
    """Π shape, checked as checked_element_count: at most 32 dimensions, each
    at least 0, and itemsize × Π (non-zero dimensions) below 2^63."""
    if len(shape) > MAX_DIMS:
        raise CorruptData(f"{where}: {len(shape)} dimensions, more than {MAX_DIMS}")
    product, count = itemsize, 1
    for d in shape:
        if not _is_int(d) or d < 0:
            raise CorruptData(f"{where}: shape dimension {d!r} is negative or not an integer")
        if d:
            product *= d
            if product >= (1 << 63):
                raise CorruptData(f"{where}: the shape {list(shape)} takes 2^63 bytes or more")
        count *= d
    return count


def _npy_descr(dtype):
    return np.dtype(dtype).str if np.dtype(dtype).itemsize > 1 else "|" + np.dtype(dtype).str[1:]


def _npy_header_bytes(descr, shape, alignment):
    """The header make_npy_header writes (docs/FORMAT.md §5.4)."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    total = 10 + len(text) + 1
    padded = -(-total // alignment) * alignment
    text += " " * (padded - total) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("ascii")


def _check_bools(a, where, first=0):
    """Every element of the bool array `a` is 0 or 1 (docs/FORMAT.md §5.2)."""
    raw = np.asarray(a).reshape(-1).view(np.uint8)
    if raw.size and int(raw.max()) > 1:
        k = int(np.argmax(raw > 1))
        raise CorruptData(f"{where}: bool element {first + k} holds the byte {int(raw[k])}; a bool must be 0 or 1")


# ---------------------------------------------------------------------------
# artifacts


class Artifact:
    """One artifact: its digest, parsed manifest and directory. What a
    registered reader function may use is listed in the module docstring."""

    def __init__(self, store, digest, depth=0, label=None, loaded=None, root=None):
        self.store, self.digest, self.depth = os.fspath(store), digest, depth
        # Values already loaded in this load, by digest, shared with the
        # children: a child listed under many parents is read once.
        self.loaded = {} if loaded is None else loaded
        self.mmap = True  # how array() reads by default: the load's mmap, for a registered reader
        self._root = root if root is not None else _open_store(self.store)
        if not _is_digest(digest):
            raise AmphoraError(f"'{digest}' is not a digest (sha256: and 64 lower-case hex digits)")
        self._parts = _object_parts(digest[7:])
        self.dir = os.path.join(self.store, *self._parts)
        self.label = label or f"artifact {digest[:19]}…"
        try:
            raw = self._root.read_small(self._parts + ["manifest.json"], MANIFEST_MAX)
        except NotFound:
            raise NotFound(f"{self.label}: no artifact {digest} in store {self.store}")
        except CorruptData as e:
            raise CorruptData(f"{self.label}: {e}")
        if "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
            raise CorruptData(f"{self.label}: manifest.json does not hash to its digest")
        self.materializer, self.version, self.meta, self.files, self.children = _parse_manifest(raw, self.label)

    # -- payload files -------------------------------------------------------

    def _open(self, name):
        """(descriptor, size) of payload file `name`: listed, reached without
        links, a regular file of the listed size."""
        entry = self.files.get(name)
        if entry is None:
            raise CorruptData(f"{self.label}: the manifest lists no file '{name}'")
        try:
            fd, size = self._root.open_file(self._parts + name.split("/"))
        except NotFound:
            raise CorruptData(f"{self.label}: payload file '{name}' is missing")
        except CorruptData as e:
            raise CorruptData(f"{self.label}: '{name}': {e}")
        if size != entry["size"]:
            os.close(fd)
            raise CorruptData(f"{self.label}: '{name}' holds {size} bytes, the manifest says {entry['size']}")
        return fd, size

    def path(self, name):
        """The checked path of payload file `name`: listed, no link on the way, the listed size."""
        os.close(self._open(name)[0])
        return os.path.join(self.dir, *name.split("/"))

    def has(self, name):
        return name in self.files

    def _read_at(self, fd, name, offset, size, into=None):
        """`size` bytes of payload file `name` from `offset` (a bytearray)."""
        out = bytearray(size) if into is None else into
        view, done = memoryview(out), 0
        try:
            while done < size:
                n = os.preadv(fd, [view[done:]], offset + done)
                if n == 0:
                    raise CorruptData(f"{self.label}: '{name}' shrank while being read")
                done += n
        except OSError as e:
            raise AmphoraError(f"{self.label}: cannot read '{name}': {e.strerror}")
        return out

    def read(self, name):
        fd, size = self._open(name)
        try:
            return bytes(self._read_at(fd, name, 0, size))
        finally:
            os.close(fd)

    def _npy(self, name, fd, size):
        where = f"{self.label}: '{name}'"
        head = bytes(self._read_at(fd, name, 0, min(size, 12)))
        if len(head) >= 12 and head[:6] == b"\x93NUMPY":
            width = 2 if head[6] == 1 else 4
            length = int.from_bytes(head[8:8 + width], "little")
            if length <= NPY_HEADER_MAX and 8 + width + length <= size:
                head = bytes(self._read_at(fd, name, 0, 8 + width + length))
        return _parse_npy_header(head, size, where)

    def array(self, name, mmap=None, dtype=None, ndim=None):
        """A .npy payload as an array (read_array, docs/FORMAT.md §6.2): its header,
        order, alignment and exact size checked before anything is allocated,
        then decoded when meta.encodings holds a recipe for it, and checked
        against the expected dtype and dimensions. Mapped read-only when
        `mmap` (None: self.mmap), else read into memory."""
        where = f"{self.label}: '{name}'"
        if mmap is None:
            mmap = self.mmap
        fd, size = self._open(name)
        try:
            h = self._npy(name, fd, size)
            if h.big_endian or h.fortran:
                raise CorruptData(f"{where} is {'big-endian' if h.big_endian else 'in Fortran order'}; arrays are "
                                  "stored C-ordered and little-endian")
            count = _element_count(h.shape, h.dtype.itemsize, where)
            if h.offset % min(h.dtype.itemsize, 16):
                raise CorruptData(f"{where}: data starts at byte {h.offset}, not aligned for {h.dtype} elements")
            have, want = size - h.offset, count * h.dtype.itemsize
            if have != want:
                raise CorruptData(f"{where} holds {have} bytes of data, but its shape needs {want} "
                                  f"({'truncated' if have < want else 'trailing bytes'})")
            a = self._array_data(fd, name, h.dtype, h.shape, h.offset, want, mmap)
        finally:
            os.close(fd)
        if a.dtype == np.bool_:
            _check_bools(a, where)
        recipes = self.meta.get("encodings")
        if recipes is not None and not isinstance(recipes, dict):
            raise CorruptData(f"{self.label}: metadata 'encodings' is not an object")
        if recipes and name in recipes:  # written with an ArrayEncoding (§6.4)
            recipe = recipes[name]
            if a.ndim != 1:
                raise CorruptData(f"{where}: an encoded array is stored 1-d")
            decoded = _decode(self, f"'{name}'", recipe, a)
            rshape = recipe.get("shape")
            if not isinstance(rshape, list) or any(not _is_int(d) for d in rshape):
                raise CorruptData(f"{where}: the encoding recipe has no shape, or not of integers")
            if _element_count(rshape, decoded.dtype.itemsize, where) != decoded.size:
                raise CorruptData(f"{where}: the recipe's shape does not match its element count")
            if decoded.dtype == np.bool_:
                _check_bools(decoded, where)
            a = decoded.reshape(rshape)
        if dtype is not None and a.dtype != np.dtype(dtype):
            raise CorruptData(f"{where} holds {a.dtype}, expected {np.dtype(dtype)}")
        if ndim is not None and a.ndim != ndim:
            raise CorruptData(f"{where} has {a.ndim} dimensions, expected {ndim}")
        return a

    def _array_data(self, fd, name, dtype, shape, offset, nbytes, mmap):
        """The `nbytes` at `offset` of payload `name` as an array (sizes already checked)."""
        if mmap and nbytes:
            try:
                with os.fdopen(os.dup(fd), "rb") as f:
                    return np.memmap(f, dtype=dtype, mode="r", offset=offset, shape=shape)
            except (OSError, ValueError) as e:
                raise AmphoraError(f"{self.label}: cannot map '{name}': {e}")
        return np.frombuffer(self._read_at(fd, name, offset, nbytes), dtype).reshape(shape)

    def strings(self, name, decode=True):
        """Merged strings (offsets + bytes, §6.3) as a list."""
        offsets = self.array(name + ".offsets.npy", mmap=False, dtype="<i8", ndim=1)
        data = self.read(name + ".bytes")
        if len(offsets) < 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(data):
            raise CorruptData(f"{self.label}: the offsets of '{name}' do not run from 0 to the end of its bytes")
        o = offsets.tolist()
        out = [data[o[i]:o[i + 1]] for i in range(len(o) - 1)]
        return [_text(s) for s in out] if decode else out

    def json_file(self, name, limit=JSON_DEPTH):
        """A JSON document payload (§6.1), parsed with the nesting limit."""
        return _json(self.read(name), f"{self.label}: '{name}'", limit)

    def meta_value(self, key, kind):
        if key not in self.meta:
            raise CorruptData(f"{self.label}: metadata '{key}' is missing")
        v = self.meta[key]
        ok = _is_unsigned(v) if kind is int else isinstance(v, kind) and not (kind is not bool and isinstance(v, bool))
        if not ok:
            raise CorruptData(f"{self.label}: metadata '{key}' does not hold the expected type "
                              f"(it is {json.dumps(v)[:80]})")
        return v

    # -- children -----------------------------------------------------------

    def child(self, role):
        if role not in self.children:
            raise CorruptData(f"{self.label}: no child '{role}'")
        if self.depth + 1 > MAX_DEPTH:
            raise CorruptData(f"{self.label}: children nest deeper than {MAX_DEPTH} levels")
        child = Artifact(self.store, self.children[role], self.depth + 1, f"{self.label} / {role}", self.loaded,
                         self._root)
        child.mmap = self.mmap  # a reader reading a child's arrays reads them as the load does
        return child

    # -- verification (docs/FORMAT.md §3.5, §4.5) ----------------------------

    def _check_entries(self):
        """Refuses whatever the directory holds besides manifest.json and the
        listed files, by its path inside the artifact (a link is never followed)."""
        listed = set(self.files)
        stack = [(self._root.open_dir(self._parts), "", 0)]
        try:
            while stack:
                fd, rel, depth = stack.pop()
                try:
                    if depth > 64:
                        raise CorruptData(f"{self.label}: '{rel}' nests folders more than 64 deep")
                    for entry in sorted(os.listdir(fd)):
                        path = rel + entry
                        mode = os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode
                        if stat.S_ISDIR(mode):
                            try:
                                stack.append((os.open(entry, _DIR_FLAGS, dir_fd=fd), path + "/", depth + 1))
                            except OSError as e:
                                raise _refusal(fd, entry, f"{self.label}: '{path}'", e, "directory")
                        elif stat.S_ISREG(mode):
                            if path != "manifest.json" and path not in listed:
                                raise CorruptData(f"{self.label}: unexpected file '{path}'")
                        elif path not in listed:
                            raise CorruptData(f"{self.label}: unexpected entry '{path}', {_describe(mode)}")
                finally:
                    os.close(fd)
        finally:
            for fd, _, _ in stack:
                os.close(fd)

    def _check_pieces(self, name):
        entry = self.files[name]
        piece, size = entry["piece_size"], entry["size"]
        fd, _ = self._open(name)
        block = bytearray(1 << 20)
        try:
            for k, want in enumerate(entry["sha256"]):
                h = hashlib.sha256()
                at, end = k * piece, min(size, (k + 1) * piece)
                while at < end:
                    n = min(len(block), end - at)
                    chunk = self._read_at(fd, name, at, n, block if n == len(block) else None)
                    h.update(memoryview(chunk)[:n])
                    at += n
                if h.hexdigest() != want:
                    raise CorruptData(f"{self.label}: file '{name}' piece {k} (bytes {k * piece} to {end - 1} of "
                                      f"{size}) does not match its SHA-256")
        finally:
            os.close(fd)


def _text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(b)


def _guarded(what, body):
    """Runs `body`. The checks above are meant to catch every way data can be
    wrong; should one be missing, what Python raises instead (a TypeError on
    an unexpected value, say) leaves as CorruptData, never as another class."""
    try:
        return body()
    except AmphoraError:
        raise
    except (TypeError, KeyError, IndexError, AttributeError, ValueError, ArithmeticError, RecursionError,
            UnicodeError, struct.error, EOFError) as e:
        raise CorruptData(f"{what}: unexpected data ({type(e).__name__}: {e})") from e
    except OSError as e:
        raise AmphoraError(f"{what}: {e}") from e


def _open_artifact(store, ref):
    root = _open_store(store)
    return Artifact(store, _resolve(root, ref), label=f"artifact {ref}", root=root)


def open_artifact(store_dir, ref):
    """The Artifact `ref` names (manifest checked against its digest and its schema)."""
    store = os.fspath(store_dir)
    return _guarded(f"artifact {ref!r}", lambda: _open_artifact(store, ref))


def _verify(art, seen):
    if art.digest in seen:
        return
    seen.add(art.digest)
    art._check_entries()
    for name in art.files:
        art._check_pieces(name)
    for role in art.children:
        _verify(art.child(role), seen)


def verify(store_dir, ref):
    """Re-hashes every payload file of `ref` and its children and refuses files
    their manifests do not list; raises CorruptData on a mismatch."""
    store = os.fspath(store_dir)
    _guarded(f"artifact {ref!r}", lambda: _verify(_open_artifact(store, ref), set()))


# ---------------------------------------------------------------------------
# tensors (§5)

INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "bfloat16": "<u2", "float32": "<f4", "float64": "<f8",
    "complex64": "<c8", "complex128": "<c16",
}
MIN_CHUNK, MAX_CHUNK = 64 << 10, 1 << 20  # the chunk sizes a reader accepts: powers of two (§5.1)
HEADER = 4096
PAGE_ALIGNED_BYTES = 64 << 10  # smaller tensors have their data at a multiple of 64 (§5.4)
FRAME_OVERHEAD = 23


def _np_dtype(art, name):
    if not isinstance(name, str) or name not in DTYPES:
        raise Unsupported(f"{art.label}: unknown dtype {name!r}")
    return np.dtype(DTYPES[name])


def _widen_bfloat16(a):
    """bfloat16 words (uint16) as float32, exactly: a bfloat16 is the top half of a float32."""
    return (np.asarray(a, dtype="<u2").astype("<u4") << 16).view("<f4")


def _xxh32_short(data, seed=0):
    """XXH32 of fewer than 16 bytes (docs/FORMAT.md §5.6)."""
    p1, p2, p3, p4, p5, m = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1, 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4 & m
        i += 4
    for b in data[i:]:
        h = rotl((h + b * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


def _frame_header(size):
    desc = bytes([0x68, 0x60]) + struct.pack("<Q", size)
    return b"\x04\x22\x4d\x18" + desc + bytes([(_xxh32_short(desc) >> 8) & 0xFF])


def _decode_frame(art, k, frame, size):
    """The `size` content bytes of LZ4 frame `k` (decode_frame, §5.6)."""
    where = f"{art.label}: tensor.npy.lz4 chunk {k}"
    if len(frame) < FRAME_OVERHEAD:
        raise CorruptData(f"{where}: the frame is shorter than {FRAME_OVERHEAD} bytes")
    word = int.from_bytes(frame[15:19], "little")
    s = word & 0x7FFFFFFF
    if frame[:15] != _frame_header(size) or len(frame) != FRAME_OVERHEAD + s or frame[19 + s:] != b"\0\0\0\0":
        raise CorruptData(f"{where} is not the LZ4 frame of {size} bytes the index announces")
    block = bytes(frame[19:19 + s])
    if word & 0x80000000:
        if s != size:
            raise CorruptData(f"{where}: a stored block of {s} bytes, not {size}")
        return block
    if s == 0:
        raise CorruptData(f"{where}: an empty compressed block")
    try:
        import lz4.block
    except ImportError:
        raise Unsupported(f"{art.label} is LZ4-compressed: install the lz4 Python module "
                          "(Debian: python3-lz4) to read it")
    try:
        chunk = lz4.block.decompress(block, uncompressed_size=size)
    except Exception as e:  # lz4 raises its own LZ4BlockError
        raise CorruptData(f"{where} does not decompress: {e}")
    if len(chunk) != size:
        raise CorruptData(f"{where} decompresses to {len(chunk)} bytes, not {size}")
    return chunk


ZSTD_MIN_FRAME = 14          # header, one block header and byte, checksum (§5.6)
ZSTD_MAX_WINDOW = 1 << 20    # a chunk never needs more


def _decode_zstd_frame(art, k, frame, size):
    """The `size` content bytes of zstd frame `k` (decode_zstd_frame, §5.6)."""
    where = f"{art.label}: tensor.npy.zst chunk {k}"
    try:
        import zstandard
    except ImportError:
        raise Unsupported(f"{art.label} is zstd-compressed: install the zstandard Python module "
                          "(Debian: python3-zstandard) to read it")
    frame = bytes(frame)
    if len(frame) < ZSTD_MIN_FRAME:
        raise CorruptData(f"{where}: zstd frame of {len(frame)} bytes is truncated")
    try:
        params = zstandard.get_frame_parameters(frame)
    except zstandard.ZstdError:
        raise CorruptData(f"{where}: not a zstd frame (its header is damaged or truncated)")
    if params.content_size != size:
        raise CorruptData(f"{where}: zstd frame does not record its content size"
                          if params.content_size == zstandard.CONTENTSIZE_UNKNOWN else
                          f"{where}: zstd frame announces {params.content_size} bytes, expected {size}")
    if params.dict_id != 0:
        raise CorruptData(f"{where}: zstd frame needs dictionary {params.dict_id}, which no chunk uses")
    if not params.has_checksum:
        raise CorruptData(f"{where}: zstd frame has no checksum")
    if params.window_size > ZSTD_MAX_WINDOW:
        raise CorruptData(f"{where}: zstd frame asks for a window of {params.window_size} bytes")
    d = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).decompressobj()
    try:
        chunk = d.decompress(frame)
    except zstandard.ZstdError as e:
        raise CorruptData(f"{where}: zstd frame is corrupt ({e})")
    if not d.eof:
        raise CorruptData(f"{where}: zstd frame is truncated or damaged")
    if d.unused_data:
        raise CorruptData(f"{where}: zstd frame ends after {len(frame) - len(d.unused_data)} of the chunk's "
                          f"{len(frame)} bytes")
    if len(chunk) != size:
        raise CorruptData(f"{where}: zstd frame decodes to {len(chunk)} bytes, expected {size}")
    return chunk


class _Codec:
    """A chunked payload's codec (§5.6): its file, its smallest frame, the most
    content a byte of frames can restore, and its frame decoder."""

    def __init__(self, file, min_frame, max_expansion, decode):
        self.file, self.min_frame, self.max_expansion, self.decode = file, min_frame, max_expansion, decode


CODECS = {
    "npy.lz4": _Codec("tensor.npy.lz4", FRAME_OVERHEAD, 255, _decode_frame),
    "npy.zst": _Codec("tensor.npy.zst", ZSTD_MIN_FRAME, MAX_CHUNK // ZSTD_MIN_FRAME, _decode_zstd_frame),
}


class _TensorLayout:
    """read_layout: what the metadata says the payload holds (docs/FORMAT.md §5.1, §5.9)."""

    def __init__(self, art):
        meta = art.meta

        def bad(why):
            return CorruptData(f"{art.label}: tensor metadata {why}")

        if not isinstance(meta.get("dtype"), str):
            raise bad("has no dtype")
        self.value_name = meta["dtype"]
        self.value_dtype = _np_dtype(art, self.value_name)
        shape = meta.get("shape")
        if not isinstance(shape, list):
            raise bad("has no shape")
        for d in shape:
            if not _is_int(d):
                raise bad("shape holds a non-integer")
            if d >= (1 << 63):
                raise bad(f"shape dimension {d} is out of range")
        self.value_shape = tuple(shape)
        count = _element_count(shape, self.value_dtype.itemsize, art.label)
        if not isinstance(meta.get("encoding"), str):
            raise bad("has no encoding")
        encoding = meta["encoding"]
        self.dtype, self.shape, self.recipe = self.value_dtype, self.value_shape, None
        if encoding.startswith("encoded."):
            encoding = encoding[len("encoded."):]
            recipe = meta.get("recipe")
            if not isinstance(recipe, dict):
                raise bad("has no recipe for its encoding")
            if recipe.get("dtype") != self.value_name or not _is_int(recipe.get("count")) or recipe["count"] != count:
                raise bad("recipe does not describe this tensor's dtype and element count")
            stored = recipe.get("stored_dtype")
            if not isinstance(stored, str) or stored not in DTYPES:
                raise bad("recipe names no stored dtype")
            self.dtype, self.shape, self.recipe = np.dtype(DTYPES[stored]), (count,), recipe
        # Chunked payloads may hold each data chunk as its integers'
        # differences and then as its elements' byte planes (§5.6).
        codec_name = named = encoding
        self.delta = codec_name.startswith("delta.")
        codec_name = codec_name[len("delta."):] if self.delta else codec_name
        self.shuffled = codec_name.startswith("shuffled.")
        codec_name = codec_name[len("shuffled."):] if self.shuffled else codec_name
        if codec_name not in CODECS:
            self.delta = self.shuffled = False
            codec_name = encoding
        if codec_name != "npy" and codec_name not in CODECS:
            raise Unsupported(f"{art.label}: unknown tensor encoding '{encoding}' (this reader knows npy, "
                              "npy.lz4 and npy.zst, the last two also after delta., shuffled. or both): written by "
                              "a newer Amphora, or damaged")
        encoding = codec_name
        payload_name = self.recipe["stored_dtype"] if self.recipe else self.value_name
        if self.delta and payload_name not in INTEGER_DTYPES:
            raise bad(f"encoding '{named}' delta-codes {payload_name} chunks; only integers are")
        self.codec = CODECS.get(encoding)
        self.packed = self.codec is not None
        self.file = self.codec.file if self.packed else "tensor.npy"
        self.chunk = meta.get("chunk_bytes")
        if self.packed and not (_is_int(self.chunk) and MIN_CHUNK <= self.chunk <= MAX_CHUNK and
                                self.chunk & (self.chunk - 1) == 0):
            shown = "(none)" if "chunk_bytes" not in meta else json.dumps(self.chunk)
            raise bad(f"has an unsupported chunk_bytes {shown} (a power of two from {MIN_CHUNK} to {MAX_CHUNK})")
        self.nbytes = self.dtype.itemsize * _element_count(self.shape, self.dtype.itemsize, art.label)
        descr = _npy_descr(self.dtype)
        self.header = _npy_header_bytes(descr, self.shape, HEADER if self.nbytes >= PAGE_ALIGNED_BYTES else 64)
        page = _npy_header_bytes(descr, self.shape, HEADER)
        self.legacy = page if page != self.header else None  # what builds before §5.4's rule wrote

    def header_ending_at(self, offset):
        if offset == len(self.header):
            return self.header
        if self.legacy is not None and offset == len(self.legacy):
            return self.legacy
        return None


def _header_mismatch(art, file, l):
    return CorruptData(f"{art.label}: {file} header does not match its manifest ({l.dtype}, {len(l.shape)}-d)")


def _tensor_raw(art, l, mmap):
    """tensor.npy: the header the manifest implies, then exactly nbytes (§5.5)."""
    fd, size = art._open("tensor.npy")
    try:
        # One of the headers the tensor accepts: this one, or the 4096-byte
        # one of earlier builds (§5.4), read only when this one does not match.
        expected = l.header
        head = bytes(art._read_at(fd, "tensor.npy", 0, min(size, len(expected))))
        if head != expected and l.legacy is not None:
            longer = bytes(art._read_at(fd, "tensor.npy", 0, min(size, len(l.legacy))))
            if longer == l.legacy:
                expected, head = l.legacy, longer
        if head != expected:
            raise _header_mismatch(art, "tensor.npy", l)
        offset = len(expected)
        if size != offset + l.nbytes:
            raise CorruptData(f"{art.label}: tensor.npy is {size} bytes; its shape needs {offset + l.nbytes}")
        return art._array_data(fd, "tensor.npy", l.dtype, l.shape, offset, l.nbytes, mmap)
    finally:
        os.close(fd)


def _chunk_index(art, l, packed_size):
    """tensor.chunks.npy, validated as read_index validates it (§5.6, checks 1-4)."""
    where = f"{art.label}: tensor.chunks.npy"
    chunks = 1 + -(-l.nbytes // l.chunk)
    fd, size = art._open("tensor.chunks.npy")
    try:
        h = art._npy("tensor.chunks.npy", fd, size)
        if h.dtype != np.dtype("<u8") or h.shape != (chunks + 1, 2):
            raise CorruptData(f"{where} should be uint64 of shape ({chunks + 1}, 2)")
        if size - h.offset != (chunks + 1) * 16:
            raise CorruptData(f"{where} holds {size - h.offset} bytes of data, not {(chunks + 1) * 16}")
        table = np.frombuffer(art._read_at(fd, "tensor.chunks.npy", h.offset, (chunks + 1) * 16),
                              ">u8" if h.big_endian else "<u8")
    finally:
        os.close(fd)
    table = table.reshape((chunks + 1, 2), order="F" if h.fortran else "C")
    packed, raw = [int(x) for x in table[:, 0].tolist()], [int(x) for x in table[:, 1].tolist()]
    # Chunk 0 restores the header, in either length the tensor accepts (§5.4).
    if l.header_ending_at(raw[1]) is None:
        raise CorruptData(f"{where}: chunk 1 has a wrong raw offset")
    data_offset = raw[1]
    for k in range(chunks + 1):
        expect = 0 if k == 0 else min(data_offset + (k - 1) * l.chunk, data_offset + l.nbytes)
        if raw[k] != expect:
            raise CorruptData(f"{where}: chunk {k} has a wrong raw offset")
        if packed[k] > packed_size or (k > 0 and (packed[k] < packed[k - 1] or
                                                   packed[k] - packed[k - 1] < l.codec.min_frame)):
            raise CorruptData(f"{where}: chunk {max(k - 1, 0)} has an impossible packed offset or size")
    if packed[0] != 0 or packed[-1] != packed_size:
        raise CorruptData(f"{where} does not cover {l.file} ({packed_size} bytes) exactly")
    return packed, raw, data_offset


def _tensor_packed(art, l, first_row=None, end_row=None):
    """The packed payload decoded: all of it, or rows [first_row, end_row)
    from the chunks that hold them; its index, expansion bound and header
    frame checked first (§5.6)."""
    fd, size = art._open(l.file)
    try:
        packed, raw, data_offset = _chunk_index(art, l, size)
        # A claim beyond what the codec can expand to must not drive an allocation.
        if l.nbytes // l.codec.max_expansion > size:
            raise CorruptData(f"{art.label}: {size} packed bytes cannot hold {l.nbytes} bytes of tensor data")

        def frame(k):
            chunk = l.codec.decode(art, k, art._read_at(fd, l.file, packed[k], packed[k + 1] - packed[k]),
                                   raw[k + 1] - raw[k])
            if l.shuffled and k > 0:  # byte planes back to elements
                width = l.dtype.itemsize
                chunk = np.frombuffer(chunk, np.uint8).reshape(width, len(chunk) // width).T.tobytes()
            if l.delta and k > 0:  # zigzag differences back to values: a running sum that wraps
                kind = np.dtype(f"<u{l.dtype.itemsize}")
                z = np.frombuffer(chunk, kind)
                d = (z >> kind.type(1)) ^ ((z & kind.type(1)) * np.iinfo(kind).max)
                chunk = np.cumsum(d, dtype=kind).tobytes()
            return chunk

        if frame(0) != l.header_ending_at(data_offset):
            raise _header_mismatch(art, l.file, l)
        shape, lo, hi = l.shape, 0, l.nbytes
        if first_row is not None:
            row = l.nbytes // l.shape[0] if l.shape[0] else 0
            shape, lo, hi = (end_row - first_row,) + tuple(l.shape[1:]), first_row * row, end_row * row
        out = bytearray(hi - lo)
        if hi > lo:
            for k in range(1 + lo // l.chunk, 2 + (hi - 1) // l.chunk):
                c_lo, c_hi = raw[k] - data_offset, raw[k + 1] - data_offset
                chunk = frame(k)
                a, b = max(lo, c_lo), min(hi, c_hi)
                out[a - lo:b - lo] = chunk[a - c_lo:b - c_lo]
    finally:
        os.close(fd)
    return np.frombuffer(out, l.dtype).reshape(shape)


def _tensor(art, mmap):
    l = _TensorLayout(art)
    a = _tensor_packed(art, l) if l.packed else _tensor_raw(art, l, mmap)
    if a.dtype == np.bool_:
        _check_bools(a, f"{art.label}: {l.file}")
    return _decoded_tensor(art, l, a)


def _decoded_tensor(art, l, a):
    """The tensor the user saved, from its payload array `a`."""
    if l.recipe is not None:
        a = _decode(art, "tensor payload", l.recipe, a)
        if a.dtype == np.bool_:
            _check_bools(a, f"{art.label}: decoded tensor")
        a = a.reshape(l.value_shape)
    return _widen_bfloat16(a).reshape(l.value_shape) if l.value_name == "bfloat16" else a


def _decode(art, what, recipe, stored):
    """The array `stored` holds after the transforms of `recipe` (docs/FORMAT.md §6.4), 1-d."""
    where = f"{art.label}: {what}"
    if not isinstance(recipe, dict):
        raise CorruptData(f"{where}: the encoding recipe is not an object")
    names = (recipe.get("dtype"), recipe.get("stored_dtype"))
    if any(not isinstance(n, str) or n not in DTYPES for n in names):
        raise CorruptData(f"{where}: the recipe names an unknown dtype or stored dtype")
    dtype, kept = np.dtype(DTYPES[names[0]]), np.dtype(DTYPES[names[1]])
    count, transforms = recipe.get("count"), recipe.get("transforms")
    if not _is_int(count) or count < 0:
        raise CorruptData(f"{where}: the recipe's count is invalid")
    order = ["decimal", "delta", "squeeze", "shuffle"]
    if not isinstance(transforms, list) or any(not isinstance(t, str) or t not in order for t in transforms) or \
            [order.index(t) for t in transforms] != sorted({order.index(t) for t in transforms}):
        raise CorruptData(f"{where}: the recipe's transforms are unknown, repeated or out of order")
    if stored.dtype != kept or stored.shape != (count,):
        raise CorruptData(f"{where}: stored {stored.dtype} {stored.shape}, the recipe says {kept} ({count},)")
    integer = dtype.kind in "iu"
    decimal = "decimal" in transforms
    digits = recipe.get("decimal_digits")
    if decimal:
        if dtype != np.dtype("<f8") or "delta" in transforms or not _is_int(digits) or not 0 <= digits <= 15:
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
        if not _is_int(first) or not np.iinfo(dtype).min <= first <= np.iinfo(dtype).max:
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
        raise CorruptData(f"{art.label}: unknown sparse format '{fmt}'")
    shape_meta = art.meta.get("shape")
    if not isinstance(shape_meta, list) or not all(_is_int(d) and -(1 << 63) <= d < (1 << 63) for d in shape_meta):
        raise CorruptData(f"{art.label}: metadata 'shape' does not hold the expected type "
                          f"(it is {json.dumps(shape_meta)[:80]})")
    if len(shape_meta) != 2 or any(d < 0 for d in shape_meta):
        raise CorruptData(f"{art.label}: metadata 'shape' {shape_meta} is not two dimensions of at least 0")
    rows, cols = shape_meta
    dtype_name = art.meta_value("dtype", str)
    dtype = _np_dtype(art, dtype_name)
    index = art.meta_value("index_dtype", str)
    if index not in ("int32", "int64"):
        raise CorruptData(f"{art.label}: index_dtype '{index}' is not int32 or int64")
    data = art.array("data.npy", mmap, dtype, 1)
    names = ("row", "col") if fmt == "coo" else ("indices", "indptr")
    first = art.array(names[0] + ".npy", mmap, DTYPES[index], 1)
    second = art.array(names[1] + ".npy", mmap, DTYPES[index], 1)
    shape = art.array("shape.npy", False, "<i8", 1)
    if shape.tolist() != [rows, cols]:
        raise CorruptData(f"{art.label}: 'shape.npy' disagrees with the metadata's shape [{rows}, {cols}]")
    want = _npy_header_bytes("|S3", (), 64) + fmt.encode()
    if art.files.get("format.npy", {}).get("size") != len(want) or art.read("format.npy") != want:
        raise CorruptData(f"{art.label}: 'format.npy' does not hold the format '{fmt}' the metadata names")
    nnz = len(data)
    meta_nnz = art.meta.get("nnz")
    if not _is_int(meta_nnz) or meta_nnz != nnz:
        raise CorruptData(f"{art.label}: metadata says {meta_nnz!r} stored entries, 'data.npy' holds {nnz}")
    bad = None
    if index == "int32" and max(rows, cols, nnz) > (1 << 31) - 1:
        bad = "a dimension or the number of entries is beyond int32 indices"
    elif len(first) != nnz:
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
    if dtype_name == "bfloat16":
        data = _widen_bfloat16(data)
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

COLUMN_DTYPES = dict(DTYPES, **{"bool": "|b1", "timestamp[ns]": "<i8", "naive_timestamp[ns]": "<i8"})
TIMESTAMPS = ("timestamp[ns]", "naive_timestamp[ns]")  # both load as numpy datetime64[ns], which has no zone


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
            if len(values) != rows:
                raise CorruptData(f"{art.label}: column '{name}' holds {len(values)} values for {rows} rows")
            if any(isinstance(v, bytes) for v in values):
                raise CorruptData(f"{art.label}: column '{name}' holds a string that is not UTF-8")
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
        if kind in TIMESTAMPS:
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
        elif kind in TIMESTAMPS:
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
            dtype = {"int64": "<i8", "uint64": "<u8"}.get(node.get("dtype")) if isinstance(node.get("dtype"), str) \
                else None
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
            values.append(None if hidden else _json(t, f"{where}: slot {i}", RECORD_JSON_DEPTH, True))
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


def _children_count(art, prefix):
    """meta.count, each of whose roles PREFIX0 ... PREFIX(count-1) must be listed (checked_count)."""
    count = art.meta_value("count", int)
    if count > len(art.children):
        raise CorruptData(f"{art.label}: meta says {count} items but it lists {len(art.children)} children")
    for i in range(count):
        if f"{prefix}{i}" not in art.children:
            raise CorruptData(f"{art.label} lists no child '{prefix}{i}' of its {count} items")
    return count


def _map(art, mmap):
    keys = art.strings("keys")
    if art.meta_value("count", int) != len(keys):
        raise CorruptData(f"{art.label}: count disagrees with the number of keys")
    raw = art.strings("keys", decode=False)
    if any(raw[i] >= raw[i + 1] for i in range(len(raw) - 1)):
        raise CorruptData(f"{art.label}: keys are not sorted and unique")
    kind = art.meta_value("values", str)
    if kind == "array":
        values = _load(art.child("values"), mmap)
        if not isinstance(values, np.ndarray) or values.ndim != 1:
            raise CorruptData(f"{art.label}: the child 'values' is not a 1-d tensor")
        values = values.tolist()
    elif kind == "strings":
        values = art.strings("values")
    elif kind == "json":
        values = art.json_file("values.json")
        if not isinstance(values, list):
            raise CorruptData(f"{art.label}: 'values.json' is not an array")
    elif kind == "children":
        if _children_count(art, "values/") != len(keys):
            raise CorruptData(f"{art.label}: map children disagree with its keys")
        values = [_scalar(_load(art.child(f"values/{i}"), mmap)) for i in range(len(keys))]
    else:
        raise Unsupported(f"{art.label}: unknown map values '{kind}'")
    if len(values) != len(keys):
        raise CorruptData(f"{art.label}: {len(values)} values for {len(keys)} keys")
    return dict(zip(keys, values))


def _tensor_list(art, mmap):
    return _tensor_items(art, "", art.meta_value("count", int), mmap)


def _tensor_items(art, prefix, count, mmap):
    """The tensors of PREFIXdata.bin + PREFIXindex.json (§7.6): `count` of them."""
    index_name, data_name = prefix + "index.json", prefix + "data.bin"
    index = art.json_file(index_name)
    if not isinstance(index, list):
        raise CorruptData(f"{art.label}: '{index_name}' is not an array")
    if count != len(index):
        raise CorruptData(f"{art.label}: {count} items expected, '{index_name}' lists {len(index)}")
    fd, size = art._open(data_name)
    try:
        items = []
        for i, item in enumerate(index):
            where = f"{art.label}: '{index_name}' item {i}"
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and
                    isinstance(item[1], list) and _is_unsigned(item[2])):
                raise CorruptData(f"{where} is not [dtype, shape, offset]")
            if item[0] not in DTYPES:
                raise CorruptData(f"{where} has unknown dtype '{item[0]}'")
            if any(not _is_int(d) or not -(1 << 63) <= d < (1 << 63) for d in item[1]):
                raise CorruptData(f"{where} has a dimension that is not an integer")
            dtype, shape, offset = np.dtype(DTYPES[item[0]]), tuple(item[1]), item[2]
            nbytes = _element_count(shape, dtype.itemsize, where) * dtype.itemsize
            if offset % 64:
                raise CorruptData(f"{where} starts at byte {offset}, not a multiple of 64")
            if offset > size or nbytes > size - offset:
                raise CorruptData(f"{where} spans bytes [{offset}, +{nbytes}) past the end of '{data_name}' "
                                  f"({size} bytes)")
            items.append((item[0], dtype, shape, offset, nbytes))
        if mmap and size:
            data = art._array_data(fd, data_name, np.uint8, (size,), 0, size, True)
        else:
            data = np.frombuffer(art._read_at(fd, data_name, 0, size), np.uint8)
    finally:
        os.close(fd)
    out = []
    for i, (name, dtype, shape, offset, nbytes) in enumerate(items):
        a = np.frombuffer(data, dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape)
        if name == "bool":
            _check_bools(a, f"{art.label}: item {i} of '{data_name}'")
        out.append(_widen_bfloat16(a).reshape(shape) if name == "bfloat16" else a)
    return out


def _record_list(art, mmap):
    art.meta_value("element", str)
    version = art.meta.get("element_version")
    if not _is_int(version) or not -(1 << 31) <= version < (1 << 31):  # an int, as check_record_list reads it
        raise CorruptData(f"{art.label}: metadata 'element_version' does not hold the expected type "
                          f"(it is {json.dumps(version)[:80]})")
    count = art.meta_value("count", int)
    if not art.files:
        # Every declared struct has a member, and every member a column
        # file: with none, `count` is backed by nothing the files hold.
        if count:
            raise CorruptData(f"{art.label}: a record list of {count} records but lists no column files")
        return []
    return _columns(art, _Columns(art.files), "", _count(art, count), mmap, 0)


class _Columns:
    """The payload paths of a record list, for the lookups its columns make."""

    def __init__(self, files):
        self.paths = sorted(files)
        self.set = set(self.paths)

    def __contains__(self, path):
        return path in self.set

    def members(self, prefix):
        """The names of the members under struct column `prefix` ("" for the record)."""
        import bisect
        start = prefix + "/" if prefix else ""
        lo = bisect.bisect_left(self.paths, start)
        out, k = [], lo
        while k < len(self.paths) and self.paths[k].startswith(start):
            member = self.paths[k][len(start):].split("/")[0].split(".")[0]
            if not out or out[-1] != member:
                out.append(member)
            k += 1
        return sorted(set(out))


def _columns(art, files, prefix, n, mmap, depth):
    """The values of record-list column `prefix` (§7.10) for `n` records."""
    if depth > MAX_DEPTH:
        raise CorruptData(f"{art.label}: the columns of the record list nest deeper than {MAX_DEPTH} levels "
                          f"(at '{prefix[:200]}')")
    if prefix + ".valid.npy" in files:
        valid = art.array(prefix + ".valid.npy", mmap, "|b1", 1)
        if len(valid) != n:
            raise CorruptData(f"{art.label}: column '{prefix}.valid.npy' holds {len(valid)} entries, not {n}")
        values = _plain_column(art, files, prefix, n, mmap, depth)
        return [v if ok else None for v, ok in zip(values, valid.tolist())]
    return _plain_column(art, files, prefix, n, mmap, depth)


def _plain_column(art, files, prefix, n, mmap, depth):
    if prefix + ".index.json" in files:
        values = _tensor_items(art, prefix + ".", n, mmap)
    elif prefix + ".npy" in files:
        values = art.array(prefix + ".npy", mmap)
        if values.ndim == 0 or len(values) != n:
            raise CorruptData(f"{art.label}: column '{prefix}' holds {values.size if values.ndim == 0 else len(values)} "
                              f"entries, not {n}")
        # One number per record: Python numbers; fixed-size arrays: the rows.
        values = values.tolist() if values.ndim == 1 else values
    elif prefix + ".json.offsets.npy" in files:
        texts = art.strings(prefix + ".json", decode=False)
        if len(texts) != n:
            raise CorruptData(f"{art.label}: column '{prefix}' holds {len(texts)} entries, not {n}")
        values = [_json(t, f"{art.label}: column '{prefix}' entry {i}") for i, t in enumerate(texts)]
    elif prefix + ".bytes" in files:
        values = art.strings(prefix)
    elif prefix + ".offsets.npy" in files:
        offsets = art.array(prefix + ".offsets.npy", False, "<i8", 1)
        if len(offsets) != n + 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            raise CorruptData(f"{art.label}: the offsets of column '{prefix}' are invalid")
        total = int(offsets[-1])
        o = offsets.tolist()
        if prefix + ".keys.bytes" in files:
            raw = art.strings(prefix + ".keys", decode=False)
            if len(raw) != total:
                raise CorruptData(f"{art.label}: map column '{prefix}' holds {len(raw)} keys for {total} entries")
            if any(raw[k - 1] >= raw[k] for i in range(n) for k in range(o[i] + 1, o[i + 1])):
                raise CorruptData(f"{art.label}: the keys of a record in map column '{prefix}' are not sorted and unique")
            keys = art.strings(prefix + ".keys")
            flat = _columns(art, files, prefix + ".values", total, mmap, depth + 1)
            values = [dict(zip(keys[o[i]:o[i + 1]], flat[o[i]:o[i + 1]])) for i in range(n)]
        else:
            flat = _columns(art, files, prefix + ".values", total, mmap, depth + 1)
            values = [flat[o[i]:o[i + 1]] for i in range(n)]
    else:
        members = files.members(prefix)
        if not members:
            raise CorruptData(f"{art.label}: no files for column '{prefix}'")
        cols = {m: _columns(art, files, f"{prefix}/{m}" if prefix else m, n, mmap, depth + 1) for m in members}
        if all(DECIMAL.match(m) for m in members):  # a pair or tuple: elements 0, 1, ...
            order = sorted(members, key=int)
            if [int(m) for m in order] != list(range(len(order))):
                raise CorruptData(f"{art.label}: the elements of tuple column '{prefix}' are not 0 to {len(order) - 1}")
            values = [tuple(cols[m][i] for m in order) for i in range(n)]
        else:
            order = _declared_order(art.meta.get("member_order", {}).get(prefix)
                                    if isinstance(art.meta.get("member_order"), dict) else None, members)
            values = [{m: cols[m][i] for m in order} for i in range(n)]
    if len(values) != n:
        raise CorruptData(f"{art.label}: column '{prefix}' holds {len(values)} entries, not {n}")
    return values


def _declared_order(declared, present):
    """`present` (member names) in the order `declared` lists them, the rest after, sorted."""
    if not isinstance(declared, list) or not all(isinstance(m, str) for m in declared):
        return sorted(present)
    have = set(present)
    first = [m for m in dict.fromkeys(declared) if m in have]
    return first + sorted(have.difference(first))


def _scalar(value):
    """A 0-d array inside a composite as the Python number it holds."""
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _tuple(art, mmap):
    count = art.meta_value("count", int)
    fields = art.meta.get("fields")
    if not isinstance(fields, dict):
        raise CorruptData(f"{art.label}: metadata 'fields' is missing or not an object")
    # Every element is stored once, inline or as a child: a count the
    # manifest does not hold is refused before anything is built for it.
    stored = len(fields) + len(art.children)
    keys = [str(i) for i in range(count)] if count == stored else None
    known = set(keys or ())
    if keys is None or any(k not in known or k in art.children for k in fields) or \
            any(r not in known for r in art.children):
        raise CorruptData(f"{art.label}: a tuple's fields and children are not its elements 0 to {count - 1}, each once")
    out = []
    for k in keys:
        if k in fields:
            out.append(fields[k])
        elif k in art.children:
            out.append(_scalar(_load(art.child(k), mmap)))
        else:
            raise CorruptData(f"{art.label} stores no element {k} of its tuple")
    return tuple(out)


def _variant(art, mmap):
    art.meta_value("index", int)
    inline = "value" in art.meta
    child = "value" in art.children
    if (inline and child) or len(art.children) != int(child):
        raise CorruptData(f"{art.label}: a variant stores its value inline or as the child 'value', once")
    if inline:
        return art.meta["value"]
    return _scalar(_load(art.child("value"), mmap)) if child else None


def _struct(art, mmap):
    fields = art.meta.get("fields")
    if not isinstance(fields, dict):
        hint = "" if art.materializer.startswith("amphora.") else \
            ": register a reader for it with amphora_reader.register_reader"
        raise Unsupported(f"{art.label}: materializer '{art.materializer}' is not one this reader knows{hint}")
    values = dict(fields)
    for name in art.files:  # small arrays kept in the struct's own payload: MEMBER.npy
        member = name[:-len(".npy")]
        if not name.endswith(".npy") or "/" in member or member in values or member in art.children:
            raise CorruptData(f"{art.label}: file '{name[:200]}' is not a member array of the struct, stored once")
        values[member] = _scalar(art.array(name, mmap))
    for role in art.children:
        if role in values:
            raise CorruptData(f"{art.label}: member '{role[:200]}' is stored twice")
        values[role] = _scalar(_load(art.child(role), mmap))
    return {m: values[m] for m in _declared_order(art.meta.get("members"), values)}


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
    newest = FORMAT_VERSIONS.get(m)
    if newest is not None and art.version > newest:
        raise Unsupported(f"{art.label}: {m} format version {art.version} is newer than the version {newest} "
                          "this reader reads")
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
        return art.json_file("value.json")
    if m == "amphora.strings":
        values = art.strings("strings")
        if art.meta_value("count", int) != len(values):
            raise CorruptData(f"{art.label}: count disagrees with the strings")
        return values
    if m == "amphora.list":
        return [_scalar(_load(art.child(f"items/{i}"), mmap)) for i in range(_children_count(art, "items/"))]
    if m == "amphora.map":
        return _map(art, mmap)
    if m == "amphora.optional":
        engaged = art.meta_value("engaged", bool)
        if engaged != ("value" in art.children) or len(art.children) != int(engaged):
            raise CorruptData(f"{art.label}: 'engaged' disagrees with the children")
        return _scalar(_load(art.child("value"), mmap)) if engaged else None
    if m == "amphora.tensor_list":
        return _tensor_list(art, mmap)
    if m == "amphora.record_list":
        return _record_list(art, mmap)
    if m == "amphora.tuple":
        return _tuple(art, mmap)
    if m == "amphora.variant":
        return _variant(art, mmap)
    registered = _READERS.get(m)
    if registered is not None:
        return _registered(art, mmap, *registered)
    return _struct(art, mmap)


# ---------------------------------------------------------------------------
# reader plugins: Python functions for the materializers plugins add

_READERS = {}  # materializer name -> (reader function, the newest format version it reads)


def register_reader(materializer, reader, version=1):
    """Loads every artifact of `materializer` with `reader(artifact, load_child)`
    from now on (see "Reader plugins" in the module docstring). `version` is
    the newest format version `reader` reads. Replaces the function registered
    for that name, if any. ValueError for a name starting with "amphora." (a
    built-in kind), an empty name or a version outside 1 to 1000000;
    TypeError when `reader` is not callable."""
    if not isinstance(materializer, str) or not materializer:
        raise ValueError(f"a materializer name is a non-empty string, not {materializer!r}")
    if materializer.startswith("amphora."):
        raise ValueError(f"'{materializer}' is a built-in materializer name (amphora.*): this module reads those "
                         "itself, and a reader cannot be registered for them")
    if not callable(reader):
        raise TypeError(f"the reader for '{materializer}' is not callable ({type(reader).__name__})")
    if not _is_int(version) or not 1 <= version <= 1_000_000:
        raise ValueError(f"the format version of the reader for '{materializer}' must be an integer from 1 to "
                         f"1000000, not {version!r}")
    _READERS[materializer] = (reader, version)


def unregister_reader(materializer):
    """Removes the reader registered for `materializer`; nothing when there is none."""
    _READERS.pop(materializer, None)


def readers():
    """A copy of the registry: {materializer: (reader, version)}."""
    return dict(_READERS)


def _registered(art, mmap, reader, newest):
    """`art` loaded by the registered function `reader`, which reads format versions up to `newest`."""
    m = art.materializer
    if art.version > newest:
        raise Unsupported(f"{art.label}: {m} format version {art.version} is newer than the version {newest} "
                          "the reader registered for it reads")

    def load_child(role):
        return _scalar(_load(art.child(role), mmap))

    art.mmap = mmap
    try:
        return reader(art, load_child)
    except (AmphoraError, MemoryError):
        raise
    except Exception as e:
        raise CorruptData(f"{art.label}: the reader registered for materializer '{m}' failed on it "
                          f"({type(e).__name__}: {e})") from e


def load(store_dir, ref, verify=False, mmap=True):
    """Loads the artifact `ref` names as a Python value (see the module docstring).
    verify=True re-hashes its files and its children's first; mmap=False reads
    arrays into memory instead of mapping them. A child listed under several
    parents is loaded once: the same Python object stands at each place."""
    store = os.fspath(store_dir)

    def body():
        art = _open_artifact(store, ref)
        if verify:
            _verify(art, set())
        return _load(art, mmap)

    return _guarded(f"artifact {ref!r}", body)


def load_rows(store_dir, ref, begin, end, verify=False):
    """Rows [begin, end) along the first axis of the tensor `ref` names, as a
    numpy.ndarray. A compressed tensor decodes only the chunks holding them;
    an uncompressed one maps its file; an encoded one (§5.9) decodes only the
    rows' stored elements when its transforms work element by element
    (decimal, squeeze), else whole.
    verify=True re-hashes the artifact's files first. ValueError for a 0-d
    tensor or rows outside [0, shape[0]); Unsupported for an artifact that is
    not a tensor."""
    store = os.fspath(store_dir)
    what = f"artifact {ref!r}"

    def layout():
        art = _open_artifact(store, ref)
        if art.materializer != "amphora.tensor":
            raise Unsupported(f"{art.label} is a '{art.materializer}' artifact, not a tensor")
        if verify:
            _verify(art, set())
        return art, _TensorLayout(art)

    art, l = _guarded(what, layout)
    # Outside _guarded: a bad request is the caller's ValueError, not damage.
    if not l.value_shape:
        raise ValueError(f"{art.label} is a 0-d tensor; it has no rows")
    if not (_is_int(begin) and _is_int(end) and 0 <= begin <= end <= l.value_shape[0]):
        raise ValueError(f"{art.label}: rows [{begin}, {end}) are outside [0, {l.value_shape[0]})")

    def rows():
        transforms = l.recipe.get("transforms") if l.recipe is not None else None
        if isinstance(transforms, list) and set(transforms) <= {"decimal", "squeeze"}:
            # Element by element: the rows' stored elements alone, decoded
            # with the recipe's count set to theirs (§5.9).
            per_row = math.prod(l.value_shape[1:])
            lo, hi = begin * per_row, end * per_row
            stored = _tensor_packed(art, l, lo, hi) if l.packed else _tensor_raw(art, l, True)[lo:hi]
            a = _decode(art, "tensor payload", dict(l.recipe, count=hi - lo), np.ascontiguousarray(stored))
            return a.reshape((end - begin,) + tuple(l.value_shape[1:]))
        if l.recipe is not None or not l.packed:  # delta or a global shuffle needs every element before the rows
            return _tensor(art, True)[begin:end]
        a = _tensor_packed(art, l, begin, end)
        if a.dtype == np.bool_:
            _check_bools(a, f"{art.label}: {l.file}")
        return _widen_bfloat16(a) if l.value_name == "bfloat16" else a

    return _guarded(what, rows)
