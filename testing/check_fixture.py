"""What the tests of the tree's own checks share (tests/layering/,
tests/lint/): a small source tree written into a temporary directory, and
a check run on it as ctest runs it.

    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {"tests/a_test.cc": "...", ...})
        result = run_check(CHECKER, root)   # .returncode, .stdout, .stderr

or, both at once, result = run_on_tree(CHECKER, {...}).
"""
import os
import subprocess
import sys
import tempfile


def write_tree(root, files):
    """Writes files ({relative path: text}) under root, making folders."""
    for relpath, text in files.items():
        path = os.path.join(root, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def run_check(script, root, *flags):
    """Runs the Python check `script` with flags on root; its
    CompletedProcess, output as text."""
    return subprocess.run([sys.executable, script, *flags, root],
                          capture_output=True, text=True, timeout=60)


def run_on_tree(script, files, *flags):
    """Writes files into a temporary directory, runs the check `script` on
    it with flags, removes the directory; the check's CompletedProcess."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        return run_check(script, root, *flags)
