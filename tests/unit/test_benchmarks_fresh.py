"""The fresh-process benchmark harness (benchmarks/fresh.py, wide_info.py) reads what the
oracles read: its loopback server answers byte ranges as the file's own bytes, its region
read selects the records pysam finds overlapping and the genotypes bio2zarr's store holds,
and the wide-INFO cohort is what htslib reads back. No timings are asserted."""

from __future__ import annotations

import email.utils
import http.server
import os
import sys
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pysam
import pytest
import zarr

import vcfvirtual

from ..conftest import bio2zarr_convert, serve_in_thread

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def fresh():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import fresh

        yield fresh
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture
def server(fresh, tmp_path):
    data = bytes(range(256)) * 40  # 10,240 bytes, every offset distinguishable
    (tmp_path / "blob").write_bytes(data)
    handler = lambda *a: fresh.RangeHandler(*a, directory=str(tmp_path))  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(httpd)
    yield f"http://127.0.0.1:{httpd.server_address[1]}", data
    httpd.shutdown()
    httpd.server_close()


def _get(url: str, range_: str | None = None, method: str = "GET"):
    req = urllib.request.Request(url, method=method, headers={"Range": range_} if range_ else {})
    with urllib.request.urlopen(req) as resp:
        return resp.status, resp.headers, resp.read()


@pytest.mark.parametrize(
    ("range_", "expected"),
    [("bytes=0-99", slice(0, 100)), ("bytes=10000-", slice(10000, None)), ("bytes=-7", slice(-7, None))],
)
def test_range_server_answers_the_files_bytes(server, range_, expected):
    url, data = server
    status, headers, body = _get(url + "/blob", range_)
    assert status == 206
    assert body == data[expected]
    assert headers["Content-Range"].endswith(f"/{len(data)}")


def test_range_server_names_each_files_version(server, tmp_path):
    """Last-Modified is the file's mtime (to the second, as HTTP dates are) and the ETag
    changes when the file is rewritten at the same size, as nginx's and S3's do."""
    url, data = server
    blob = tmp_path / "blob"
    _, headers, _ = _get(url + "/blob", method="HEAD")
    assert email.utils.parsedate_to_datetime(headers["Last-Modified"]).timestamp() == int(blob.stat().st_mtime)
    _, ranged, _ = _get(url + "/blob", "bytes=0-9")
    assert ranged["ETag"] == headers["ETag"]
    blob.write_bytes(data[::-1])
    os.utime(blob, (blob.stat().st_atime, blob.stat().st_mtime + 5))
    assert _get(url + "/blob", method="HEAD")[1]["ETag"] != headers["ETag"]


def test_range_server_whole_file_head_and_errors(server):
    url, data = server
    assert _get(url + "/blob")[2] == data
    status, headers, body = _get(url + "/blob", method="HEAD")
    assert (status, int(headers["Content-Length"]), body) == (200, len(data), b"")
    for path, range_, code in (("/missing", None, 404), ("/blob", "bytes=20000-", 416)):
        with pytest.raises(urllib.error.HTTPError) as e:
            _get(url + path, range_)
        assert e.value.code == code


def test_region_read_selects_pysams_records_and_bio2zarrs_genotypes(fresh, cohort_bcf, tmp_path):
    refs = tmp_path / "c.vcz.json"
    vcfvirtual.index(cohort_bcf, refs_path=refs, cache_path=tmp_path / "c.cache", variants_chunk_size=100)
    theirs = tmp_path / "c.bio2zarr.vcz"
    bio2zarr_convert(cohort_bcf, theirs, chunk_length=100)
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        positions = [r.pos for r in vf if r.chrom == "chr1"]
    lo, hi = positions[150], positions[420]  # across chunks, neither end on a chunk edge
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        expected = sum(1 for r in vf if r.chrom == "chr1" and r.start < hi and r.stop >= lo)
    extra = {"region": f"chr1:{lo}-{hi}", "warm": False}
    ours = fresh.run_read("region", "open_store", str(refs), extra)
    bio = fresh.run_read("region", "dir", str(theirs), extra)
    assert ours.rows == bio.rows == expected
    assert ours.checksum == bio.checksum
    assert ours.warm_wall is None


