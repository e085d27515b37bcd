"""Crafted hostile stores: what no save writes, for the tests that run the
C++ CLI and the Python reader (python/amphora_reader.py) over the same bytes.

Every manifest written here hashes to its digest (cli_support.put_manifest),
so the first check a reader makes, the digest, passes: what follows is up to
the rest of its checks. Each case of CORPUS builds one such store and says
how the CLI and the reader must refuse it:

    case.build(store, scratch) -> the ref to try (scratch: a directory beside
                                  the store, for what lies outside it)
    case.cli                      the CLI's arguments, "{ref}" replaced
    case.cli_exit                 its exit status (cli_support.EXIT_*)
    case.error, case.message      the reader's exception class (by name) and
                                  a regular expression its message matches
    case.call, case.kwargs        "load" (with kwargs) or "resolve"

A test runs the CLI and the reader on a fresh store per case; a CLI test may
reuse the builders alone.
"""

import contextlib
import hashlib
import json
import os
import resource
import struct
from collections import namedtuple

from cli_support import EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CORRUPT, put_manifest

PIECE = 1 << 21  # the piece size writers start from (docs/FORMAT.md §3.4)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


# -- writing artifacts --------------------------------------------------------


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_entry(path, data, piece_size=PIECE):
    """A manifest file entry for `data` as a writer makes it."""
    pieces = [sha256(data[k:k + piece_size]) for k in range(0, len(data), piece_size)] or [EMPTY_SHA256]
    return {"path": path, "piece_size": piece_size, "sha256": pieces, "size": len(data)}


def object_dir(store, digest):
    hexd = digest.split(":", 1)[1]
    return os.path.join(store, "objects", "sha256", hexd[:2], hexd)


def write_payload(store, digest, files):
    """Writes `files` (path -> bytes) into the directory of artifact `digest`."""
    base = object_dir(store, digest)
    for path, data in files.items():
        full = os.path.join(base, *path.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)


def put_artifact(store, materializer, meta, files=None, children=None, edit=None, payload=None):
    """An artifact of `materializer` with `meta`, payload `files` (path ->
    bytes, listed with their real digests) and `children` (role -> digest).
    `edit(manifest)` may change the manifest before it is written, and
    `payload` (path -> bytes) replaces what is written to disk, so the files
    can differ from what the manifest lists. Returns the digest."""
    files = files or {}
    manifest = {
        "children": [{"digest": d, "role": r} for r, d in sorted((children or {}).items())],
        "files": [file_entry(p, files[p]) for p in sorted(files)],
        "manifest_version": 2,
        "materializer": {"name": materializer, "version": 1},
        "meta": meta,
    }
    if edit is not None:
        manifest = edit(manifest) or manifest
    digest = put_manifest(store, manifest)
    write_payload(store, digest, files if payload is None else payload)
    return digest


def put_raw_artifact(store, raw):
    """An artifact whose manifest.json is exactly the bytes `raw` (for
    manifests no dict serializes to). Returns the digest."""
    hexd = sha256(raw)
    art = os.path.join(store, "objects", "sha256", hexd[:2], hexd)
    os.makedirs(art, exist_ok=True)
    with open(os.path.join(art, "manifest.json"), "wb") as f:
        f.write(raw)
    return "sha256:" + hexd


def put_name(store, name, digest, version=1, raw=None):
    """names/NAME/N.json pointing at `digest`, or holding exactly `raw`."""
    d = os.path.join(store, "names", name)
    os.makedirs(d, exist_ok=True)
    if raw is None:
        record = {"digest": digest, "name": name, "version": version}
        raw = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    with open(os.path.join(d, f"{version}.json"), "wb") as f:
        f.write(raw)


