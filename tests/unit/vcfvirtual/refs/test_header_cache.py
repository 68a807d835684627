"""refs/header_cache: a store's header as htslib parsed it, kept on disk by digest so a
fresh process's open needs no pysam; an entry is used only for the text (and parser) it
was made from, and the checks refuse what they refused without it.

The oracle for every value is htslib's own reading of the header, through pysam."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pysam
import pytest

import vcfvirtual
from vcfvirtual.errors import UntrustedReferenceError
from vcfvirtual.refs import checks, header_cache
from vcfvirtual.refs.kerchunk import load_references

from .... import bcfdata

OTHER_HEADER = bcfdata.HEADER.replace('##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">\n', "").replace(
    "##FORMAT=<ID=GT", '##INFO=<ID=AF,Number=A,Type=Float,Description="Frequency">\n##FORMAT=<ID=GT'
)


@pytest.fixture(autouse=True)
def cache_dir(user_cache_root):
    """Each test its own folder (conftest.py), whose ``headers/`` this is."""
    return user_cache_root / "headers"


def _text(header: str, samples=("S1", "S2")) -> str:
    return header + "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t" + "\t".join(samples) + "\n"


def _entry(cache_dir, text: str):
    """The entry of a store's header: kept for its text without the samples past the
    first (checks._split_samples: htslib's dictionary of sample names is not needed)."""
    return cache_dir / f"{header_cache.key_of(checks._split_samples(text)[0])}.json"


def _verdict(cache_dir, text: str):
    """The entry saying that ``text`` names each sample once."""
    return cache_dir / f"samples-{header_cache._samples_key(text)}.json"


def _htslib_keys(text: str, tmp_path) -> dict[str, int]:
    """Each INFO/FORMAT field's dictionary key as htslib assigns it (the oracle)."""
    path = tmp_path / "oracle.vcf"
    path.write_text(text)
    with pysam.VariantFile(str(path)) as f:
        keys = {f"INFO/{k}": v.id for k, v in f.header.info.items()}
        keys |= {f"FORMAT/{k}": v.id for k, v in f.header.formats.items()}
        return keys


def _keys(header) -> dict[str, int]:
    return {f"{d.category}/{d.name}": d.key for d in (*header.info, *header.formats)}


def test_a_parsed_header_is_kept_and_read_back_as_htslib_gave_it(cache_dir, tmp_path):
    text = _text(bcfdata.HEADER)
    first = checks._parsed_header(text)
    assert sorted(cache_dir.iterdir()) == sorted([_entry(cache_dir, text), _verdict(cache_dir, text)])
    checks._parsed_header.cache_clear()  # as a fresh process: only the disk entry is left
    assert header_cache.load(checks._split_samples(text)[0]) is not None
    again = checks._parsed_header(text)
    assert again == first
    assert _keys(again) == _htslib_keys(text, tmp_path)
    assert again.samples == ("S1", "S2") and again.contigs == ("chr1", "chr2", "chrX")


def test_an_entry_under_another_texts_name_is_not_used(cache_dir, tmp_path):
    """A file copied (or renamed) over another header's entry records the other key: the
    header is parsed again, and the checks see the text's own keys."""
    text, other = _text(bcfdata.HEADER), _text(OTHER_HEADER)
    checks._parsed_header(other)
    _entry(cache_dir, other).rename(_entry(cache_dir, text))
    assert header_cache.load(checks._split_samples(text)[0]) is None
    checks._parsed_header.cache_clear()
    parsed = checks._parsed_header(text)
    assert _keys(parsed) == _htslib_keys(text, tmp_path) != _htslib_keys(other, tmp_path)
    assert json.loads(_entry(cache_dir, text).read_text())["key"] == _entry(cache_dir, text).stem  # kept again


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: "{not json",
        lambda e: json.dumps({**e, "format": 0}),
        lambda e: json.dumps({**e, "header": {k: v for k, v in e["header"].items() if k != "info"}}),
        lambda e: json.dumps({**e, "header": {**e["header"], "info": [{"name": "DP"}]}}),
    ],
)
def test_a_damaged_entry_is_parsed_again(cache_dir, damage):
    text = _text(bcfdata.HEADER)
    parsed = checks._parsed_header(text)
    entry = _entry(cache_dir, text)
    entry.write_text(damage(json.loads(entry.read_text())))
    assert header_cache.load(checks._split_samples(text)[0]) is None
    checks._parsed_header.cache_clear()
    assert checks._parsed_header(text) == parsed


