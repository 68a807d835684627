"""What a run shows while it works: one labelled bar per phase of ``vcfvirtual index``
(scan, compress, references), each finishing before the next starts, so nothing runs
under a bar that has stopped moving or has no name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tqdm.auto import tqdm

# The phases' names line up, so the bars read as one column.
_WIDTH = len("write parts")


def byte_bar(phase: str, total: int, progress: bool | None) -> tqdm:
    """A bar over ``total`` bytes for ``phase``; ``progress`` None shows it only on a terminal."""
    return _bar(phase, total, progress, "B")


def record_bar(phase: str, total: int, progress: bool | None) -> tqdm:
    """A bar over ``total`` records for ``phase``."""
    return _bar(phase, total, progress, " records")


def _bar(phase: str, total: int, progress: bool | None, unit: str) -> tqdm:
    return tqdm(
        total=total,
        unit=unit,
        unit_scale=True,
        desc=phase.ljust(_WIDTH),
        disable=None if progress is None else not progress,
    )


@contextlib.contextmanager
def phase(name: str, progress: bool | None) -> Iterator[None]:
    """A step with no byte count to follow (the last chunks' compression, the references):
    its own labelled bar, complete when the step is."""
    bar = tqdm(
        total=1,
        desc=name.ljust(_WIDTH),
        bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}]",
        disable=None if progress is None else not progress,
    )
    try:
        yield
        bar.update(1)
    finally:
        bar.close()
