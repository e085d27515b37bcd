#!/usr/bin/python3
"""The command line itself: help text, option parsing, usage errors.

Run as:
    /usr/bin/python3 tests/python/test_cli_commands.py --cli build/bin/amphora

The expected `--help` output of `amphora` and of every command is kept in
tests/golden/help/<command>.txt and compared byte for byte. After changing a
command's help on purpose, rewrite those files with

    /usr/bin/python3 tests/python/test_cli_commands.py --cli build/bin/amphora --update-golden

and review the difference (git diff tests/golden) before committing it.
"""

import json
import os
import re
import pty
import shutil
import subprocess
import unittest

import numpy as np

import cli_support
from cli_support import EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CORRUPT, run

UPDATE_GOLDEN = False
GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "help")
COMMANDS = ("init", "plugins", "ls", "show", "import", "export", "verify", "rm", "gc", "runs", "why", "lineage", "migrate",
            "remote", "push", "pull")


class CliTestCase(cli_support.StoreTestCase):
    def error_line(self, proc, *mentions, status=EXIT_USAGE):
        """Asserts the one-line `amphora: ...` message and returns it."""
        self.assertEqual(proc.returncode, status, f"stdout={proc.stdout!r} stderr={proc.stderr!r}")
        self.assertEqual(proc.stdout, "")
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"expected one line, got {proc.stderr!r}")
        self.assertTrue(lines[0].startswith("amphora: "), lines[0])
        for m in mentions:
            self.assertIn(m, lines[0])
        return lines[0]

    def save(self, arr, name):
        path = self.path(name)
        np.save(path, arr)
        return path

    def names(self):
        return [(r["name"], r["version"]) for r in json.loads(self.run_cli("ls", "--json", check=EXIT_OK).stdout)]


class HelpTest(unittest.TestCase):
    """`--help` of amphora and of every command, against tests/golden/help."""

    def check_golden(self, topic, text):
        path = os.path.join(GOLDEN_DIR, topic + ".txt")
        if UPDATE_GOLDEN:
            os.makedirs(GOLDEN_DIR, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            return
        self.assertTrue(os.path.exists(path), f"{path} is missing: run with --update-golden")
        with open(path) as f:
            expected = f.read()
        self.assertEqual(text, expected, f"amphora {topic} --help differs from {path}; if the change is "
                                         "intended, rerun with --update-golden and review the diff")

    def test_top_level_help(self):
        for flag in ("--help", "-h"):
            proc = run(flag)
            self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
            self.assertEqual(proc.stderr, "")
            self.check_golden("amphora", proc.stdout)
        self.assertEqual(run("help").stdout, run("--help").stdout)
        for command in COMMANDS:
            self.assertIn("\n  " + command + " ", run("--help").stdout)

    def test_command_help(self):
        for command in COMMANDS:
            with self.subTest(command=command):
                proc = run(command, "--help")
                self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
                self.assertEqual(proc.stderr, "")
                text = proc.stdout
                self.check_golden(command, text)
                self.assertTrue(text.splitlines()[0].endswith("."), "first line is a one-line description")
                self.assertIn("Usage: amphora " + command, text)
                self.assertIn("\nExamples:\n  amphora ", text)
                # the same text however help is asked for
                self.assertEqual(run("help", command).stdout, text)
                self.assertEqual(run("--store", "x", command, "-h").stdout, text)
                for store_first in (["--store", "x"], ["--store=x"]):
                    proc = run(*store_first, "help", command)
                    self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (EXIT_OK, text, ""))

    def test_help_wins_over_missing_arguments(self):
        proc = run("import", "--help")  # FILE and --name are required, but help is asked
        self.assertEqual(proc.returncode, EXIT_OK)
        self.assertIn("--name NAME", proc.stdout)

    def test_version(self):
        proc = run("--version")
        self.assertEqual(proc.returncode, EXIT_OK)
        self.assertRegex(proc.stdout, r"^amphora \d+\.\d+\.\d+\n$")


