"""What `vcfvirtual index` tells its user: the help names every output's default, the
progress shows labelled phases in order (scan, compress, references), the scan bar moves
block by block to the BCF's size, and a Dask scheduler that cannot be reached is named by
its address."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from click.testing import CliRunner

import vcfvirtual._progress
from vcfvirtual.cli import main
from vcfvirtual.scan.scanner import scan_bcf


def _words(text: str) -> str:
    return " ".join(text.split())  # click wraps help text at the terminal's width


def test_index_help_gives_each_formats_default_output():
    out = _words(CliRunner().invoke(main, ["index", "--help"]).output)
    option = out.split("-o, --output PATH", 1)[1].split(" --cache ", 1)[0]
    defaults = ("<BCF>.vcz.json", "<BCF>.vcz.parq for --format parquet", "<BCF>.vcz.icechunk for --format icechunk")
    for default in defaults:
        assert default in option, option


@pytest.mark.parametrize("layout", ["columns", "bgzf"])
def test_progress_shows_labelled_phases_in_order(cohort_bcf, tmp_path, layout):
    bcf = tmp_path / "c.bcf"
    shutil.copy(cohort_bcf, bcf)
    result = CliRunner().invoke(main, ["index", "--progress", "--cache-layout", layout, str(bcf)])
    assert result.exit_code == 0, result.output
    # Every bar redraw starts with its label; the last draw of each phase is complete.
    draws = [d for d in re.split(r"[\r\n]+", result.stderr) if "|" in d]
    labels = [d.split(":", 1)[0].strip() for d in draws]
    order = [label for i, label in enumerate(labels) if i == 0 or labels[i - 1] != label]
    assert order == ["scan", "compress", "references"], labels
    for phase in order:
        last = [d for d, label in zip(draws, labels) if label == phase][-1]
        assert "100%" in last, last


class _Recorder:
    """Stands in for tqdm: keeps every position a bar is moved to."""

    bars: list[_Recorder] = []

    def __init__(self, total=None, desc="", **_):
        self.total, self.desc, self.n, self.positions = total, desc.strip(), 0, []
        _Recorder.bars.append(self)

    def update(self, n=1):
        self.n += n
        self.positions.append(self.n)

    def close(self):
        pass


def test_the_scan_bar_moves_block_by_block_to_the_file_size(cohort_bcf, monkeypatch):
    """No 4 MiB jumps (the file's read size): each step is at most one BGZF block
    (<= 64 KiB compressed), and the bar ends at the BCF's size."""
    monkeypatch.setattr(vcfvirtual._progress, "tqdm", _Recorder)
    _Recorder.bars = []
    scan_bcf(cohort_bcf, lambda header: 100, progress=True)
    (bar,) = _Recorder.bars
    assert bar.desc == "scan" and bar.total == os.path.getsize(cohort_bcf)
    steps = [b - a for a, b in zip([0, *bar.positions], bar.positions)]
    assert len(steps) > 5 and all(0 <= s <= 65536 for s in steps[:-1]), steps
    assert bar.positions[-1] == bar.total


def test_an_unreachable_dask_scheduler_is_named(small_bcf, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")

    def refuse(address, timeout):
        raise OSError(f"Timed out trying to connect to {address} after {timeout} s")

    monkeypatch.setattr(distributed, "Client", refuse)
    result = CliRunner().invoke(main, ["index", "--dask-scheduler", "tcp://10.1.2.3:8786", str(small_bcf)])
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith("vcfvirtual: error: tcp://10.1.2.3:8786: cannot reach the Dask scheduler (Timed out"), line
    assert "<input>" not in line
