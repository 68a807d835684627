"""vcfvirtual.bcf.fields: which INFO/FORMAT field becomes which array.

The clashing names are checked against the VCF Zarr spec's fixed arrays as bio2zarr
names them (its own refusal is exercised on real conversions in
tests/oracle/test_field_names.py)."""

from __future__ import annotations

import pytest

from vcfvirtual.bcf.fields import FIXED_ARRAYS, FieldChoice, map_fields
from vcfvirtual.errors import FieldNameError, HeaderError

from ....header_cases import FIXED_FORMAT, FIXED_INFO

# What bio2zarr's vcf2zarr writes for the fixed columns and GT (its array names).
BIO2ZARR_FIXED = {
    "variant_contig",
    "variant_position",
    "variant_length",
    "variant_id",
    "variant_id_mask",
    "variant_allele",
    "variant_quality",
    "variant_filter",
    "call_genotype",
    "call_genotype_phased",
    "call_genotype_mask",
}


def test_fixed_arrays_are_the_spec_arrays_fields_could_name():
    assert FIXED_ARRAYS == BIO2ZARR_FIXED
    assert {f"variant_{n}" for n in FIXED_INFO} | {f"call_{n}" for n in FIXED_FORMAT} == BIO2ZARR_FIXED


def test_every_field_under_its_id_by_default():
    m = map_fields(["DP", "AF"], ["GT", "AD"])
    assert m.arrays == {("INFO", "DP"): "variant_DP", ("INFO", "AF"): "variant_AF", ("FORMAT", "AD"): "call_AD"}
    assert m.genotypes and m.omitted == () and m.to_attribute() is None


@pytest.mark.parametrize("name", FIXED_INFO)
def test_info_named_like_a_fixed_array_is_refused(name):
    with pytest.raises(FieldNameError) as e:
        map_fields(["DP", name], ["GT"], path="x.bcf")
    text = str(e.value)
    assert isinstance(e.value, HeaderError)
    assert text.startswith("x.bcf: ") and "\n" not in text
    assert f"INFO field {name!r}" in text and f"replacing the fixed array variant_{name}" in text
    assert f"--rename-field INFO/{name}={name}_info" in text and f"--exclude-fields INFO/{name}" in text


@pytest.mark.parametrize("name", FIXED_FORMAT)
def test_format_named_like_a_genotype_array_is_refused(name):
    with pytest.raises(FieldNameError, match=f"FORMAT field '{name}' would be stored as call_{name}, replacing"):
        map_fields([], ["GT", name])


def test_every_clash_is_named_in_one_line():
    with pytest.raises(FieldNameError) as e:
        map_fields(["filter", "id"], ["genotype"])
    text = str(e.value)
    assert "\n" not in text
    assert all(a in text for a in ("variant_filter", "variant_id", "call_genotype"))


def test_renames_and_exclusions_are_the_way_through():
    choice = FieldChoice.of({"INFO/filter": "filter_info"}, exclude_fields="FORMAT/genotype")
    m = map_fields(["filter", "DP"], ["GT", "genotype"], choice)
    assert m.array_of("INFO", "filter") == "variant_filter_info"
    assert m.array_of("FORMAT", "genotype") is None and m.omitted == ("FORMAT/genotype",)
    assert m.to_attribute() == {"rename": {"INFO/filter": "filter_info"}, "omitted": ["FORMAT/genotype"]}
    # A reader rebuilds the same map from what the store records.
    again = map_fields(["filter", "DP"], ["GT", "genotype"], FieldChoice.from_attribute({"fields": m.to_attribute()}))
    assert again == m


def test_a_rename_onto_another_field_names_the_renamed_one():
    with pytest.raises(FieldNameError, match="INFO field 'filter' renamed to 'DP' would be stored as variant_DP"):
        map_fields(["DP", "filter"], [], FieldChoice.of({"INFO/filter": "DP"}))
    with pytest.raises(FieldNameError, match="another renamed field"):
        map_fields(["A", "B"], [], FieldChoice.of({"INFO/A": "x", "INFO/B": "x"}))


def test_same_id_in_info_and_format_is_no_clash():
    m = map_fields(["DP"], ["DP"])
    assert set(m.arrays.values()) == {"variant_DP", "call_DP"}


def test_fields_keeps_only_those_named():
    m = map_fields(["DP", "AF", "CSQ"], ["GT", "AD", "PL"], FieldChoice.of(fields=["INFO/AF", "FORMAT/AD"]))
    assert set(m.arrays.values()) == {"variant_AF", "call_AD"}
    assert not m.genotypes  # GT not named: no call_genotype arrays
    assert m.omitted == ("INFO/DP", "INFO/CSQ", "FORMAT/GT", "FORMAT/PL")


@pytest.mark.parametrize(
    "choice, message",
    [
        (FieldChoice.of(fields="INFO/XX"), "names INFO/XX, which the header does not declare"),
        (FieldChoice.of(exclude_fields=["AF"]), "names 'AF', not a field"),
        (FieldChoice.of({"FORMAT/GT": "g"}), "FORMAT/GT cannot be renamed"),
        (FieldChoice.of({"INFO/AF": "a/b"}), "gives INFO/AF the name 'a/b'"),
        (FieldChoice.of({"INFO/AF": "af"}, exclude_fields="INFO/AF"), "renames INFO/AF, which is left out"),
    ],
)
def test_choices_naming_no_field_are_refused(choice, message):
    with pytest.raises(FieldNameError, match=message):
        map_fields(["AF"], ["GT"], choice)


@pytest.mark.parametrize(
    "value", [{"rename": [], "omitted": []}, {"rename": {"X/a": "b"}, "omitted": []}, {"omitted": [3]}, "x"]
)
def test_a_malformed_recorded_choice_is_refused(value):
    with pytest.raises(FieldNameError, match="malformed"):
        FieldChoice.from_attribute({"fields": value}, "s.json")
