#!/usr/bin/python3
"""Reader plugins of python/amphora_reader.py: artifacts saved through C++
plugins (tests/plugins), loaded generically when they are declared structs
and through functions registered with register_reader otherwise; format
versions, errors raised by those functions, children, and the registry.

Run as:
    /usr/bin/python3 tests/python/test_reader_plugins.py --cli build/bin/amphora --plugins build/test-plugins
"""

import hashlib
import json
import os
import sys
import unittest

import numpy as np

import cli_support
from cli_support import EXIT_OK, put_manifest, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import amphora_reader as reader  # noqa: E402

PLUGINS = ""  # --plugins DIR: test-plugins/, with good/ and evolving-v1/, evolving-v2/


def plugin(kind):
    return {"point": os.path.join(PLUGINS, "good", "test_point_plugin.so"),
            "v1": os.path.join(PLUGINS, "evolving-v1", "test_evolving_plugin.so"),
            "v2": os.path.join(PLUGINS, "evolving-v2", "test_evolving_plugin.so")}[kind]


def read_setting(artifact, load_child):
    """test.setting: format 1 stored the rate as a percentage, format 2 as a fraction."""
    value = artifact.json_file("value.json")
    if artifact.version == 1:
        value["rate"] = value.pop("rate_percent") / 100
    return value


