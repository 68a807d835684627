"""Cut points for parallel scans must be record starts. The oracle is htslib: pysam's
``VariantFile.tell()`` before each record is that record's BGZF virtual offset."""

from __future__ import annotations

import json
import logging
import os
import shutil

import numpy as np
import pysam
import pytest
from vcfvirtual_codec.bcf import bgzf

import vcfvirtual
from vcfvirtual.bcf import csi
from vcfvirtual.scan import partition
from vcfvirtual.scan.scanner import read_header

from .... import bcfdata


def true_starts(bcf) -> list[int]:
    out = []
    with pysam.VariantFile(str(bcf)) as f:
        f.subset_samples([])
        while True:
            virtual = f.tell()
            try:
                next(f)
            except StopIteration:
                return out
            out.append(virtual)


def block_offsets(bcf) -> list[int]:
    with open(bcf, "rb") as f:
        return [b.offset for b in bgzf.read_blocks(f, bcf)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    d = tmp_path_factory.mktemp("partition")
    bcf = bcfdata.write_bcf(bcfdata.random_cohort_vcf(1000, 300, seed=2), d / "wide.bcf")
    return bcf, true_starts(bcf)


@pytest.fixture(scope="module")
def huge_records(tmp_path_factory):
    """Records of 40,000 samples (~80 kB each): every record spans several blocks, and
    some blocks hold no record start at all."""
    d = tmp_path_factory.mktemp("huge")
    bcf = bcfdata.write_bcf(bcfdata.random_cohort_vcf(12, 40_000, seed=3), d / "huge.bcf", index=False)
    return bcf, true_starts(bcf)


def first_start_at_or_after(starts, block):
    later = [v for v in starts if v >> 16 >= block]
    return later[0] if later else None


@pytest.mark.parametrize("which", ["wide", "huge_records"])
def test_record_start_found_from_any_block(which, request):
    bcf, starts = request.getfixturevalue(which)
    header = read_header(bcf)
    blocks = block_offsets(bcf)
    checked = 0
    with open(bcf, "rb") as f:
        for block in blocks[1:-1]:
            found = partition.find_record_start(bcf, f, block, header)
            expected = first_start_at_or_after(starts, block)
            if expected is not None and (expected >> 16) - block > 2 * 1024 * 1024:
                continue  # beyond the search window: None is allowed
            assert (found.virtual_offset if found else None) == expected, block
            checked += 1
    assert checked >= 10


def test_block_near_finds_the_next_block(wide):
    bcf, _ = wide
    blocks = block_offsets(bcf)
    size = os.path.getsize(bcf)
    with open(bcf, "rb") as f:
        for target in np.linspace(1, size - 30, 25).astype(int).tolist():
            later = [b for b in blocks if b >= target]
            assert partition.block_near(f, target, size, bcf) == later[0]


def test_csi_names_record_starts(wide):
    bcf, starts = wide
    from_index = csi.csi_record_starts(bcf)
    assert from_index  # write_bcf indexes with bcftools' CSI
    assert {s.virtual_offset for s in from_index} <= set(starts)


def test_stale_or_foreign_csi_is_not_used(wide, tmp_path, caplog):
    bcf, _ = wide
    copy = shutil.copy(bcf, tmp_path / "copy.bcf")
    shutil.copy(str(bcf) + ".csi", str(copy) + ".csi")
    os.utime(str(copy) + ".csi", (1, 1))  # older than the BCF
    with caplog.at_level(logging.WARNING, logger="vcfvirtual"):
        assert csi.csi_record_starts(copy) is None
    assert "older than the BCF" in caplog.text
    small = bcfdata.small_bcf(tmp_path / "small.bcf")
    shutil.copy(str(bcf) + ".csi", str(small) + ".csi")  # an index of a bigger file
    assert csi.csi_record_starts(small) is None
    assert csi.csi_record_starts(tmp_path / "none.bcf") is None


@pytest.mark.parametrize("with_csi", [True, False])
def test_plan_cuts_at_record_starts(wide, tmp_path, monkeypatch, with_csi, caplog):
    bcf, starts = wide
    copy = shutil.copy(bcf, tmp_path / "w.bcf")
    if with_csi:
        shutil.copy(str(bcf) + ".csi", str(copy) + ".csi")
    size = os.path.getsize(copy)
    monkeypatch.setattr(partition, "MIN_PARTITION_BYTES", size // 10)
    with caplog.at_level(logging.INFO, logger="vcfvirtual"):
        cuts = partition.plan_partitions(copy, 6)
    assert ("CSI index" if with_csi else "block scan") in caplog.text
    virtual = [c.virtual_offset for c in cuts]
    assert len(cuts) >= 4 and virtual == sorted(set(virtual)) and set(virtual) <= set(starts[1:])
    # Roughly equal shares of the compressed file.
    shares = np.diff([0, *[c.block_offset for c in cuts], size]) / size
    assert shares.max() < 0.4


def test_a_large_file_gets_more_parts_than_asked(wide, tmp_path, monkeypatch):
    """Parts of at most MAX_PARTITION_BYTES (each one task writing the columns cache),
    whatever the parts asked for: here 5 of a fifth of the file, where 2 were asked."""
    bcf, starts = wide
    size = os.path.getsize(bcf)
    monkeypatch.setattr(partition, "MIN_PARTITION_BYTES", size // 10)
    monkeypatch.setattr(partition, "MAX_PARTITION_BYTES", size // 5 + 1)
    cuts = partition.plan_partitions(bcf, 2)
    assert len(cuts) == 4 and {c.virtual_offset for c in cuts} <= set(starts[1:])


def test_plan_is_empty_for_small_or_uncompressed(wide, tmp_path):
    bcf, _ = wide
    assert partition.plan_partitions(bcf, 8) == []  # under MIN_PARTITION_BYTES a part
    plain = bcfdata.uncompressed_copy(bcf, tmp_path / "plain.bcf")
    assert partition.plan_partitions(plain, 8) == []


@pytest.mark.parametrize("with_csi", [True, False])
def test_workers_write_the_serial_store(wide, tmp_path, monkeypatch, with_csi, caplog):
    """End to end through the public option: the planner really cuts the file, and the
    cache and references equal a serial run's."""
    bcf, _ = wide
    copy = shutil.copy(bcf, tmp_path / "w.bcf")
    if with_csi:
        shutil.copy(str(bcf) + ".csi", str(copy) + ".csi")
    monkeypatch.setattr(partition, "MIN_PARTITION_BYTES", os.path.getsize(copy) // 8)
    outputs = []
    for name, workers in (("serial", 1), ("parallel", 2)):
        refs, cache = tmp_path / f"{name}.json", tmp_path / f"{name}.cache.bcf"
        with caplog.at_level(logging.INFO, logger="vcfvirtual"):
            # bgzf: a cache that is one file either way (columns is cut into parts by task).
            vcfvirtual.index(
                copy, refs_path=refs, cache_path=cache, variants_chunk_size=170, workers=workers, cache_layout="bgzf"
            )
        doc = json.loads(refs.read_text())
        doc.pop("templates")
        doc["refs"].pop(".zattrs")
        outputs.append((doc, bcfdata.cache_bytes(cache)))
    assert "4 partitions" in caplog.text
    assert outputs[1] == outputs[0]
