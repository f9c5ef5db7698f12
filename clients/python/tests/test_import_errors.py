"""What a user sees when hilo_client cannot find what it needs."""

import os
import subprocess
import sys
import unittest

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_in_python_without_site_packages():
    """Imports hilo_client in a Python that sees no installed packages (-S),
    as a python3 other than Debian's would; returns (exit code, stderr)."""
    code = ("import sys; sys.path.insert(0, %r); import hilo_client"
            % _PACKAGE_ROOT)
    done = subprocess.run([sys.executable, "-S", "-c", code],
                          capture_output=True, text=True, timeout=60,
                          check=False)
    return done.returncode, done.stderr


class ImportErrorTest(unittest.TestCase):

    def test_missing_grpc_names_the_package_to_install(self):
        code, stderr = _import_in_python_without_site_packages()
        self.assertEqual(code, 1)
        self.assertIn("ImportError: hilo_client needs the grpc module", stderr)
        self.assertIn("python3-grpcio", stderr)
        self.assertIn("/usr/bin/python3", stderr)


if __name__ == "__main__":
    unittest.main()
