"""``vcfvirtual verify`` in worker processes (``-j``), on a random sample of chunks
(``--sample``), and with FORMAT vectors read from htslib's arrays: the same outcome as
one process reading every chunk, against hand-written VCF text read by htslib."""

from __future__ import annotations

import pysam
import pytest
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.cli import main
from vcfvirtual.errors import VcfVirtualError
from vcfvirtual.verify import verify_store

from ... import bcfdata


def _index(bcf, tmp_path, chunk, name="store"):
    refs = tmp_path / f"{name}.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=tmp_path / f"{name}.cache.bcf", variants_chunk_size=chunk, force=True
    )
    return refs


def _fields(tmp_path, records=None):
    records = bcfdata.FUZZ_RECORDS if records is None else records
    return bcfdata.write_bcf(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER), tmp_path / "f.bcf", index=False)


def _altered(tmp_path):
    """FUZZ_RECORDS with record 3's POS 10 -> 11 and record 0's FORMAT/QS of sample 0
    9.5 -> 9.25 and GT of sample 2 1/1 -> 0/1."""
    records = list(bcfdata.FUZZ_RECORDS)
    records[0] = records[0].replace("0|1:3:9.5:PASS", "0|1:3:9.25:PASS").replace("1/1:7:2:lowq", "0/1:7:2:lowq")
    records[3] = records[3].replace("chr2\t10\t", "chr2\t11\t")
    return bcfdata.write_bcf(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER), tmp_path / "alt.bcf", index=False)


def _describe(report):
    return {d.name: (d.count, d.first_variant, d.first_sample, d.ours, d.expected) for d in report.differences}


def test_workers_find_what_one_process_finds(tmp_path):
    refs = _index(_fields(tmp_path), tmp_path, chunk=1)  # six chunks, so several tasks
    assert verify_store(refs, progress=False, workers=2).ok
    altered = _altered(tmp_path)
    serial = verify_store(refs, source=altered, progress=False)
    parallel = verify_store(refs, source=altered, progress=False, workers=2)
    found = _describe(parallel)
    assert found == _describe(serial)
    assert found["variant_position"] == (1, 3, None, "10", "11")
    assert found["call_QS"] == (1, 0, 0, "9.5", "9.25")
    assert found["call_genotype"] == (1, 0, 2, "1", "0")
    assert parallel.num_records == serial.num_records == 6


def test_workers_read_a_chunk_across_two_files(tmp_path):
    first = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:4]), tmp_path / "a.bcf")
    second = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[4:]), tmp_path / "b.bcf")
    refs = tmp_path / "both.json"
    vcfvirtual.index([first, second], refs_path=refs, variants_chunk_size=3)  # chunk 1: records 3, 4, 5
    report = verify_store(refs, progress=False, workers=2)
    assert report.ok and report.num_records == len(bcfdata.SMALL_RECORDS)
    swapped = verify_store(refs, source=[second, first], progress=False, workers=2)
    assert "variant_position" in {d.name for d in swapped.differences}


def test_a_plain_vcf_source_is_read_in_one_process(tmp_path):
    bcf = _fields(tmp_path)
    refs = _index(bcf, tmp_path, chunk=2)
    vcf = tmp_path / "plain.vcf"
    vcf.write_text(bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=bcfdata.FUZZ_HEADER))
    assert verify_store(refs, source=vcf, progress=False, workers=2).ok
    records = list(bcfdata.FUZZ_RECORDS)
    records[3] = records[3].replace("chr2\t10\t", "chr2\t11\t")
    vcf.write_text(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER))
    report = verify_store(refs, source=vcf, progress=False, workers=2, sample=1, seed=0)
    assert report.num_records == 6


def test_a_sample_compares_only_its_chunks(tmp_path):
    refs = _index(_fields(tmp_path), tmp_path, chunk=1)
    altered = _altered(tmp_path)  # records 0 and 3 differ
    seen = set()
    for seed in range(12):
        report = verify_store(refs, source=altered, progress=False, sample=2, seed=seed, workers=1 + seed % 2)
        assert len(report.sampled) == 2 and report.n_chunks == 6
        assert report.num_records == 6  # the record count is always whole
        names = {d.name for d in report.differences}
        assert ("variant_position" in names) == (3 in report.sampled)
        assert ("call_genotype" in names) == (0 in report.sampled)
        # region_index: only the sampled chunks' rows, so a position change shows
        # there only when its chunk is sampled.
        assert ("region_index" in names) == (3 in report.sampled)
        seen.add(report.sampled)
        again = verify_store(refs, source=altered, progress=False, sample=2, seed=seed)
        assert again.sampled == report.sampled
    assert len(seen) > 1
    assert verify_store(refs, progress=False, sample=100).sampled == tuple(range(6))


