"""Which INFO and FORMAT fields become which arrays: the one place that decides.

VCF Zarr names an INFO field's array ``variant_<ID>`` and a FORMAT field's ``call_<ID>``,
beside fixed arrays of the same prefixes (``variant_filter``, ``call_genotype``...). A
field whose ID is one of those fixed names (freebayes writes an INFO ``filter``) would
replace the fixed array, or be replaced by it: :func:`map_fields` refuses such a header,
as bio2zarr does, unless the user renames the field (``rename_fields={"INFO/filter":
"filter_info"}`` -> ``variant_filter_info``) or leaves it out. Fields can also be chosen
(``fields=`` keeps only those named, ``exclude_fields=`` leaves those out).

The index records the choice in the store's ``vcfvirtual.fields`` attribute
(:meth:`FieldChoice.to_attribute`), and every reader of a store (``verify``,
``inspect``, the checks ``open_store`` makes) rebuilds the same map from the store's
header and that attribute, so a renamed array is found under its name and a field left
out on request is not taken for a lost one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import FieldNameError

Category = Literal["INFO", "FORMAT"]
PREFIX: dict[str, str] = {"INFO": "variant_", "FORMAT": "call_"}

# The fixed arrays an INFO or FORMAT field's array could take the name of. bio2zarr
# refuses the same INFO names but ``length``; we write ``variant_length`` too, so an INFO
# ``length`` would replace it just as well.
FIXED_INFO_NAMES = ("contig", "position", "length", "id", "id_mask", "allele", "quality", "filter")
FIXED_FORMAT_NAMES = ("genotype", "genotype_phased", "genotype_mask")
FIXED_ARRAYS = frozenset(
    [PREFIX["INFO"] + n for n in FIXED_INFO_NAMES] + [PREFIX["FORMAT"] + n for n in FIXED_FORMAT_NAMES]
)
GENOTYPE_ARRAYS = ("call_genotype", "call_genotype_phased", "call_genotype_mask")

# A new name becomes part of a Zarr array name and a file name in some stores.
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class FieldChoice:
    """What the user asked of the fields: renames and a selection, by ``INFO/ID`` or
    ``FORMAT/ID``.

    Attributes
    ----------
    renames : tuple of (str, str)
        ``("INFO/filter", "filter_info")``: the field's array is then ``variant_filter_info``.
    fields : tuple of str or None
        Keep only these fields (None: every field).
    exclude : tuple of str
        Leave these fields out.
    """

    renames: tuple[tuple[str, str], ...] = ()
    fields: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        rename_fields: Mapping[str, str] | None = None,
        fields: Iterable[str] | str | None = None,
        exclude_fields: Iterable[str] | str | None = None,
    ) -> FieldChoice:
        """From the keyword arguments of :func:`vcfvirtual.index` (a comma-separated
        string or a list of ``CATEGORY/ID`` each)."""
        return cls(
            renames=tuple((str(k), str(v)) for k, v in (rename_fields or {}).items()),
            fields=None if fields is None else _names(fields),
            exclude=() if exclude_fields is None else _names(exclude_fields),
        )

    @property
    def empty(self) -> bool:
        return not self.renames and self.fields is None and not self.exclude

    @classmethod
    def from_attribute(cls, info: Mapping[str, Any] | None, where: Any = None) -> FieldChoice:
        """The choice a store recorded (its ``vcfvirtual`` attribute); none for a store
        written before fields could be chosen.

        Raises
        ------
        FieldNameError
            The recorded attribute is not one the index writes."""
        value = (info or {}).get("fields")
        if value is None:
            return cls()
        renames = value.get("rename") if isinstance(value, dict) else None
        omitted = value.get("omitted") if isinstance(value, dict) else None
        if (
            not isinstance(renames, dict)
            or not isinstance(omitted, list)
            or not all(isinstance(x, str) for x in [*renames, *renames.values(), *omitted])
            or not all(x.partition("/")[0] in PREFIX for x in [*renames, *omitted])
        ):
            raise FieldNameError(where, f"the store's vcfvirtual.fields attribute is malformed: {value!r}"[:300])
        return cls(renames=tuple(renames.items()), exclude=tuple(omitted))


#: Every field, under its ID: what a run that chooses nothing gets.
EVERY_FIELD = FieldChoice()


@dataclass(frozen=True)
class FieldMap:
    """The arrays of a header's INFO and FORMAT fields, as one store names them.

    Attributes
    ----------
    arrays : dict
        ``(category, ID) -> array name`` of every field kept, FORMAT/GT aside (its arrays
        are the three ``call_genotype*``).
    omitted : tuple of str
        ``CATEGORY/ID`` of the fields left out on request, in header order.
    renamed : dict
        ``CATEGORY/ID -> array name`` of the fields renamed.
    genotypes : bool
        Whether the header declares FORMAT/GT and it is kept.
    """

    arrays: dict[tuple[str, str], str]
    omitted: tuple[str, ...] = ()
    renamed: dict[str, str] = field(default_factory=dict)
    genotypes: bool = False

    def array_of(self, category: str, name: str) -> str | None:
        """The array of field ``category/name``; None when it is left out or GT."""
        return self.arrays.get((category, name))

    def fields_by_array(self) -> dict[str, tuple[str, str]]:
        """``array name -> (category, ID)``."""
        return {array: key for key, array in self.arrays.items()}

    def to_attribute(self) -> dict[str, Any] | None:
        """What the store records (``vcfvirtual.fields``), None when nothing was chosen."""
        if not self.omitted and not self.renamed:
            return None
        renames = {k: v.removeprefix(PREFIX[k.split("/", 1)[0]]) for k, v in self.renamed.items()}
        return {"rename": renames, "omitted": list(self.omitted)}


def map_fields(
    info: Sequence[str], formats: Sequence[str], choice: FieldChoice = EVERY_FIELD, path: Any = None
) -> FieldMap:
    """The arrays of a header's INFO and FORMAT fields (``info``, ``formats``: their IDs,
    in header order) under ``choice``.

    Raises
    ------
    FieldNameError
        A field's array would take a fixed array's name or another field's; a choice
        names a field the header does not declare, or a new name that is not one."""
    fields = [(c, n, f"{c}/{n}") for c, names in (("INFO", info), ("FORMAT", formats)) for n in names]
    declared = {ident for _, _, ident in fields}
    kept = _selection(choice, declared, path)
    renames = _renames(choice, declared, kept, path)
    arrays = {
        (category, name): PREFIX[category] + renames.get(ident, name)
        for category, name, ident in fields
        if ident in kept and ident != "FORMAT/GT"
    }
    if renames or not FIXED_ARRAYS.isdisjoint(arrays.values()):
        # IDs are unique within a category: only a fixed name or a rename can clash.
        _refuse_clashes(arrays, renames, path)
    omitted = tuple(ident for _, _, ident in fields if ident not in kept)
    renamed = {i: PREFIX[i.split("/", 1)[0]] + new for i, new in renames.items()}
    return FieldMap(arrays, omitted, renamed, genotypes="GT" in formats and "FORMAT/GT" in kept)


def _names(value: Iterable[str] | str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else [y for x in value for y in str(x).split(",")]
    return tuple(x.strip() for x in items if x.strip())


def _check_named(names: Iterable[str], declared: set[str], option: str, path: Any) -> None:
    for ident in names:
        category, _, name = ident.partition("/")
        if category not in PREFIX or not name:
            raise FieldNameError(
                path, f"{option} names {ident!r}, not a field", hint="name fields as INFO/ID or FORMAT/ID, e.g. INFO/AF"
            )
        if ident not in declared:
            raise FieldNameError(
                path,
                f"{option} names {ident}, which the header does not declare",
                hint=f"the header declares: {', '.join(sorted(declared))[:300] or 'no INFO or FORMAT field'}",
            )


def _selection(choice: FieldChoice, declared: set[str], path: Any) -> set[str]:
    """The fields kept: those named by ``fields`` (all when None) but ``exclude``."""
    if choice.fields is not None:
        _check_named(choice.fields, declared, "--fields (fields=)", path)
    _check_named(choice.exclude, declared, "--exclude-fields (exclude_fields=)", path)
    kept = set(declared) if choice.fields is None else set(choice.fields)
    return kept - set(choice.exclude)


def _renames(choice: FieldChoice, declared: set[str], kept: set[str], path: Any) -> dict[str, str]:
    renames = dict(choice.renames)
    _check_named(renames, declared, "--rename-field (rename_fields=)", path)
    for ident, new in renames.items():
        if ident == "FORMAT/GT":
            raise FieldNameError(path, "FORMAT/GT cannot be renamed: its arrays are call_genotype, _phased and _mask")
        if ident not in kept:
            raise FieldNameError(
                path, f"--rename-field renames {ident}, which is left out", hint="keep it, or do not rename it"
            )
        if not _NAME.fullmatch(new):
            raise FieldNameError(
                path,
                f"--rename-field gives {ident} the name {new!r}",
                hint="use letters, digits, '_', '.' or '-', e.g. " + ident.split("/", 1)[1] + "_field",
            )
    return renames


def _refuse_clashes(arrays: dict[tuple[str, str], str], renames: dict[str, str], path: Any) -> None:
    """Every field whose array would take a fixed array's name or another field's, in one
    error. Of two fields given one name, the renamed one is named (an ID is the header's)."""
    natural = {array: f"{c}/{n}" for (c, n), array in arrays.items() if f"{c}/{n}" not in renames}
    problems, first = [], None
    for (category, name), array in arrays.items():
        ident = f"{category}/{name}"
        if array in FIXED_ARRAYS:
            replaced = f"the fixed array {array}"
        elif ident in renames and natural.get(array, ident) != ident:
            replaced = f"{natural[array]}'s array"
        elif ident in renames and sum(a == array for a in arrays.values()) > 1:
            replaced = "another renamed field's array"
        else:
            continue
        renamed = f" renamed to {renames[ident]!r}" if ident in renames else ""
        problems.append(f"{category} field {name!r}{renamed} would be stored as {array}, replacing {replaced}")
        first = first or (ident, name, category)
    if first is None:
        return
    ident, name, category = first
    new = f"{name}_{category.lower()}"
    raise FieldNameError(
        path,
        "; ".join(problems) + " (VCF Zarr names an INFO field's array variant_<ID>, a FORMAT field's call_<ID>)",
        hint=f"rename it with --rename-field {ident}={new} or leave it out with --exclude-fields {ident}; "
        f"in Python rename_fields={{'{ident}': '{new}'}} or exclude_fields=['{ident}']",
    )
