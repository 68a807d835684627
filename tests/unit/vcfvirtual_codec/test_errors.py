"""The typed errors' contract: they survive pickling (errors raised in worker processes of
``-j`` runs travel back pickled), their text names the path, the byte offset and the
hint, and a bad codec configuration is also the ``ValueError`` numcodecs/zarr expect."""

from __future__ import annotations

import pickle

import pytest
from vcfvirtual_codec import errors as E

# The codec's own classes; the indexer's subclasses are tested in tests/unit/vcfvirtual.
ALL = [E.VcfVirtualError, E.CorruptBCFError, E.ChunkDecodeError, E.CodecConfigError]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_pickle_round_trip_keeps_class_and_fields(cls):
    e = cls("/data/x.bcf", "record 3 is cut short", offset=1234, hint="re-run bcftools view")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    expected = ("/data/x.bcf", "record 3 is cut short", 1234, "re-run bcftools view")
    assert (back.path, back.problem, back.offset, back.hint) == expected
    assert str(back) == str(e)


def test_pickle_round_trip_without_optional_fields():
    back = pickle.loads(pickle.dumps(E.CorruptBCFError(None, "bad")))
    assert (back.path, back.problem, back.offset, back.hint) == (None, "bad", None, None)


def test_text_names_path_offset_problem_and_hint():
    text = str(E.CorruptBCFError("/data/x.bcf", "BSIZE too small", offset=65536, hint="the file is damaged"))
    assert text == "/data/x.bcf (byte offset 65536): BSIZE too small (the file is damaged)"


def test_text_without_offset_or_hint():
    assert str(E.CorruptBCFError("h.bcf", "no BGZF magic")) == "h.bcf: no BGZF magic"


def test_offset_zero_is_named():
    assert "(byte offset 0)" in str(E.CorruptBCFError("a.bcf", "empty", offset=0))


def test_no_path_reads_as_input():
    assert str(E.VcfVirtualError(None, "bad option")) == "<input>: bad option"


def test_path_like_is_kept_as_text(tmp_path):
    e = E.ChunkDecodeError(tmp_path / "c.cache", "changed")
    assert e.path == str(tmp_path / "c.cache")
    assert str(e).startswith(str(tmp_path / "c.cache") + ": ")


def test_codec_config_error_is_a_value_error_and_a_chunk_decode_error():
    e = E.CodecConfigError("refs.json", "unknown kind")
    assert isinstance(e, ValueError)
    assert isinstance(e, E.ChunkDecodeError)
    assert isinstance(e, E.VcfVirtualError)
    with pytest.raises(ValueError):
        raise e


@pytest.mark.parametrize("cls", [c for c in ALL if c is not E.CodecConfigError], ids=lambda c: c.__name__)
def test_other_errors_are_not_value_errors(cls):
    # A ValueError would be swallowed as "bad config" by callers catching ValueError.
    assert not isinstance(cls("p", "x"), ValueError)
    assert issubclass(cls, E.VcfVirtualError)


def test_the_codec_defines_only_what_it_raises():
    """The reader's package carries no error class of the indexer's."""
    defined = {name for name, value in vars(E).items() if isinstance(value, type) and issubclass(value, Exception)}
    assert defined == {cls.__name__ for cls in ALL}
