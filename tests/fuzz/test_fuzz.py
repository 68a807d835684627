"""Fuzzing: mutated BCF files through the scanner, mutated chunks through the codec.

The targets live in tests/fuzz_targets.py and each runs in a child process: the
kernels are compiled C with no bounds checks, so a read past a buffer could kill the
process, and that must fail one test here with the input that caused it, not end the
pytest run. A child that runs too long (a hang) is killed and fails too.

In the suite each target runs a fixed, derandomized set of examples (seconds each).
VCFVIRTUAL_HYPOTHESIS=deep runs each target for VCFVIRTUAL_FUZZ_SECONDS (default
300) of fresh random examples, on a copy of the codec whose kernels are built with
AddressSanitizer, so that any read outside a buffer stops the child (a failed test)
instead of reading garbage; see tests/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEEP = os.environ.get("VCFVIRTUAL_HYPOTHESIS") == "deep"
# Examples per target in the suite: the codec targets cost ~10 ms an example, the
# scanner targets (index + xarray + pysam per example) 30-200 ms.
SUITE_EXAMPLES = {
    "scan_bgzf_flip": 60,
    "scan_bgzf": 120,
    "scan_plain": 100,
    "scan_bgzf_columns": 60,
    "codec_raw": 300,
    "codec_bgzf": 200,
    "codec_columns": 200,
    "codec_columns_sealed": 200,
    "references": 60,
}


@cache
def sanitized_codec() -> Path:
    """A copy of codec/ whose kernels are built with AddressSanitizer (setup.py's
    VCFVIRTUAL_KERNELS_SANITIZE), in a folder of its own so that it never mixes with the
    installed build; about a minute to build, once per deep run."""
    root = Path.home() / ".cache" / "vcfvirtual-asan-codec"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "codec", root, ignore=shutil.ignore_patterns("*.so", "*.c", "build", "*.egg-info"))
    env = {**os.environ, "VCFVIRTUAL_KERNELS_SANITIZE": "address"}
    cmd = [sys.executable, "setup.py", "build_ext", "--inplace", "-q"]
    subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root


def deep_environment() -> dict[str, str]:
    """The child's environment for a deep run: the sanitized kernels first on the path,
    ASan's runtime preloaded (Python itself is not built with it), and every Python
    allocation through malloc, so that ASan guards the bytes objects too."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True)
    return {
        "PYTHONPATH": os.pathsep.join([str(sanitized_codec()), str(REPO), os.environ.get("PYTHONPATH", "")]),
        "LD_PRELOAD": libasan.stdout.strip(),
        "ASAN_OPTIONS": "detect_leaks=0",
        "PYTHONMALLOC": "malloc",
    }


def run_target(target: str, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if DEEP:
        seconds = float(os.environ.get("VCFVIRTUAL_FUZZ_SECONDS", "300"))
        env.update(
            VCFVIRTUAL_FUZZ_SECONDS=str(seconds),
            VCFVIRTUAL_FUZZ_EXAMPLES="200",
            **deep_environment(),
        )
        timeout = seconds + 600  # ASan slows the kernels 2-3x; the build is apart
    else:
        env["VCFVIRTUAL_FUZZ_EXAMPLES"] = str(SUITE_EXAMPLES[target])
        timeout = 240
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.fuzz_targets", target, str(work)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{target} hung (> {timeout} s); last example: {_last(work)}\n{(e.stderr or '')[-3000:]}")
    if proc.returncode != 0:
        how = f"crashed (signal {-proc.returncode})" if proc.returncode < 0 else f"failed (exit {proc.returncode})"
        pytest.fail(f"{target} {how}; last example: {_last(work)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("FUZZ-STATS "))
    stats = json.loads(line.removeprefix("FUZZ-STATS "))
    print(json.dumps(stats, indent=1))  # shown with -s: how many cases, which outcomes
    return stats


def _last(work: Path) -> str:
    f = work / "current-example.txt"
    return f.read_text() if f.exists() else "(none recorded)"


@pytest.mark.parametrize("target", list(SUITE_EXAMPLES))
def test_fuzz_target(target, tmp_path):
    stats = run_target(target, tmp_path)
    outcomes = stats["outcomes"]
    assert stats["cases"] >= (SUITE_EXAMPLES[target] if not DEEP else 1)
    # Guards on the fuzzer itself: it must reach both outcomes, or it tests nothing.
    if target.startswith("scan"):
        assert any(k.startswith("typed error") for k in outcomes), outcomes
        assert any(k.startswith("values") for k in outcomes), outcomes
    elif target == "references":
        assert any(k.startswith("open_store: typed error") for k in outcomes), outcomes
        assert outcomes.get("open_store: the seed's values", 0) > 0, outcomes
    elif target == "codec_raw":
        assert any(k.startswith("raw: values equal") for k in outcomes), outcomes
        assert outcomes.get("arrays refused 18/18", 0) > 0, outcomes
    elif target.startswith("codec_columns"):
        # Both outcomes: damage refused by every array reading the segment, and (sealed:
        # a changed value the kernels accept; stored: a byte carrying no data) decoded.
        assert any(k.startswith("readers refused 0/") for k in outcomes), outcomes
        assert any(k.startswith("readers refused") and not k.startswith("readers refused 0/") for k in outcomes)
    else:
        assert outcomes.get("arrays refused 18/18", 0) > 0, outcomes