def npy_header(descr, shape, alignment=64):
    """The .npy 1.0 header Amphora writes (make_npy_header, docs/FORMAT.md §5.4)."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    total = 10 + len(text) + 1
    padded = -(-total // alignment) * alignment
    text += " " * (padded - total) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("ascii")


def npy(descr, shape, data, alignment=64):
    return npy_header(descr, shape, alignment) + data


def strings_files(path, values):
    """Merged strings (docs/FORMAT.md §6.3) under `path`."""
    offsets, total = [0], 0
    for v in values:
        total += len(v)
        offsets.append(total)
    return {path + ".offsets.npy": npy("<i8", (len(offsets),), struct.pack(f"<{len(offsets)}q", *offsets)),
            path + ".bytes": b"".join(values)}


def put_string(store, text, **kw):
    data = text.encode()
    return put_artifact(store, "amphora.string", {"bytes": len(data), "utf8": True}, {"string.bin": data}, **kw)


def put_json(store, raw, **kw):
    """An amphora.json artifact whose value.json is the bytes `raw`."""
    return put_artifact(store, "amphora.json", {"type": "array"}, {"value.json": raw}, **kw)


def nested(levels):
    return b"[" * levels + b"]" * levels


def link_dir(src, link):
    """Moves nothing: makes `link` a symbolic link to the directory `src`."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(src, link)


