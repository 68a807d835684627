"""Header conventions from real files (tests/header_cases.py), each store compared with
bio2zarr where it converts the file and, always, array by array with htslib's reading
(pysam; bcftools query for the values pysam will not read: INFO Number=G, local-allele
fields of a record without LAA)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import FieldShapeError, HeaderError
from vcfvirtual.regions import select_region
from vcfvirtual.verify import verify_store

from .. import bcfdata, header_cases
from ..conftest import bio2zarr_convert, differences_from_bio2zarr, layout_options, open_both

MISSING_BITS, FILL_BITS = 0x7F800001, 0x7F800002
CASES = {case.name: case for case in header_cases.cases()}


def _definitions(header: pysam.VariantHeader):
    """(category, ID, Number word, Type) of every INFO/FORMAT line, first definition kept."""
    seen, out = set(), []
    for rec in header.records:
        if rec.type in ("INFO", "FORMAT") and "ID" in rec and (rec.type, rec["ID"]) not in seen:
            seen.add((rec.type, rec["ID"]))
            out.append((rec.type, rec["ID"], str(rec.get("Number")), str(rec.get("Type"))))
    return out


def _bcftools_values(bcf, category, key, n_samples):
    """Per record: INFO values, or per-sample FORMAT values, as bcftools prints them."""
    expr = f"%INFO/{key}" if category == "INFO" else f"[%{key}\t]"
    out = bcfdata.bcftools("query", "-f", expr + "\n", bcf).splitlines()

    def parse(text):
        return tuple(None if x == "." else float(x) for x in text.split(","))

    if category == "INFO":
        return [parse(line) for line in out]
    return [[parse(x) for x in line.split("\t")[:n_samples]] for line in out]


def _info_end(rec):
    """INFO/END as htslib prints the record (pysam shows it only as ``rec.stop``)."""
    for entry in str(rec).split("\t")[7].split(";"):
        if entry.startswith("END="):
            return tuple(None if x == "." else int(x) for x in entry[4:].split(","))
    return None


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def htslib_reading(bcf):
    """Everything htslib reads from ``bcf``: fixed fields per record, and INFO/FORMAT
    values per record (None: the key is absent) keyed by (category, ID)."""
    with pysam.VariantFile(str(bcf)) as vf:
        header = vf.header
        samples = list(header.samples)
        defs = _definitions(header)
        contig_lengths = {rec["ID"]: rec.get("length") for rec in header.records if rec.type == "CONTIG"}
        rows = []
        values = {(c, k): [] for c, k, _, _ in defs}
        unreadable = set()
        for rec in vf:
            gts = []
            for s in samples:
                call = rec.samples[s]
                gt = call.get("GT") if "GT" in rec.format else None
                gts.append(None if gt is None else [-1 if a is None else a for a in gt])
            rows.append(
                dict(
                    chrom=rec.chrom,
                    pos=rec.pos,
                    rlen=rec.rlen,
                    stop=rec.stop,
                    id=rec.id or ".",
                    alleles=list(rec.alleles),
                    qual=rec.qual,
                    filters=list(rec.filter.keys()),
                    gts=gts,
                )
            )
            for category, key, _, _ in defs:
                present = key in (rec.info if category == "INFO" else rec.format)
                value = None
                if (category, key) == ("INFO", "END"):
                    value = _info_end(rec)  # pysam folds END into rec.stop, out of rec.info
                elif present:
                    try:
                        if category == "INFO":
                            value = _as_tuple(rec.info[key])
                        else:
                            value = [_as_tuple(rec.samples[s][key]) for s in samples]
                    except ValueError:  # pysam will not size it: bcftools prints it below
                        unreadable.add((category, key))
                        value = "bcftools"
                values[(category, key)].append(value)
    for category, key in unreadable:
        printed = _bcftools_values(bcf, category, key, len(samples))
        values[(category, key)] = [printed[i] if v is not None else None for i, v in enumerate(values[(category, key)])]
    return dict(samples=samples, defs=defs, rows=rows, values=values, contig_lengths=contig_lengths)


def _width(number, vtype, category, key, values, reading):
    """(width, has a dimension) by the VCF Zarr rules bio2zarr follows."""
    rows = reading["rows"]
    n_alleles = max([len(r["alleles"]) for r in rows] + [2])
    lengths = [0]
    for v in values:
        if v is None:
            continue
        for vec in [v] if category == "INFO" else v:
            lengths.append(len(",".join(str(x) for x in vec).split(",")) if vtype == "String" else len(vec))
    seen = max(lengths)
    if number in ("A", "R", "G"):
        if number == "A":
            size = n_alleles - 1
        elif number == "R":
            size = n_alleles
        elif any(k == "GT" for c, k, _, _ in reading["defs"] if c == "FORMAT"):
            ploidy = max([len(g) for r in rows for g in r["gts"] if g] + [1])
            size = math.comb(n_alleles + ploidy - 1, ploidy)
        else:
            g_format = [d for d in reading["defs"] if d[0] == "FORMAT" and d[2] == "G"]
            g_fields = g_format or [d for d in reading["defs"] if d[0] == "INFO" and d[2] == "G"]
            size = max(_width_seen(reading["values"][(c, k)], c) for c, k, _, _ in g_fields)
        assert seen <= size
        return size, size > 0
    try:
        declared = int(number)
    except ValueError:
        declared = 0
    declared = max(declared, 0)
    width = max(seen, declared)
    return width, width > 1 or (category, key) == ("FORMAT", "LAA")


def _width_seen(values, category):
    return max([len(vec) for v in values if v is not None for vec in ([v] if category == "INFO" else v)] + [0])


def _expected_numeric(vec, width, is_float, whole_missing_allowed):
    missing, fill = (MISSING_BITS, FILL_BITS) if is_float else (-1, -2)
    if vec is None:
        return [missing] * width
    if whole_missing_allowed and len(vec) == 1 and vec[0] is None:
        return [missing] * width  # an INFO "." is missing in every slot
    out = []
    for x in vec:
        if x is None or (is_float and math.isnan(x)):
            out.append(missing)
        else:
            out.append(int(np.float32(x).view(np.uint32)) if is_float else int(x))
    return out + [fill] * (width - len(out))


def _expected_string(vec, width):
    if vec is None:
        return ["."] * width
    # pysam reads a present String of zero characters ("S=", printed "S" by bcftools) as None
    parts = ",".join("" if x is None else str(x) for x in vec).split(",")
    return parts + [""] * (width - len(parts))


def expected_field(category, key, number, vtype, reading):
    """The VCF Zarr array for one INFO/FORMAT field, from htslib's values."""
    values = reading["values"][(category, key)]
    n_samples = len(reading["samples"])
    if vtype == "Flag":
        return np.array([v is not None for v in values], dtype=bool)
    width, has_dim = _width(number, vtype, category, key, values, reading)
    w = max(width, 1) if has_dim else 1
    rows = []
    for v in values:
        vectors = [v] if category == "INFO" else (v if v is not None else [None] * n_samples)
        row = []
        # BCF pads a FORMAT vector shorter than the record's longest with end-of-vector;
        # for Floats that is a NaN, which VCF Zarr (bio2zarr) stores as missing, not fill.
        record_width = max((len(vec) for vec in vectors if vec is not None), default=0)
        for vec in vectors:
            if vtype in ("String", "Character"):
                if category == "INFO" and vec is not None and all(x is None for x in vec):
                    vec = None  # a key without a value (pysam: None or ()) is missing, as htslib holds none
                row.append(_expected_string(vec, w))
                continue
            if category == "FORMAT" and vtype == "Float" and vec is not None:
                vec = tuple(vec) + (None,) * (record_width - len(vec))
            row.append(_expected_numeric(vec, w, vtype == "Float", category == "INFO" and w > 1))
        rows.append(row)
    shape = (len(values),) + ((n_samples,) if category == "FORMAT" else ()) + ((w,) if has_dim else ())
    if vtype in ("String", "Character"):
        return np.array(rows, dtype=object).reshape(shape)
    return np.array(rows, dtype=np.int64).reshape(shape)