def test_another_parser_or_htslib_keys_other_entries(cache_dir, monkeypatch):
    text = _text(bcfdata.HEADER)
    checks._parsed_header(text)
    assert header_cache.load(checks._split_samples(text)[0]) is not None
    monkeypatch.setattr(header_cache, "_parser_digest", lambda: b"another pysam version.py")
    assert header_cache.load(checks._split_samples(text)[0]) is None


def test_a_header_htslib_refuses_is_never_kept(cache_dir):
    with pytest.raises(vcfvirtual.VcfVirtualError):
        checks._parsed_header("##fileformat=VCFv4.3\n##INFO=<ID=DP,Number=1,Type=Nonsense>\n#CHROM\tPOS\n")
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_an_unwritable_folder_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(header_cache.ENV, str(blocker))  # headers/ cannot be made below a file
    text = _text(bcfdata.HEADER)
    assert checks._parsed_header(text).samples == ("S1", "S2")
    assert header_cache.load(text) is None


@pytest.fixture
def store(tmp_path):
    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    refs_path = tmp_path / "small.json"
    vcfvirtual.index(bcf, refs_path=refs_path, cache_path=tmp_path / "small.cache", variants_chunk_size=4, force=True)
    return refs_path


def test_with_the_header_kept_a_crafted_config_is_still_refused(store):
    refs = load_references(store)
    cache = checks.declared_cache(refs, store)
    checks.check_references(refs, store, cache)  # parses and keeps the header
    checks._parsed_header.cache_clear()
    meta = json.loads(refs["refs"]["call_genotype/.zarray"])
    meta["filters"][-1]["key"] += 1
    refs["refs"]["call_genotype/.zarray"] = json.dumps(meta)
    with pytest.raises(UntrustedReferenceError, match="GT key"):
        checks.check_references(refs, store, cache)


def test_a_fresh_open_of_a_store_opened_before_imports_no_pysam(store, cache_dir, tmp_path):
    """The first open parses (pysam) and keeps the header; the next process reads it back."""
    # As a collaborator receives the store: without the verdict and header its index kept
    # (it runs open_store's checks), which would spare the first open the parse.
    for kind in ("verdicts", "headers"):
        shutil.rmtree(cache_dir.parent / kind)
    script = (
        "import sys, vcfvirtual, zarr\n"
        f"store = vcfvirtual.open_store({str(store)!r})\n"
        "print(int(zarr.open_group(store, mode='r', zarr_format=2)['variant_position'][:].sum()))\n"
        "print('pysam' in sys.modules)\n"
        # Nor the writers: the checks read two facts of each layout without them.
        "print([m for m in sys.modules if m.startswith(('vcfvirtual.scan', 'vcfvirtual.cache.layouts'))])\n"
    )
    env_dir = str(cache_dir.parent)
    runs = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, header_cache.ENV: env_dir},
        ).stdout.splitlines()
        for _ in range(2)
    ]
    positions = sum(int(line.split("\t")[1]) for line in bcfdata.SMALL_RECORDS)
    assert runs == [[str(positions), "True", "[]"], [str(positions), "False", "[]"]]


def test_distinct_samples_are_kept_per_text_and_duplicates_never(cache_dir, tmp_path):
    """The verdict that a header names each sample once is kept under its own text's
    digest: moved onto a text naming a sample twice, it is not used, and that text is
    refused as htslib refuses it ("Duplicated sample name")."""
    good, twice = _text(bcfdata.HEADER, ("S1", "S2", "S3")), _text(bcfdata.HEADER, ("S1", "S2", "S1"))
    with pytest.raises(vcfvirtual.VcfVirtualError, match="names a sample twice"):
        checks._parsed_header(twice)
    assert not header_cache.samples_distinct(twice)
    assert checks._parsed_header(good).samples == ("S1", "S2", "S3")
    assert header_cache.samples_distinct(good)
    verdicts = [p for p in cache_dir.iterdir() if p.name.startswith("samples-")]
    assert len(verdicts) == 1
    verdicts[0].rename(cache_dir / f"samples-{header_cache._samples_key(twice)}.json")
    assert not header_cache.samples_distinct(twice)
    checks._parsed_header.cache_clear()
    with pytest.raises(vcfvirtual.VcfVirtualError, match="names a sample twice"):
        checks._parsed_header(twice)
    oracle = tmp_path / "twice.vcf"
    oracle.write_text(twice)
    with pytest.raises((ValueError, OSError)):
        pysam.VariantFile(str(oracle))  # htslib refuses it too
