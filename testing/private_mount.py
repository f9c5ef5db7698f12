"""What the fault tests that mount a file system share (tests/faults/): a
test runs itself again in a private mount namespace, so that nothing it
mounts is seen outside it or stays mounted after it, and skips (exit 77)
where this user may not mount.

    def prepare(d):               # d: a fresh private temporary directory
        ...probe...
        return mount, None        # or None, "why this user may not"
    sys.exit(private_mount.main("disk_full_health", "HILO_..._MOUNT",
                                prepare, run, sys.argv))

and a guard that thaws a frozen file system if the test is killed.
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


# The guard: a process of its own session (so that neither ctest's kill of
# the test's process tree nor of its group reaches it) in the test's mount
# namespace, which waits on a pipe. "done" on the pipe: the test ended
# well. End of file without it: the test died (SIGKILL at a ctest
# timeout), and the guard thaws the mount, so that the server stuck on it
# can die too and the namespace go.
_GUARD = r"""
import os, subprocess, sys
if os.fork():
    os._exit(0)
os.setsid()
mount = sys.argv[1]
said = sys.stdin.buffer.read()
if said != b"done" and os.path.ismount(mount):
    subprocess.run(["fsfreeze", "-u", mount], capture_output=True)
"""


class ThawGuard:
    """Thaws `mount` if this process dies before close(). Use as a context
    manager around the time the mount may be frozen."""

    def __init__(self, mount):
        read_end, self._write_end = os.pipe()
        launcher = subprocess.Popen([sys.executable, "-c", _GUARD, mount],
                                    stdin=read_end, close_fds=True)
        os.close(read_end)
        launcher.wait()  # the guard itself runs on, reparented

    def close(self, done=True):
        """Stands the guard down; done=False acts as this process's death
        would (the guard thaws the mount)."""
        if self._write_end is not None:
            if done:
                os.write(self._write_end, b"done")
            os.close(self._write_end)
            self._write_end = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
