"""The BCF header: magic, header text, and htslib's own reading of that text.

BCF records refer to contigs, FILTERs, INFO and FORMAT keys by integer indices into
dictionaries that htslib builds from the header text (PASS is always 0, ``IDX=`` is
honoured). We never rebuild those dictionaries by hand: the text goes to pysam, which
is htslib, and the indices are read back from it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import struct
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ..errors import HeaderError, NotBCFError, UnsupportedBCFError, VcfVirtualError

if TYPE_CHECKING:  # imported where a header is parsed: a store's cached parse needs no htslib (~20 ms)
    import pysam

logger = logging.getLogger(__name__)

BCF_MAGIC = b"BCF\x02\x02"
BCF_PREFIX_SIZE = 9  # magic (5) + l_text (4)
# A record's n_sample is 24 bits (BCF 2.2 spec, section 6.3): a header naming more
# samples cannot have records that agree with it.
MAX_SAMPLES = 0xFFFFFF


@dataclasses.dataclass(frozen=True)
class FieldDef:
    """One INFO or FORMAT definition as htslib reads it."""

    category: str  # "INFO" or "FORMAT"
    name: str
    key: int  # index in htslib's string dictionary
    number: str  # "1", "2", "A", "R", "G", "." (see normalise_number)
    type: str  # Integer, Float, Flag, Character, String
    description: str


@dataclasses.dataclass(frozen=True)
class BCFHeader:
    text: str  # the VCF header text as stored in the BCF, NUL terminator removed
    size: int  # bytes the header occupies in the uncompressed BCF stream
    samples: tuple[str, ...]
    contigs: tuple[str, ...]  # in htslib contig-dictionary (rid) order
    contig_lengths: tuple[int | None, ...]
    filters: tuple[str, ...]  # header order with PASS first (VCF Zarr filter_id order)
    filter_descriptions: tuple[str, ...]
    filter_keys: tuple[int, ...]  # htslib dictionary index of each filter above
    info: tuple[FieldDef, ...]
    formats: tuple[FieldDef, ...]
    # Contig ids that ##contig IDX= values skip: "" in ``contigs``, and no record may name them.
    unused_contig_ids: tuple[int, ...] = ()

    @property
    def gt_key(self) -> int:
        """Dictionary index of FORMAT/GT, or -1 when the header declares none."""
        for f in self.formats:
            if f.name == "GT":
                return f.key
        return -1

    @property
    def end_key(self) -> int:
        """Dictionary index of INFO/END, or -1: htslib derives a damaged rlen from it."""
        return next((f.key for f in self.info if f.name == "END"), -1)

    def filter_column_map(self) -> list[int]:
        """List indexed by filter dictionary key giving the ``filter_id`` column (-1: none)."""
        size = max(self.filter_keys, default=-1) + 1
        columns = [-1] * size
        for column, key in enumerate(self.filter_keys):
            columns[key] = column
        return columns

    def meta_information(self) -> list[list[str]]:
        """``##key=value`` lines other than contig/FILTER/INFO/FORMAT, as vcztools reads them."""
        pattern = re.compile("##([^=]+)=(.*)")
        out = []
        for line in self.text.split("\n"):
            m = pattern.fullmatch(line)
            if m and m.group(1) not in ("contig", "FILTER", "INFO", "FORMAT"):
                out.append([m.group(1), m.group(2)])
        return out


VCF_TYPES = ("Integer", "Float", "Flag", "Character", "String")


def classify_prefix(prefix: bytes, path: str | os.PathLike[str]) -> None:
    """Raise a clear error when the first bytes of an (inflated) stream are not BCF 2.2."""
    if prefix.startswith(BCF_MAGIC):
        return
    if not prefix:
        raise NotBCFError(path, "file is empty")
    if len(prefix) < len(BCF_MAGIC) and BCF_MAGIC.startswith(prefix):
        raise HeaderError(path, "file ends inside the BCF magic (truncated)")
    if prefix.startswith(b"BCF\x02"):
        raise UnsupportedBCFError(
            path,
            f"BCF version 2.{prefix[4]} is not supported, only BCF 2.2",
            hint="rewrite it with a current bcftools: bcftools view -Ob",
        )
    if prefix.startswith(b"BCF"):
        raise UnsupportedBCFError(path, "unknown BCF version", hint="expected BCF 2.2")
    if prefix.startswith(b"##") or prefix.startswith(b"#CHROM"):
        raise NotBCFError(
            path,
            "this is VCF text, not BCF",
            # vcfvirtual converts VCF itself, recognising it by name; only the name is wrong.
            hint="name it .vcf, .vcf.gz or .vcf.bgz and vcfvirtual converts it to BCF first",
        )
    raise NotBCFError(path, "not a BCF file (no BCF magic)")


