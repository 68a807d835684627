"""Writing the references in the format asked for."""

from __future__ import annotations

from pathlib import Path

from ..errors import OutputWriteError, VcfVirtualError
from ..io import outputs
from . import icechunk, kerchunk


def write_references(
    group, tmp_refs: Path, refs_path: Path, refs_format: str, cache_url, cache_path: Path, local_cache_url: str
):
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