class UsageTest(CliTestCase):
    def test_no_command(self):
        self.error_line(run(), "no command", "amphora --help")

    def test_unknown_command(self):
        self.error_line(self.run_cli("frobnicate"), "unknown command 'frobnicate'", "amphora --help")
        self.error_line(run("help", "frobnicate"), "unknown command 'frobnicate'")

    def test_unknown_option_names_it_and_the_command(self):
        self.error_line(self.run_cli("ls", "--bogus"), "unknown option --bogus", "(see amphora ls --help)")
        self.error_line(self.run_cli("gc", "--json"), "--json", "amphora gc --help")

    def test_extra_argument(self):
        self.error_line(self.run_cli("show", "a", "b"), "unexpected argument 'b'", "amphora show --help")
        self.error_line(self.run_cli("init", "x"), "'x'", "amphora init --help")

    def test_missing_argument(self):
        self.error_line(self.run_cli("export", "a"), "FILE", "amphora export --help")
        self.error_line(self.run_cli("import", "--name"), "--name")
        self.error_line(run("--store"), "--store")

    def test_repeated_single_value_option_is_refused(self):
        p = self.save(np.arange(5), "a.npy")
        for args in (("import", p, "--name", "a", "--name", "b"),
                     ("import", p, "--name", "a", "--compress", "lz4", "--compress", "none"),
                     ("import", p, "--name=a", "--name=a")):
            with self.subTest(args=args):
                option = args[-1].split("=")[0] if "=" in args[-1] else args[-2]
                line = self.error_line(self.run_cli(*args), option, "given 2 times", "amphora import --help")
                self.assertIn(option, line)
        self.assertEqual(self.names(), [])
        # --store twice: before the command, after it, or both
        for args in (("--store", "a", "--store", "b", "ls"), ("ls", "--store", "a", "--store", "b"),
                     ("--store", "a", "ls", "--store", "b")):
            with self.subTest(args=args):
                self.error_line(run(*args), "--store", "amphora ls --help")

    def test_invalid_compress_choice_names_the_choices(self):
        p = self.save(np.arange(5), "a.npy")
        line = self.error_line(self.run_cli("import", p, "--name", "a", "--compress", "xz"), "xz")
        for choice in ("none", "lz4", "zstd", "auto"):
            self.assertIn(choice, line)
        self.assertEqual(self.names(), [])

    def test_double_dash_ends_options(self):
        p = self.save(np.arange(5), "-weird.npy")
        # without --, the file name is taken for an option
        self.error_line(self.run_cli("import", "-weird.npy", "--name", "w"), "-weird.npy")
        os.chdir(self.tmp)
        try:
            self.run_cli("import", "--name", "w", "--", "-weird.npy", check=EXIT_OK)
            # after --, even --name is an argument: the command has one file, so this is refused
            self.error_line(self.run_cli("import", "--", "-weird.npy", "--name", "x"), "--name")
            out = self.path("-out.npy")
            self.run_cli("export", "--", "w", "-out.npy", check=EXIT_OK)
            np.testing.assert_array_equal(np.load(out), np.arange(5))
            self.run_cli("export", "w", "--force", "--", "-out.npy", check=EXIT_OK)
            self.error_line(self.run_cli("ls", "--", "--json"), "--json")  # not a valid name
        finally:
            os.chdir("/")
        self.assertEqual(self.names(), [("w", 1)])

    def test_store_before_or_after_the_command(self):
        p = self.save(np.arange(5), "a.npy")
        self.run_cli("import", p, "--name", "a", check=EXIT_OK)
        before = run("--store", self.store, "ls")
        after = run("ls", "--store", self.store)
        inline = run("ls", "--store=" + self.store)
        self.assertEqual(before.returncode, EXIT_OK, before.stderr)
        self.assertEqual(before.stdout, after.stdout)
        self.assertEqual(before.stdout, inline.stdout)
        env = dict(os.environ, AMPHORA_STORE=self.store)
        self.assertEqual(run("ls", env=env).stdout, before.stdout)

    def test_library_usage_errors_keep_their_status(self):
        p = self.save(np.arange(5), "a.npy")
        self.error_line(self.run_cli("import", p, "--name", "bad/name"), "bad/name")
        self.error_line(self.run_cli("show", "a@x"), "a@x")
        self.error_line(self.run_cli("show", "nosuch"), "nosuch", status=EXIT_NOT_FOUND)