def read_prefix(data: bytes, path: str | os.PathLike[str]) -> int:
    """Validate the magic and return ``l_text``. ``data`` holds at least 9 bytes."""
    classify_prefix(data[:5], path)
    if len(data) < BCF_PREFIX_SIZE:
        raise HeaderError(path, "file ends inside the BCF header")
    (l_text,) = struct.unpack_from("<I", data, 5)
    return l_text


def _strip_quotes(value: object) -> str:
    return str(value).strip('"') if value is not None else ""


def parse_header_text(raw_text: bytes, path: str | os.PathLike[str], stream_size: int) -> BCFHeader:
    """Parse the header text with htslib (through pysam) and collect what VCF Zarr needs."""
    try:
        text = raw_text.rstrip(b"\x00").decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise HeaderError(
            path,
            f"the BCF header text is not UTF-8 ({e.reason})",
            offset=9 + e.start,
            hint="the file is damaged, or not a BCF",
        ) from None
    if not text.startswith("##fileformat"):
        raise HeaderError(path, "BCF header text does not start with ##fileformat")
    import pysam

    # pysam parses a header only from a file; a temporary .vcf holding just the text
    # gives us exactly what htslib would build when reading the BCF itself.
    fd, tmp = tempfile.mkstemp(suffix=".vcf", prefix="vcfvirtual-header-")
    # htslib prints its own complaints straight to the process's stderr, where they would
    # break the CLI's one line per error; ours (errors, header_line_warnings) name the file.
    verbosity = pysam.set_verbosity(0)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        try:
            with pysam.VariantFile(tmp, "r") as vf:
                header = _collect(vf.header, text, path, stream_size)
            for warning in header_line_warnings(text):
                logger.warning("%s: %s", path, warning)
            return header
        except VcfVirtualError:  # ours, already naming the file
            raise
        except (ValueError, OSError) as e:
            raise HeaderError(path, f"htslib rejects the VCF header: {e}") from None
        except Exception as e:  # noqa: BLE001 - pysam asserts on dictionaries it built inconsistently
            raise HeaderError(
                path,
                f"htslib cannot make sense of the VCF header ({type(e).__name__}: {e})",
                hint="the header is damaged; check it with bcftools view -h",
            ) from None
    finally:
        pysam.set_verbosity(verbosity)
        os.unlink(tmp)


_STRUCTURED = re.compile(r"##(INFO|FORMAT|FILTER|contig)=(.*)")


def header_line_warnings(text: str) -> list[str]:
    """What htslib silently repairs or drops in the structured header lines.

    htslib reads such a header anyway (a repeated ID keeps its first definition, a line
    without ID is ignored), and so do we, to agree with every htslib-based reader; these
    warnings say what it did, so nothing changes unseen. Lines it cannot parse at all (an
    unterminated ``<``, ``Number=Q``) make it refuse the header: a HeaderError.
    """
    out = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        m = _STRUCTURED.fullmatch(line)
        if not m:
            continue
        category, body = m.groups()
        where = f"header line {lineno} (##{category})"
        ident = re.search(r"(?:^<|,)ID=([^,>]*)", body)
        if not ident or not ident.group(1):
            out.append(f"{where} has no ID; htslib ignores the line")
            continue
        key = (category, ident.group(1))
        if key in seen:
            out.append(
                f"{where} defines {category}/{key[1]} again; htslib keeps the first definition (line {seen[key]})"
            )
        else:
            seen[key] = lineno
    return out


# htslib keeps a Number in 20 bits; 0xFFFFF is what it stores for "." and also what
# Number=-1 (the samtools-era spelling of ".") wraps to.
HTSLIB_VARIABLE_NUMBER = 0xFFFFF
# VCF 4.4/4.5 per-record counts htslib accepts (per ploidy, local alleles, local
# alleles with REF, local genotypes, base modifications): their length follows each
# record's own values, so they are read like ".".
VARIABLE_NUMBERS = ("P", "LA", "LR", "LG", "M")


