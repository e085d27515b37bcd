"""What the command-line test scripts share: the CLI under test, its exit
statuses, a test case with a fresh store, and the `--cli PATH` argument."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CLI = os.environ.get("AMPHORA_CLI", "")  # set by parse_args from --cli PATH
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CORRUPT = 0, 1, 2, 3, 4


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def le_c_bytes(a):
    """The bytes a C-ordered little-endian copy of numpy array `a` holds (bit-exact, no value conversion)."""
    import numpy as np
    c = np.ascontiguousarray(a)
    if c.dtype.byteorder == ">":
        c = c.byteswap()
    return c.tobytes()


def run(*args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=None, preexec_fn=None, timeout=120):
    """Runs the CLI with `args`. Standard input is not a terminal unless given."""
    return subprocess.run([CLI, *map(str, args)], text=True, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                          env=env, preexec_fn=preexec_fn, timeout=timeout)


def peak_rss_mb(argv, env=None, preexec_fn=None):
    """Runs `argv` (a program and its arguments); returns (exit status, stdout,
    stderr, peak RSS in MiB) of that process alone, measured with wait4."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                                env=env, preexec_fn=preexec_fn)
        with proc.stderr:
            err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return proc.returncode, out.read().decode(errors="replace"), err, usage.ru_maxrss / 1024


class StoreTestCase(unittest.TestCase):
    """Each test gets a temporary directory with an initialised store in it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="amphora-cli-")
        self.store = os.path.join(self.tmp, "store")
        self.run_cli("init", check=EXIT_OK)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def run_cli(self, *args, check=None, stdout=None, **kw):
        """`amphora --store STORE ARGS...`; with `check`, asserts the exit status."""
        proc = run("--store", self.store, *args, stdout=stdout if stdout is not None else subprocess.PIPE, **kw)
        if check is not None:
            self.assertEqual(proc.returncode, check,
                             f"amphora {' '.join(map(str, args))}: stdout={proc.stdout!r} stderr={proc.stderr!r}")
        return proc


def parse_args(script, flags=()):
    """Takes `--cli PATH` and any of `flags` from the command line; returns the
    flags given and the arguments left for unittest."""
    global CLI
    args = sys.argv[1:]
    given = {f for f in flags if f in args}
    args = [a for a in args if a not in given]
    if len(args) >= 2 and args[0] == "--cli":
        CLI = os.path.abspath(args[1])
        args = args[2:]
    if not CLI:
        sys.exit(f"usage: {script} --cli PATH {' '.join('[' + f + ']' for f in flags)} [unittest args]")
    return given, [sys.argv[0]] + args


def parse_plugin_args(script):
    """parse_args for a test also given `--plugins DIR` (the test plugins'
    build directory): returns that directory, absolute, and the arguments
    left for unittest."""
    args = sys.argv[1:]
    plugins = ""
    if "--plugins" in args:
        i = args.index("--plugins")
        plugins = os.path.abspath(args[i + 1]) if i + 1 < len(args) else ""
        del args[i:i + 2]
    sys.argv[1:] = args
    _, argv = parse_args(f"{script} --plugins DIR")
    if not plugins:
        sys.exit(f"usage: {script} --cli PATH --plugins DIR")
    return plugins, argv


# -- crafted stores: what no save writes, for the hostile-input tests --------


def put_manifest(store, manifest):
    """Writes `manifest` (a dict) as an artifact of `store`, in canonical form;
    returns its digest. No payload files are written."""
    import hashlib
    import json
    raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    hexd = hashlib.sha256(raw).hexdigest()
    art = os.path.join(store, "objects", "sha256", hexd[:2], hexd)
    os.makedirs(art, exist_ok=True)
    with open(os.path.join(art, "manifest.json"), "wb") as f:
        f.write(raw)
    return "sha256:" + hexd


def shared_lists(store, levels):
    """Lists whose two items are one shared child, `levels` deep above an
    empty list: levels + 1 artifacts, 2**levels paths from the top. Returns
    the top's digest."""
    def lst(children):
        return {"children": [{"digest": d, "role": f"items/{i}"} for i, d in enumerate(children)],
                "files": [], "manifest_version": 2,
                "materializer": {"name": "amphora.list", "version": 1}, "meta": {"count": len(children)}}
    digest = put_manifest(store, lst([]))
    for _ in range(levels):
        digest = put_manifest(store, lst([digest, digest]))
    return digest
