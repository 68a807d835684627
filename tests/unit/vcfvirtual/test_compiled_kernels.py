"""The indexer's compiled kernels (demux, scan, verify) on their own: the GT byte map the
writer applies is the one the codec undoes, and outputs too small for what a kernel
would write are refused before it writes (the kernels run without bounds checks)."""

from __future__ import annotations

import numpy as np
import pytest
from vcfvirtual_codec import columns as codec_columns
from vcfvirtual_codec._kernels import verify_cells

from vcfvirtual.cache import columns_demux as demux
from vcfvirtual.scan import kernel


def test_the_writer_shifts_gt_by_what_the_codec_adds_back():
    assert demux.GT_SHIFT == codec_columns.GT_SHIFT == 2


def test_scan_refuses_outputs_shorter_than_its_capacity():
    buf = np.zeros(64, np.uint8)
    out = [np.zeros(4, np.int64)] + [np.zeros(4, np.int32) for _ in range(4)] + [np.zeros(3, np.int32)]
    stats = kernel.new_stats(2), kernel.new_stats(2)
    kinds = np.zeros(2, np.int8), np.zeros(2, np.int8), np.zeros(2, bool)
    with pytest.raises(ValueError, match="holds 3 records"):
        kernel.scan_records(buf, 1, 1, -1, 0, *out, *stats, *kinds)


def test_verify_decoders_refuse_mismatched_shapes():
    raw = np.zeros((2, 3, 2), np.int32)
    gt = np.zeros((2, 3, 1), np.int8)
    with pytest.raises(ValueError, match="phased"):
        verify_cells.decode_genotypes(
            raw, np.ones(2, np.int64), np.ones(2, bool), gt, np.zeros((2, 2), bool), np.zeros((2, 3), bool), 127
        )
    with pytest.raises(ValueError, match="must match"):
        verify_cells.decode_cells(
            raw,
            np.zeros((2, 2, 1), np.int64),
            np.ones(2, bool),
            np.zeros(2, np.int64),
            True,
            False,
            False,
            np.zeros((2, 3), np.int64),
            np.zeros((2, 3), bool),
        )
