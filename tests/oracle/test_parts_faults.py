"""The columns cache written by tasks, one part each, when tasks fail: a worker that dies
is replaced and its part written again; a task that fails ends the run with nothing
left behind; a task run twice writes its part once. Values against pysam."""

from __future__ import annotations

import os

import numpy as np
import pysam
import pytest
import zarr

import vcfvirtual
import vcfvirtual.cache.columns
import vcfvirtual.scan.partition
from vcfvirtual.errors import CorruptBCFError, OutputWriteError

from .. import bcfdata


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    d = tmp_path_factory.mktemp("parts")
    # One contig: its CSI index counts no contig small enough to be a partition of its own,
    # so the file is cut (and counted) in quarters, inside chunks.
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(2000, 60, seed=11, contigs=("chr1",)), d / "c.bcf")


@pytest.fixture(autouse=True)
def four_partitions(cohort, monkeypatch):
    """Partitions of a quarter of the file (a real cohort's are megabytes): with 2
    workers, the 4 partitions each start a run, so 4 tasks write 4 parts."""
    monkeypatch.setattr(vcfvirtual.scan.partition, "MIN_PARTITION_BYTES", os.path.getsize(cohort) // 4)


FOUR_PARTS = [f"part-{i:06d}" for i in range(4)]


def pysam_positions_and_genotypes(path):
    positions, genotypes = [], []
    with pysam.VariantFile(str(path)) as f:
        for rec in f:
            positions.append(rec.pos)
            genotypes.append([[-1 if a is None else a for a in s["GT"]] for s in rec.samples.values()])
    return np.array(positions), np.array(genotypes)


def assert_values(refs, bcf):
    group = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)
    positions, genotypes = pysam_positions_and_genotypes(bcf)
    assert group["variant_position"][:].tolist() == positions.tolist()
    assert np.array_equal(group["call_genotype"][:], genotypes)


def parts_of(folder):
    return sorted(os.listdir(folder))


def test_several_parts_hold_pysams_values(cohort, tmp_path):
    refs, cache = tmp_path / "p.json", tmp_path / "p.cache"
    vcfvirtual.index(cohort, refs_path=refs, cache_path=cache, variants_chunk_size=100, workers=2)
    assert parts_of(cache) == FOUR_PARTS  # one run per partition: 2 x 2 workers
    assert_values(refs, cohort)


def _dies_once(task, folder, *args):
    """A worker killed while writing its first part (as by the kernel's OOM killer)."""
    marker = os.path.join(os.path.dirname(folder), "died")
    if task.first_chunk > 0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return _write_run(task, folder, *args)


_write_run = vcfvirtual.cache.columns.write_run


def test_a_worker_that_dies_is_replaced_and_its_part_written_again(cohort, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(vcfvirtual.cache.columns, "write_run", _dies_once)
    refs, cache = tmp_path / "p.json", tmp_path / "p.cache"
    vcfvirtual.index(cohort, refs_path=refs, cache_path=cache, variants_chunk_size=100, workers=2)
    assert (tmp_path / "died").exists() and "a worker died" in caplog.text
    assert parts_of(cache) == FOUR_PARTS
    assert_values(refs, cohort)


def _dies_while_writing(task, folder, *args):
    """A worker killed with its part half written under its temporary name."""
    marker = os.path.join(os.path.dirname(folder), "died")
    if task.first_chunk > 0 and not os.path.exists(marker):
        open(marker, "w").close()
        with open(os.path.join(folder, f".{task.part}.tmp-{os.getpid()}"), "wb") as f:
            f.write(b"VVCOLS1\n half a part")
        os._exit(9)
    return _write_run(task, folder, *args)


def test_a_worker_killed_mid_part_leaves_no_temporary_in_the_cache(cohort, tmp_path, monkeypatch):
    monkeypatch.setattr(vcfvirtual.cache.columns, "write_run", _dies_while_writing)
    refs, cache = tmp_path / "p.json", tmp_path / "p.cache"
    vcfvirtual.index(cohort, refs_path=refs, cache_path=cache, variants_chunk_size=100, workers=2)
    assert (tmp_path / "died").exists()
    assert parts_of(cache) == FOUR_PARTS  # a --force later accepts the folder
    vcfvirtual.index(cohort, refs_path=refs, cache_path=cache, variants_chunk_size=100, workers=2, force=True)
    assert_values(refs, cohort)


def _fails(task, folder, *args):
    if task.first_chunk > 0:
        raise OutputWriteError(os.path.join(folder, task.part), "cannot write the cache: No space left on device")
    return _write_run(task, folder, *args)


def test_a_task_that_fails_leaves_nothing(cohort, tmp_path, monkeypatch):
    monkeypatch.setattr(vcfvirtual.cache.columns, "write_run", _fails)
    out = tmp_path / "out"
    out.mkdir()
    before = set(os.listdir(out))
    with pytest.raises(OutputWriteError, match="No space left"):
        vcfvirtual.index([cohort], refs_path=out / "p.json", variants_chunk_size=100, workers=2)
    assert set(os.listdir(out)) == before  # no references, no cache folder, no temporaries


def test_several_files_in_one_pass_that_fail_leave_nothing(cohort, tmp_path):
    """Without workers, several files are written in one pass: a second file cut off
    inside its records fails it, and nothing is left."""
    out = tmp_path / "out"
    out.mkdir()
    whole = bcfdata.write_bcf(bcfdata.random_cohort_vcf(300, 60, seed=11), tmp_path / "b.bcf").read_bytes()
    (out / "b.bcf").write_bytes(whole[: 2 * len(whole) // 3])
    before = set(os.listdir(out))
    with pytest.raises(CorruptBCFError):
        vcfvirtual.index([cohort, out / "b.bcf"], refs_path=out / "p.json", variants_chunk_size=100)
    assert set(os.listdir(out)) == before


def _twice(task, folder, *args):
    """A task run again after it wrote its part (as a retried task is)."""
    first = _write_run(task, folder, *args)
    again = _write_run(task, folder, *args)
    assert again.ranges.segments["position"].offsets.tolist() == first.ranges.segments["position"].offsets.tolist()
    assert again.fingerprint.size == first.fingerprint.size
    return again


def test_a_task_run_twice_writes_its_part_once(cohort, tmp_path, monkeypatch):
    monkeypatch.setattr(vcfvirtual.cache.columns, "write_run", _twice)
    refs, cache = tmp_path / "p.json", tmp_path / "p.cache"
    vcfvirtual.index(cohort, refs_path=refs, cache_path=cache, variants_chunk_size=100, workers=2)
    assert parts_of(cache) == FOUR_PARTS  # nothing left under a temporary name
    assert_values(refs, cohort)
