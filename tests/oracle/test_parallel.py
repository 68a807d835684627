"""Parallel indexing writes the store a serial run writes: the same cache, byte for byte,
and the same references, whatever the partitions, workers or executor.

Partition starts come from pysam (``VariantFile.tell()`` before each record is the
record's BGZF virtual offset), independent of our own planner, which is tested through
the public ``workers=`` option as well."""

from __future__ import annotations

import json
import logging

import pysam
import pytest
import xarray as xr
import zarr

import vcfvirtual
import vcfvirtual.cache.write
from vcfvirtual.bcf.csi import RecordStart
from vcfvirtual.errors import CorruptBCFError

from .. import bcfdata
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert


@pytest.fixture(scope="module")
def wide_bcf(tmp_path_factory):
    """Records of 400 samples, ~3 BGZF blocks each on average across the file, so that
    record starts fall at every kind of place in a block."""
    d = tmp_path_factory.mktemp("par")
    return bcfdata.write_bcf(
        bcfdata.random_cohort_vcf(1200, 400, seed=5, contigs=("chr1", "chr2", "chrX")), d / "wide.bcf"
    )


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """One local Dask cluster (two worker processes) for this module's Dask tests: each
    only submits tasks to it, and a cluster costs seconds to start. Started from a folder
    of its own, so its workers' working directory is no test's."""
    import os

    distributed = pytest.importorskip("distributed")
    started_in = tmp_path_factory.mktemp("dask-workers")
    here = os.getcwd()
    os.chdir(started_in)
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    finally:
        os.chdir(here)
    with cluster:
        yield cluster


def true_record_starts(bcf) -> list[RecordStart]:
    starts = []
    with pysam.VariantFile(str(bcf)) as f:
        f.subset_samples([])
        while True:
            virtual = f.tell()
            try:
                next(f)
            except StopIteration:
                return starts
            starts.append(RecordStart(virtual >> 16, virtual & 0xFFFF))


def use_starts(monkeypatch, starts_for):
    """Partition every file at the record starts ``starts_for(path)`` names."""
    monkeypatch.setattr(vcfvirtual.cache.write, "_file_planner", lambda n, storage_options=None: starts_for)


def serial_and_parallel(bcf, tmp_path, chunk_length, layout="bgzf", **parallel_options):
    """(serial, parallel) outputs: (refs JSON, cache bytes) of each."""
    out = []
    for name, options in (("serial", {}), ("parallel", parallel_options)):
        refs, cache = tmp_path / f"{name}.json", tmp_path / f"{name}.cache.bcf"
        vcfvirtual.index(
            bcf, refs_path=refs, cache_path=cache, variants_chunk_size=chunk_length, cache_layout=layout, **options
        )
        out.append(store_of(refs, cache))
    return out


def store_of(refs_path, cache):
    """(refs JSON, cache bytes); for a columns cache (a folder of parts, which a
    partitioned run cuts where a serial run does not), the bytes each chunk reference
    names, read by hand: the same arrays hold the same bytes whatever the parts."""
    refs = json.loads(refs_path.read_text())
    if not cache.is_dir():
        return refs, cache.read_bytes()
    return refs, bcfdata.referenced_chunks(refs_path)


def assert_same_store(serial, parallel):
    (refs_s, cache_s), (refs_p, cache_p) = serial, parallel
    assert cache_p == cache_s
    attrs_s, attrs_p = (json.loads(r["refs"].pop(".zattrs")) for r in (refs_s, refs_p))
    # Only the cache's own name differs between the two runs (and, for a cache of parts,
    # how it is cut into parts: each part's fingerprint).
    for attrs in (attrs_s, attrs_p):
        attrs["vcfvirtual"]["cache"].pop("url")
        attrs["vcfvirtual"]["cache"].pop("mtime_ns", None)
        attrs["vcfvirtual"]["cache"].pop("parts", None)
        attrs["vcfvirtual"]["cache"].pop("size", None)
    assert attrs_p == attrs_s
    refs_s.pop("templates"), refs_p.pop("templates")
    if isinstance(cache_s, dict):  # a cache of parts: chunk ranges differ, their bytes do not
        assert refs_p["refs"].keys() == refs_s["refs"].keys()
        refs_s, refs_p = ({k: v for k, v in r["refs"].items() if not isinstance(v, list)} for r in (refs_s, refs_p))
    assert refs_p == refs_s


@pytest.mark.parametrize("layout", ["bgzf", "raw", "columns"])
@pytest.mark.parametrize("cut_at", [[1], [299, 300, 301, 900], list(range(97, 1200, 97))])
def test_partitions_at_record_starts_give_the_serial_store(wide_bcf, tmp_path, monkeypatch, layout, cut_at):
    starts = true_record_starts(wide_bcf)
    use_starts(monkeypatch, lambda path: [starts[i] for i in cut_at])
    serial, parallel = serial_and_parallel(wide_bcf, tmp_path, 250, layout=layout, workers=2)
    assert_same_store(serial, parallel)