def test_a_sample_still_counts_every_record(tmp_path):
    refs = _index(_fields(tmp_path), tmp_path, chunk=1)
    fewer = bcfdata.write_bcf(
        bcfdata.vcf_text(bcfdata.FUZZ_RECORDS[:-1], header=bcfdata.FUZZ_HEADER), tmp_path / "fewer.bcf", index=False
    )
    report = verify_store(refs, source=fewer, progress=False, sample=1, seed=0)
    assert not report.ok and (report.num_records, report.num_variants) == (5, 6)


VECTORS_HEADER = (
    bcfdata.HEADER
    + """##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Phred likelihoods">
##FORMAT=<ID=GL,Number=G,Type=Float,Description="Log likelihoods">
##FORMAT=<ID=AB,Number=A,Type=Float,Description="Allele balance">
##FORMAT=<ID=V,Number=.,Type=Integer,Description="Any number of values">
##FORMAT=<ID=P2,Number=2,Type=Float,Description="Two values">
##FORMAT=<ID=SC,Number=1,Type=Float,Description="A score">
"""
)

# FORMAT vectors of every Number, full, shorter than the record's longest call, wholly
# or partly missing, and absent from a call (FORMAT ends early for it).
VECTOR_RECORDS = [
    "chr1\t100\t.\tA\tT\t.\t.\t.\tGT:AD:PL:GL:AB:V:P2:SC\t0/1:3,4:10,0,20:-1,0,-2:0.5:1,2,3:1.5,2.5:7\t"
    "1/1:.:.:.:.:.:.:.\t./.:5,.:0,1:-0.5:.:9:.,3:.",
    "chr1\t200\t.\tA\tC,G\t.\t.\t.\tGT:AD:PL:GL:AB:V\t0/2:1,2,3:1,2,3,4,5,6:-1,-2,-3,-4,-5,-6:0.1,0.2:4\t"
    "1|2:0,0,0:.:.:.,0.3:.\t0:7\t",
    "chr1\t300\t.\tAT\tA\t.\t.\t.\tGT:V:SC\t0|0:1,2,3,4,5:nan\t0/1:.:-0\t1/1:6:1e-3",
    "chr2\t50\t.\tG\tGA,GAA,GAAA\t.\t.\t.\tGT:AD:AB:P2\t0/3:1,1,1,1:.,.,0.25:1\t2/3:9,8:0.5,0.5,0.5:.\t./.:.:.:.",
]


def test_format_vectors_of_every_number_equal_htslib(tmp_path):
    records = [r.rstrip("\t") for r in VECTOR_RECORDS]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=VECTORS_HEADER), tmp_path / "v.bcf", index=False)
    with pysam.VariantFile(str(bcf)) as vf:
        assert sum(1 for _ in vf) == len(records)
    refs = _index(bcf, tmp_path, chunk=2)
    for workers in (1, 2):
        report = verify_store(refs, progress=False, workers=workers)
        assert report.ok, [d.describe() for d in report.differences]
        assert {"call_AD", "call_PL", "call_GL", "call_AB", "call_V", "call_P2", "call_SC"} <= set(
            report.arrays_compared
        )

    # One changed value in each vector field is found, at its call.
    edits = {
        "call_AD": (0, "0/1:3,4:", "0/1:3,5:", 0),
        "call_PL": (1, ":1,2,3,4,5,6:", ":1,2,3,4,5,7:", 0),
        "call_GL": (0, ":-0.5:", ":-0.25:", 2),
        "call_AB": (3, ":0.5,0.5,0.5:", ":0.5,0.75,0.5:", 1),
        "call_V": (2, "1/1:6:", "1/1:6,6:", 2),
        "call_P2": (0, ":.,3:", ":.,4:", 2),
        "call_SC": (2, "0/1:.:-0", "0/1:.:1", 1),
    }
    for name, (record, old, new, sample) in edits.items():
        changed = list(records)
        assert old in changed[record], name
        changed[record] = changed[record].replace(old, new, 1)
        altered = bcfdata.write_bcf(
            bcfdata.vcf_text(changed, header=VECTORS_HEADER), tmp_path / f"{name}.bcf", index=False
        )
        report = verify_store(refs, source=altered, progress=False, workers=2)
        found = {d.name: d for d in report.differences}
        assert set(found) == {name}, (name, [d.describe() for d in report.differences])
        assert (found[name].first_variant, found[name].first_sample) == (record, sample)


