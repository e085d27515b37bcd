#!/usr/bin/python3
"""Plugins from the command line: --plugin and $AMPHORA_PLUGIN_PATH, `amphora
plugins`, a value saved through a plugin shown, verified and exported with
and without the plugin, broken plugins refused with their path.

Run as:
    /usr/bin/python3 tests/python/test_plugins_cli.py --cli build/bin/amphora --plugins build/test-plugins
"""

import json
import os
import sys
import unittest

import cli_support
from cli_support import EXIT_OK, EXIT_FAILURE, EXIT_USAGE, run

PLUGINS = ""  # --plugins DIR: test-plugins/, with good/ and broken/


def good(name="test_point_plugin.so"):
    return os.path.join(PLUGINS, "good", name)


def broken(name):
    return os.path.join(PLUGINS, "broken", name)


def env_with(**values):
    env = {k: v for k, v in os.environ.items() if k != "AMPHORA_PLUGIN_PATH"}
    env.update(values)
    return env


class PluginsCliTest(cli_support.StoreTestCase):
    def setUp(self):
        super().setUp()
        self.env = env_with()  # no $AMPHORA_PLUGIN_PATH from outside

    def cli(self, *args, check=None, env=None):
        proc = run("--store", self.store, *args, env=env or self.env)
        if check is not None:
            self.assertEqual(proc.returncode, check, f"amphora {args}: stdout={proc.stdout!r} stderr={proc.stderr!r}")
        return proc

    def listing(self, *args, env=None):
        return json.loads(self.cli(*args, "plugins", "--json", check=EXIT_OK, env=env).stdout)

    def test_plugins_lists_built_ins_then_what_plugins_add(self):
        plain = self.listing()
        names = {m["name"]: m for m in plain["materializers"]}
        self.assertEqual(names["amphora.tensor"]["origin"], "built-in")
        self.assertEqual(names["amphora.tensor"]["type"], "amphora::Tensor")
        self.assertEqual(names["amphora.tensor"]["version"], 1)
        self.assertNotIn("test.point", names)
        self.assertEqual(plain["plugins"], [])
        self.assertIn({"extension": ".npy", "materializer": "amphora.tensor", "origin": "built-in",
                       "description": next(f["description"] for f in plain["formats"] if f["extension"] == ".npy")},
                      plain["formats"])
        text = self.cli("plugins", check=EXIT_OK).stdout
        self.assertIn("(no plugins loaded", text)

        path = os.path.realpath(good())
        for args, env in ((("--plugin", good()), None), ((), env_with(AMPHORA_PLUGIN_PATH=os.path.dirname(good())))):
            with self.subTest(args=args):
                listed = self.listing(*args, env=env)
                point = {m["name"]: m for m in listed["materializers"]}["test.point"]
                self.assertEqual(point["origin"], path)
                self.assertEqual(point["type"], "test_plugin::Point")
                self.assertIn({"extension": ".point", "materializer": "test.point", "origin": path,
                               "description": "a point as 'x y label'"}, listed["formats"])
                self.assertEqual(listed["plugins"], [{"name": "test.points", "version": "1.2.0", "path": path,
                                                      "materializers": ["test.fragile", "test.point"],
                                                      "formats": [".point", ".fragile"]}])
        # After the command too, and twice: loaded once.
        again = json.loads(self.cli("plugins", "--json", "--plugin", good(), "--plugin", good(), check=EXIT_OK).stdout)
        self.assertEqual(len(again["plugins"]), 1)
        text = self.cli("--plugin", good(), "plugins", check=EXIT_OK).stdout
        self.assertIn("test.point", text)
        self.assertIn("1 plugin:", text)
        self.assertIn(path, text)

    def test_broken_plugins_are_refused_with_their_path(self):
        for name, status, says in (("test_no_entry_plugin.so", EXIT_USAGE, "exports no amphora_plugin_entry"),
                                   ("test_wrong_abi_plugin.so", EXIT_FAILURE, "rebuild the plugin"),
                                   ("test_throwing_plugin.so", EXIT_USAGE, "deliberate failure"),
                                   ("test_duplicate_plugin.so", EXIT_USAGE, "'amphora.tensor' is registered twice")):
            with self.subTest(plugin=name):
                for args in (("--plugin", broken(name), "plugins"), ("--plugin", broken(name), "ls")):
                    proc = self.cli(*args, check=status)
                    self.assertEqual(proc.stdout, "")
                    self.assertIn(os.path.realpath(broken(name)), proc.stderr)
                    self.assertIn(says, proc.stderr)
                    self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        proc = self.cli("--plugin", self.path("absent.so"), "plugins", check=cli_support.EXIT_NOT_FOUND)
        self.assertIn(self.path("absent.so"), proc.stderr)
        proc = self.cli("plugins", env=env_with(AMPHORA_PLUGIN_PATH=os.path.dirname(broken("x"))))
        self.assertNotEqual(proc.returncode, EXIT_OK)
        self.assertIn(os.path.realpath(os.path.dirname(broken("x"))), proc.stderr)

    def test_a_value_saved_through_a_plugin_with_and_without_it(self):
        with open(self.path("apex.point"), "w") as f:
            f.write("1.5 -2.25 apex\n")
        self.cli("--plugin", good(), "import", self.path("apex.point"), "--name", "apex", check=EXIT_OK)
        shown = json.loads(self.cli("--plugin", good(), "show", "apex", "--json", check=EXIT_OK).stdout)
        self.assertEqual(shown["materializer"], {"name": "test.point", "version": 1})
        self.assertTrue(shown["registered"])
        self.assertEqual(shown["meta"]["fields"], {"label": "apex", "x": 1.5, "y": -2.25})
        self.cli("--plugin", good(), "verify", check=EXIT_OK)
        self.cli("--plugin", good(), "export", "apex", self.path("out.point"), check=EXIT_OK)
        with open(self.path("out.point")) as f:
            self.assertEqual(f.read(), "1.5 -2.25 apex\n")

        # A plugin's format is never handed a FIFO (it would block reading it).
        os.mkfifo(self.path("pipe.point"))
        proc = self.cli("--plugin", good(), "import", self.path("pipe.point"), "--name", "piped", check=EXIT_USAGE)
        self.assertIn("pipe.point is not a regular file (a FIFO)", proc.stderr)

        # Without the plugin: listed, shown, verified; not loaded, and said why.
        self.assertIn("apex", self.cli("ls", check=EXIT_OK).stdout)
        bare = json.loads(self.cli("show", "apex", "--json", check=EXIT_OK).stdout)
        self.assertFalse(bare["registered"])
        self.assertEqual(bare["meta"], shown["meta"])
        text = self.cli("show", "apex", check=EXIT_OK).stdout
        self.assertIn("test.point (format 1)  [not registered: loading it needs the plugin that provides it", text)
        self.cli("verify", check=EXIT_OK)
        # Exported as what it is on disk: a directory of its files.
        self.cli("export", "apex", self.path("raw"), check=EXIT_OK)
        with open(self.path("raw", "manifest.json")) as f:
            self.assertEqual(json.load(f)["materializer"], {"name": "test.point", "version": 1})

    def test_a_plugin_format_evolves_and_migrate_rewrites_it(self):
        v1, v2 = (os.path.join(PLUGINS, f"evolving-v{n}", "test_evolving_plugin.so") for n in (1, 2))
        with open(self.path("warmup.setting"), "w") as f:
            f.write("warmup 0.25\n")
        self.cli("--plugin", v1, "import", self.path("warmup.setting"), "--name", "s", check=EXIT_OK)
        shown = json.loads(self.cli("--plugin", v1, "show", "s", "--json", check=EXIT_OK).stdout)
        self.assertEqual(shown["materializer"], {"name": "test.setting", "version": 1})

        # Release 2 reads what release 1 wrote, through its migration.
        self.cli("--plugin", v2, "export", "s", self.path("read.setting"), check=EXIT_OK)
        with open(self.path("read.setting")) as f:
            self.assertEqual(f.read(), "warmup 0.25\n")
        self.cli("--plugin", v2, "verify", "s", check=EXIT_OK)

        # Without the plugin: not rewritten, and said why.
        proc = self.cli("migrate", "s", check=EXIT_FAILURE)
        self.assertIn("'test.setting'", proc.stderr)
        self.assertIn("not registered", proc.stderr)

        migrated = json.loads(self.cli("--plugin", v2, "migrate", "s", "--json", check=EXIT_OK).stdout)
        self.assertTrue(migrated["rewritten"])
        self.assertEqual((migrated["name"], migrated["version"]), ("s", 2))
        self.assertEqual(migrated["from"], shown["digest"])
        self.assertNotEqual(migrated["to"], migrated["from"])
        self.assertEqual(migrated["upgrades"], [{"materializer": "test.setting", "from": 1, "to": 2, "artifacts": 1}])
        now = json.loads(self.cli("--plugin", v2, "show", "s", "--json", check=EXIT_OK).stdout)
        self.assertEqual(now["materializer"], {"name": "test.setting", "version": 2})
        self.assertEqual(now["digest"], migrated["to"])
        self.cli("--plugin", v2, "export", "s", self.path("after.setting"), check=EXIT_OK)
        with open(self.path("after.setting")) as f:
            self.assertEqual(f.read(), "warmup 0.25\n")

        # Release 1 refuses what release 2 wrote, naming both versions and the plugin.
        proc = self.cli("--plugin", v1, "export", "s", self.path("old.setting"), check=EXIT_FAILURE)
        self.assertIn("'test.setting' format version 2, newer than the version 1 this build reads", proc.stderr)
        self.assertIn(os.path.realpath(v1), proc.stderr)
        self.assertFalse(os.path.exists(self.path("old.setting")))
        self.cli("--plugin", v1, "export", "s@1", self.path("old.setting"), check=EXIT_OK)

        # Current already: nothing written.
        text = self.cli("--plugin", v2, "migrate", "s", check=EXIT_OK).stdout
        self.assertIn("already at the format versions this build writes; nothing written", text)
        versions = json.loads(self.cli("ls", "s", "--json", check=EXIT_OK).stdout)
        self.assertEqual([v["version"] for v in versions], [1, 2])
        self.assertNotIn("migrated_from", versions[0])
        self.assertEqual(versions[1]["migrated_from"], shown["digest"])
        # A digest needs --name.
        proc = self.cli("--plugin", v2, "migrate", shown["digest"], check=EXIT_USAGE)
        self.assertIn("--name NAME", proc.stderr)
        text = self.cli("--plugin", v2, "migrate", shown["digest"], "--name", "s-copy", check=EXIT_OK).stdout
        self.assertIn("to s-copy@1", text)
        self.assertIn("test.setting format 1 -> 2 (1 artifact)", text)


def main():
    global PLUGINS
    PLUGINS, argv = cli_support.parse_plugin_args("test_plugins_cli.py")
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
