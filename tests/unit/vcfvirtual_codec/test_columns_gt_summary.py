"""call_genotype_mask and call_genotype_phased from a GT block's preamble alone.

The index records, per GT samples block, whether every call holds the array's ploidy of
alleles with none missing, and whether every call is phased or none is; a block that says
so is read without decompressing it. The BCF is written by htslib from VCF text with blocks
of each kind (complete and unphased, complete and phased, with a missing call, mixed
phasing, a haploid call); the oracle is pysam's reading of it, as VCF Zarr encodes the mask
(an allele missing or past the call's ploidy) and the phasing.
"""

from __future__ import annotations

import json

import numpy as np
import pysam
import pytest
import zarr
from vcfvirtual_codec import columns as codec_columns
from vcfvirtual_codec.codec import BCFRecordsCodec
from vcfvirtual_codec.errors import ChunkDecodeError

import vcfvirtual

from ... import bcfdata

# Samples chunks of 2: block 0 is S1 and S2, block 1 is S3. Variants chunks of 2.
RECORDS = [
    # chunk 0: block 0 complete, unphased; block 1 complete, unphased
    "chr1\t100\t.\tA\tT\t.\t.\t.\tGT\t0/1\t1/1\t0/0",
    "chr1\t200\t.\tA\tC\t.\t.\t.\tGT\t0/0\t0/1\t1/1",
    # chunk 1: block 0 complete, phased; block 1 has a missing allele, mixed phasing
    "chr1\t300\t.\tG\tT\t.\t.\t.\tGT\t0|1\t1|0\t./1",
    "chr1\t400\t.\tG\tC\t.\t.\t.\tGT\t1|1\t0|0\t0|1",
    # chunk 2 (one record, one padded row): block 0 has a haploid call; block 1 complete, phased
    "chr1\t500\t.\tC\tA\t.\t.\t.\tGT\t0\t1|0\t1|1",
]
SAMPLES_CHUNK, VARIANTS_CHUNK = 2, 2


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("gt-summary")
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS), d / "gt.bcf")
    refs = d / "gt.vcz.json"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_layout="columns",
        samples_chunk_size=SAMPLES_CHUNK,
        variants_chunk_size=VARIANTS_CHUNK,
        progress=False,
    )
    return bcf, refs


def pysam_calls(bcf):
    """(mask, phased) per variant and sample, and each call's alleles, as pysam reads them."""
    mask: list = []
    phased: list = []
    alleles: list = []
    with pysam.VariantFile(str(bcf)) as f:
        for rec in f:
            calls = [s["GT"] for s in rec.samples.values()]
            # Ploidy 2 (the file's largest): a haploid call's second allele is fill.
            mask.append([[a is None for a in call] + [True] * (2 - len(call)) for call in calls])
            phased.append([s.phased for s in rec.samples.values()])
            alleles.append(calls)
    return np.array(mask), np.array(phased), alleles


def blocks_needing_their_bytes(values: np.ndarray, kind: str) -> int:
    """How many (variants chunk, samples block) the preamble cannot answer, from htslib's
    values: a mask block with a True (a missing or short call), a phased block with both."""
    count = 0
    for v0 in range(0, values.shape[0], VARIANTS_CHUNK):
        for s0 in range(0, values.shape[1], SAMPLES_CHUNK):
            block = values[v0 : v0 + VARIANTS_CHUNK, s0 : s0 + SAMPLES_CHUNK]
            count += bool(block.any()) if kind == "mask" else bool(block.any() and not block.all())
    return count


def test_mask_and_phased_equal_htslib(store):
    bcf, refs = store
    group = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)
    mask, phased, _ = pysam_calls(bcf)
    np.testing.assert_array_equal(group["call_genotype_mask"][:], mask)
    np.testing.assert_array_equal(group["call_genotype_phased"][:], phased)


