"""vcfvirtual.errors re-exports the codec's classes: ``except vcfvirtual.errors.X`` must
catch what the codec (installed alone by readers) raises."""

from __future__ import annotations

import vcfvirtual_codec.errors as codec_errors

import vcfvirtual.errors as errors


def test_every_name_is_the_codec_class():
    assert errors.__all__
    for name in errors.__all__:
        assert getattr(errors, name) is getattr(codec_errors, name), name


def test_every_codec_error_class_is_exported():
    codec_classes = {
        name
        for name, value in vars(codec_errors).items()
        if isinstance(value, type) and issubclass(value, codec_errors.VcfVirtualError)
    }
    assert codec_classes == set(errors.__all__)


def test_codec_error_caught_through_vcfvirtual_name():
    try:
        raise codec_errors.ChunkDecodeError("refs.json", "bad chunk")
    except errors.VcfVirtualError as e:
        assert isinstance(e, errors.ChunkDecodeError)
