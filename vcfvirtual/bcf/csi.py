"""CSI indexes and BGZF virtual offsets: where records start in a compressed BCF."""

from __future__ import annotations

import dataclasses
import logging
import os
import struct

import numpy as np
from vcfvirtual_codec.bcf import bgzf

from ..errors import VcfVirtualError

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RecordStart:
    """Where a record begins in a BGZF file: the block holding its first byte, and that
    byte's offset in the block's inflated data (htslib's virtual offset, split)."""

    block_offset: int
    within_block: int

    @property
    def virtual_offset(self) -> int:
        return (self.block_offset << 16) | self.within_block


def csi_record_starts(bcf_path: str | os.PathLike[str]) -> list[RecordStart] | None:
    """Record starts the BCF's CSI index names, ascending; None without a usable index.

    An index older than the BCF, or naming offsets past its end, is not used (with a
    warning): it describes another version of the file."""
    read = _read_csi(os.fspath(bcf_path))
    return None if read is None else [RecordStart(int(v >> 16), int(v & 0xFFFF)) for v in read[0]]


@dataclasses.dataclass(frozen=True)
class ContigRecords:
    """A contig's records as a CSI index counts them: from the record at ``start`` on
    (the file's records of one contig are consecutive in an indexed BCF), ``count``."""

    start: RecordStart
    count: int


def csi_record_count(bcf_path: str | os.PathLike[str]) -> int | None:
    """The records of the BCF as its CSI index counts them (each contig's, and those with
    no position, as ``bcftools index --nrecords`` sums them); None without a usable index."""
    read = _read_csi(os.fspath(bcf_path))
    return None if read is None else sum(c.count for c in read[1]) + read[2]


def csi_contig_records(bcf_path: str | os.PathLike[str]) -> list[ContigRecords] | None:
    """Each contig's records as the BCF's CSI index counts them, in file order; None
    without a usable index, or when records without a position are counted apart."""
    read = _read_csi(os.fspath(bcf_path))
    if read is None or read[2]:
        return None
    return sorted(read[1], key=lambda c: c.start.virtual_offset)


def _read_csi(bcf_path: str) -> tuple[np.ndarray, list[ContigRecords], int] | None:
    """(record virtual offsets, each contig's records, records of no position) of a
    usable CSI index beside the BCF."""
    csi = bcf_path + ".csi"
    if not os.path.exists(csi):
        return None
    if os.path.getmtime(csi) < os.path.getmtime(bcf_path):
        logger.warning("%s: older than the BCF, not used", csi)
        return None
    try:
        with open(csi, "rb") as f:
            offsets, contigs, no_coor = _csi_contents(bgzf.inflate_all(f.read(), csi))
    except (VcfVirtualError, struct.error, ValueError) as e:
        logger.warning("%s: not a CSI index this version reads (%s); not used", csi, e)
        return None
    size = os.path.getsize(bcf_path)
    if offsets.size and int(offsets[-1] >> 16) >= size:
        logger.warning("%s: names offsets past the end of %s; not used", csi, bcf_path)
        return None
    return offsets, contigs, no_coor


def _csi_contents(data: bytes) -> tuple[np.ndarray, list[ContigRecords], int]:
    """Sorted unique record virtual offsets from an inflated CSI index (the chunk
    begins and each bin's linear offset), each contig's records as its pseudo-bin counts
    them (the first's virtual offset; mapped and unmapped), and the records of no
    position counted after the contigs."""
    if data[:4] != b"CSI\x01":
        raise ValueError("no CSI magic")
    _min_shift, depth, l_aux = struct.unpack_from("<iii", data, 4)
    pos = 16 + l_aux
    (n_ref,) = struct.unpack_from("<i", data, pos)
    pos += 4
    pseudo_bin = ((1 << ((depth + 1) * 3)) - 1) // 7 + 1
    found = []
    contigs = []
    for _ in range(n_ref):
        (n_bin,) = struct.unpack_from("<i", data, pos)
        pos += 4
        for _ in range(n_bin):
            bin_id, loffset, n_chunk = struct.unpack_from("<IQi", data, pos)
            pos += 16
            chunks = np.frombuffer(data, dtype="<u8", count=2 * n_chunk, offset=pos)
            pos += 16 * n_chunk
            if bin_id == pseudo_bin:
                if n_chunk != 2:
                    raise ValueError(f"a pseudo-bin of {n_chunk} chunks")
                begin = int(chunks[0])
                contigs.append(ContigRecords(RecordStart(begin >> 16, begin & 0xFFFF), int(chunks[2]) + int(chunks[3])))
                continue
            found.append(chunks[0::2])
            found.append(np.array([loffset], dtype=np.uint64))
    no_coor = 0
    if pos + 8 <= len(data):
        (no_coor,) = struct.unpack_from("<Q", data, pos)
    offsets = np.unique(np.concatenate(found)) if found else np.empty(0, np.uint64)
    return offsets, contigs, int(no_coor)