class RmTest(CliTestCase):
    def import_array(self, arr, name):
        out = self.run_cli("import", self.save(arr, name + ".npy"), "--name", name, "--compress", "none",
                           check=EXIT_OK).stdout
        return out.split("(")[1].split(")")[0]

    def objects(self):
        root = os.path.join(self.store, "objects", "sha256")
        return sorted("sha256:" + d for fan in os.listdir(root) for d in os.listdir(os.path.join(root, fan)))

    def rm_on_terminal(self, answer, *args):
        """Runs `amphora rm` with a pseudo-terminal as standard input, answering `answer`."""
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen([cli_support.CLI, "--store", self.store, "rm", *args], stdin=slave,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            os.close(slave)
            slave = None
            # None: end of input (Ctrl-D on an empty line)
            os.write(master, b"\x04" if answer is None else answer.encode() + b"\n")
            out, err = proc.communicate(timeout=60)
        finally:
            if slave is not None:
                os.close(slave)
            os.close(master)
        return proc.returncode, out, err

    def test_rm_version_then_gc_frees_only_what_it_alone_reached(self):
        only = self.import_array(np.arange(100), "a")           # a@1 only
        shared = self.import_array(np.arange(200), "a")         # a@2 and b@1
        self.import_array(np.arange(200), "b")
        latest = self.import_array(np.arange(300), "a")         # a@3
        proc = self.run_cli("rm", "a@1", check=EXIT_OK)
        self.assertEqual(proc.stdout, f"removed a@1 ({only})\n")
        self.assertEqual(self.names(), [("a", 3), ("b", 1)])
        self.assertEqual(self.objects(), sorted([only, shared, latest]))  # rm alone frees nothing
        # Saved moments ago, so within gc's grace period: kept, and gc says why.
        young = self.run_cli("gc", check=EXIT_OK).stdout
        self.assertIn("removed 0 artifacts", young)
        self.assertIn("1 unnamed, saved less than 60 s ago", young)
        self.assertIn("removed 1 artifact", self.run_cli("gc", "--grace", "0", check=EXIT_OK).stdout)
        self.assertEqual(self.objects(), sorted([shared, latest]))
        self.run_cli("rm", "a", check=EXIT_OK)
        self.run_cli("gc", "--grace=0", check=EXIT_OK)
        self.assertEqual(self.objects(), [shared])  # b@1 still reaches it
        self.run_cli("verify", check=EXIT_OK)
        self.assertEqual(self.run_cli("export", "b", self.path("b.npy"), check=EXIT_OK).returncode, 0)
        np.testing.assert_array_equal(np.load(self.path("b.npy")), np.arange(200))

    def test_rm_name_lists_every_version_removed(self):
        digests = [self.import_array(np.arange(n), "a") for n in (1, 2, 3)]
        self.run_cli("rm", "a@2", check=EXIT_OK)
        proc = self.run_cli("rm", "a", check=EXIT_OK)
        self.assertEqual(proc.stdout, f"removed a@1 ({digests[0]})\nremoved a@3 ({digests[2]})\n")
        self.assertEqual(proc.stderr, "")
        self.assertEqual(self.names(), [])
        self.error_line(self.run_cli("ls", "a"), "'a'", status=EXIT_NOT_FOUND)

    def test_rm_of_what_does_not_exist(self):
        self.import_array(np.arange(3), "a")
        line = self.error_line(self.run_cli("rm", "a@5"), "'a'", "5", self.store, status=EXIT_NOT_FOUND)
        self.assertIn("latest is 1", line)
        self.error_line(self.run_cli("rm", "nosuch"), "'nosuch'", self.store, status=EXIT_NOT_FOUND)
        self.error_line(self.run_cli("rm", "nosuch@1"), "'nosuch'", status=EXIT_NOT_FOUND)
        for bad in ("a@0", "a@x", "a@", "a@-1", "bad/name", "@1"):
            with self.subTest(ref=bad):
                self.error_line(self.run_cli("rm", bad), bad, status=EXIT_USAGE)
        self.error_line(self.run_cli("rm"), "REF")
        self.assertEqual(self.names(), [("a", 1)])

    def test_version_numbers_are_never_reused(self):
        for n in (1, 2, 3):
            self.import_array(np.arange(n), "a")
        self.run_cli("rm", "a@3", check=EXIT_OK)
        out = self.run_cli("import", self.save(np.arange(9), "x.npy"), "--name", "a", check=EXIT_OK).stdout
        self.assertIn(" as a@4 ", out)
        self.run_cli("rm", "a", check=EXIT_OK)
        out = self.run_cli("import", self.save(np.arange(1), "y.npy"), "--name", "a", check=EXIT_OK).stdout
        self.assertIn(" as a@5 ", out)  # same content as the removed a@1, but a new version
        self.assertEqual(self.names(), [("a", 5)])
        self.run_cli("verify", check=EXIT_OK)
        self.error_line(self.run_cli("show", "a@4"), "a", status=EXIT_NOT_FOUND)

    def test_without_a_terminal_rm_does_not_ask(self):
        self.import_array(np.arange(3), "a")
        for stdin in (subprocess.DEVNULL, subprocess.PIPE):
            self.import_array(np.arange(4), "a")
            proc = self.run_cli("rm", "a", stdin=stdin)
            self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
            self.assertNotIn("?", proc.stderr)
            self.assertTrue(proc.stdout.startswith("removed a@"), proc.stdout)

    def test_on_a_terminal_rm_asks(self):
        for n in (1, 2, 3):
            self.import_array(np.arange(n), "a")
        for answer in ("n", "", "nope", None):  # None: end of input
            with self.subTest(answer=answer):
                status, out, err = self.rm_on_terminal(answer, "a")
                self.assertEqual(status, EXIT_FAILURE, err)
                self.assertIn("remove name a (3 versions)? [y/N]", err)
                self.assertIn("amphora: nothing removed", err)
                self.assertEqual(out, "")
                self.assertEqual(self.names(), [("a", 3)])
        status, out, err = self.rm_on_terminal("y", "a@2")
        self.assertEqual(status, EXIT_OK, err)
        self.assertIn("remove a@2? [y/N]", err)
        self.assertTrue(out.startswith("removed a@2 (sha256:"), out)
        status, out, err = self.rm_on_terminal("YES", "a")
        self.assertEqual(status, EXIT_OK, err)
        self.assertIn("remove name a (2 versions)?", err)
        self.assertEqual(len(out.splitlines()), 2)
        self.assertEqual(self.names(), [])
        # --yes does not ask; something missing is reported without asking
        self.import_array(np.arange(5), "b")
        status, out, err = self.rm_on_terminal(None, "b", "--yes")
        self.assertEqual((status, err), (EXIT_OK, ""))
        status, out, err = self.rm_on_terminal(None, "b@9")
        self.assertEqual(status, EXIT_NOT_FOUND)
        self.assertNotIn("?", err)


def main():
    global UPDATE_GOLDEN
    flags, argv = cli_support.parse_args("test_cli_commands.py", ["--update-golden"])
    UPDATE_GOLDEN = "--update-golden" in flags
    unittest.main(argv=argv, verbosity=1)



# The composite of docs/FORMAT.md §3.6, written by the test helper program.
WRITER = os.environ.get("AMPHORA_TEST_WRITER", "")


class LsTest(CliTestCase):
    import_array = RmTest.import_array

    def test_columns_line_up_whatever_the_lengths(self):
        self.import_array(np.arange(3), "a")
        self.import_array(np.arange(4), "a")
        self.import_array(np.arange(5), "a-name-longer-than-the-thirty-two-columns-it-used-to-get")
        records = self.path("r.jsonl")
        with open(records, "w") as f:
            f.write('{"x": 1}\n{"x": 2}\n')
        self.run_cli("import", records, "--name", "r", check=EXIT_OK)
        lines = self.run_cli("ls", check=EXIT_OK).stdout.splitlines()
        self.assertEqual(len(lines), 4, lines)
        header = lines[0]
        self.assertEqual(header.split(), ["NAME", "VERSION", "DIGEST", "MATERIALIZER", "SIZE", "CREATED"])
        for column in ("VERSION", "DIGEST", "MATERIALIZER", "CREATED"):
            start = header.index(column)
            for line in lines[1:]:
                self.assertNotEqual(line[start], " ", f"{column} out of line in {line!r}")
                self.assertEqual(line[start - 1], " ", f"{column} out of line in {line!r}")
        size_end = header.index("SIZE") + len("SIZE")  # right-aligned
        for line in lines[1:]:
            self.assertEqual(line[size_end - 1], "B", line)
            self.assertEqual(line[size_end], " ", line)
        rows = {line.split()[0]: line.split() for line in lines[1:]}
        self.assertEqual(rows["a"][1], "2/2")  # latest version of two
        self.assertEqual(rows["r"][3], "amphora.records")


class CompositeTest(cli_support.StoreTestCase):
    def composite(self):
        self.assertTrue(WRITER, "set AMPHORA_TEST_WRITER to the amphora_test_writer program")
        return subprocess.run([WRITER, "example", self.store], capture_output=True, text=True,
                              check=True).stdout.strip()

    def test_show_lists_children(self):
        digest = self.composite()
        text = self.run_cli("show", digest, check=EXIT_OK).stdout
        self.assertIn("children      2\n", text)
        self.assertRegex(text, r"\n  values/0 +sha256:[0-9a-f]{64}  amphora\.list\n")
        shown = json.loads(self.run_cli("show", digest, "--json", check=EXIT_OK).stdout)
        self.assertEqual([c["role"] for c in shown["children"]], ["values/0", "values/1"])
        self.assertEqual(shown["children"][0]["digest"], shown["children"][1]["digest"])
        self.assertEqual(shown["children"][0]["materializer"], "amphora.list")
        tensor = json.loads(self.run_cli("show", shown["children"][0]["digest"], "--json", check=EXIT_OK).stdout)
        self.assertEqual(tensor["children"][0]["role"], "items/0")
        self.assertEqual(tensor["children"][0]["materializer"], "amphora.tensor")

    def test_ls_sizes_count_the_whole_tree_each_shared_child_once(self):
        digest = subprocess.run([WRITER, "example", self.store, "shared"], capture_output=True, text=True,
                                check=True).stdout.strip()
        [row] = json.loads(self.run_cli("ls", "--json", check=EXIT_OK).stdout)
        shown = json.loads(self.run_cli("show", digest, "--json", check=EXIT_OK).stdout)
        child = json.loads(self.run_cli("show", shown["children"][0]["digest"], "--json", check=EXIT_OK).stdout)
        leaf = json.loads(self.run_cli("show", child["children"][0]["digest"], "--json", check=EXIT_OK).stdout)
        # The map, its one list (listed twice) and the list's tensor.
        self.assertEqual(row["tree_artifacts"], 3)
        self.assertEqual(row["tree_bytes"], shown["payload_bytes"] + child["payload_bytes"] + leaf["payload_bytes"])
        self.assertGreater(row["tree_bytes"], row["payload_bytes"])
        self.assertTrue(row["tree_complete"])
        # `amphora help ls` names every field --json prints.
        helped = self.run_cli("help", "ls", check=EXIT_OK).stdout
        fields = re.search(r"--json prints an array of \{([^}]*)\}", helped)
        self.assertIsNotNone(fields, helped)
        listed = {f.strip() for f in fields.group(1).split(",")} | {"versions"}  # "versions" in the prose after it
        self.assertEqual(sorted(set(row) - listed), [])
        line = self.run_cli("ls", check=EXIT_OK).stdout.splitlines()[1]
        shown_size = f"{row['tree_bytes']} B" if row["tree_bytes"] < 1024 else f"{row['tree_bytes'] / 1024:.1f} KiB"
        self.assertIn(f" {shown_size} ", line)
        # A missing child is not counted, and the size says it is a lower bound.
        hexd = leaf["digest"].split(":")[1]
        shutil.rmtree(os.path.join(self.store, "objects", "sha256", hexd[:2], hexd))
        [row] = json.loads(self.run_cli("ls", "--json", check=EXIT_OK).stdout)
        self.assertFalse(row["tree_complete"])
        self.assertEqual(row["tree_artifacts"], 2)
        self.assertIn(" >", self.run_cli("ls", check=EXIT_OK).stdout.splitlines()[1])

    def test_export_writes_members_in_their_own_formats(self):
        digest = self.composite()
        out = self.path("exported")
        proc = self.run_cli("export", digest, out, check=EXIT_OK)
        self.assertIn("to directory", proc.stdout)
        self.assertTrue(os.path.isfile(os.path.join(out, "manifest.json")))
        with open(os.path.join(out, "keys.bytes"), "rb") as fh:
            self.assertEqual(fh.read(), b"ab")
        for role in ("values/0", "values/1"):
            item = os.path.join(out, role, "items", "0.npy")
            np.testing.assert_array_equal(np.load(item), np.array([1.5, 2.5], dtype=np.float32))
        self.assertEqual([e for e in os.listdir(self.tmp) if "amphora-export" in e], [])
        # An existing destination is never replaced by a directory.
        again = self.run_cli("export", digest, out, check=EXIT_USAGE)
        self.assertIn(out + " exists; ", again.stderr)
        self.assertIn("is exported as a new directory", again.stderr)

    def test_export_of_a_composite_needs_its_directory_and_a_path_through_no_file(self):
        digest = self.composite()
        # A missing directory fails as it does for a single file, creating nothing.
        missing = self.path("no", "such", "out")
        proc = self.run_cli("export", digest, missing, check=EXIT_FAILURE)
        self.assertIn(missing, proc.stderr)
        self.assertIn("No such file or directory", proc.stderr)
        self.assertFalse(os.path.exists(self.path("no")))
        # A path through a regular file can never be written: an invalid argument.
        with open(self.path("notes.txt"), "w") as fh:
            fh.write("keep")
        through = self.path("notes.txt", "out")
        proc = self.run_cli("export", digest, through, check=EXIT_USAGE)
        self.assertIn(through + " cannot be written: a component of the path is not a directory", proc.stderr)
        with open(self.path("notes.txt")) as fh:
            self.assertEqual(fh.read(), "keep")
        self.assertEqual([e for e in os.listdir(self.tmp) if "amphora-export" in e], [])

    def test_a_missing_child_fails_verify_and_export(self):
        digest = self.composite()
        shown = json.loads(self.run_cli("show", digest, "--json", check=EXIT_OK).stdout)
        child = shown["children"][0]["digest"][len("sha256:"):]
        shutil.rmtree(os.path.join(self.store, "objects", "sha256", child[:2], child))
        proc = self.run_cli("verify", digest, check=EXIT_CORRUPT)
        self.assertIn("child 'values/0'", proc.stdout)
        self.assertIn("is missing", proc.stdout)
        self.run_cli("export", digest, self.path("broken"), check=EXIT_CORRUPT)
        self.assertFalse(os.path.exists(self.path("broken")))
        self.assertEqual([e for e in os.listdir(self.tmp) if "amphora-export" in e], [])

    def test_json_and_text_round_trip(self):
        doc = {"layers": [1, 2, 3], "name": "résumé", "nested": {"x": None, "y": 1.5}}
        with open(self.path("config.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        self.run_cli("import", self.path("config.json"), "--name", "config", check=EXIT_OK)
        shown = json.loads(self.run_cli("show", "config", "--json", check=EXIT_OK).stdout)
        self.assertEqual(shown["materializer"]["name"], "amphora.json")
        self.run_cli("export", "config", self.path("back.json"), check=EXIT_OK)
        with open(self.path("back.json"), encoding="utf-8") as fh:
            self.assertEqual(json.load(fh), doc)
        raw = b"any bytes \x00\xff\n"
        with open(self.path("notes.txt"), "wb") as fh:
            fh.write(raw)
        self.run_cli("import", self.path("notes.txt"), "--name", "notes", check=EXIT_OK)
        self.run_cli("export", "notes", self.path("back.txt"), check=EXIT_OK)
        with open(self.path("back.txt"), "rb") as fh:
            self.assertEqual(fh.read(), raw)
        # A FIFO is refused at once, as for .npy, not waited on.
        os.mkfifo(self.path("pipe.json"))
        proc = self.run_cli("import", self.path("pipe.json"), "--name", "pipe", check=EXIT_USAGE, timeout=20)
        self.assertIn("pipe.json is not a regular file (a FIFO)", proc.stderr)
        with open(self.path("bad.json"), "w") as fh:
            fh.write("{not json")
        proc = self.run_cli("import", self.path("bad.json"), "--name", "bad", check=EXIT_USAGE)
        self.assertIn("not valid JSON", proc.stderr)

    def test_gc_grace_is_checked(self):
        proc = self.run_cli("gc", "--grace", "-1", check=EXIT_USAGE)
        self.assertIn("--grace: '-1' is not a duration: give seconds, or a whole number with s, m, h or d", proc.stderr)
        for good in ("0", "90", "90s", "15m", "12h", "7d"):
            self.run_cli("gc", "--grace", good, "--dry-run", check=EXIT_OK)
        self.run_cli("gc", "--grace", "soon", check=EXIT_USAGE)
        self.run_cli("gc", "--grace", "5", "--grace", "6", check=EXIT_USAGE)
        for bad in ("0", "-3", "abc", "1.5", "99999999999999999999999"):
            proc = self.run_cli("gc", "--keep-last", bad, check=EXIT_USAGE)
            self.assertIn(f"--keep-last: '{bad}' is not a number of versions to keep: give a whole number, 1 or more",
                          proc.stderr)
            self.assertNotIn("e+308", proc.stderr)
            self.assertNotIn("17976931348623157", proc.stderr)

    def test_export_of_a_composite_to_a_file_name_is_refused(self):
        digest = self.composite()
        for name in ("out.jsonl", "out.json", "out.npy"):
            proc = self.run_cli("export", digest, self.path(name), check=EXIT_FAILURE)
            self.assertIn("that names a ." + name.split(".")[1] + " file", proc.stderr)
            self.assertIn("give a path without that extension", proc.stderr)
            self.assertFalse(os.path.exists(self.path(name)))


class CommandDetailsTest(cli_support.StoreTestCase):
    def test_init_on_an_existing_store_says_so(self):
        fresh = self.path("fresh")
        self.assertIn("initialised store", run("--store", fresh, "init", stdout=subprocess.PIPE).stdout)
        self.run_cli("import", self.write_csv(), "--name", "t", check=EXIT_OK)
        again = self.run_cli("init", check=EXIT_OK)
        self.assertIn("already exists; nothing changed", again.stdout)
        self.run_cli("show", "t", check=EXIT_OK)

    def write_csv(self):
        path = self.path("t.csv")
        with open(path, "w") as fh:
            fh.write("a,t\n1,2020-01-01T00:00:00Z\n2,2021-05-06 07:08:09\n")
        return path

    def test_show_prints_table_timestamps_as_iso_8601(self):
        self.run_cli("import", self.write_csv(), "--name", "t", check=EXIT_OK)
        text = self.run_cli("show", "t", check=EXIT_OK).stdout
        self.assertIn('"min": "2020-01-01T00:00:00.000000000Z"', text)
        self.assertIn('"max": "2021-05-06T07:08:09.000000000Z"', text)
        # --json keeps the stored numbers.
        shown = json.loads(self.run_cli("show", "t", "--json", check=EXIT_OK).stdout)
        self.assertEqual(shown["meta"]["columns"][1]["min"], 1577836800000000000)

    def test_unknown_import_extension_lists_the_supported_ones(self):
        with open(self.path("x.xyz"), "w") as fh:
            fh.write("{}")
        proc = self.run_cli("import", self.path("x.xyz"), "--name", "x", check=EXIT_FAILURE)
        self.assertIn("no materializer handles '.xyz' files (importable: ", proc.stderr)
        for ext in (".npy", ".npz", ".csv", ".jsonl", ".txt", ".json"):
            self.assertIn(ext, proc.stderr)
        self.assertIn(".jsonl JSON lines", self.run_cli("import", "--help", check=EXIT_OK).stdout)

    def test_why_of_an_unknown_name_points_at_runs(self):
        proc = self.run_cli("why", "nosuch", check=EXIT_NOT_FOUND)
        self.assertIn("no name or artifact 'nosuch'", proc.stderr)
        self.assertIn("amphora runs lists them", proc.stderr)

    def test_verify_names_the_damaged_byte_range_in_full(self):
        np.save(self.path("big.npy"), np.arange(1_200_000, dtype=np.float64))
        self.run_cli("import", self.path("big.npy"), "--name", "big", "--compress", "none", check=EXIT_OK)
        shown = json.loads(self.run_cli("show", "big", "--json", check=EXIT_OK).stdout)
        payload = shown["files"][0]
        self.assertGreater(len(payload["sha256"]), 1)
        piece = payload["piece_size"]
        digest = shown["digest"][len("sha256:"):]
        path = os.path.join(self.store, "objects", "sha256", digest[:2], digest, payload["path"])
        with open(path, "r+b") as fh:
            fh.seek(piece + 10)
            byte = fh.read(1)
            fh.seek(piece + 10)
            fh.write(bytes([byte[0] ^ 1]))
        proc = self.run_cli("verify", "big", check=EXIT_CORRUPT)
        end = min(payload["size"], 2 * piece) - 1
        self.assertIn(f"piece 1 (bytes {piece} to {end} of {payload['size']}) does not match its SHA-256",
                      proc.stderr)

if __name__ == "__main__":
    main()
