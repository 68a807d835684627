"""refs/checks: each refusal of references, caches and sources as its typed error.

The references are those ``vcfvirtual index`` wrote for a BCF htslib wrote, each test
changing one thing; what the checks must do with them is the contract (refuse, with the
error type and the thing named), not a value vcfvirtual computes."""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil

import pysam
import pytest
from numcodecs import Zstd

import vcfvirtual
from vcfvirtual.errors import StaleCacheError, UntrustedReferenceError
from vcfvirtual.io.fingerprint import Fingerprint
from vcfvirtual.refs import checks
from vcfvirtual.refs.kerchunk import load_references

from .... import bcfdata


@pytest.fixture
def store(tmp_path):
    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    refs_path, cache = tmp_path / "small.json", tmp_path / "small.cache"
    vcfvirtual.index(bcf, refs_path=refs_path, cache_path=cache, variants_chunk_size=4, force=True)
    refs = load_references(refs_path)
    return refs, refs_path, checks.declared_cache(refs, refs_path), bcf, cache


def _with_attrs(refs, change):
    out = copy.deepcopy(refs)
    attrs = json.loads(out["refs"][".zattrs"])
    change(attrs)
    out["refs"][".zattrs"] = json.dumps(attrs)
    return out


def test_unchanged_references_pass(store):
    refs, path, cache, _, _ = store
    checks.check_cache(refs, path)
    checks.check_references(refs, path, cache)
    folder = cache["url"][7:]
    assert cache["url"].startswith("file://") and cache["size"] == os.path.getsize(bcfdata.cache_file(folder))
    assert [p["name"] for p in cache["parts"]] == os.listdir(folder) == ["part-000000"]


@pytest.mark.parametrize("zattrs", [None, "[1, 2]", "{not json"])
def test_group_attributes_must_be_a_json_object(store, zattrs):
    refs, path, _, _, _ = store
    refs = copy.deepcopy(refs)
    if zattrs is None:
        del refs["refs"][".zattrs"]
    else:
        refs["refs"][".zattrs"] = zattrs
    with pytest.raises(UntrustedReferenceError) as e:
        checks.group_attributes(refs, path)
    assert e.value.path == str(path)


def test_declared_cache_is_none_without_a_vcfvirtual_attribute(store):
    refs, path, _, _, _ = store
    assert checks.declared_cache(_with_attrs(refs, lambda a: a.pop("vcfvirtual")), path) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.pop("url"),
        lambda c: c.update(url=5),
        lambda c: c.update(size=-1),
        lambda c: c.update(size=True),
        lambda c: c.update(size="611"),
    ],
)
def test_declared_cache_needs_a_url_and_a_byte_count(store, change):
    refs, path, _, _, _ = store
    with pytest.raises(UntrustedReferenceError, match="cache"):
        checks.declared_cache(_with_attrs(refs, lambda a: change(a["vcfvirtual"]["cache"])), path)


def test_missing_cache_is_stale(store):
    refs, path, _, _, cache = store
    shutil.rmtree(cache)
    with pytest.raises(StaleCacheError, match="missing"):
        checks.check_cache(refs, path)


def test_missing_or_truncated_part_is_stale_and_named(store):
    refs, path, _, _, cache = store
    part = bcfdata.cache_file(cache)
    data = part.read_bytes()
    part.write_bytes(data[:-1])
    with pytest.raises(
        StaleCacheError, match=f"part {part} does not match the references: it is {len(data) - 1} bytes"
    ):
        checks.check_cache(refs, path)
    part.unlink()
    with pytest.raises(StaleCacheError, match=f"part {part} is missing"):
        checks.check_cache(refs, path)


