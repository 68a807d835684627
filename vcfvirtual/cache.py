"""The transcode cache: the BCF's records laid out so each variants chunk is one range.

Layout ``raw`` (the only one so far) is the uncompressed BCF stream itself (header then
records), so the cache is a valid uncompressed BCF that bcftools reads, and chunk k is
the contiguous range of its records. Files are written under a temporary name and
renamed only when complete, so a failed or killed run never leaves a partial cache
under the final name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import OutputExistsError, VcfVirtualError
from .scan import ScanResult, scan_bcf

LAYOUTS = ("raw",)
CACHE_SUFFIX = ".vcz.cache.bcf"
REFS_SUFFIX = ".vcz.json"


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What identifies a file's contents cheaply: size and modification time."""

    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path) -> "Fingerprint":
        st = os.stat(path)
        return cls(size=st.st_size, mtime_ns=st.st_mtime_ns)


def default_paths(bcf_path) -> tuple[Path, Path]:
    """(refs, cache) written next to the BCF."""
    bcf_path = Path(bcf_path)
    return bcf_path.with_name(bcf_path.name + REFS_SUFFIX), bcf_path.with_name(bcf_path.name + CACHE_SUFFIX)


def temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_output(path: Path, *, force: bool) -> Iterator[Path]:
    """Yield a temporary path that becomes ``path`` only if the block completes."""
    path = Path(path)
    if path.exists() and not force:
        raise OutputExistsError(path, "output already exists", hint="pass --force to overwrite it")
    tmp = temporary_name(path)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    os.replace(tmp, path)


def write_raw_cache(bcf_path, tmp_cache: Path, progress: bool | None = None) -> ScanResult:
    """Scan ``bcf_path`` once, writing its uncompressed stream to ``tmp_cache``."""
    try:
        sink = open(tmp_cache, "wb")
    except OSError as e:
        raise VcfVirtualError(tmp_cache, f"cannot write the cache: {e.strerror}") from None
    with sink:
        try:
            result = scan_bcf(bcf_path, sink=sink, progress=progress)
            sink.flush()
            os.fsync(sink.fileno())
        except OSError as e:
            raise VcfVirtualError(tmp_cache, f"cannot write the cache: {e.strerror}",
                                  hint="check free disk space") from None
    return result