def expected_region_index(reading, contig_ids, chunk_length: int) -> np.ndarray:
    """VCF Zarr 0.3's region index from htslib's records: per chunk and contig run, the
    chunk, contig, first and last POS, the largest end (pysam's ``stop``: END for a
    symbolic allele) and the record count."""
    rows = []
    for i, r in enumerate(reading["rows"]):
        key = (i // chunk_length, contig_ids.index(r["chrom"]))
        if rows and rows[-1][:2] == list(key):
            rows[-1][3] = r["pos"]
            rows[-1][4] = max(rows[-1][4], r["stop"])
            rows[-1][5] += 1
        else:
            rows.append([*key, r["pos"], r["pos"], r["stop"], 1])
    return np.array(rows, dtype=np.int64).reshape(-1, 6)


def htslib_differences(ds: xr.Dataset, reading, renames=None) -> list[str]:
    """Every way our dataset differs from htslib's reading, as readable lines
    (``renames``: the ``rename_fields`` the store was indexed with)."""
    renames = renames or {}
    problems = []
    rows = reading["rows"]
    n = len(rows)

    def check(name, ok, detail=""):
        if not ok:
            problems.append(f"{name}: {detail}")

    check("sample_id", ds["sample_id"].values.tolist() == reading["samples"])
    contig_ids = ds["contig_id"].values.tolist()
    check("contig_id", {c for c in contig_ids if c} == set(reading["contig_lengths"]), contig_ids)
    if "contig_length" in ds:
        lengths = dict(zip(contig_ids, ds["contig_length"].values.tolist()))
        for name, length in reading["contig_lengths"].items():
            check("contig_length", lengths[name] == (-1 if length is None else int(length)), (name, lengths[name]))
    check("variant_position", ds["variant_position"].shape == (n,), ds["variant_position"].shape)
    v = {name: ds[name].values for name in ds.data_vars if "variants" in ds[name].dims}
    filter_ids = ds["filter_id"].values.tolist()
    for i, r in enumerate(rows):
        check("variant_contig", contig_ids[v["variant_contig"][i]] == r["chrom"], i)
        check("variant_position", v["variant_position"][i] == r["pos"], i)
        check("variant_length", v["variant_length"][i] == r["rlen"], i)
        check("variant_id", v["variant_id"][i] == r["id"], i)
        alleles = v["variant_allele"][i].tolist()
        check(
            "variant_allele",
            alleles[: len(r["alleles"])] == r["alleles"] and all(a == "" for a in alleles[len(r["alleles"]) :]),
            i,
        )
        qual_bits = np.asarray(v["variant_quality"][i]).view(np.uint32)
        check(
            "variant_quality",
            qual_bits == MISSING_BITS if r["qual"] is None else v["variant_quality"][i] == np.float32(r["qual"]),
            i,
        )
        check("variant_filter", [filter_ids[j] for j in np.nonzero(v["variant_filter"][i])[0]] == r["filters"], i)
        if "call_genotype" in v:
            for j, call in enumerate(r["gts"]):
                gt = v["call_genotype"][i, j]
                check(
                    "call_genotype",
                    (gt == -1).all()
                    if call is None
                    else gt[: len(call)].tolist() == call and (gt[len(call) :] == -2).all(),
                    (i, j),
                )
    if n:
        chunk_length = ds["variant_position"].data.chunks[0][0]
        expected = expected_region_index(reading, contig_ids, chunk_length)
        got = ds["region_index"].values
        check("region_index", np.array_equal(got.astype(np.int64), expected), f"{got.tolist()} != {expected.tolist()}")
    for category, key, number, vtype in reading["defs"]:
        if (category, key) == ("FORMAT", "GT"):
            continue
        name = ("variant_" if category == "INFO" else "call_") + renames.get(f"{category}/{key}", key)
        if name not in ds:
            problems.append(f"{name}: missing from the store")
            continue
        expected = expected_field(category, key, number, vtype, reading)
        got = ds[name].values
        if got.shape != expected.shape:
            problems.append(f"{name}: shape {got.shape} != htslib's {expected.shape}")
            continue
        if vtype == "Float":
            same = np.array_equal(got.view(np.uint32).astype(np.int64), expected)
        elif vtype in ("String", "Character"):
            same = got.tolist() == expected.tolist()
        else:
            same = np.array_equal(got.astype(np.int64) if got.dtype != bool else got, expected)
        if not same:
            problems.append(f"{name}: values differ: ours {got.tolist()[:4]} htslib {expected.tolist()[:4]}")
    return problems


def _index_refs(bcf, tmp_path, chunk_length=2, layout="bgzf", **options):
    refs = tmp_path / (bcf.name + ".vcz.json")
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=tmp_path / (bcf.name + ".cache.bcf"),
        variants_chunk_size=chunk_length,
        force=True,
        **layout_options(layout),
        **options,
    )
    return xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)


