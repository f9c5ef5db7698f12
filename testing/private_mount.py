"""What the fault tests that mount a file system share (tests/faults/): a
test runs itself again in a private mount namespace, so that nothing it
mounts is seen outside it or stays mounted after it, and skips (exit 77)
where this user may not mount.

    def prepare(d):               # d: a fresh private temporary directory
        ...probe...
        return mount, None        # or None, "why this user may not"
    sys.exit(private_mount.main("disk_full_health", "HILO_..._MOUNT",
                                prepare, run, sys.argv))
"""
import os
import subprocess
import sys
import tempfile

UNSHARE = ["unshare", "--mount", "--propagation", "private", "--"]
SKIPPED = 77


def main(name, inside_env, prepare, run, argv):
    """Inside the namespace (`inside_env` names the mount point): returns
    run(argv, mount). Outside: makes a temporary directory, lets
    `prepare(d)` probe and choose the mount point, and runs argv again
    under unshare with `inside_env` set; returns its exit status, or 77
    with a line saying why not."""
    mount = os.environ.get(inside_env)
    if mount:
        return run(argv, mount)
    with tempfile.TemporaryDirectory(prefix=f"hilo-{name}-") as d:
        os.chmod(d, 0o700)
        mount, why = prepare(d)
        if mount is None:
            print(f"{name}: SKIPPED: {why}")
            return SKIPPED
        env = dict(os.environ, **{inside_env: mount})
        return subprocess.run(
            UNSHARE + [sys.executable, os.path.abspath(argv[0])] + argv[1:],
            env=env).returncode
