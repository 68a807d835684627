"""How the header's string arrays (``sample_id``, ``contig_id``, ``filter_id``,
``filter_description``) travel inline in the references: vlen-utf8, then Zstandard.

Inlined as they are, the strings were most of a wide cohort's references: at 100,000 samples
1.7 of the JSON's 2.9 MB were ``sample_id``'s base64, at 1,000,000 samples 11.4 of 27 MB,
parsed by every open and, for a collaborator, downloaded with the JSON. Sample names compress
well (sequential IDs 26x, 7-digit random IDs 2.6x at level 7; 1-2 ms per 10,000 names), and
bio2zarr compresses its ``sample_id`` too. Zstandard because every reader has it (numcodecs'
``zstd``, Zarr v2's last filter as VirtualiZarr writes a bytes-to-bytes codec; the core
``zstd`` codec for Zarr v3) and its frame header states the decompressed size, which the
open's checks bound before anything is allocated for it (``refs/arrays.check_plain_chunk_data``).
"""

from __future__ import annotations

from typing import Any, Final

LEVEL: Final = 7
# The Zarr v2 codec as numcodecs' Zstd(level=LEVEL).get_config() gives it: the one the
# open's checks accept after vlen-utf8 on a header string array, besides none (references
# written before).
V2_COMPRESSOR: Final[dict[str, Any]] = {"id": "zstd", "level": LEVEL, "checksum": False}
# The same as a Zarr v3 codec (after vlen-utf8).
V3_CODEC: Final[dict[str, Any]] = {
    "name": V2_COMPRESSOR["id"],
    "configuration": {k: v for k, v in V2_COMPRESSOR.items() if k != "id"},
}


def compress(encoded: bytes) -> bytes:
    """A chunk's vlen-utf8 bytes as the references inline them."""
    from numcodecs import Zstd

    return bytes(Zstd(level=LEVEL).encode(encoded))