# Each case on the default and the columns layout (samples blocks of 2).
@pytest.mark.parametrize("layout", ["bgzf", "columns"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_htslib(name, tmp_path, layout):
    case = CASES[name]
    bcf = case.write(tmp_path)
    reading = htslib_reading(bcf)
    for ds in open_both(bcf, 2, tmp_path, **layout_options(layout), **case.index_options):
        problems = htslib_differences(ds, reading, case.renames)
        assert not problems, "\n".join(problems)


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.bio2zarr == "equal"))
def test_case_matches_bio2zarr(name, tmp_path, layout):
    bcf = CASES[name].write(tmp_path)
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    ds = _index_refs(bcf, tmp_path, layout=layout)
    problems = differences_from_bio2zarr(ds, ref)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.bio2zarr == "refuses"))
def test_bio2zarr_still_refuses(name, tmp_path):
    """The cases judged by htslib alone are ones bio2zarr cannot convert (if it learns
    to, move them to the bio2zarr comparison)."""
    bcf = CASES[name].write(tmp_path)
    with pytest.raises(Exception), warnings.catch_warnings():  # noqa: B017 - any failure of bio2zarr's
        warnings.simplefilter("ignore")
        bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)


def test_number_minus_one_is_variable(tmp_path):
    """Number=-1 sizes from the data (bio2zarr's 10 for a 10-value PL), not htslib's 0xFFFFF."""
    bcf = CASES["number_minus_one"].write(tmp_path)
    ds = _index_refs(bcf, tmp_path)
    assert ds["call_PL"].shape == (3, 2, 10)
    assert ds["variant_XN"].shape == (3, 3)


