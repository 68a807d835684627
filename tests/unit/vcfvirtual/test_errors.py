"""vcfvirtual.errors: the codec's classes re-exported (``except vcfvirtual.errors.X`` must
catch what the codec, installed alone by readers, raises), and the indexer's own classes
beside them, subclasses of the codec's base."""

from __future__ import annotations

import pickle

import pytest
import vcfvirtual_codec.errors as codec_errors

import vcfvirtual.errors as errors

CODEC_NAMES = {"VcfVirtualError", "CorruptBCFError", "ChunkDecodeError", "CodecConfigError"}
INDEXER_NAMES = sorted(set(errors.__all__) - CODEC_NAMES)


def test_the_codec_names_are_the_codec_classes():
    for name in CODEC_NAMES:
        assert getattr(errors, name) is getattr(codec_errors, name), name


def test_every_error_class_is_exported():
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, codec_errors.VcfVirtualError)
    }
    assert defined == set(errors.__all__)
    assert len(INDEXER_NAMES) == 11


def test_codec_error_caught_through_vcfvirtual_name():
    try:
        raise codec_errors.ChunkDecodeError("refs.json", "bad chunk")
    except errors.VcfVirtualError as e:
        assert isinstance(e, errors.ChunkDecodeError)


@pytest.mark.parametrize("name", INDEXER_NAMES)
def test_indexer_errors_are_caught_as_the_codecs_base(name):
    with pytest.raises(codec_errors.VcfVirtualError):
        raise getattr(errors, name)("x.bcf", "bad")


@pytest.mark.parametrize("name", INDEXER_NAMES)
def test_pickle_round_trip_keeps_class_and_fields(name):
    """Errors raised in worker processes of ``-j`` runs travel back pickled."""
    cls = getattr(errors, name)
    e = cls("/data/x.bcf", "record 3 is cut short", offset=1234, hint="re-run bcftools view")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert (back.path, back.problem, back.offset, back.hint) == (
        "/data/x.bcf",
        "record 3 is cut short",
        1234,
        "re-run bcftools view",
    )
    assert str(back) == str(e)


def test_text_names_path_and_problem():
    assert str(errors.HeaderError("h.bcf", "no ##fileformat")) == "h.bcf: no ##fileformat"
    assert "(byte offset 0)" in str(errors.NotBCFError("a.bcf", "empty", offset=0))


@pytest.mark.parametrize("name", sorted(set(INDEXER_NAMES) - {"RegionError", "UnknownContigError"}))
def test_other_errors_are_not_value_errors(name):
    # A ValueError would be swallowed as "bad config" by callers catching ValueError.
    assert not isinstance(getattr(errors, name)("p", "x"), ValueError)