def normalise_number(word: object) -> str:
    """The Number of a definition as we size it: "A", "R", "G", a fixed count, or "."
    for anything whose length varies by record (".", a negative count, htslib's
    variable-length marker, the VCF 4.4/4.5 words above)."""
    word = str(word).strip()
    if word in ("A", "R", "G", "."):
        return word
    if word in VARIABLE_NUMBERS:
        return "."
    try:
        value = int(word)
    except ValueError:
        return "."  # htslib itself reads an unknown word as "." (with a warning)
    return "." if value < 0 or value >= HTSLIB_VARIABLE_NUMBER else str(value)


def _contigs(h: pysam.VariantHeader) -> tuple[list[str], list[int | None], tuple[int, ...]]:
    """Contig names and lengths indexed by htslib's contig id (a record's CHROM).

    ``##contig=<...,IDX=n>`` sets the id; ids it skips leave empty slots in htslib's
    dictionary (pysam refuses to iterate it then), which no record can name: those slots
    get the name "" and no length, so every id still indexes ``contig_id``; records naming
    them are refused (htslib's bcf_record_check refuses them too: "Invalid CONTIG id")."""
    by_id: dict[int, tuple[str, int | None]] = {}
    for rec in h.records:
        if rec.type != "CONTIG" or "ID" not in rec:
            continue
        name = str(rec["ID"])
        try:
            contig = h.contigs[name]
        except KeyError:
            continue  # a line htslib did not register (a repeated ID keeps the first)
        contig_id = int(contig.id)
        if contig_id not in by_id:
            by_id[contig_id] = (name, _int_or_none(rec.get("length")))
    size = max(by_id, default=-1) + 1
    names = [by_id.get(i, ("", None))[0] for i in range(size)]
    lengths = [by_id.get(i, ("", None))[1] for i in range(size)]
    return names, lengths, tuple(i for i in range(size) if i not in by_id)


def _int_or_none(value: str | None) -> int | None:
    """A header attribute as a number, or None when absent or not a number."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _filters(h: pysam.VariantHeader) -> tuple[list[str], list[str], list[int]]:
    """FILTER ids, descriptions and htslib dictionary keys in header order, PASS first; a
    repeated ID keeps its first definition, as htslib does."""
    filters: list[str] = []
    descriptions: list[str] = []
    filter_keys: list[int] = []
    for rec in h.records:
        if rec.type != "FILTER" or "ID" not in rec or rec["ID"] in filters:
            continue
        fid = rec["ID"]
        filters.append(fid)
        descriptions.append(_strip_quotes(rec.get("Description")))
        filter_keys.append(h.filters[fid].id)  # type: ignore[attr-defined]  # pysam's stubs lack VariantMetadata.id
    if "PASS" not in filters:
        return filters, descriptions, filter_keys
    i = filters.index("PASS")
    return _moved_first(filters, i), _moved_first(descriptions, i), _moved_first(filter_keys, i)


def _moved_first[T](seq: list[T], i: int) -> list[T]:
    return [seq[i], *seq[:i], *seq[i + 1 :]]


def _field_def(
    category: Literal["INFO", "FORMAT"],
    rec: pysam.VariantHeaderRecord,
    meta: pysam.VariantMetadata,
    path: str | os.PathLike[str],
) -> FieldDef:
    """One INFO or FORMAT definition, its Number and Type as the header line writes them.

    The header's word, not htslib's number: htslib keeps 20 bits, so Number=-2 reads back
    as 1048574, and pysam has no name for the VCF 4.4/4.5 kinds (P, LA, ...: IndexError)."""
    number = rec.get("Number")
    if number is None:
        number = meta.number
    word = str(rec.get("Type", meta.type))
    if word not in VCF_TYPES:
        raise HeaderError(
            path,
            f"{category}/{rec['ID']} has Type={word}, not one of {', '.join(VCF_TYPES)}",
            hint="fix the header line with bcftools reheader",
        )
    return FieldDef(
        category=category,
        name=meta.name,
        key=meta.id,  # type: ignore[attr-defined]  # pysam's stubs lack VariantMetadata.id
        number=normalise_number(number),
        # htslib stores Character as String internally; keep the header's word.
        type=word,
        description=_strip_quotes(meta.description),
    )


def _field_defs(
    h: pysam.VariantHeader,
    category: Literal["INFO", "FORMAT"],
    table: pysam.VariantHeaderMetadata,
    path: str | os.PathLike[str],
) -> tuple[FieldDef, ...]:
    """The INFO or FORMAT definitions htslib registered, in header order; a repeated ID
    keeps its first definition, as htslib does."""
    out = []
    seen = set()
    for rec in h.records:
        if rec.type != category or "ID" not in rec or rec["ID"] not in table or rec["ID"] in seen:
            continue
        seen.add(rec["ID"])
        out.append(_field_def(category, rec, table[rec["ID"]], path))
    return tuple(out)


def _collect(h: pysam.VariantHeader, text: str, path: str | os.PathLike[str], stream_size: int) -> BCFHeader:
    contig_names, contig_lengths, unused_contig_ids = _contigs(h)
    filters, descriptions, filter_keys = _filters(h)
    if len(h.samples) > MAX_SAMPLES:
        raise UnsupportedBCFError(
            path,
            f"the header names {len(h.samples)} samples, more than the {MAX_SAMPLES} a BCF record can hold",
            hint="split the samples over several files (bcftools view -S)",
        )
    return BCFHeader(
        text=text,
        size=stream_size,
        samples=tuple(h.samples),
        contigs=tuple(contig_names),
        contig_lengths=tuple(contig_lengths),
        filters=tuple(filters),
        filter_descriptions=tuple(descriptions),
        filter_keys=tuple(filter_keys),
        info=_field_defs(h, "INFO", h.info, path),
        formats=_field_defs(h, "FORMAT", h.formats, path),
        unused_contig_ids=unused_contig_ids,
    )


def _first_difference(kind: str, ours: Sequence[str], theirs: Sequence[str]) -> str | None:
    """The first position where two ordered name lists differ, said in words."""
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"{kind} {i} is {b!r} where the first file has {a!r}"
    if len(ours) != len(theirs):
        return f"it has {len(theirs)} {kind}s where the first file has {len(ours)}"
    return None


def compatibility_problems(first: BCFHeader, other: BCFHeader) -> list[str]:
    """Why records written under ``other`` cannot be read with ``first``'s header.

    A BCF record names its contig, INFO, FORMAT and FILTER keys by their index in its
    header's dictionaries, and holds one value per sample in header order: so another
    file can join the store only when it has the same samples, the same contigs in the
    same order, and every key it declares means the same (index, Number, Type) as in the
    first file. Descriptions and other header lines may differ; the store keeps the
    first file's header. Empty when compatible."""
    problems = _sample_and_contig_problems(first, other)
    problems += _field_problems(first, other)
    problems += _filter_problems(first, other)
    return problems


