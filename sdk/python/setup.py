"""Builds the wire module (allot/_allot_pb2.py) into the package with protoc.

The proto is ``$ALLOT_PROTO`` or ``proto/allot.proto`` two levels up (this
folder inside the allot source tree). Everything else is in pyproject.toml.
"""

import os
import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent


def proto_path() -> pathlib.Path:
    env = os.environ.get("ALLOT_PROTO")
    path = pathlib.Path(env) if env else HERE.parents[1] / "proto" / "allot.proto"
    if not path.is_file():
        raise SystemExit(f"allot: no {path}: build from the allot source tree or set ALLOT_PROTO")
    return path


class BuildWithWire(build_py):
    """build_py, plus allot/_allot_pb2.py generated from allot.proto."""

    def run(self) -> None:
        super().run()
        protoc = shutil.which("protoc")
        if protoc is None:
            raise SystemExit("allot: protoc is needed to build the package "
                             "(Debian package protobuf-compiler)")
        proto = proto_path()
        target = pathlib.Path(self.build_lib) / "allot"
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([protoc, f"--proto_path={proto.parent}", f"--python_out={target}", proto.name],
                       check=True)
        os.replace(target / "allot_pb2.py", target / "_allot_pb2.py")


setup(cmdclass={"build_py": BuildWithWire})