def test_same_size_rewritten_cache_is_stale(store):
    refs, path, _, _, store_cache = store
    cache = bcfdata.cache_file(store_cache)
    data = bytearray(cache.read_bytes())
    data[-30] ^= 0xFF
    stat = cache.stat()
    cache.write_bytes(bytes(data))
    os.utime(cache, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime put back: only the hash tells
    with pytest.raises(StaleCacheError, match=f"part {cache} does not match"):
        checks.check_cache(refs, path)


def test_cache_url_of_another_scheme_is_untrusted(store):
    refs, path, _, _, _ = store
    changed = _with_attrs(refs, lambda a: a["vcfvirtual"]["cache"].update(url="ftp-ish:/x"))
    with pytest.raises(UntrustedReferenceError, match="neither a file:// nor a remote URL"):
        checks.check_cache(changed, path)


def test_changed_reachable_source_is_stale_and_an_absent_one_is_not_checked(store):
    refs, path, _, bcf, _ = store
    with open(bcf, "ab") as f:
        f.write(b"\0")
    with pytest.raises(StaleCacheError, match="source BCF"):
        checks.check_cache(refs, path)
    bcf.unlink()
    checks.check_cache(refs, path)


def _refuses(refs, path, cache, match):
    with pytest.raises(UntrustedReferenceError, match=match) as e:
        checks.check_references(refs, path, cache)
    assert e.value.path == str(path)
    return e.value


def test_generated_references_are_refused(store):
    refs, path, cache, _, _ = store
    _refuses({**refs, "gen": []}, path, cache, "vcfvirtual never writes")


def test_template_naming_another_url_is_refused(store):
    refs, path, cache, _, _ = store
    _refuses({**refs, "templates": {"cache": "file:///etc/passwd"}}, path, cache, "cache template names")
    _refuses({**refs, "templates": ["x"]}, path, cache, "templates are not a map")


def _chunk_key(refs):
    return next(k for k, v in refs["refs"].items() if isinstance(v, list))


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (lambda v, size: ["file:///etc/passwd", *v[1:]], "points at"),
        # Names that fsspec would resolve outside the folder, or to a part not listed.
        (lambda v, size: ["{{cache}}/../x", *v[1:]], "points at"),
        (lambda v, size: ["{{cache}}/part-000000/..", *v[1:]], "points at"),
        (lambda v, size: ["{{cache}}/part-000001", *v[1:]], "points at"),
        (lambda v, size: ["{{cache}}", *v[1:]], "points at"),
        (lambda v, size: ["{{cache}}/./part-000000", *v[1:]], "points at"),
        (lambda v, size: [v[0][len("{{cache}}") :], *v[1:]], "points at"),
        (lambda v, size: [v[0], 0, size + 1], "past the cache"),
        (lambda v, size: [v[0], -1, 2], "not a byte count"),
        (lambda v, size: [v[0], 0, True], "not a byte count"),
        (lambda v, size: [v[0], 0], "not \\[url, offset, length\\]"),
    ],
)
def test_chunk_reference_outside_the_cache_is_refused(store, value, match):
    refs, path, cache, _, _ = store
    refs = copy.deepcopy(refs)
    key = _chunk_key(refs)
    assert refs["refs"][key][0] == "{{cache}}/part-000000"
    refs["refs"][key] = value(refs["refs"][key], cache["size"])
    error = _refuses(refs, path, cache, match)
    assert key in error.problem and error.hint == checks.UNTRUSTED_HINT


def _with_zarray(refs, name, change):
    out = copy.deepcopy(refs)
    meta = json.loads(out["refs"][f"{name}/.zarray"])
    change(meta)
    out["refs"][f"{name}/.zarray"] = json.dumps(meta)
    return out


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda m: m.update(compressor={"id": "zlib"}), "compressor"),
        (lambda m: m.update(chunks=[99, 3, 2]), "chunks"),
        (lambda m: m.update(shape=[7, 4, 2]), "shape"),
        (lambda m: m.update(dtype="<i8"), "dtype"),
        (lambda m: m["filters"].append({"id": "zlib"}), "not the one, last filter"),
        (lambda m: m["filters"][-1].update(key=99), "GT key 99"),
        (lambda m: m["filters"][-1].update(layout="raw"), "'raw'"),
        (lambda m: m["filters"][-1].update(ploidy="two"), "call_genotype"),
    ],
)
def test_genotype_metadata_disagreeing_with_its_codec_or_header_is_refused(store, change, match):
    refs, path, cache, _, _ = store
    error = _refuses(_with_zarray(refs, "call_genotype", change), path, cache, match)
    assert "call_genotype" in error.problem


