#!/usr/bin/python3
"""CLI behaviour against hostile stores, odd destinations and a starved machine.

Run as:
    /usr/bin/python3 tests/python/test_cli_hardening.py --cli build/bin/amphora

Every test works in a fresh temporary store and asserts the exit status and
the message a user would see.
"""

import hashlib
import re
import json
import os
import resource
import signal
import stat
import subprocess
import time
import unittest

import numpy as np

import cli_support
from cli_support import EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CORRUPT


class CliTestCase(cli_support.StoreTestCase):
    def import_array(self, arr, name):
        src = self.path(name + ".npy")
        np.save(src, arr)
        out = self.run_cli("import", src, "--name", name, "--compress", "none", check=EXIT_OK).stdout
        return out.split("(")[1].split(")")[0]

    def object_dir(self, digest):
        hexd = digest.split(":")[1]
        return os.path.join(self.store, "objects", "sha256", hexd[:2], hexd)


class ExportDestinationTest(CliTestCase):
    def setUp(self):
        super().setUp()
        self.arr = np.arange(12, dtype=np.int32).reshape(3, 4)
        self.import_array(self.arr, "a")

    def test_regular_file_is_replaced(self):
        dest = self.path("out.npy")
        with open(dest, "w") as f:
            f.write("old")
        self.run_cli("export", "a", dest, check=EXIT_OK)
        np.testing.assert_array_equal(np.load(dest), self.arr)

    def test_symlink_needs_force_and_target_is_untouched(self):
        target = self.path("target.txt")
        with open(target, "w") as f:
            f.write("keep")
        dest = self.path("link.npy")
        os.symlink(target, dest)
        proc = self.run_cli("export", "a", dest, check=EXIT_USAGE)
        self.assertIn("is a symbolic link", proc.stderr)
        self.assertIn("--force", proc.stderr)
        self.assertTrue(os.path.islink(dest))
        self.run_cli("export", "a", dest, "--force", check=EXIT_OK)
        self.assertFalse(os.path.islink(dest))
        np.testing.assert_array_equal(np.load(dest), self.arr)
        with open(target) as f:
            self.assertEqual(f.read(), "keep")

    def test_fifo_is_refused_even_with_force(self):
        dest = self.path("pipe.npy")
        os.mkfifo(dest)
        for extra in ([], ["--force"]):
            proc = self.run_cli("export", "a", dest, *extra, check=EXIT_USAGE, timeout=30)
            self.assertIn("is a FIFO", proc.stderr)
            self.assertTrue(stat.S_ISFIFO(os.lstat(dest).st_mode))

    def test_device_is_never_replaced(self):
        if os.geteuid() != 0:
            self.skipTest("creating a device node needs root")
        dest = self.path("null.npy")
        os.mknod(dest, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        proc = self.run_cli("export", "a", dest, "--force", check=EXIT_USAGE)
        self.assertIn("character device", proc.stderr)
        self.assertTrue(stat.S_ISCHR(os.lstat(dest).st_mode))

    def test_directory_is_refused(self):
        dest = self.path("adir.npy")
        os.mkdir(dest)
        proc = self.run_cli("export", "a", dest, check=EXIT_USAGE)
        self.assertIn("is a directory", proc.stderr)

    def test_a_path_through_a_file_is_an_invalid_argument_for_export_and_import(self):
        with open(self.path("notes.txt"), "w") as f:
            f.write("keep")
        dest = self.path("notes.txt", "out.npy")
        proc = self.run_cli("export", "a", dest, check=EXIT_USAGE)
        self.assertIn(dest + " cannot be written: a component of the path is not a directory", proc.stderr)
        proc = self.run_cli("import", dest, "--name", "b", check=EXIT_USAGE)
        self.assertIn(dest + " cannot be read: a component of the path is not a directory", proc.stderr)
        with open(self.path("notes.txt")) as f:
            self.assertEqual(f.read(), "keep")

    def test_missing_directory_names_the_file_asked_for(self):
        dest = self.path("no", "such", "dir", "out.npy")
        proc = self.run_cli("export", "a", dest, check=EXIT_FAILURE)
        self.assertIn(dest, proc.stderr)
        self.assertNotIn(".tmp-", proc.stderr)
        self.assertIn("No such file or directory", proc.stderr)

    def test_file_named_dot_npy(self):
        dest = self.path(".npy")
        self.run_cli("export", "a", dest, check=EXIT_OK)
        np.testing.assert_array_equal(np.load(dest), self.arr)
        proc = self.run_cli("import", dest, "--name", "b", check=EXIT_OK)
        self.assertIn("identical content was already stored", proc.stdout)


class OutputTest(CliTestCase):
    def test_failed_stdout_is_an_error(self):
        self.import_array(np.zeros(3), "z")
        for args in (["ls", "--json"], ["ls"], ["show", "z"], ["verify"]):
            with open("/dev/full", "w") as full:
                proc = self.run_cli(*args, stdout=full)
            self.assertEqual(proc.returncode, EXIT_FAILURE, args)
            self.assertIn("cannot write to standard output", proc.stderr)

    def test_control_characters_from_records_are_escaped(self):
        self.import_array(np.zeros(3), "z")
        record_path = os.path.join(self.store, "names", "z", "1.json")
        os.chmod(record_path, 0o644)
        with open(record_path) as f:
            record = json.load(f)
        record["created_at"] = "\x1b]0;owned\x07\x1b[2J"
        record["materializer"] = "evil\u009b31m\u202etxt.exe"
        with open(record_path, "w") as f:
            json.dump(record, f)
        proc = self.run_cli("ls", check=EXIT_OK)
        for bad in ("\x1b", "\x07", "\u009b", "\u202e"):
            self.assertNotIn(bad, proc.stdout)
        self.assertIn("\\u202etxt.exe", proc.stdout)
        shown = self.run_cli("show", "z", check=None)
        self.assertNotIn("\u202e", shown.stdout + shown.stderr)
        self.assertIn("\\x1b]0;owned\\x07", proc.stdout)
        self.assertIn("evil\\u009b31m", proc.stdout)
        # --json keeps the exact value, escaped by JSON itself, in ASCII only.
        raw = subprocess.run([cli_support.CLI, "--store", self.store, "ls", "--json"], capture_output=True).stdout
        self.assertTrue(all(b < 0x80 for b in raw), raw)
        self.assertIn(b"\\u009b", raw)
        out = json.loads(raw)
        self.assertEqual(out[0]["created_at"], record["created_at"])
        self.assertEqual(out[0]["materializer"], record["materializer"])

    def test_raw_8bit_bytes_in_store_names_are_escaped(self):
        self.import_array(np.zeros(3), "z")
        os.mkdir(os.path.join(self.store.encode(), b"names", b"x\x9b31mz"))
        proc = subprocess.run([cli_support.CLI, "--store", self.store, "ls"], capture_output=True)
        self.assertEqual(proc.returncode, EXIT_OK)
        self.assertNotIn(b"\x9b", proc.stderr + proc.stdout)
        self.assertIn(b"x\\x9b31mz", proc.stderr)


class BadRecordsTest(CliTestCase):
    def setUp(self):
        super().setUp()
        self.good = self.import_array(np.arange(5), "good")
        self.import_array(np.arange(6), "other")
        names = os.path.join(self.store, "names")
        os.mkdir(os.path.join(names, "-x"))
        with open(os.path.join(names, "other", "2.json"), "w") as f:
            f.write("{not json")
        with open(os.path.join(names, "other", "3.json"), "w") as f:
            f.write('{"digest": "sha256:12"}')

    def test_ls_lists_the_healthy_and_warns_once_per_bad_record(self):
        for args in (["ls"], ["ls", "--json"]):
            proc = self.run_cli(*args, check=EXIT_OK)
            self.assertIn("good", proc.stdout)
            self.assertIn("other", proc.stdout)
            warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
            self.assertEqual(len(warnings), 3, proc.stderr)
            self.assertTrue(any("names/-x" in w for w in warnings))
            self.assertTrue(any("2.json is not valid JSON" in w for w in warnings))
            self.assertTrue(any("other@3 has no valid digest" in w for w in warnings))
        out = json.loads(self.run_cli("ls", "--json", check=EXIT_OK).stdout)
        self.assertEqual(sorted(r["name"] for r in out), ["good", "other"])

    def test_show_of_a_healthy_ref_works(self):
        proc = self.run_cli("show", "good", check=EXIT_OK)
        self.assertIn(self.good, proc.stdout)
        self.run_cli("show", "other@1", check=EXIT_OK)
        self.run_cli("export", "good", self.path("g.npy"), check=EXIT_OK)

    def test_verify_and_gc_report_the_store_inconsistent(self):
        proc = self.run_cli("verify", check=EXIT_CORRUPT)
        self.assertIn("names/-x", proc.stdout)
        proc = self.run_cli("gc", check=EXIT_CORRUPT)
        self.assertIn("gc refused", proc.stderr)
        self.assertIn("names/-x", proc.stderr)


class SharedChildrenExportTest(CliTestCase):
    """Lists whose two items are one shared child, nested: a DAG whose tree of
    paths doubles with each level."""

    def nested(self, levels):
        return cli_support.shared_lists(self.store, levels)

    def leftovers(self, out):
        parent = os.path.dirname(out)
        return [n for n in os.listdir(parent) if n.startswith(os.path.basename(out) + ".amphora-export-")]

    def test_an_exponential_tree_is_refused_before_anything_is_written(self):
        top = self.nested(30)
        out = self.path("out")
        proc = self.run_cli("export", top, out, check=EXIT_FAILURE, timeout=60)
        self.assertIn("would write more than 1000000 files and directories", proc.stderr)
        self.assertIn("31 distinct artifacts", proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual(self.leftovers(out), [])

    def test_a_small_shared_tree_exports_whole(self):
        out = self.path("out")
        self.run_cli("export", self.nested(4), out, check=EXIT_OK)
        leaves = [d for d, subdirs, _ in os.walk(out) if not subdirs]
        self.assertEqual(len(leaves), 16)  # each place the shared child stands

    def test_an_interrupted_export_leaves_nothing_behind(self):
        out = self.path("out")
        top = self.nested(17)  # 2**18 directories: long enough to be caught midway
        proc = subprocess.Popen([cli_support.CLI, "--store", self.store, "export", top, out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not self.leftovers(out) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
        if proc.returncode == 0:
            self.skipTest("the export finished before the signal")
        self.assertEqual(proc.returncode, -signal.SIGTERM)
        self.assertEqual(self.leftovers(out), [])
        self.assertFalse(os.path.exists(out))


class UnsupportedTest(CliTestCase):
    def test_newer_manifest_version_is_unsupported_for_show_and_verify(self):
        manifest = b'{"children":[],"files":[],"manifest_version":3,"materializer":{"name":"x.y","version":1},"meta":{}}'
        hexd = hashlib.sha256(manifest).hexdigest()
        art = os.path.join(self.store, "objects", "sha256", hexd[:2], hexd)
        os.makedirs(art)
        with open(os.path.join(art, "manifest.json"), "wb") as f:
            f.write(manifest)
        for args in (["show", "sha256:" + hexd], ["verify", "sha256:" + hexd], ["verify"]):
            proc = self.run_cli(*args, check=EXIT_FAILURE)
            self.assertIn("manifest version 3", proc.stdout + proc.stderr)
            self.assertIn("newer", proc.stdout + proc.stderr)


class StarvedMachineTest(CliTestCase):
    """Thread creation fails under a real process limit (RLIMIT_NPROC for an unprivileged user)."""

    def run_limited(self, nproc, *args):
        def limit():
            os.setgid(65534)
            os.setuid(65534)
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        # LeakSanitizer needs a thread of its own at exit, which the limit forbids.
        env = dict(os.environ, AMPHORA_THREADS="4",
                   ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":"))
        return self.run_cli(*args, env=env, preexec_fn=limit)

    def test_runs_on_the_threads_that_started(self):
        if os.geteuid() != 0:
            self.skipTest("dropping to an unprivileged user with a process limit needs root")
        os.chmod(self.tmp, 0o777)
        for root, dirs, files in os.walk(self.store):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o777)
            for f in files:
                os.chmod(os.path.join(root, f), 0o666)
        src = self.path("big.npy")
        np.save(src, np.random.default_rng(1).random((2048, 1024)))  # 16 MiB: parallel hashing
        os.chmod(src, 0o644)
        for nproc in (1, 2):
            proc = self.run_limited(nproc, "import", src, "--name", "n%d" % nproc, "--compress", "lz4")
            self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
            warnings = [l for l in proc.stderr.splitlines() if "worker threads" in l]
            self.assertEqual(len(warnings), 1, proc.stderr)  # said once
            m = re.search(r"started (\d+) of 3 worker threads \((.+)\); continuing with (\d+)", warnings[0])
            self.assertTrue(m, warnings[0])
            # The limit leaves nproc - 1 threads beside the main one (fewer
            # where a sanitizer runtime takes one for itself).
            started = int(m.group(1))
            self.assertLessEqual(started, nproc - 1)
            self.assertEqual(int(m.group(3)), started + 1)
            self.assertIn("Resource temporarily unavailable", m.group(2))
            proc = self.run_limited(nproc, "verify", "n%d" % nproc)
            self.assertEqual(proc.returncode, EXIT_OK, proc.stderr)
        self.run_cli("verify", check=EXIT_OK)


def main():
    _, argv = cli_support.parse_args("test_cli_hardening.py")
    unittest.main(argv=argv, verbosity=1)


class FullDiskTest(CliTestCase):
    """A store on a 3 MB file system (tmpfs, mounted for the test): content
    already stored imports again with no room for a staged copy."""

    def setUp(self):
        super().setUp()
        self.disk = self.path("disk")
        os.mkdir(self.disk)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", self.disk], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            self.skipTest(f"cannot mount a small file system here: {proc.stderr.strip()}")
        self.addCleanup(subprocess.run, ["umount", self.disk], check=True)
        self.small = os.path.join(self.disk, "store")
        self.small_cli("init", check=EXIT_OK)

    def small_cli(self, *args, check):
        proc = cli_support.run("--store", self.small, *args)
        self.assertEqual(proc.returncode, check, f"amphora {' '.join(map(str, args))}: {proc.stdout!r} {proc.stderr!r}")
        return proc

    def test_reimport_without_room_for_a_staged_copy(self):
        first, second = self.path("a.npy"), self.path("b.npy")
        np.save(first, np.random.default_rng(1).random(250_000))
        np.save(second, np.random.default_rng(2).random(250_000))
        self.small_cli("import", first, "--name", "a", check=EXIT_OK)
        self.assertLess(os.statvfs(self.disk).f_bavail * os.statvfs(self.disk).f_frsize, os.path.getsize(first))
        again = self.small_cli("import", first, "--name", "a", check=EXIT_OK)
        self.assertIn("as a@2", again.stdout)
        self.assertIn("identical content was already stored", again.stdout)
        # New content still needs the room, and says so.
        full = self.small_cli("import", second, "--name", "b", check=EXIT_FAILURE)
        self.assertIn("No space left on device", full.stderr)
        listed = self.small_cli("ls", "--json", check=EXIT_OK).stdout
        self.assertEqual([(n["name"], n["version"]) for n in json.loads(listed)], [("a", 2)])
        self.small_cli("verify", check=EXIT_OK)
        out = self.path("back.npy")
        self.small_cli("export", "a@2", out, check=EXIT_OK)
        self.assertTrue(np.array_equal(np.load(out), np.load(first)))


if __name__ == "__main__":
    main()
