"""The allot wire messages (``proto/allot.proto``) as Python classes.

An installed package (``pip install sdk/python``) carries the module, built
with ``protoc`` from ``allot.proto`` when the package was built
(``allot/_allot_pb2.py``, ``setup.py``). Used from the source tree (this
folder on ``PYTHONPATH``), the module is generated the first time it is needed
and cached under a name derived from the proto's hash: either way the Python
and C++ sides come from the same ``allot.proto``.

Where the source-tree case finds the proto, in order: ``$ALLOT_PROTO``; the
source tree this package sits in (``<repo>/proto/allot.proto``);
``/usr/share/allot/allot.proto`` (the Debian package). The cache lives in
``$ALLOT_PYTHON_CACHE`` or ``~/.cache/allot``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import tempfile
from types import ModuleType


def _proto_path() -> pathlib.Path:
    env = os.environ.get("ALLOT_PROTO")
    candidates = [pathlib.Path(env)] if env else []
    here = pathlib.Path(__file__).resolve()
    candidates += [here.parents[3] / "proto" / "allot.proto",
                   pathlib.Path("/usr/share/allot/allot.proto")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ImportError("allot: cannot find allot.proto (looked in "
                      + ", ".join(str(c) for c in candidates) + "); set ALLOT_PROTO")


def _cache_dir() -> pathlib.Path:
    env = os.environ.get("ALLOT_PYTHON_CACHE")
    if env:
        return pathlib.Path(env)
    return pathlib.Path.home() / ".cache" / "allot"


def _generate(proto: pathlib.Path, target: pathlib.Path) -> None:
    protoc = shutil.which("protoc")
    if protoc is None:
        raise ImportError("allot: protoc is needed to generate the wire module "
                          "(Debian package protobuf-compiler)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        result = subprocess.run(
            [protoc, f"--proto_path={proto.parent}", f"--python_out={scratch}", proto.name],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ImportError(f"allot: protoc failed on {proto}: {result.stderr.strip()}")
        # Atomic: a concurrent importer sees the old state or the whole file.
        os.replace(pathlib.Path(scratch) / "allot_pb2.py", target)


def _load() -> ModuleType:
    try:
        from . import _allot_pb2  # the installed package's own copy
        return _allot_pb2
    except ImportError:
        pass
    proto = _proto_path()
    digest = hashlib.sha256(proto.read_bytes()).hexdigest()[:16]
    target = _cache_dir() / f"allot_pb2_{digest}.py"
    if not target.is_file():
        _generate(proto, target)
    spec = importlib.util.spec_from_file_location("allot._allot_pb2", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _load()