def test_info_missing_dot_fills_every_slot(tmp_path):
    """AC=. with three ALTs reads [-1, -1, -1] (bio2zarr's), not [-1, -2, -2]."""
    bcf = CASES["info_missing_everywhere"].write(tmp_path)
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    ds = _index_refs(bcf, tmp_path)
    assert ref["variant_AC"][0].tolist() == [-1, -1, -1]
    assert ds["variant_AC"].values[0].tolist() == [-1, -1, -1]
    assert (ds["variant_AF"].values[0].view(np.uint32) == MISSING_BITS).all()
    # FORMAT "." keeps one missing then fill, as bio2zarr
    assert ds["call_F2"].values[0, 0].tolist() == ref["call_F2"][0, 0].tolist() == [-1, -2]


def test_number_zero_without_value_is_fill(tmp_path):
    """A Number=0 Integer present without a value: htslib holds zero values (pysam reads
    (), bcftools writes the key alone), so every slot is fill, apart from absent (missing)
    and from FR=0. bio2zarr stores 0 / 0.0 there, a value no record holds: the one
    difference, everything else agrees."""
    bcf = CASES["number_zero_without_values"].write(tmp_path)
    with pysam.VariantFile(str(bcf)) as vf:
        first = next(iter(vf))
        assert first.info["FR"] == () and first.info["FF"] == ()
    ds = _index_refs(bcf, tmp_path)
    assert ds["variant_FR"].values.tolist() == [-2, 3, -1]
    assert ds["variant_FF"].values.view(np.uint32).tolist()[0] == FILL_BITS
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    assert ref["variant_FR"][:].tolist() == [0, 3, -1]
    assert ref["variant_FF"][0] == 0.0
    assert (
        differences_from_bio2zarr(ds.drop_vars(["variant_FR", "variant_FF"]), ref, ignore=("variant_FR", "variant_FF"))
        == []
    )


def test_vcf45_numbers_are_read_not_refused(tmp_path):
    """Number=P/LA/LR/LG/M: htslib (bcftools) prints them; so do we, sized by record."""
    bcf = CASES["vcf45_numbers"].write(tmp_path)
    ds = _index_refs(bcf, tmp_path)
    printed = bcfdata.bcftools("query", "-f", "[%LPL\t]\n", bcf).split("\n")
    assert printed[1].split("\t")[0] == "1,2,3,4,5,6"
    assert ds["call_LPL"].values[1, 0].tolist() == [1, 2, 3, 4, 5, 6]
    assert ds["call_LPL"].dims == ("variants", "samples", "FORMAT_LPL_dim")