def test_a_start_inside_a_record_falls_back_to_one_partition(wide_bcf, tmp_path, monkeypatch, caplog):
    starts = true_record_starts(wide_bcf)
    inside = RecordStart(starts[600].block_offset, starts[600].within_block + 7)  # not a record start
    use_starts(monkeypatch, lambda path: [starts[300], inside, starts[900]])
    with caplog.at_level(logging.WARNING, logger="vcfvirtual"):
        serial, parallel = serial_and_parallel(wide_bcf, tmp_path, 250, workers=2)
    assert "scanning it whole" in caplog.text
    assert_same_store(serial, parallel)


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_dask_client_gives_the_serial_store(wide_bcf, tmp_path, monkeypatch, layout, dask_cluster):
    distributed = pytest.importorskip("distributed")
    starts = true_record_starts(wide_bcf)
    use_starts(monkeypatch, lambda path: [starts[i] for i in (400, 800)])
    with distributed.Client(dask_cluster) as client:
        serial, parallel = serial_and_parallel(wide_bcf, tmp_path, 300, layout=layout, dask_client=client)
    assert_same_store(serial, parallel)


def test_columns_cache_of_samples_blocks_in_parallel(wide_bcf, tmp_path, monkeypatch):
    """The columns layout cut into samples blocks (150 of 400 samples: a narrower last
    block) from four partitions on two processes: the serial run's store, cache byte for
    byte, and bio2zarr's values."""
    starts = true_record_starts(wide_bcf)
    use_starts(monkeypatch, lambda path: [starts[i] for i in (1, 299, 300, 777)])
    stores = []
    for name, workers in (("serial", 1), ("parallel", 2)):
        refs, cache = tmp_path / f"{name}.json", tmp_path / f"{name}.cache"
        vcfvirtual.index(
            wide_bcf,
            refs_path=refs,
            cache_path=cache,
            variants_chunk_size=250,
            cache_layout="columns",
            samples_chunk_size=150,
            workers=workers,
        )
        stores.append(store_of(refs, cache))
    assert_same_store(*stores)
    ref = bio2zarr_convert(wide_bcf, tmp_path / "ref.vcz", 250)
    ds = xr.open_zarr(vcfvirtual.open_store(tmp_path / "parallel.json"), consolidated=False)
    assert ds["call_genotype"].chunks[1] == (150, 150, 100)
    assert_matches_bio2zarr(ds, ref)


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_several_files_in_parallel(wide_bcf, tmp_path, monkeypatch, layout):
    """Per-contig files, each cut in parts, on two processes: bio2zarr's values of the
    unsplit file, and the same store as the files indexed serially (one process)."""
    parts = []
    for contig in ("chr1", "chr2", "chrX"):
        part = tmp_path / f"{contig}.bcf"
        pysam.bcftools.view("--no-version", "-r", contig, "-Ob", "-o", str(part), str(wide_bcf), catch_stdout=False)
        parts.append(part)
    use_starts(monkeypatch, lambda path: true_record_starts(path)[150::150])
    stores = []
    for name, workers in (("serial", 1), ("parallel", 2)):
        refs = tmp_path / f"{name}.vcz.json"
        vcfvirtual.index(parts, refs_path=refs, variants_chunk_size=250, cache_layout=layout, workers=workers)
        # Named references: the cache is named after them, its suffix the layout's.
        suffix = ".cache.columns" if layout == "columns" else ".cache.bcf"
        stores.append(store_of(refs, tmp_path / f"{name}.vcz{suffix}"))
    assert_same_store(*stores)
    ref = bio2zarr_convert(wide_bcf, tmp_path / "ref.vcz", 250)
    assert_matches_bio2zarr(
        xr.open_zarr(vcfvirtual.open_store(tmp_path / "parallel.vcz.json"), consolidated=False), ref
    )


def test_corruption_is_reported_as_a_serial_run_reports_it(wide_bcf, tmp_path, monkeypatch):
    """A damaged record in a middle partition: the file is scanned again whole and the
    error is the serial scan's, at the same offset."""
    data = bytearray(bcfdata.uncompressed_copy(wide_bcf, tmp_path / "plain.bcf").read_bytes())
    # Record boundaries from the BCF layout: l_shared and l_indiv lead each record.
    bounds = [9 + int.from_bytes(data[5:9], "little")]
    while bounds[-1] < len(data):
        at = bounds[-1]
        bounds.append(
            at + 8 + int.from_bytes(data[at : at + 4], "little") + int.from_bytes(data[at + 4 : at + 8], "little")
        )
    data[bounds[700] + 8 + 20] ^= 0x01  # n_sample of record 700 no longer the header's
    damaged = tmp_path / "damaged.bcf"
    starts = []
    with pysam.BGZFile(str(damaged), "wb") as f:  # htslib's BGZF writer says where each record goes
        f.write(bytes(data[: bounds[0]]))
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            virtual = f.tell()
            starts.append(RecordStart(virtual >> 16, virtual & 0xFFFF))
            f.write(bytes(data[lo:hi]))
    with pytest.raises(CorruptBCFError) as serial_error:
        vcfvirtual.index(damaged, refs_path=False, cache_path=tmp_path / "s.bcf")
    use_starts(monkeypatch, lambda path: [starts[i] for i in (300, 600, 900)])
    with pytest.raises(CorruptBCFError) as parallel_error:
        vcfvirtual.index(damaged, refs_path=False, cache_path=tmp_path / "p.bcf", workers=2)
    assert "sample count differs" in str(serial_error.value) and serial_error.value.offset == bounds[700]
    assert str(parallel_error.value) == str(serial_error.value)
    assert not (tmp_path / "p.bcf").exists()