def test_first_chunk_through_reference_equals_bio2zarr(fresh, cohort_bcf, tmp_path):
    refs = tmp_path / "c.vcz.json"
    vcfvirtual.index(cohort_bcf, refs_path=refs, cache_path=tmp_path / "c.cache", variants_chunk_size=100)
    theirs = tmp_path / "c.bio2zarr.vcz"
    group = bio2zarr_convert(cohort_bcf, theirs, chunk_length=100)
    extra = {"warm": True}
    plain = fresh.run_read("first_chunk", "reference", str(refs), extra)
    bio = fresh.run_read("first_chunk", "dir", str(theirs), extra)
    gt = np.ascontiguousarray(group["call_genotype"][:1000])
    assert plain.checksum == bio.checksum
    assert plain.checksum.startswith(f"int8{list(gt.shape)}:")
    assert plain.warm_wall is not None and plain.warm_wall >= 0


def test_wide_info_cohort_as_htslib_reads_it(tmp_path):
    pytest.importorskip("msprime")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import wide_info
    finally:
        sys.path.remove(str(BENCHMARKS))
    bcf = wide_info.make_wide_cohort(tmp_path, 2e5)
    declared = wide_info.field_names()
    with pysam.VariantFile(str(bcf)) as vf:
        assert len(declared) == 41
        assert {name: (vf.header.info[name].number, vf.header.info[name].type) for name, _, _ in declared} == {
            name: (int(number) if number.isdigit() else number, kind) for name, number, kind in declared
        }
        records = list(vf)
    assert len(records) > 50
    af = np.array([r.info["AF"][0] for r in records], np.float32).reshape(-1, 1)
    # bcftools query's text of AF, parsed as the benchmark parses it, checksums as the
    # float32 values htslib holds (AF has 4 decimals at most, so its text is exact).
    text = pysam.bcftools.query("-f", "%AF\n", str(bcf))
    expected = f"float32[{len(records)}, 1]:{zlib.crc32(af.tobytes()):08x}"
    assert wide_info.query_checksum(text) == (expected, len(records))
    assert all(len(r.info) > 20 for r in records)  # most fields set, some left out
    assert any(len(r.info) < 41 for r in records)


def test_index_profile_probes_every_stage_and_changes_nothing(cohort_bcf, tmp_path):
    # A probe whose function moved would leave its stage empty: the code and the probes
    # must move together. The wrapped run must still write the store pysam agrees with.
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import index_profile
    finally:
        sys.path.remove(str(BENCHMARKS))
    got = index_profile.index_run(cohort_bcf, tmp_path, index_profile.PROBES, [])
    assert got["missing"] == []
    assert set(got["stages"]) == set(index_profile.STAGES)
    refs = tmp_path / (cohort_bcf.name + ".profile.vcz.json")
    group = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        assert group["variant_position"][:].tolist() == [r.pos for r in vf]


def test_ratio_interval_of_pairs_in_a_fixed_ratio_is_that_ratio(fresh):
    """Every pair 2:1, whatever the load each ran under: every resample's medians are 2:1."""
    pairs = [(2.0 * t, t) for t in (0.4, 0.5, 0.9, 0.45, 0.41)]
    assert fresh.ratio_interval(pairs) == (2.0, 2.0)


def test_ratio_interval_holds_the_runs_ratio_and_repeats(fresh):
    """Medians 0.50 / 0.48 (hand-computed): the interval holds that ratio, is wider than
    one point when the pairs disagree, and the same pairs give the same interval."""
    pairs = [(0.50, 0.48), (0.47, 0.52), (0.61, 0.45), (0.49, 0.49), (0.55, 0.47)]
    lo, hi = fresh.ratio_interval(pairs)
    assert lo < 0.50 / 0.48 < hi
    assert fresh.ratio_interval(pairs) == (lo, hi)


def test_ours_faster_counts_the_pairs_ours_won(fresh):
    row = fresh.Row("r", lambda: None, lambda: None)
    row.runs = [(fresh.Run(w, 0.0, "", 0), fresh.Run(t, 0.0, "", 0)) for w, t in ((1, 2), (3, 2), (1, 1), (0.5, 0.6))]
    assert row.ours_faster() == 2