def test_blocks_the_preamble_describes_are_not_decompressed(store, monkeypatch):
    """The mask of a block whose calls are all complete, and the phasing of a block whose
    calls are all phased or all unphased, come without decompressing it: the other
    blocks are decompressed, and every value still equals htslib's."""
    bcf, refs = store
    mask, phased, _ = pysam_calls(bcf)
    decompressed: list[str] = []
    real = codec_columns._decompress

    def counting(body, seg, spec, out):
        decompressed.append(spec.kind)
        return real(body, seg, spec, out)

    monkeypatch.setattr(codec_columns, "_decompress", counting)
    group = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)
    np.testing.assert_array_equal(group["call_genotype_mask"][:], mask)
    # Incomplete blocks: chunk 1 block 1 (a missing allele), chunk 2 block 0 (a haploid call).
    assert decompressed.count("genotype_mask") == blocks_needing_their_bytes(mask, "mask") == 2
    # The complete blocks' mask chunks are not even referenced: zarr fills them (False).
    mask_keys = {k for k in json.loads(refs.read_text())["refs"] if k.startswith("call_genotype_mask/")}
    assert mask_keys - {"call_genotype_mask/.zarray", "call_genotype_mask/.zattrs"} == {
        "call_genotype_mask/1.1.0",
        "call_genotype_mask/2.0.0",
    }
    np.testing.assert_array_equal(group["call_genotype_phased"][:], phased)
    # Mixed phasing: chunk 1 block 1 (./1 then 0|1). htslib reads the haploid call of chunk 2
    # block 0 as phased (its end-of-vector byte has the phase bit), so that block is all phased.
    assert decompressed.count("genotype_phased") == blocks_needing_their_bytes(phased, "phased") == 1


def chunk_of(refs, key: str) -> tuple[bytes, dict]:
    """A chunk's stored bytes and its array's codec config, as the references name them
    (a call_genotype_mask chunk of a complete block is left out of them: its GT block's,
    call_genotype's chunk, which the mask reads where it is not)."""
    references = json.loads(refs.read_text())["refs"]
    config = dict(json.loads(references[key.rsplit("/", 1)[0] + "/.zarray"])["filters"][-1])
    config.pop("id")
    url, offset, length = references.get(key) or references[key.replace("call_genotype_mask/", "call_genotype/")]
    assert url == "{{cache}}/part-000000"  # the one part of a serial run
    cache = json.loads(refs.read_text())["templates"]["cache"].removeprefix("file://")
    with open(f"{cache}/part-000000", "rb") as f:
        f.seek(offset)
        return f.read(length), config


def resealed(chunk: bytes, **change) -> bytes:
    """The chunk with preamble fields changed and its CRC32 made right again."""
    names = ("magic", "kind", "flags", "pad", "key", "records", "block", "width", "length", "crc")
    fields = dict(zip(names, codec_columns.PREAMBLE.unpack_from(chunk)))
    fields.update(change)
    frame = chunk[codec_columns.PREAMBLE.size :]
    return codec_columns.seal_segment(
        fields["kind"], fields["flags"], fields["key"], fields["records"], fields["block"], fields["width"],
        fields["length"], frame, complete_count=fields["pad"],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("array", "change"),
    [
        ("call_genotype_phased", {"flags": 1 | 2 | 4}),  # all phased and none phased at once
        ("call_genotype_mask", {"pad": 3}),  # a complete count above the ploidy (2)
        ("call_genotype_mask", {"flags": 1 | 8}),  # a flag the index never writes
    ],
    ids=["both-phasings", "count-above-ploidy", "unknown-flag"],
)
def test_claims_the_index_never_writes_are_refused(store, array, change):
    _, refs = store
    chunk, config = chunk_of(refs, f"{array}/" + ("0.0" if array == "call_genotype_phased" else "0.0.0"))
    with pytest.raises(ChunkDecodeError, match="preamble flags .* are not what the index writes"):
        BCFRecordsCodec(**config).decode(resealed(chunk, **change))


def test_a_claim_on_another_array_is_refused(store):
    _, refs = store
    chunk, config = chunk_of(refs, "variant_position/0")
    with pytest.raises(ChunkDecodeError, match="preamble flags .* are not what the index writes"):
        BCFRecordsCodec(**config).decode(resealed(chunk, flags=2))


def test_a_changed_claim_fails_the_crc(store):
    """Flipping the phasing a block claims, without resealing, is stored damage."""
    _, refs = store
    chunk, config = chunk_of(refs, "call_genotype_phased/0.0")
    flags = chunk[5]
    assert flags & codec_columns.FLAG_GT_NONE_PHASED  # chunk 0, block 0: all unphased
    damaged = chunk[:5] + bytes([flags ^ (codec_columns.FLAG_GT_NONE_PHASED | codec_columns.FLAG_GT_ALL_PHASED)])
    with pytest.raises(ChunkDecodeError, match="CRC32"):
        BCFRecordsCodec(**config).decode(damaged + chunk[6:])
