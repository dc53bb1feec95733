"""CRC-32C (Castagnoli), the checksum of record batches and of producer-state snapshots: the C
function of the `crc32c` package.

Why not `import crc32c`: that package's `__init__` reads its own version from the installed
distribution metadata (importlib.metadata, which scans the *.dist-info of every sys.path entry)
and imports its argparse command line, tens of milliseconds of every broker start and every
client command, for a version string kafkapy never reads. The package's C extension module is
loaded on its own here (and registered, so a later `import crc32c` reuses it); should the
package ever be laid out differently, the ordinary import is the fallback.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from typing import cast

__all__ = ["crc32c"]

_EXTENSION = "crc32c._crc32c"

Checksum = Callable[[bytes | bytearray | memoryview], int]


def _load() -> Checksum:
    module = sys.modules.get(_EXTENSION)
    if module is None:
        package = importlib.util.find_spec("crc32c")  # finds it, does not run its __init__
        locations = package.submodule_search_locations if package is not None else None
        spec = importlib.machinery.PathFinder.find_spec(_EXTENSION, locations) if locations else None
        if spec is None or spec.loader is None:
            import crc32c as package_module

            return cast(Checksum, package_module.crc32c)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[_EXTENSION] = module
    return cast(Checksum, module.crc32c)


#: crc32c(data) -> the CRC-32C of a bytes-like object, as an unsigned 32-bit int
crc32c: Checksum = _load()
