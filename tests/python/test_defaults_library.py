"""A shared library that is not Amphora's adds a materializer to every
registry's defaults (amphora::register_defaults in a static initializer):
a program linked to it sees the materializer beside the built-ins, and so
does the `amphora` command when the library is loaded into it (LD_PRELOAD
here; plugins will load such libraries by path).

    test_defaults_library.py --cli build/bin/amphora
    (with AMPHORA_POINT_USER and AMPHORA_DEFAULTS_LIBRARY in the environment)"""

import json
import os
import subprocess
import sys
import unittest

import cli_support
from cli_support import EXIT_CORRUPT, EXIT_OK, StoreTestCase

USER = os.environ.get("AMPHORA_POINT_USER", "")
LIBRARY = os.environ.get("AMPHORA_DEFAULTS_LIBRARY", "")


class DefaultsLibraryTest(StoreTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(USER and LIBRARY, "set AMPHORA_POINT_USER and AMPHORA_DEFAULTS_LIBRARY")
        proc = subprocess.run([USER, self.store], text=True, capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "saved")
        self.loaded = dict(os.environ, LD_PRELOAD=LIBRARY)

    def test_show_knows_the_materializer_only_with_the_library(self):
        shown = json.loads(self.run_cli("show", "inside", "--json", check=EXIT_OK, env=self.loaded).stdout)
        self.assertEqual(shown["materializer"]["name"], "test.point")
        self.assertTrue(shown["registered"])
        bare = json.loads(self.run_cli("show", "inside", "--json", check=EXIT_OK).stdout)
        self.assertFalse(bare["registered"])

    def test_verify_runs_the_library_validation(self):
        proc = self.run_cli("verify", check=EXIT_CORRUPT, env=self.loaded)
        self.assertIn("off the unit square", proc.stdout)
        self.assertEqual(proc.stdout.count("problem:"), 1, proc.stdout)  # "inside" passes
        # Without the library its artifacts are hashed only, and said to be.
        proc = self.run_cli("verify", check=EXIT_OK)
        self.assertIn("2", proc.stdout)
        self.assertNotIn("off the unit square", proc.stdout)


if __name__ == "__main__":
    _, argv = cli_support.parse_args(sys.argv[0])
    unittest.main(argv=argv)
