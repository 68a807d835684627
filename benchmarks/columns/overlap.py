"""Index pass of cohort A with and without inflating the next chunk on a thread (``ahead``),
against ``bgzip -dc``: medians of 3, interleaved; asserts both caches are byte-identical.

    PYTHONPATH=$PWD:$PWD/codec python benchmarks/columns/overlap.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from columns import layout as L  # noqa: E402
from columns.measure import DEFAULT_CODECS  # noqa: E402

BCF = Path("/work/cohorts/sim_10000_2.5e+07.bcf")


def main(repeats: int = 3):
    with tempfile.TemporaryDirectory() as tmp:
        out = {flag: Path(tmp) / f"a{int(flag)}.columns" for flag in (False, True)}
        L.write(BCF, out[True], 1000, 1000, DEFAULT_CODECS, ahead=True)  # warm: numba cache, page cache
        times = {"serial": [], "ahead": [], "bgzip -dc": []}
        for _ in range(repeats):
            for flag in (False, True):
                times["ahead" if flag else "serial"].append(
                    L.write(BCF, out[flag], 1000, 1000, DEFAULT_CODECS, ahead=flag)["seconds"]
                )
            t = time.perf_counter()
            subprocess.run(f"bgzip -dc '{BCF}' > /dev/null", shell=True, check=True)
            times["bgzip -dc"].append(time.perf_counter() - t)
        assert out[False].read_bytes() == out[True].read_bytes()
    for name, ts in times.items():
        print(f"{name}: median {statistics.median(ts):.2f} s of {[round(t, 2) for t in ts]}")


if __name__ == "__main__":
    main()
