"""Writing the references in the format asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OutputWriteError, VcfVirtualError
from ..io import outputs
from . import icechunk, kerchunk
from .formats import RefsFormat

if TYPE_CHECKING:
    from ..manifests.virtual import VirtualGroup


@dataclass(frozen=True)
class ReferencesOutput:
    """Where and how a store's references are written.

    Parameters
    ----------
    tmp : Path
        Where they are written (renamed into place by the caller).
    path : Path
        Their final name, which errors name.
    refs_format : {"json", "parquet", "icechunk"}
        The format.
    cache_path : Path
        The cache's local path (its name completes a ``cache_url`` ending in ``/``).
    local_cache_url : str
        The cache's ``file://`` URL (or the URL it was uploaded to): where an Icechunk
        repository's chunks point without ``cache_url``.
    cache_url : str or None
        Where readers find the cache; None: where the group's manifests say.
    """

    tmp: Path
    path: Path
    refs_format: RefsFormat
    cache_path: Path
    local_cache_url: str
    cache_url: str | None = None


def write_references(group: VirtualGroup, output: ReferencesOutput) -> None:
    """Write ``group``'s references as ``output`` says.

    Raises
    ------
    OutputWriteError
        They cannot be written, named as ``output.path``.
    VcfVirtualError
        Icechunk references to a remote cache.
    """
    try:
        cache_url = output.cache_url
        public = kerchunk.public_cache_url(cache_url, output.cache_path.name) if cache_url else None
        if output.refs_format == "icechunk":
            if public and not public.startswith("file://"):
                raise VcfVirtualError(
                    None,
                    "Icechunk output reads local caches only, so far",
                    hint="leave out cache_url=, or write refs_format='json'",
                )
            icechunk.write_icechunk(group, output.tmp, public or output.local_cache_url)
        else:
            parquet = output.refs_format == "parquet"
            write = kerchunk.write_kerchunk_parquet if parquet else kerchunk.write_kerchunk_json
            write(group, output.tmp, cache_url=public)
    except OutputWriteError as e:  # named after its temporary: name the output asked for
        raise OutputWriteError(output.path, e.problem, hint=e.hint) from None
    except OSError as e:
        raise OutputWriteError(
            output.path, f"cannot write the references: {e.strerror}", hint=outputs.write_hint(e, "refs_path=")
        ) from None