def test_fixed_array_of_another_kind_is_refused(store):
    refs, path, cache, _, _ = store
    changed = _with_zarray(refs, "variant_position", lambda m: m["filters"][-1].update(kind="length"))
    _refuses(changed, path, cache, "kind 'length', expected 'position'")


def test_field_array_naming_an_undeclared_field_is_refused(store):
    refs, path, cache, _, _ = store
    changed = copy.deepcopy(refs)
    meta = json.loads(changed["refs"]["variant_DP/.zarray"])
    meta["filters"][-1]["array"] = "variant_XX"
    changed["refs"]["variant_XX/.zarray"] = json.dumps(meta)
    _refuses(changed, path, cache, "are not arrays vcfvirtual index writes")
    changed = _with_zarray(refs, "variant_DP", lambda m: m["filters"][-1].update(key=99))
    _refuses(changed, path, cache, "the header's INFO/DP has")


def test_references_without_a_header_to_check_against_are_refused(store):
    refs, path, cache, _, _ = store
    _refuses(_with_attrs(refs, lambda a: a.pop("vcf_header")), path, cache, "no vcf_header")
    _refuses(_with_attrs(refs, lambda a: a.update(vcf_header="not a header")), path, cache, "not a header htslib")


def test_parquet_metadata_is_checked_without_chunk_references(store):
    refs, path, cache, _, _ = store
    metadata_only = {k: v for k, v in refs["refs"].items() if not isinstance(v, list)}
    changed = _with_zarray({"refs": metadata_only, "parquet": True}, "call_genotype", lambda m: m.update(dtype="<i8"))
    _refuses(changed, path, cache, "dtype")


def test_guarded_filesystem_refuses_fetches_outside_the_cache(store, tmp_path):
    refs, path, cache, _, _ = store
    secret = tmp_path / "secret"
    secret.write_bytes(b"secret")
    part = cache["url"] + "/part-000000"
    crafted = [cache["url"] + "/part-000000/../../secret", cache["url"] + "/part-000001", str(secret)]
    fo = {"version": 1, "refs": {"a": [part, 0, 4], **{f"b{i}": [url, 0, 6] for i, url in enumerate(crafted)}}}
    targets = checks.chunk_targets(cache, {}, path)
    fs = checks.guarded_reference_fs(targets, path, fo=fo, remote_protocol="file")
    assert fs.cat("a") == open(part[7:], "rb").read(4)
    for i in range(len(crafted)):
        with pytest.raises(UntrustedReferenceError, match="points at"):
            fs.cat(f"b{i}")


def test_deferred_inline_chunks_are_checked_when_the_guarded_filesystem_reads_them(store):
    """A remote cache's store (fsspec's reference filesystem, guarded) checks a header
    array's inline chunk when it is read, as the local store does: a sample_id chunk of
    two names where the header has three is refused at each read; the good one reads
    htslib's sample names."""
    refs, path, cache, bcf, _ = store
    with pysam.VariantFile(str(bcf)) as f:
        names = list(f.header.samples)
    bad = copy.deepcopy(refs)
    two = b"\x02\x00\x00\x00\x02\x00\x00\x00S1\x02\x00\x00\x00S2"
    bad["refs"]["sample_id/0"] = "base64:" + base64.b64encode(Zstd(level=7).encode(two)).decode()
    inline = checks.check_references(bad, path, cache, defer_inline=True)  # the keys only: passes
    assert "sample_id/0" in inline
    fs = checks.guarded_reference_fs(
        checks.chunk_targets(cache, {}, path), path, inline, fo=bad, remote_protocol="file"
    )
    for _ in range(2):
        with pytest.raises(UntrustedReferenceError, match="sample_id/0 holds 2 strings, not the 3 values"):
            fs.cat("sample_id/0")
    good = checks.check_references(refs, path, cache, defer_inline=True)
    fs = checks.guarded_reference_fs(checks.chunk_targets(cache, {}, path), path, good, fo=refs, remote_protocol="file")
    from numcodecs import VLenUTF8

    assert list(VLenUTF8().decode(Zstd().decode(fs.cat("sample_id/0")))) == names
    with pytest.raises(UntrustedReferenceError, match="holds 2 strings"):
        checks.check_references(bad, path, cache)  # without deferring: at once