def _sample_and_contig_problems(first: BCFHeader, other: BCFHeader) -> list[str]:
    """Samples and contigs in another order or number; else the first contig whose length differs."""
    problems = []
    for kind, ours, theirs in (("sample", first.samples, other.samples), ("contig", first.contigs, other.contigs)):
        diff = _first_difference(kind, ours, theirs)
        if diff:
            problems.append(diff)
    if problems:
        return problems
    for name, a, b in zip(first.contigs, first.contig_lengths, other.contig_lengths):
        if a != b:
            return [f"contig {name!r} has length {b} where the first file has {a}"]
    return []


_OTHER_ORDER = "(the headers list their fields in another order)"


def _field_problems(first: BCFHeader, other: BCFHeader) -> list[str]:
    """INFO/FORMAT keys ``other`` declares that the first file lacks or defines otherwise."""
    problems = []
    declared = {(f.category, f.name): f for f in (*first.info, *first.formats)}
    for f in (*other.info, *other.formats):
        mine = declared.get((f.category, f.name))
        if mine is None:
            problems.append(f"it declares {f.category}/{f.name}, which the first file does not")
        elif (mine.number, mine.type) != (f.number, f.type):
            problems.append(
                f"{f.category}/{f.name} is Number={f.number},Type={f.type} "
                f"where the first file has Number={mine.number},Type={mine.type}"
            )
        elif mine.key != f.key:
            problems.append(
                f"{f.category}/{f.name} is dictionary key {f.key} where the first file has {mine.key} {_OTHER_ORDER}"
            )
    return problems


def _filter_problems(first: BCFHeader, other: BCFHeader) -> list[str]:
    """FILTER keys ``other`` declares that the first file lacks or keys otherwise."""
    problems = []
    filter_keys = dict(zip(first.filters, first.filter_keys))
    for name, key in zip(other.filters, other.filter_keys):
        if name not in filter_keys:
            problems.append(f"it declares FILTER/{name}, which the first file does not")
        elif filter_keys[name] != key:
            problems.append(
                f"FILTER/{name} is dictionary key {key} where the first file has {filter_keys[name]} {_OTHER_ORDER}"
            )
    return problems
