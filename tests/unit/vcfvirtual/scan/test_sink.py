"""The sinks that need nothing of the records: FileSink writes exactly the inflated
stream (Python's gzip is the oracle), NullSink keeps nothing and changes no result
(pysam counts the records)."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pysam

from vcfvirtual.scan.scanner import scan_bcf
from vcfvirtual.scan.sink import FileSink, NullSink, RecordSink

from .... import bcfdata


def _is_a_sink(sink: RecordSink) -> None:
    """Checked by mypy: both sinks satisfy the protocol the scan declares."""


_is_a_sink(NullSink())
_is_a_sink(FileSink(io.BytesIO()))


def test_file_sink_writes_the_inflated_stream(small_bcf, tmp_path):
    out = tmp_path / "stream"
    with open(out, "wb") as f:
        scan_bcf(small_bcf, lambda h: 3, sink=FileSink(f), progress=False)
    assert out.read_bytes() == gzip.decompress(small_bcf.read_bytes())


def test_file_sink_of_an_uncompressed_bcf(small_bcf, tmp_path):
    plain = bcfdata.uncompressed_copy(small_bcf, tmp_path / "plain.bcf")
    buf = io.BytesIO()
    scan_bcf(plain, lambda h: 3, sink=FileSink(buf), progress=False)
    assert buf.getvalue() == plain.read_bytes()


def test_null_sink_scan_counts_what_htslib_reads(small_bcf):
    with pysam.VariantFile(str(small_bcf)) as f:
        positions = [r.pos for r in f]
    scan = scan_bcf(small_bcf, lambda h: 3, sink=NullSink(), progress=False)
    assert scan.num_records == len(positions)
    assert scan.pos_range == (min(positions), max(positions))


def test_file_sink_writes_what_it_is_given():
    buf = io.BytesIO()
    sink = FileSink(buf)
    sink.add_block(b"compressed", b"abc")
    sink.add_block(None, memoryview(b"def"))
    sink.records_scanned(np.array([0, 3], np.int64))
    sink.scanned_to(6)
    assert buf.getvalue() == b"abcdef"