def test_copy_differs_on_size_and_hash_not_mtime(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 100)
    b.write_bytes(b"x" * 100)
    os.utime(b, ns=(0, 0))
    assert checks.copy_differs(Fingerprint.of(a), Fingerprint.of(b)) is None
    b.write_bytes(b"y" * 100)
    assert "contents changed" in checks.copy_differs(Fingerprint.of(a), Fingerprint.of(b))
    b.write_bytes(b"x" * 99)
    assert "99 bytes" in checks.copy_differs(Fingerprint.of(a), Fingerprint.of(b))


def _htslib_reads(text, tmp_path):
    """Whether htslib (through pysam) reads this header text: the oracle for the samples line."""
    import pysam

    vcf = tmp_path / "header.vcf"
    vcf.write_text(text)
    verbosity = pysam.set_verbosity(0)
    try:
        with pysam.VariantFile(str(vcf)) as vf:
            return list(vf.header.samples)
    except (ValueError, OSError):
        return None
    finally:
        pysam.set_verbosity(verbosity)


@pytest.mark.parametrize(
    "extra, match",
    [("\t{first}", "not a header htslib"), ("\t", "not a header htslib"), ("\tanother", "samples")],
)
def test_samples_line_is_checked_as_htslib_reads_it(store, tmp_path, extra, match):
    """The #CHROM line is not handed to htslib whole (a dictionary entry per sample is slow at
    100,000 samples), yet a samples line htslib refuses is refused, and a sample count that
    disagrees with the codec configs too."""
    refs, path, cache, _, _ = store
    text = json.loads(refs["refs"][".zattrs"])["vcf_header"]
    first = text.rstrip("\n").rsplit("\n", 1)[1].split("\t")[9]
    changed_text = text.rstrip("\n") + extra.format(first=first) + "\n"
    samples = _htslib_reads(changed_text, tmp_path)
    assert (samples is None) == (match == "not a header htslib")
    _refuses(_with_attrs(refs, lambda a: a.update(vcf_header=changed_text)), path, cache, match)


def test_samples_line_htslib_reads_passes_with_its_samples(store, tmp_path):
    refs, path, cache, _, _ = store
    text = json.loads(refs["refs"][".zattrs"])["vcf_header"]
    header = checks.store_header(refs, path)
    assert list(header.samples) == _htslib_reads(text, tmp_path)
    assert len(header.samples) > 1


def test_the_layout_facts_read_at_open_are_the_writers(tmp_path):
    """RLEN_RESOLVED and chunk_records stand in for the layout writers at open (whose
    imports cost most of a fresh open): equal to theirs, and to htslib's record count."""
    from vcfvirtual.cache.layouts import LAYOUT_WRITERS

    assert checks.RLEN_RESOLVED == {name for name, writer in LAYOUT_WRITERS.items() if writer.rlen_resolved}
    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    with pysam.VariantFile(str(bcf)) as f:
        n = sum(1 for _ in f)
    for layout in LAYOUT_WRITERS:
        refs_path = tmp_path / f"{layout}.json"
        vcfvirtual.index(
            bcf,
            refs_path=refs_path,
            cache_path=tmp_path / f"{layout}.cache",
            variants_chunk_size=3,
            cache_layout=layout,
            force=True,
        )
        loaded = load_references(refs_path)
        cache = checks.declared_cache(loaded, refs_path)
        targets = checks.chunk_targets(cache, loaded.get("templates", {}), refs_path)
        counts = []
        for i in range(-(-n // 3)):
            url, offset, size = loaded["refs"][f"variant_position/{i}"]
            with open(targets.files[url][0].removeprefix("file://"), "rb") as f:
                ours = checks.chunk_records(layout, f, offset, size)
                assert ours == LAYOUT_WRITERS[layout].chunk_records(f, offset, size), layout
            counts.append(ours)
        expected = [min(3, n - 3 * i) for i in range(len(counts))]
        assert counts == ([None] * len(counts) if layout == "bgzf" else expected), layout