def test_cli_scans_on_a_dask_scheduler(wide_bcf, tmp_path, dask_cluster):
    """`--dask-scheduler ADDRESS` connects to a running cluster, whose workers scan; the
    store equals a serial run's (the file is below the size that is cut, so one task)."""
    import subprocess
    import sys

    out = tmp_path / "dask.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "vcfvirtual.cli",
            "index",
            str(wide_bcf),
            "-o",
            str(out),
            "--cache",
            str(tmp_path / "dask.cache.bcf"),
            "-c",
            "250",
            "--dask-scheduler",
            dask_cluster.scheduler_address,
        ],
        check=True,
        capture_output=True,
    )
    vcfvirtual.index(
        wide_bcf, refs_path=tmp_path / "serial.json", cache_path=tmp_path / "serial.cache.bcf", variants_chunk_size=250
    )
    assert_same_store(
        store_of(tmp_path / "serial.json", tmp_path / "serial.cache.bcf"), store_of(out, tmp_path / "dask.cache.bcf")
    )


@pytest.mark.parametrize("layout", ["raw", "columns"])
def test_dask_workers_find_the_parts_folder_of_a_relative_cache(wide_bcf, tmp_path, monkeypatch, layout, dask_cluster):
    """Layouts whose workers write their partitions' bytes (raw, columns) hand them the
    folder by absolute path: a cluster's workers need not share the caller's working
    directory (here they were started in another folder, dask_cluster's), and `-o x.json`
    is relative."""
    import shutil
    import subprocess
    import sys

    here = tmp_path / "run"
    here.mkdir()
    shutil.copy(wide_bcf, here / "w.bcf")
    cmd = [sys.executable, "-m", "vcfvirtual.cli", "index", "w.bcf", "-o", "w.json", "--cache", "w.cache"]
    cmd += ["--cache-layout", layout, "-c", "250", "--dask-scheduler", dask_cluster.scheduler_address]
    run = subprocess.run(cmd, cwd=here, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    monkeypatch.chdir(here)
    with pysam.VariantFile("w.bcf") as vf:
        positions = [rec.pos for rec in vf]
    group = zarr.open_group(vcfvirtual.open_store("w.json"), mode="r", zarr_format=2)
    assert group["variant_position"][:].tolist() == positions


@pytest.fixture(scope="module")
def three_contigs(tmp_path_factory):
    d = tmp_path_factory.mktemp("contigs")
    vcf = bcfdata.random_cohort_vcf(1500, 30, seed=21, contigs=("chr1", "chr2", "chrX"))
    return bcfdata.write_bcf(vcf, d / "c.bcf")


def test_contigs_counted_by_the_index_need_no_counting_scan(three_contigs, tmp_path, caplog):
    """A BCF of three contigs with its CSI index, -j 2: each contig one partition counted
    by the index (no counting scan), the chunks straddling contigs; bio2zarr's values."""
    refs = tmp_path / "c.vcz.json"
    with caplog.at_level(logging.INFO, logger="vcfvirtual"):
        vcfvirtual.index(
            three_contigs, refs_path=refs, cache_path=tmp_path / "c.cache", variants_chunk_size=170, workers=2
        )
    assert "counted by their CSI indexes" in caplog.text
    ref = bio2zarr_convert(three_contigs, tmp_path / "ref.vcz", 170)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)


def test_an_index_that_counts_wrong_is_caught_and_the_file_counted(three_contigs, tmp_path, caplog):
    """A CSI index of other records (newer than the BCF, same contigs): the task reading a
    contig finds other counts, and the run counts by scanning; bio2zarr's values."""
    import os
    import shutil

    bcf = shutil.copy(three_contigs, tmp_path / "c.bcf")
    other = bcfdata.write_bcf(
        bcfdata.random_cohort_vcf(900, 30, seed=5, contigs=("chr1", "chr2", "chrX")), tmp_path / "other.bcf"
    )
    shutil.copy(str(other) + ".csi", str(bcf) + ".csi")
    os.utime(str(bcf) + ".csi", (os.path.getmtime(bcf) + 10,) * 2)
    refs = tmp_path / "c.vcz.json"
    with caplog.at_level(logging.WARNING, logger="vcfvirtual"):
        vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "c.cache", variants_chunk_size=170, workers=2)
    assert "counted by scanning them instead" in caplog.text
    ref = bio2zarr_convert(three_contigs, tmp_path / "ref.vcz", 170)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)
