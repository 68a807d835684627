"""The demux kernel alone on the first chunk of cohort A, best of 10 (the index pass shares
its core with inflate; this separates the kernel's own speed).

    PYTHONPATH=$PWD:$PWD/codec python benchmarks/columns/demux_alone.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from columns import demux as D  # noqa: E402
from columns import stream  # noqa: E402

BCF = Path("/work/cohorts/sim_10000_2.5e+07.bcf")


def best(fn, repeats: int = 10) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    h, buf, offs = next(stream.chunks(BCF, 1000))
    islot, fslot = D.slot_maps([f.key for f in h.info], [f.key for f in h.formats])
    mb = buf.nbytes / 1e6
    for samples_chunk_size in (1000, 10_000):
        for gt_slot in (-1, 0):
            args = (
                buf,
                offs,
                islot,
                fslot,
                len(h.info),
                len(h.formats),
                len(h.samples),
                samples_chunk_size,
                -1,
                gt_slot,
            )
            scratch = D.demux_chunk(*args)[0]
            reused = best(lambda args=args, scratch=scratch: D.demux_chunk(*args, scratch))
            fresh = best(lambda args=args: D.demux_chunk(*args))
            print(
                f"samples_chunk_size {samples_chunk_size}, GT shift {gt_slot >= 0}: "
                f"{mb / reused:.0f} MB/s reusing its output, {mb / fresh:.0f} MB/s allocating it"
            )
    out = np.empty_like(buf)
    out[:] = buf
    print(f"memcpy of the chunk: {mb / best(lambda: np.copyto(out, buf)):.0f} MB/s")


if __name__ == "__main__":
    main()