def test_cli_workers_sample_and_seed(tmp_path):
    refs = _index(_fields(tmp_path), tmp_path, chunk=1)
    args = ["verify", "--no-progress", "-j", "2", "--sample", "2", "--seed", "5", str(refs)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "(2 of 6 chunks, chosen at random): all equal" in result.output
    assert CliRunner().invoke(main, args).output == result.output
    bad = CliRunner().invoke(main, ["verify", "--sample", "0", str(refs)])
    assert bad.exit_code == 2


def test_a_damaged_cache_read_by_a_worker_is_the_typed_error_naming_it(cohort_bcf, tmp_path):
    refs = tmp_path / "c.json"
    cache = tmp_path / "c.cache.bcf"
    vcfvirtual.index(cohort_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=64, cache_layout="bgzf")
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a block: its CRC32 no longer matches
    cache.write_bytes(bytes(data))
    with pytest.raises(VcfVirtualError) as caught:
        verify_store(refs, check=False, progress=False, workers=2)
    assert caught.value.path == str(cache)


def test_workers_seek_into_the_middle_of_bgzf_blocks(cohort_bcf, tmp_path):
    """1,500 records, many straddling BGZF blocks: tasks start at records inside blocks."""
    refs = _index(cohort_bcf, tmp_path, chunk=64)
    report = verify_store(refs, progress=False, workers=2)
    assert report.ok and report.num_records == 1500, [d.describe() for d in report.differences]
    sampled = verify_store(refs, progress=False, workers=2, sample=5, seed=3)
    assert sampled.ok and len(sampled.sampled) == 5 and sampled.n_chunks == 24


STRINGS_HEADER = (
    bcfdata.HEADER
    + """##FORMAT=<ID=FT,Number=1,Type=String,Description="Sample filter">
##FORMAT=<ID=XS,Number=2,Type=String,Description="Two strings">
##FORMAT=<ID=C,Number=1,Type=Character,Description="One character">
"""
)

# FORMAT strings plain (read from htslib's bytes) and not (commas, missing, empty: pysam).
STRING_RECORDS = [
    "chr1\t100\t.\tA\tT\t.\t.\t.\tGT:FT:XS:C\t0/1:PASS:ab,c:x\t1/1:lowq:d:yz\t./.:.:.:.",
    "chr1\t200\t.\tA\tC\t.\t.\t.\tGT:FT:XS:C\t0/1:PASS:ab:x\t1/1:lowq:cd:y\t0/0:q:e:z",
    "chr1\t300\t.\tA\tG\t.\t.\t.\tGT:FT:C\t0/1:a,b:x\t1/1\t0/0:PASS:w",
]


def test_format_strings_equal_htslib(tmp_path):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(STRING_RECORDS, header=STRINGS_HEADER), tmp_path / "s.bcf", index=False)
    refs = _index(bcf, tmp_path, chunk=2)
    report = verify_store(refs, progress=False, workers=2)
    assert report.ok, [d.describe() for d in report.differences]
    assert {"call_FT", "call_XS", "call_C"} <= set(report.arrays_compared)
    changed = list(STRING_RECORDS)
    changed[1] = changed[1].replace("1/1:lowq:cd:y", "1/1:lowr:cd:y")
    altered = bcfdata.write_bcf(bcfdata.vcf_text(changed, header=STRINGS_HEADER), tmp_path / "a.bcf", index=False)
    found = {d.name: d for d in verify_store(refs, source=altered, progress=False).differences}
    assert set(found) == {"call_FT"}
    assert (found["call_FT"].first_variant, found["call_FT"].first_sample) == (1, 1)
    assert (found["call_FT"].ours, found["call_FT"].expected) == ("'lowq'", "'lowr'")
