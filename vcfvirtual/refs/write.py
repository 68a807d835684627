"""Writing the references in the format asked for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OutputWriteError, VcfVirtualError
from ..io import outputs
from . import icechunk, kerchunk
from .formats import RefsFormat

if TYPE_CHECKING:
    from virtualizarr.manifests import ManifestGroup


def write_references(
    group: ManifestGroup,
    tmp_refs: Path,
    *,
    refs_path: Path,
    refs_format: RefsFormat,
    cache_url: str | None,
    cache_path: Path,
    local_cache_url: str,
) -> None:
    """Write ``group``'s references to ``tmp_refs`` (renamed to ``refs_path`` by the caller).

    Parameters
    ----------
    group : ManifestGroup
        The store.
    tmp_refs : Path
        Where they are written.
    refs_path : Path
        Their final name, which errors name.
    refs_format : {"json", "parquet", "icechunk"}
        The format.
    cache_url : str or None
        Where readers find the cache (a URL ending in ``/`` gets the cache's name); None:
        where the group's manifests say.
    cache_path : Path
        The cache's local path (its name completes ``cache_url``).
    local_cache_url : str
        The cache's ``file://`` URL, for an Icechunk repository without ``cache_url``.

    Raises
    ------
    OutputWriteError
        They cannot be written, named as ``refs_path``.
    VcfVirtualError
        Icechunk references to a remote cache.
    """
    try:
        public = kerchunk.public_cache_url(cache_url, cache_path.name) if cache_url else None
        if refs_format == "icechunk":
            if public and not public.startswith("file://"):
                raise VcfVirtualError(
                    None,
                    "Icechunk output reads local caches only, so far",
                    hint="leave out cache_url=, or write refs_format='json'",
                )
            icechunk.write_icechunk(group, tmp_refs, public or local_cache_url)
        else:
            write = kerchunk.write_kerchunk_parquet if refs_format == "parquet" else kerchunk.write_kerchunk_json
            write(group, tmp_refs, cache_url=public)
    except OutputWriteError as e:  # named after its temporary: name the output asked for
        raise OutputWriteError(refs_path, e.problem, hint=e.hint) from None
    except OSError as e:
        raise OutputWriteError(
            refs_path, f"cannot write the references: {e.strerror}", hint=outputs.write_hint(e, "refs_path=")
        ) from None