class ReaderPluginsTest(cli_support.StoreTestCase):
    def setUp(self):
        super().setUp()
        self.assertEqual(reader.readers(), {})  # nothing left registered by another test
        self.addCleanup(lambda: self.assertEqual(reader.readers(), {}, "a test left a reader registered"))
        self.env = {k: v for k, v in os.environ.items() if k != "AMPHORA_PLUGIN_PATH"}

    def register(self, name, fn, version=1):
        reader.register_reader(name, fn, version)
        self.addCleanup(reader.unregister_reader, name)

    def save(self, kind, file_name, text, name):
        """Imports a file holding `text` through plugin `kind` as `name`; returns its digest."""
        with open(self.path(file_name), "w") as f:
            f.write(text)
        proc = run("--store", self.store, "--plugin", plugin(kind), "import", self.path(file_name), "--name", name,
                   env=self.env)
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        proc = run("--store", self.store, "show", name, "--json", env=self.env)
        self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        return json.loads(proc.stdout)["digest"]

    def put(self, materializer, children=(), meta=None, files=None):
        """A hand-made artifact: its manifest, and `files` {path: bytes} written beside it; returns its digest."""
        files = files or {}
        manifest = {"manifest_version": 2, "materializer": {"name": materializer, "version": 1},
                    "meta": meta or {}, "children": [{"role": r, "digest": d} for r, d in sorted(children)],
                    "files": [{"path": p, "size": len(b), "piece_size": 1 << 21,
                               "sha256": [hashlib.sha256(b).hexdigest()]} for p, b in sorted(files.items())]}
        digest = put_manifest(self.store, manifest)
        for p, b in files.items():
            cli_support.write_bytes(os.path.join(self.store, "objects", "sha256", digest[7:9], digest[7:], p), b)
        return digest

    # -- generic loading -----------------------------------------------------

    def test_a_declared_struct_from_a_plugin_loads_without_a_reader(self):
        self.save("point", "apex.point", "1.5 -2.25 apex\n", "apex")
        value = reader.load(self.store, "apex", verify=True)
        self.assertEqual(value, {"x": 1.5, "y": -2.25, "label": "apex"})
        self.assertEqual(list(value), ["x", "y", "label"])
        # A registered reader wins over the generic one.
        self.register("test.point", lambda art, load_child: (art.meta["fields"]["x"], art.materializer))
        self.assertEqual(reader.load(self.store, "apex"), (1.5, "test.point"))

    def test_another_layout_without_a_reader_is_unsupported_and_says_how(self):
        self.save("v1", "warmup.setting", "warmup 0.25\n", "s")
        for registered in (False, True):
            if registered:  # registered, then removed: unsupported again
                self.register("test.setting", read_setting)
                self.assertIn("test.setting", reader.readers())
                reader.unregister_reader("test.setting")
            with self.assertRaises(reader.Unsupported) as cm:
                reader.load(self.store, "s")
            self.assertIn("artifact s: materializer 'test.setting' is not one this reader knows: register a reader "
                          "for it with amphora_reader.register_reader", str(cm.exception))
        reader.unregister_reader("test.setting")  # none registered: no error
        # An amphora.* name this reader does not know cannot be registered: no hint.
        digest = self.put("amphora.future")
        with self.assertRaisesRegex(reader.Unsupported,
                                    r"materializer 'amphora\.future' is not one this reader knows$"):
            reader.load(self.store, digest)

    # -- registered readers and format versions ------------------------------

    def test_a_registered_reader_reads_every_version_up_to_its_own(self):
        d1 = self.save("v1", "warmup.setting", "warmup 0.25\n", "old")
        d2 = self.save("v2", "warmup.setting", "warmup 0.25\n", "new")
        seen = []

        def spy(artifact, load_child):
            seen.append((artifact.label, artifact.digest, artifact.materializer, artifact.version,
                         sorted(artifact.files), artifact.children, artifact.meta))
            return read_setting(artifact, load_child)

        self.register("test.setting", spy, version=2)
        self.assertEqual(reader.readers(), {"test.setting": (spy, 2)})
        self.assertEqual(reader.load(self.store, "old", verify=True), {"label": "warmup", "rate": 0.25})
        self.assertEqual(reader.load(self.store, "new"), {"label": "warmup", "rate": 0.25})
        self.assertEqual(seen, [("artifact old", d1, "test.setting", 1, ["value.json"], {}, {}),
                                ("artifact new", d2, "test.setting", 2, ["value.json"], {}, {})])

    def test_a_newer_format_than_the_reader_reads_is_refused_naming_both(self):
        self.save("v2", "warmup.setting", "warmup 0.25\n", "s")
        calls = []
        self.register("test.setting", lambda art, load_child: calls.append(art) or read_setting(art, load_child))
        with self.assertRaises(reader.Unsupported) as cm:
            reader.load(self.store, "s")
        self.assertIn("artifact s: test.setting format version 2 is newer than the version 1 the reader registered "
                      "for it reads", str(cm.exception))
        self.assertEqual(calls, [])

    def test_what_a_reader_raises_leaves_as_the_modules_errors(self):
        self.save("point", "seven.fragile", "7\n", "f")
        self.register("test.fragile", lambda art, load_child: art.meta_value("code", int))
        self.assertEqual(reader.load(self.store, "f"), 7)
        for raised, expected in ((KeyError("rate"), reader.CorruptData), (RuntimeError("boom"), reader.CorruptData),
                                 (reader.NotFound("gone"), reader.NotFound),
                                 (reader.Unsupported("later"), reader.Unsupported)):
            def failing(art, load_child, raised=raised):
                raise raised
            with self.subTest(raised=type(raised).__name__):
                reader.register_reader("test.fragile", failing)  # replaces the one before
                with self.assertRaises(reader.AmphoraError) as cm:
                    reader.load(self.store, "f")
                self.assertIs(type(cm.exception), expected)
                if expected is reader.CorruptData:
                    self.assertIn(f"artifact f: the reader registered for materializer 'test.fragile' failed on it "
                                  f"({type(raised).__name__}: ", str(cm.exception))
                    self.assertIs(cm.exception.__cause__, raised)
                else:
                    self.assertIs(cm.exception, raised)
        # A check of the artifact's own fails as the module's error, not the reader's.
        reader.register_reader("test.fragile", lambda art, load_child: art.meta_value("absent", int))
        with self.assertRaisesRegex(reader.CorruptData, r"^artifact f: metadata 'absent' is missing$"):
            reader.load(self.store, "f")

    def test_registration_rules(self):
        for name in ("amphora.tensor", "amphora.unknown"):
            with self.assertRaisesRegex(ValueError, f"'{name}' is a built-in materializer name"):
                reader.register_reader(name, read_setting)
        for name, fn, version, error in (("", read_setting, 1, ValueError), (None, read_setting, 1, ValueError),
                                         ("test.x", "not a function", 1, TypeError),
                                         ("test.x", read_setting, 0, ValueError),
                                         ("test.x", read_setting, True, ValueError),
                                         ("test.x", read_setting, 1.0, ValueError)):
            with self.subTest(name=name, version=version), self.assertRaises(error):
                reader.register_reader(name, fn, version)
        self.assertEqual(reader.readers(), {})
        # The registry handed out is a copy.
        self.register("test.x", read_setting)
        copy = reader.readers()
        copy["test.y"] = (read_setting, 1)
        del copy["test.x"]
        self.assertEqual(reader.readers(), {"test.x": (read_setting, 1)})

    # -- children ------------------------------------------------------------

    def test_load_child_loads_through_the_same_dispatch_once_per_artifact(self):
        apex = self.save("point", "apex.point", "1.5 -2.25 apex\n", "apex")
        base = self.save("point", "base.point", "0 0 base\n", "base")
        setting = self.save("v1", "warmup.setting", "warmup 0.25\n", "s")
        segment = self.put("test.segment", [("from", apex), ("to", base), ("again", apex), ("setting", setting)])
        self.register("test.setting", read_setting)
        self.register("test.segment", lambda art, load_child: [load_child(r) for r in ("from", "to", "again",
                                                                                       "setting")])
        got = reader.load(self.store, segment, verify=True)
        self.assertEqual(got, [{"x": 1.5, "y": -2.25, "label": "apex"}, {"x": 0.0, "y": 0.0, "label": "base"},
                               {"x": 1.5, "y": -2.25, "label": "apex"}, {"label": "warmup", "rate": 0.25}])
        self.assertIs(got[0], got[2])  # one artifact, loaded once

        reader.register_reader("test.segment", lambda art, load_child: load_child("absent"))
        with self.assertRaisesRegex(reader.CorruptData, r"^artifact [0-9a-f]{64}: no child 'absent'$"):
            reader.load(self.store, segment[7:])

    def test_load_child_stops_at_the_nesting_limit(self):
        self.register("test.chain", lambda art, load_child: load_child("next") + 1 if art.children else 0)
        digest = self.put("test.chain")
        for _ in range(reader.MAX_DEPTH):
            digest = self.put("test.chain", [("next", digest)])
        self.assertEqual(reader.load(self.store, digest), reader.MAX_DEPTH)
        digest = self.put("test.chain", [("next", digest)])
        with self.assertRaisesRegex(reader.CorruptData, f"children nest deeper than {reader.MAX_DEPTH} levels"):
            reader.load(self.store, digest)

    def test_arrays_are_mapped_as_the_load_asks(self):
        values = np.arange(6, dtype="<f8").reshape(2, 3)
        npy = self.path("v.npy")
        np.save(npy, values)
        digest = self.put("test.arrays", files={"v.npy": cli_support.read_bytes(npy)})
        self.register("test.arrays", lambda art, load_child: (art.mmap, art.array("v.npy", dtype="<f8", ndim=2),
                                                             art.array("v.npy", mmap=False)))
        for mmap in (True, False):
            with self.subTest(mmap=mmap):
                flag, default, copied = reader.load(self.store, digest, mmap=mmap)
                self.assertEqual(flag, mmap)
                self.assertEqual(isinstance(default, np.memmap), mmap)
                self.assertNotIsInstance(copied, np.memmap)
                np.testing.assert_array_equal(default, values)
                np.testing.assert_array_equal(copied, values)
        reader.register_reader("test.arrays", lambda art, load_child: art.array("v.npy", dtype="<i8"))
        with self.assertRaisesRegex(reader.CorruptData, r"'v\.npy' holds float64, expected int64"):
            reader.load(self.store, digest)


def main():
    global PLUGINS
    PLUGINS, argv = cli_support.parse_plugin_args("test_reader_plugins.py")
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