def test_contig_idx_gaps(tmp_path):
    """Contig ids set by IDX= with unused ids between: records still find their contig."""
    bcf = CASES["contig_idx_gaps"].write(tmp_path)
    ds = _index_refs(bcf, tmp_path)
    ids = ds["contig_id"].values.tolist()
    chroms = bcfdata.bcftools("query", "-f", "%CHROM\n", bcf).split()
    assert [ids[c] for c in ds["variant_contig"].values] == chroms == ["chr1", "chr2"]


def test_unknown_number_word_is_refused_by_htslib_or_read(tmp_path):
    """A Number word htslib does not know: htslib's own verdict, never a raw traceback."""
    case = header_cases.Case(
        "number_q", header_cases.info("XQ", "Q") + header_cases.GT, ("chr1\t10\t.\tA\tC\t.\t.\tXQ=1,2\tGT\t0/1\t0/0",)
    )
    try:
        bcf = case.write(tmp_path)
    except (OSError, ValueError):
        pytest.skip("htslib itself refuses to write it")
    try:
        ds = _index_refs(bcf, tmp_path)
    except HeaderError as e:
        assert "number_q.bcf" in str(e)
    else:
        assert not htslib_differences(ds, htslib_reading(bcf))


# 300 keys reach what 1,000 do: dictionary indexes past 127 (htslib types the records'
# INFO keys int16, not int8) and past 255, hundreds of arrays and of INFO segments a
# chunk. 1,000 (issue 15: slivar's 869-field header) costs bio2zarr ~25 s of CPU to convert,
# 5x the 300 keys' (its cost is per array): it runs with the slow checks (--slow), in CI too.
@pytest.mark.parametrize("n_fields", [300, pytest.param(1000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_wide_info_headers_match_bio2zarr(tmp_path, layout, n_fields):
    """Hundreds of INFO keys of every kind: every array equals bio2zarr's (the references
    are written in time linear in the arrays; benchmarks/wide_header.py times it at 1,000).
    Columns: one INFO segment per key a chunk."""
    bcf = header_cases.wide_info_case(n_fields).write(tmp_path)
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    ds = _index_refs(bcf, tmp_path, layout=layout)
    assert len([n for n in ds.data_vars if n.startswith("variant_K")]) == n_fields
    problems = differences_from_bio2zarr(ds, ref)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("name", ["info_missing_everywhere", "contig_idx_gaps", "vcf45_numbers"])
def test_references_equal_virtualizarr_dataset_route(name, tmp_path):
    """kerchunk.kerchunk_refs (array by array, from the index's own manifests) writes what
    VirtualiZarr's Dataset route (the same arrays as its ManifestStore -> virtual Dataset ->
    dataset_to_kerchunk_refs) writes."""
    from virtualizarr.manifests import ManifestStore
    from virtualizarr.writers.kerchunk import dataset_to_kerchunk_refs

    from vcfvirtual.api import IndexOptions, run_index
    from vcfvirtual.manifests.virtual import manifest_group
    from vcfvirtual.refs import kerchunk

    bcf = CASES[name].write(tmp_path)
    options = IndexOptions(refs_path=tmp_path / "x.json", cache_path=tmp_path / "x.cache", force=True)
    group = run_index(bcf, options).group
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = dataset_to_kerchunk_refs(ManifestStore(manifest_group(group)).to_virtual_dataset(), zarr_format=2)
    ours = kerchunk.kerchunk_refs(group)
    assert set(ours["refs"]) == set(theirs["refs"])
    for key, value in theirs["refs"].items():
        if key.endswith(".zarray"):
            meta = json.loads(value)
            meta["fill_value"] = None  # the one change kerchunk_refs makes on purpose
            assert json.loads(ours["refs"][key]) == meta, key
        else:
            assert ours["refs"][key] == value, key


def test_number_g_with_gt_declared_but_no_calls_is_explained(tmp_path):
    """INFO Number=G holding diploid counts in a file that declares GT but has no samples:
    genotypes can only be counted for ploidy 1, so the values do not fit. bio2zarr refuses
    it too; our error says why."""
    case = header_cases.Case(
        "g_no_calls", header_cases.info("XG", "G") + header_cases.GT, ("chr1\t10\t.\tA\tC\t.\t.\tXG=1,2,3",), samples=()
    )
    bcf = case.write(tmp_path)
    with pytest.raises(Exception, match="exceeds max genotypes"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    with pytest.raises(FieldShapeError, match="no record has a GT call, so genotypes are counted for ploidy 1") as e:
        _index_refs(bcf, tmp_path)
    assert "g_no_calls.bcf" in str(e.value) and "INFO/XG" in str(e.value)


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_long_symbolic_deletions_are_found_by_region(tmp_path, layout):
    """<DEL> at POS 1 ending at 10,000 and at 40,306,195: positions fit int8, ends do not.
    region_index holds the ends (they once saturated at 127 and 32,767, and a region
    query missed the deletion); select_region finds what htslib's index finds."""
    bcf = CASES["long_symbolic_deletions"].write(tmp_path)
    ds = _index_refs(bcf, tmp_path, layout=layout)
    with pysam.VariantFile(str(bcf)) as vf:
        assert [r.stop for r in vf][0::3] == [10000, 40306195]
        for region in ("chr1:5000-5000", "chr1:10000", "chr1:10001-20000", "chr1:55", "chr2:40306195", "chr2:2-99"):
            contig, _, span = region.partition(":")
            start, _, end = span.partition("-")
            # htslib's index query: 0-based half-open, overlap by each record's end (stop).
            theirs = [(r.chrom, r.pos) for r in vf.fetch(contig, int(start) - 1, int(end or start))]
            found = select_region(ds, region)
            contigs = ds["contig_id"].values.tolist()
            at = zip(found["variant_contig"].values, found["variant_position"].values)
            ours = [(contigs[c], int(p)) for c, p in at]
            assert ours == theirs, region
    index = ds["region_index"].values
    assert index[:, 4].max() == 40306195 and index.dtype == np.int32
    assert ds["variant_position"].dtype == np.int8  # bio2zarr's rule for the positions themselves
    with pytest.raises(OverflowError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_bare_string_keys_read_missing_and_verify(tmp_path, layout):
    """VEP's bare keys (...;NOVALUE;...) and KEY=: htslib holds no value (pysam: None for
    Number=1, () otherwise; bcftools prints the key alone), read '.' in every slot, as an
    absent key, for every Number; verify agrees."""
    bcf = CASES["bare_string_keys"].write(tmp_path)
    with pysam.VariantFile(str(bcf)) as vf:
        first, _, _, fourth, _ = list(vf)
    assert first.info["S1"] is None and first.info["C1"] is None
    assert first.info["SD"] == first.info["S2"] == first.info["SA"] == first.info["SR"] == ()
    assert fourth.info["SR"] == () and str(fourth).split("\t")[7] == "SR;SD;C1"
    ds = _index_refs(bcf, tmp_path, layout=layout)
    assert ds["variant_S1"].values.tolist() == [".", "x", ".", ".", "."]
    assert ds["variant_C1"].values.tolist() == [".", "c", ".", ".", "."]
    assert ds["variant_SR"].values[[0, 3, 4]].tolist() == [["."] * 3] * 3
    assert ds["variant_SD"].values[:, 0].tolist() == [".", "a", ".", ".", "."]
    assert ds["variant_S2"].values[2].tolist() == [".", ""]  # S2=. : one missing value, then fill
    report = verify_store(tmp_path / (bcf.name + ".vcz.json"), progress=False)
    assert report.ok, report.summary()


def test_empty_string_value_reads_missing_where_bio2zarr_reads_empty(tmp_path):
    """S= : htslib stores no characters and prints the key alone, as for a bare key
    (which it also writes back as one): '.', where bio2zarr stores ''. Every other array
    equals bio2zarr's."""
    bcf = CASES["empty_info_keys"].write(tmp_path)
    with pysam.VariantFile(str(bcf)) as vf:
        last = list(vf)[2]
    assert last.info["S"] is None and str(last).split("\t")[7] == "S"
    ds = _index_refs(bcf, tmp_path)
    assert ds["variant_S"].values.tolist() == ["x", ".", "."]
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    assert ref["variant_S"][:].tolist() == ["x", ".", ""]
    assert differences_from_bio2zarr(ds.drop_vars("variant_S"), ref, ignore=("variant_S",)) == []