@contextlib.contextmanager
def memory_budget(extra=1 << 30):
    """Caps this process's address space at its present size plus `extra`
    bytes while the block runs: code that allocates for a crafted size
    instead of refusing it meets MemoryError here, not the machine's limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# -- the corpus -----------------------------------------------------------------

Case = namedtuple("Case", "name build cli cli_exit error message call kwargs")


def case(name, build, cli, cli_exit, error, message, call="load", **kwargs):
    return Case(name, build, cli, cli_exit, error, message, call, kwargs)


VERIFY = ("verify", "{ref}")
SHOW = ("show", "{ref}")


def _piece_size_zero(store, scratch):
    # Issue 19: piece_size 0 with one digest of nothing: hashing "pieces of
    # 0 bytes" hashes nothing, and the tampered payload would pass.
    def tamper(m):
        m["files"][0]["piece_size"] = 0
        m["files"][0]["sha256"] = [EMPTY_SHA256]
    return put_string(store, "tampered", edit=tamper)


def _piece_size_huge(store, scratch):
    def huge(m):
        m["files"][0]["piece_size"] = 1 << 41
    return put_string(store, "tampered", edit=huge)


def _piece_count_short(store, scratch):
    data = b"x" * 5000  # two pieces of 4096 bytes, one digest listed
    def one_piece(m):
        m["files"][0]["piece_size"] = 4096
        m["files"][0]["sha256"] = [sha256(data)]
    return put_artifact(store, "amphora.string", {"bytes": len(data), "utf8": True}, {"string.bin": data},
                        edit=one_piece)


def _tensor_8tib(store, scratch):
    # An 8 TiB float64 tensor whose tensor.npy is its header and 8 bytes.
    shape = (1 << 40,)
    header = npy_header("<f8", shape, 4096)
    return put_artifact(store, "amphora.tensor", {"dtype": "float64", "shape": list(shape), "encoding": "npy",
                                                  "stats": None}, {"tensor.npy": header + b"\0" * 8})


def _lz4_expansion_lie(store, scratch):
    # A 300 MiB uint8 tensor in LZ4 frames whose index is exact but whose
    # frames are 23 bytes each: LZ4 expands at most 255:1, so they cannot
    # hold it, and nothing is allocated for the claim.
    nbytes = 300 << 20
    chunks = 1 + nbytes // (1 << 20)
    raw = [0] + [min(4096 + (k - 1) * (1 << 20), 4096 + nbytes) for k in range(1, chunks + 1)]
    packed = [23 * k for k in range(chunks + 1)]
    index = b"".join(struct.pack("<2Q", p, r) for p, r in zip(packed, raw))
    files = {"tensor.npy.lz4": b"\0" * packed[-1], "tensor.chunks.npy": npy("<u8", (chunks + 1, 2), index)}
    return put_artifact(store, "amphora.tensor", {"dtype": "uint8", "shape": [nbytes], "encoding": "npy.lz4",
                                                  "chunk_bytes": 1 << 20, "chunks": chunks, "stored_chunks": 0,
                                                  "stats": None}, files)


def _delta_chunks_of_floats(store, scratch):
    # Chunk delta names a float32 tensor: differences of floats are no
    # transform this format has, so the metadata is damaged.
    files = {"tensor.npy.zst": b"\0" * 32, "tensor.chunks.npy": npy("<u8", (3, 2), b"\0" * 48)}
    return put_artifact(store, "amphora.tensor", {"dtype": "float32", "shape": [4], "encoding": "delta.npy.zst",
                                                  "chunk_bytes": 1 << 20, "chunks": 2, "stored_chunks": 0,
                                                  "stats": None}, files)


def _chunk_bytes_not_a_power_of_two(store, scratch):
    # 384 KiB chunks: within the sizes readers take, but not a power of two,
    # so some chunk of some dtype would hold a partial element.
    files = {"tensor.npy.zst": b"\0" * 32, "tensor.chunks.npy": npy("<u8", (3, 2), b"\0" * 48)}
    return put_artifact(store, "amphora.tensor", {"dtype": "uint8", "shape": [4], "encoding": "npy.zst",
                                                  "chunk_bytes": 384 << 10, "chunks": 2, "stored_chunks": 0,
                                                  "stats": None}, files)


def _offsets_8tib(store, scratch):
    # Strings whose offsets header claims 2^40 int64 offsets (8 TiB) over 16 bytes.
    files = {"strings.offsets.npy": npy_header("<i8", (1 << 40,)) + struct.pack("<2q", 0, 1), "strings.bytes": b"a"}
    return put_artifact(store, "amphora.strings", {"count": 1, "bytes": 1}, files)


def _npy_is_zip(store, scratch):
    import io
    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(3, dtype=np.float32))
    return put_artifact(store, "amphora.tensor", {"dtype": "float32", "shape": [3], "encoding": "npy", "stats": None},
                        {"tensor.npy": buf.getvalue()})


def _record_list_huge(store, scratch):
    return put_artifact(store, "amphora.record_list", {"count": 10 ** 12, "element": "x", "element_version": 1})


def _tuple_count_huge(store, scratch):
    return put_artifact(store, "amphora.tuple", {"count": 10 ** 6, "fields": {"0": 1}})


def _size_is_string(store, scratch):
    def stringly(m):
        m["files"][0]["size"] = str(m["files"][0]["size"])
    return put_string(store, "seven b", edit=stringly)


def _piece_size_is_string(store, scratch):
    def stringly(m):
        m["files"][0]["piece_size"] = "4096"
    return put_string(store, "seven b", edit=stringly)


def _files_is_dict(store, scratch):
    def as_dict(m):
        m["files"] = {f["path"]: f for f in m["files"]}
    return put_string(store, "seven b", edit=as_dict)


def _materializer_is_list(store, scratch):
    def as_list(m):
        m["materializer"] = ["amphora.string", 1]
    return put_string(store, "seven b", edit=as_list)


def _no_sha256_key(store, scratch):
    def drop(m):
        del m["files"][0]["sha256"]
    return put_string(store, "seven b", edit=drop)


def _no_meta_key(store, scratch):
    def drop(m):
        del m["meta"]
    return put_string(store, "seven b", edit=drop)


def _child_without_digest(store, scratch):
    child = put_string(store, "item")
    def drop(m):
        del m["children"][0]["digest"]
    return put_artifact(store, "amphora.list", {"count": 1}, children={"items/0": child}, edit=drop)


def _tensor_shape_strings(store, scratch):
    data = struct.pack("<3f", 1, 2, 3)
    return put_artifact(store, "amphora.tensor", {"dtype": "float32", "shape": ["3"], "encoding": "npy",
                                                  "stats": None},
                        {"tensor.npy": npy_header("<f4", (3,), 4096) + data})


def _map_json_not_a_list(store, scratch):
    files = dict(strings_files("keys", [b"a"]), **{"values.json": b"5"})
    return put_artifact(store, "amphora.map", {"count": 1, "values": "json"}, files)


def _sparse_shape_lists(store, scratch):
    return put_artifact(store, "amphora.sparse", {"format": "csr", "shape": [[2], [2]], "nnz": 0, "dtype": "float64",
                                                  "index_dtype": "int32", "density": 0.0, "stats": None}, {})


def _tensor_list_bool_dimension(store, scratch):
    # [dtype, [true], 0]: Python's bool is an int, numpy's product of [True] is 1.
    files = {"data.bin": b"\x07" + b"\0" * 63, "index.json": b'[["uint8",[true],0]]'}
    return put_artifact(store, "amphora.tensor_list", {"count": 1, "data_bytes": 64}, files)


def _json_nested(store, scratch):
    return put_json(store, nested(100_000))


def _json_nul_then_junk(store, scratch):
    # Both C++ JSON parsers stopped at a raw NUL, so this passed for [1].
    return put_json(store, b"[1]\0garbage")


def _name_record_nested(store, scratch):
    digest = put_string(store, "fine")
    put_name(store, "t", digest, raw=b"{\"digest\": " + nested(100_000) + b"}\n")
    return "t"


def _fanout_link(store, scratch):
    # Issue 21: objects/sha256/ab is a link to another store's fan-out
    # directory, which holds an artifact this store does not.
    outside = os.path.join(scratch, "outside", "objects", "sha256", "ab")
    os.makedirs(os.path.join(outside, "ab" * 32))
    with open(os.path.join(outside, "ab" * 32, "manifest.json"), "wb") as f:
        f.write(b"{}")
    os.makedirs(os.path.join(store, "objects", "sha256"), exist_ok=True)
    link_dir(outside, os.path.join(store, "objects", "sha256", "ab"))
    return "abababab"


def _fanout_link_full_digest(store, scratch):
    _fanout_link(store, scratch)
    return "sha256:" + "ab" * 32


def _digest_dir_link(store, scratch):
    # A real fan-out directory holding a link named like a digest.
    outside = os.path.join(scratch, "outside-artifact")
    os.makedirs(outside)
    with open(os.path.join(outside, "manifest.json"), "wb") as f:
        f.write(b"{}")
    link_dir(outside, os.path.join(store, "objects", "sha256", "cd", "cd" * 32))
    return "cdcdcdcd"


def _marker_link(store, scratch):
    digest = put_string(store, "fine")
    put_name(store, "t", digest)
    marker = os.path.join(store, "amphora-store.json")
    os.rename(marker, os.path.join(scratch, "marker.json"))
    os.symlink(os.path.join(scratch, "marker.json"), marker)
    return "t"


def _marker_newer(store, scratch):
    digest = put_string(store, "fine")
    put_name(store, "t", digest)
    with open(os.path.join(store, "amphora-store.json"), "w") as f:
        f.write('{"format": "amphora-store", "layout_version": 2}\n')
    return "t"


def _marker_not_a_marker(store, scratch):
    digest = put_string(store, "fine")
    put_name(store, "t", digest)
    with open(os.path.join(store, "amphora-store.json"), "w") as f:
        f.write('{"format": "something else", "layout_version": 1}\n')
    return "t"


def _cache_link(store, scratch):
    digest = put_string(store, "fine")
    put_name(store, "t", digest)
    os.makedirs(os.path.join(scratch, "cache"))
    os.rmdir(os.path.join(store, "cache"))
    os.symlink(os.path.join(scratch, "cache"), os.path.join(store, "cache"))
    return "t"


def _unicode_digit_version(store, scratch):
    put_name(store, "t", put_string(store, "version one"))
    return "t@\u0661"  # ARABIC-INDIC DIGIT ONE


def _superscript_version(store, scratch):
    put_name(store, "t", put_string(store, "version one"))
    return "t@\u00b2"  # SUPERSCRIPT TWO: str.isdigit() says yes, int() says no


def _records_json_nested(store, scratch):
    text = nested(100_000)
    files = strings_files("records", [text])
    schema = {"kind": "json", "nullable": False, "optional": False}
    return put_artifact(store, "amphora.records", {"count": 1, "schema": schema, "encodings": {}}, files)


def _record_list_deep_members(store, scratch):
    # A column 400 structs deep: a/a/.../a.npy (well inside the 1024-byte path limit).
    path = "/".join(["a"] * 400) + ".npy"
    return put_artifact(store, "amphora.record_list", {"count": 1, "element": "x", "element_version": 1},
                        {path: npy("<i8", (1,), struct.pack("<q", 7))})


def _extra_file(store, scratch):
    digest = put_string(store, "fine")
    write_payload(store, digest, {"stowaway.bin": b"not listed"})
    return digest


def _bool_byte(store, scratch):
    return put_artifact(store, "amphora.tensor", {"dtype": "bool", "shape": [3], "encoding": "npy", "stats": None},
                        {"tensor.npy": npy_header("|b1", (3,), 4096) + b"\x01\x00\x07"})


def _tensor_header_mismatch(store, scratch):
    # The payload is an int32 array; the manifest says float32: same size, other header.
    return put_artifact(store, "amphora.tensor", {"dtype": "float32", "shape": [2], "encoding": "npy", "stats": None},
                        {"tensor.npy": npy_header("<i4", (2,), 4096) + b"\0" * 8})


def _nan_in_manifest(store, scratch):
    # JSON has no NaN: Python's json module reads one, Amphora's parser does not.
    raw = (b'{"children":[],"files":[],"manifest_version":2,"materializer":{"name":"amphora.optional","version":1},'
           b'"meta":{"engaged":false,"x":NaN}}')
    return put_raw_artifact(store, raw)


CORPUS = [
    # item 19: integrity
    case("piece_size_zero", _piece_size_zero, VERIFY, EXIT_CORRUPT, "CorruptData", r"piece_size 0 is outside",
         verify=True),
    case("piece_size_above_2_40", _piece_size_huge, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"piece_size 2199023255552 is outside", verify=True),
    case("piece_count_short", _piece_count_short, SHOW, EXIT_CORRUPT, "CorruptData",
         r"'string.bin' lists 1 piece digests, but 5000 bytes make 2 pieces"),
    case("extra_file_in_artifact", _extra_file, VERIFY, EXIT_CORRUPT, "CorruptData", r"unexpected file 'stowaway.bin'",
         verify=True),
    # item 20: sizes before allocation, wrong types, recursion
    case("tensor_8tib_over_a_tiny_file", _tensor_8tib, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"tensor.npy is 4104 bytes; its shape needs 8796093026304", mmap=False),
    case("lz4_frames_cannot_hold_the_claim", _lz4_expansion_lie, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"6923 packed bytes cannot hold 314572800 bytes of tensor data"),
    case("delta_chunks_of_floats", _delta_chunks_of_floats, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"encoding 'delta.npy.zst' delta-codes float32 chunks; only integers are"),
    case("chunk_bytes_not_a_power_of_two", _chunk_bytes_not_a_power_of_two, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"unsupported chunk_bytes 393216 \(a power of two from 65536 to 1048576\)"),
    case("offsets_header_8tib", _offsets_8tib, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"'strings.offsets.npy' holds 16 bytes of data, but its shape needs 8796093022208", mmap=False),
    case("npy_that_is_a_zip", _npy_is_zip, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"tensor.npy header does not match its manifest \(float32, 1-d\)"),
    # The CLI cannot load a record list (only a program knowing the element
    # type can): its verify checks the metadata alone, and passes. No
    # declared struct is without a member, nor a member without a column
    # file, so the reader refuses what it cannot back with files.
    case("record_list_count_1e12_no_files", _record_list_huge, VERIFY, EXIT_OK, "CorruptData",
         r"a record list of 1000000000000 records but lists no column files"),
    # A tuple stores each element once, inline or as a child: a count the
    # manifest does not hold is refused before anything is built for it.
    case("tuple_count_1e6", _tuple_count_huge, VERIFY, EXIT_OK, "CorruptData",
         r"a tuple's fields and children are not its elements 0 to 999999, each once"),
    case("record_list_400_levels_deep", _record_list_deep_members, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"the columns of the record list nest deeper than 64 levels"),
    case("size_is_a_string", _size_is_string, SHOW, EXIT_CORRUPT, "CorruptData",
         r"file 'string.bin' \"size\" is not a non-negative integer"),
    case("piece_size_is_a_string", _piece_size_is_string, SHOW, EXIT_CORRUPT, "CorruptData",
         r"file 'string.bin' \"piece_size\" is not a non-negative integer", verify=True),
    case("files_is_an_object", _files_is_dict, SHOW, EXIT_CORRUPT, "CorruptData", r"\"files\" is not an array"),
    case("materializer_is_a_list", _materializer_is_list, SHOW, EXIT_CORRUPT, "CorruptData",
         r"\"materializer\" is not an object"),
    case("file_without_sha256", _no_sha256_key, SHOW, EXIT_CORRUPT, "CorruptData",
         r"file 'string.bin' has no \"sha256\""),
    case("manifest_without_meta", _no_meta_key, SHOW, EXIT_CORRUPT, "CorruptData", r"manifest has no \"meta\""),
    case("child_without_digest", _child_without_digest, SHOW, EXIT_CORRUPT, "CorruptData",
         r"child 'items/0' has no \"digest\""),
    case("tensor_shape_of_strings", _tensor_shape_strings, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"tensor metadata shape holds a non-integer"),
    # The CLI's verify of a map checks its keys, not values it cannot type.
    case("map_values_json_not_a_list", _map_json_not_a_list, VERIFY, EXIT_OK, "CorruptData",
         r"'values.json' is not an array"),
    case("tensor_list_dimension_true", _tensor_list_bool_dimension, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"'index.json' item 0 has a dimension that is not an integer"),
    case("sparse_shape_of_lists", _sparse_shape_lists, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"metadata 'shape'"),
    case("json_value_nested_100000", _json_nested, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"'value.json' .*nests deeper than 64 levels"),
    case("json_value_nul_then_junk", _json_nul_then_junk, VERIFY, EXIT_CORRUPT, "CorruptData", r"'value.json'"),
    case("records_json_slot_nested_100000", _records_json_nested, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"slot 0 is not valid JSON \(it nests deeper than 257 levels\)"),
    case("name_record_nested_100000", _name_record_nested, SHOW, EXIT_CORRUPT, "CorruptData",
         r"name record t@1 .*nests deeper than 64 levels"),
    case("nan_in_a_manifest", _nan_in_manifest, SHOW, EXIT_CORRUPT, "CorruptData", r"manifest.json is not valid JSON"),
    case("bool_byte_7", _bool_byte, VERIFY, EXIT_CORRUPT, "CorruptData", r"bool element 2 .*7"),
    case("tensor_header_not_the_manifests", _tensor_header_mismatch, VERIFY, EXIT_CORRUPT, "CorruptData",
         r"tensor.npy header does not match its manifest"),
    # item 21: links, the store marker, refs
    case("fanout_dir_link_prefix", _fanout_link, SHOW, EXIT_CORRUPT, "CorruptData",
         r"objects/sha256/ab is a symbolic link", call="resolve"),
    case("fanout_dir_link_full_digest", _fanout_link_full_digest, SHOW, EXIT_NOT_FOUND, "NotFound",
         r"no artifact sha256:abab", call="resolve"),
    case("digest_dir_link", _digest_dir_link, SHOW, EXIT_NOT_FOUND, "NotFound", r"no artifact matches 'cdcdcdcd'",
         call="resolve"),
    case("store_marker_link", _marker_link, SHOW, EXIT_CORRUPT, "CorruptData",
         r"amphora-store.json is a symbolic link"),
    case("store_marker_newer_layout", _marker_newer, SHOW, EXIT_FAILURE, "Unsupported",
         r"has layout version 2, newer than the version 1"),
    case("store_marker_of_another_format", _marker_not_a_marker, SHOW, EXIT_CORRUPT, "CorruptData",
         r"amphora-store.json is not an Amphora store marker"),
    case("cache_dir_link", _cache_link, SHOW, EXIT_CORRUPT, "CorruptData",
         r"'cache' is a symbolic link, not a directory"),
    case("ref_with_arabic_indic_digit", _unicode_digit_version, SHOW, EXIT_USAGE, "AmphoraError",
         r"invalid version in ref 't@\u0661'"),
    case("ref_with_superscript_digit", _superscript_version, SHOW, EXIT_USAGE, "AmphoraError",
         r"invalid version in ref 't@\u00b2'"),
]
