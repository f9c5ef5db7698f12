"""Builds hilo-client with its generated hilo.v1 stubs inside.

pyproject.toml holds the metadata; this file only adds a build step: after
the client's own modules are copied, protoc and grpc_python_plugin generate
the hilo.v1 stubs from proto/hilo/v1/hilo.proto into the same build tree, so
the wheel (and whatever pip installs from this folder) carries module
hilo.v1 next to hilo_client. The proto is found beside this folder in a
checkout (../../proto) or where HILO_PROTO_DIR says. On Debian:
scripts/install-deps-languages.sh python, then, offline,

    pip install --no-index --no-build-isolation clients/python

(--no-build-isolation: pip uses the installed setuptools instead of
downloading one).
"""
import atexit
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = "hilo/v1/hilo.proto"


def _tool(name):
    path = shutil.which(name)
    if path is None:
        raise SystemExit(
            f"hilo-client: {name} not found; it generates the hilo.v1 stubs "
            f"(on Debian: scripts/install-deps-languages.sh python)")
    return path


class BuildPyWithStubs(build_py):
    """build_py, then the hilo.v1 stubs generated into the build tree."""

    def run(self):
        super().run()
        proto_dir = os.environ.get(
            "HILO_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))
        if not os.path.isfile(os.path.join(proto_dir, PROTO)):
            raise SystemExit(
                f"hilo-client: {PROTO} not found under {proto_dir}; build "
                f"from a hilo checkout or set HILO_PROTO_DIR")
        out = self.build_lib
        subprocess.run(
            [_tool("protoc"), "-I", proto_dir, f"--python_out={out}",
             f"--pyi_out={out}", f"--grpc_python_out={out}",
             f"--plugin=protoc-gen-grpc_python={_tool('grpc_python_plugin')}",
             PROTO], check=True)
        for package in ("hilo", os.path.join("hilo", "v1")):
            init = os.path.join(out, package, "__init__.py")
            if not os.path.exists(init):
                with open(init, "w", encoding="utf-8") as f:
                    f.write('"""Generated from proto/hilo/v1/hilo.proto."""\n')


# Build products (build/, hilo_client.egg-info/) go to a scratch directory,
# never into the checkout, which may be read-only or shared.
_SCRATCH = tempfile.mkdtemp(prefix="hilo-client-build-")
atexit.register(shutil.rmtree, _SCRATCH, True)

setup(cmdclass={"build_py": BuildPyWithStubs},
      options={"build": {"build_base": os.path.join(_SCRATCH, "build")},
               "egg_info": {"egg_base": _SCRATCH}})
