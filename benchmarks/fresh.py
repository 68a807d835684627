"""Reads in fresh processes, ours and bio2zarr's alternating, as a user's script, a CLI or a
Dask worker pays for them (issue 24's table).

    python benchmarks/fresh.py COHORT.bcf --workdir DIR [--pairs 3] [--bio2zarr STORE]

Each read is its own new Python process (a short script run by subprocess): interpreter
start, imports, opening the store and the read itself. The parent times each process, wall
by its own clock and CPU by ``resource.getrusage(RUSAGE_CHILDREN)`` before and after (the
child's user + system time, every thread of it). ``--pairs`` times ours and theirs, in turn
first, the medians are kept and the ratio is ours / theirs. Before every timed process a
throwaway one touches ``--prime-gb`` of memory (:func:`prime_memory`: on a virtual machine
whose balloon returns idle memory to the host, the first process after a pause otherwise
pays for the host mapping it back). Our packages are compiled to bytecode first, as a wheel's
install leaves them (:func:`compile_bytecode`). A child also checksums what it read
(CRC32 of the array's bytes, its dtype and shape; printed beside each row, and ours must
equal theirs) and then reads the same again, timed inside the process (the *warm* figure,
what ``benchmarks/bench.py`` measures); it reports both durations so the parent subtracts
them: the fresh figure is everything up to the end of the first read, and the warm column
beside it shows what start-up costs.

Reads: open + the first 1,000 rows of call_genotype, through ``vcfvirtual.open_store`` and
through plain zarr on a ``reference://`` fsspec mapper of the JSON; variant_position;
call_genotype of 10 samples; the whole call_genotype; call_genotype_mask; a 1 Mb region in
the middle of the contig (from region_index, then the rows' genotypes) against bio2zarr's
store and against ``bcftools view -H -r`` on the BCF (its record count must equal the rows');
af-dist (``benchmarks/afdist.py``) against ``bcftools +af-dist`` (the histograms must be
equal); variant_position over HTTP from a loopback server answering Range requests, which
this script starts and which serves both stores; and each array named by ``--arrays``, read
whole against bio2zarr's (cohort B's ``call_AD``, ``call_DP``...).

Beside each median ratio: a 90% bootstrap interval of it (:func:`ratio_interval`: the pairs
drawn again with replacement), and in how many pairs ours took less wall time. With the
region, two more rows, each paired with ``bcftools view -H -r`` in the same way, give what
bcftools leaves any reader through zarr: a process that imports zarr and numpy and reads
nothing (the floor), and the same region from bio2zarr's store.

Our store (``vcfvirtual index``) and bio2zarr's (``vcf2zarr convert``) are made in --workdir
unless found there (or given with --bio2zarr). Each is then opened once, untimed, as a user
opens a store before reading it many times (:func:`first_opens`): our first open after an
index checks everything and keeps what it found for later opens of the same, unchanged files
(``vcfvirtual/refs/opened.py``); what that first open costs is in docs/benchmarks.md. The
table is printed in markdown; --output also writes it to a file. Needs bcftools and the bench extras (bio2zarr).
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import http.server
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent

# ---------------------------------------------------------------------------- the child

# The script each fresh process runs: argv = op, how the store is opened, the store, extra
# JSON (region, benchmarks dir). Kept to the imports the read needs, so that a process pays
# what a user's script would. Prints one JSON line: the checksum, what the checksum and the
# second (warm) read took inside the process.
CHILD = r"""
import json, sys, time
op, how, store, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

def group():
    import zarr
    if how == "open_store":
        import vcfvirtual
        return zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)
    if how == "reference":
        return zarr.open_group("reference://", storage_options={"fo": store}, mode="r", zarr_format=2)
    return zarr.open_group(store, mode="r")

def region_rows(g, region):
    # Rows of variants overlapping the region: region_index names the chunks (columns:
    # chunk, contig, first position, last position, largest end, records), then each
    # chunk's positions and lengths give the rows, as bcftools -r overlaps records.
    import numpy as np
    name, span = region.split(":")
    lo, hi = (int(x) for x in span.replace(",", "").split("-"))
    contig = [str(c) for c in g["contig_id"][:]].index(name)
    index = g["region_index"][:]
    hit = index[(index[:, 1] == contig) & (index[:, 2] <= hi) & (index[:, 4] >= lo)]
    size = g["variant_position"].chunks[0]
    rows = []
    for c in np.unique(hit[:, 0]):
        s = slice(int(c) * size, (int(c) + 1) * size)
        pos = g["variant_position"][s]
        end = pos + g["variant_length"][s] - 1
        keep = (g["variant_contig"][s] == contig) & (pos <= hi) & (end >= lo)
        rows.append(int(c) * size + np.flatnonzero(keep))
    return np.concatenate(rows) if rows else np.zeros(0, np.int64)

def region():
    g = group()
    rows = region_rows(g, extra["region"])
    if not len(rows):
        return g["call_genotype"][0:0]
    first, last = int(rows[0]), int(rows[-1])
    return g["call_genotype"][first : last + 1][rows - first]

def floor():
    # What every zarr reader's process pays before reading anything: the imports.
    import zarr, numpy
    return numpy.zeros(0, numpy.int8)

def afdist():
    sys.path.insert(0, extra["benchmarks"])
    from afdist import afdist
    return afdist(store)

OPS = {
    "first_chunk": lambda: group()["call_genotype"][:1000],
    "position": lambda: group()["variant_position"][:],
    "gt10": lambda: group()["call_genotype"][:, :10],
    "gt": lambda: group()["call_genotype"][:],
    "mask": lambda: group()["call_genotype_mask"][:],
    "array": lambda: group()[extra["field"]][:],
    "region": region,
    "afdist": afdist,
    "floor": floor,
}

value = OPS[op]()
t, c = time.perf_counter(), time.process_time()
import zlib
import numpy as np
a = np.ascontiguousarray(value)
checksum = f"{a.dtype.name}{list(a.shape)}:{zlib.crc32(a.view(np.uint8).reshape(-1)) if a.size else 0:08x}"
check = (time.perf_counter() - t, time.process_time() - c)
rows = int(a.shape[0]) if a.ndim else 0
del value, a  # a whole call_genotype of C is GBs: not two at once
warm = (0.0, 0.0)
if extra.get("warm"):
    t, c = time.perf_counter(), time.process_time()
    OPS[op]()
    warm = (time.perf_counter() - t, time.process_time() - c)
print(json.dumps({"checksum": checksum, "rows": rows, "check": check, "warm": warm}))
"""


@dataclasses.dataclass(frozen=True)
class Run:
    """One fresh process: wall and CPU seconds up to the end of its first read, what it read
    (checksum, rows) and the same read again inside it (warm; None for an outside tool)."""

    wall: float
    cpu: float
    checksum: str
    rows: int
    warm_wall: float | None = None
    warm_cpu: float | None = None


def child_cpu() -> float:
    """User + system CPU of every reaped child so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_process(
    cmd: list[str], env: dict[str, str] | None = None, stdout=subprocess.PIPE
) -> tuple[float, float, str]:
    """(wall, CPU, stdout) of one process run to its end."""
    cpu0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, check=True, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
    return time.perf_counter() - t0, child_cpu() - cpu0, proc.stdout or ""


def compile_bytecode() -> None:
    """Compile vcfvirtual's and its codec's modules to bytecode, as installing a wheel does.

    An editable install (this checkout) leaves them as source, and where
    PYTHONDONTWRITEBYTECODE is set (this machine) every process compiles them again:
    ``open_store`` then took 95 ms in a fresh process instead of 42 ms, 63 ms of it
    ``compile``. bio2zarr, zarr and numpy, installed from wheels, come compiled; this puts
    both sides on that footing. Writes ``__pycache__`` folders in the packages (ignored by
    git)."""
    import importlib.util

    for name in ("vcfvirtual", "vcfvirtual_codec"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folder = next(iter(spec.submodule_search_locations))
            subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True, stdout=subprocess.DEVNULL)


# A process that touches ``sys.argv[1]`` bytes of new memory and exits (see prime_memory).
PRIMER = "import sys, numpy; numpy.ones(int(sys.argv[1]), numpy.uint8)"


def prime_memory(nbytes: int) -> None:
    """Touch ``nbytes`` of memory in a throwaway process just before a timed one.

    A virtual machine with a free-page-reporting balloon (virtio_balloon here) hands the
    guest's idle free memory back to its host after a second or two; the next process to
    touch those pages waits for the host to map them again. Here 2 GB touched after 3 s of
    quiet took 2.6-5.0 s, and 0.24 s right after another process had freed 2 GB. Which side
    of a pair paid that depended on what ran just before it, not on its own code (a full
    call_genotype read swung between 1.8 and 6.3 s). A primer run before every timed
    process, ours and theirs alike, leaves that memory mapped and free, as a machine
    without such a balloon always has it."""
    if nbytes > 0:
        subprocess.run([sys.executable, "-c", PRIMER, str(nbytes)], check=True)


def run_read(op: str, how: str, store: str, extra: dict, env: dict[str, str] | None = None) -> Run:
    """One read in a fresh Python process (:data:`CHILD`); the checksum and the warm second
    read it reports are taken off the process's wall and CPU."""
    cmd = [sys.executable, "-c", CHILD, op, how, store, json.dumps(extra)]
    try:
        wall, cpu, out = timed_process(cmd, env=env)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"fresh.py: {op} ({how}) on {store} failed:\n{e.stderr}") from None
    got = json.loads(out.strip().splitlines()[-1])
    (check_wall, check_cpu), (warm_wall, warm_cpu) = got["check"], got["warm"]
    warm = extra.get("warm", False)
    return Run(
        wall - check_wall - warm_wall,
        cpu - check_cpu - warm_cpu,
        got["checksum"],
        got["rows"],
        warm_wall if warm else None,
        warm_cpu if warm else None,
    )


# ---------------------------------------------------------------------------- outside tools


def bcftools_region(bcf: Path, region: str) -> Callable[[], Run]:
    """`bcftools view -H -r` on the BCF, its output thrown away (the record count, the
    checksum compared, is taken once beforehand by `bcftools query`)."""
    out = subprocess.run(
        ["bcftools", "query", "-r", region, "-f", ".\n", str(bcf)], check=True, capture_output=True, text=True
    ).stdout
    count = out.count("\n")

    def run() -> Run:
        wall, cpu, _ = timed_process(["bcftools", "view", "-H", "-r", region, str(bcf)], stdout=subprocess.DEVNULL)
        return Run(wall, cpu, f"{count} records", count)

    return run


def bcftools_afdist(bcf: Path) -> Callable[[], Run]:
    """`bcftools +af-dist` on the BCF; the checksum is its PROB_DIST histogram, as
    benchmarks/afdist.py's counts."""

    def run() -> Run:
        wall, cpu, out = timed_process(["bcftools", "+af-dist", str(bcf)])
        counts = [int(line.split("\t")[3]) for line in out.splitlines() if line.startswith("PROB_DIST")]
        return Run(wall, cpu, histogram_checksum(counts), len(counts))

    return run


def histogram_checksum(counts: list[int]) -> str:
    """The af-dist counts as the child checksums its int64 array (so the two compare)."""
    import zlib

    import numpy as np

    a = np.asarray(counts, np.int64)
    return f"{a.dtype.name}{list(a.shape)}:{zlib.crc32(a.view(np.uint8)):08x}"


# ---------------------------------------------------------------------------- HTTP


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Files of the served folder with single-range ``Range: bytes=a-b`` requests answered
    (206), as object stores and web servers answer them; http.server alone ignores Range.
    Every answer names the file's version as nginx does (``Last-Modified``, and an ``ETag``
    of its mtime and size), which a reader may use to skip what it verified before.
    Keep-alive (HTTP/1.1) and each response in one write with Nagle off, as a real server
    answers: otherwise every request waits out a delayed ACK (~40 ms) on loopback."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002 - http.server's name
        pass

    def _answer(self, body_too: bool) -> tuple[int, bytes, dict[str, str]]:
        """(status, body, headers) of the request's file, or of its byte range; the body
        read only when ``body_too`` (a HEAD of a 48 MB cache part read it all: 57 ms)."""
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            return 404, b"", {}
        st = os.stat(path)
        size = st.st_size
        start, end, status = 0, size - 1, 200
        headers = {
            "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
            "ETag": f'"{int(st.st_mtime):x}-{size:x}"',
        }
        wanted = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if wanted and (wanted[1] or wanted[2]):
            if wanted[1]:
                start, end = int(wanted[1]), min(int(wanted[2] or size - 1), size - 1)
            else:  # the last N bytes
                start = max(0, size - int(wanted[2]))
            if start >= size:
                return 416, b"", {"Content-Range": f"bytes */{size}"}
            status, headers["Content-Range"] = 206, f"bytes {start}-{end}/{size}"
        headers["Content-Length"] = str(end - start + 1)
        if not body_too:
            return status, b"", headers
        with open(path, "rb") as f:
            f.seek(start)
            return status, f.read(end - start + 1), headers

    def _reply(self, body_too: bool) -> None:
        status, body, headers = self._answer(body_too)
        headers |= {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        headers.setdefault("Content-Length", str(len(body)))
        lines = [f"{self.protocol_version} {status} {self.responses[status][0]}"]
        lines += [f"{key}: {value}" for key, value in headers.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + (body if body_too else b""))  # status, headers, body: one write

    def do_GET(self) -> None:
        self._reply(body_too=True)

    def do_HEAD(self) -> None:
        self._reply(body_too=False)


class WebServer(http.server.ThreadingHTTPServer):
    """A listen backlog of a web server's (nginx 511, Apache 511): Python's default of 5
    drops the connections past the fifth of a burst of concurrent requests, and each dropped
    one waits a second for the client's SYN to be resent, which no real server makes a
    reader pay (a reader opening requests concurrently would pay it here)."""

    request_queue_size = 128


def serve(folder: str) -> None:
    """Serve ``folder`` on a free loopback port; print the port, then serve until killed."""
    handler = lambda *a: RangeHandler(*a, directory=folder)  # noqa: E731
    server = WebServer(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Server:
    """The Range server in its own process (its CPU is no read's), stopped by its pid."""

    def __init__(self, folder: Path):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(folder)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def http_stores(work: Path, refs: Path, theirs: Path) -> Path:
    """A folder to serve: bio2zarr's store and our cache linked in, our JSON copied (its
    cache URL set when the server's port is known)."""
    folder = work / "http"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "bio2zarr.vcz").symlink_to(theirs.resolve())
    cache = json.loads(refs.read_text())["templates"]["cache"]
    local = Path(cache.removeprefix("file://"))
    (folder / local.name).symlink_to(local)
    shutil.copy(refs, folder / "ours.vcz.json")
    return folder


# ---------------------------------------------------------------------------- stores


def our_store(bcf: Path, work: Path) -> Path:
    """Our references for ``bcf`` in ``work``, indexed with the defaults unless there."""
    refs = work / (bcf.name + ".vcz.json")
    if not refs.exists():
        cache = work / (bcf.name + ".vcz.cache.columns")
        cmd = [str(BIN / "vcfvirtual"), "index", "--force", "--no-progress", "-o", str(refs), "--cache", str(cache)]
        subprocess.run([*cmd, str(bcf)], check=True)
    return refs


def their_store(bcf: Path, work: Path, given: Path | None) -> Path:
    """bio2zarr's store of ``bcf`` with its defaults: given, or in ``work``, or converted."""
    if given is not None:
        return given
    store = work / (bcf.name + ".bio2zarr.vcz")
    # A finished conversion leaves a note beside it (bench.py's leaves its .seconds).
    done = [store.with_name(store.name + suffix) for suffix in (".done", ".seconds")]
    if not any(note.exists() for note in done):
        shutil.rmtree(store, ignore_errors=True)
        subprocess.run([str(BIN / "vcf2zarr"), "convert", "--force", str(bcf), str(store)], check=True)
        done[0].write_text("converted by benchmarks/fresh.py\n")
    return store


def indexed_copy(bcf: Path, work: Path) -> Path:
    """The BCF linked into ``work`` with a CSI index beside it, for `bcftools -r` (the
    cohort's own folder is left as it is)."""
    link = work / bcf.name
    if not link.exists():
        link.symlink_to(bcf.resolve())
    if not Path(str(link) + ".csi").exists():
        subprocess.run(["bcftools", "index", "-f", str(link)], check=True)
    return link


def middle_megabase(refs: Path) -> str:
    """1 Mb in the middle of the first contig's variants, as CHROM:START-END."""
    meta = json.loads(json.loads(refs.read_text())["refs"][".zattrs"])
    scan = meta["vcfvirtual"]["scan"]
    first, last = scan["pos_range"]
    header = meta["vcf_header"]
    contig = re.search(r"##contig=<ID=([^,>]+)", header)
    name = contig[1] if contig else "1"
    start = max(1, (first + last) // 2 - 500_000)
    return f"{name}:{start}-{start + 999_999}"


def settle(refs: Path) -> None:
    """Wait until our references' and cache's files have been unchanged for as long as an
    open needs to keep what it found of them (files written more recently are checked
    again at every open: vcfvirtual/refs/opened.py)."""
    from vcfvirtual.refs.opened import RACY_SECONDS

    cache = refs.with_name(refs.name.removesuffix(".json") + ".cache.columns")
    files = [refs, *(cache.iterdir() if cache.is_dir() else [])]
    newest = max(max(p.stat().st_mtime, p.stat().st_ctime) for p in files)
    time.sleep(max(0.0, newest + RACY_SECONDS + 0.5 - time.time()))


def first_opens(refs: Path, theirs: Path | None) -> None:
    """Open each store once, untimed, in a fresh process, once our files have settled."""
    settle(refs)
    run_read("position", "open_store", str(refs), {})
    if theirs is not None:
        run_read("position", "plain", str(theirs), {})


# ---------------------------------------------------------------------------- the table


@dataclasses.dataclass
class Row:
    """One read: ours and theirs alternating, ``pairs`` times."""

    label: str
    ours: Callable[[], Run]
    theirs: Callable[[], Run]
    theirs_name: str = "bio2zarr"
    runs: list[tuple[Run, Run]] = dataclasses.field(default_factory=list)
    # Not ours against theirs: a floor beside the region (printed in a table of its own).
    floor: bool = False

    def measure(self, prime: int, theirs_first: bool) -> None:
        """One pair; ``theirs_first`` alternates the order between pairs, so that neither
        side always runs after the other's process."""
        sides = [self.theirs, self.ours] if theirs_first else [self.ours, self.theirs]
        runs = []
        for side in sides:
            prime_memory(prime)
            runs.append(side())
        self.runs.append((runs[1], runs[0]) if theirs_first else (runs[0], runs[1]))

    def median(self, side: int, field: str) -> float | None:
        values = [getattr(pair[side], field) for pair in self.runs]
        return None if None in values else statistics.median(values)

    def interval(self, field: str = "wall") -> tuple[float, float]:
        """:func:`ratio_interval` of the pairs' ``field``."""
        return ratio_interval([(getattr(o, field), getattr(t, field)) for o, t in self.runs])

    def ours_faster(self) -> int:
        """Pairs whose own process took less wall time than the other side's in that pair."""
        return sum(o.wall < t.wall for o, t in self.runs)

    def checks(self) -> str:
        ours = {pair[0].checksum for pair in self.runs}
        theirs = {pair[1].checksum for pair in self.runs}
        if len(ours) == 1 and ours == theirs:
            return f"equal {next(iter(ours))}"
        if self.theirs_name.startswith("bcftools view"):
            rows = {pair[0].rows for pair in self.runs} | {pair[1].rows for pair in self.runs}
            return f"{rows.pop()} rows, both" if len(rows) == 1 else f"DIFFER rows {sorted(rows)}"
        return f"DIFFER ours {sorted(ours)} theirs {sorted(theirs)}"


def ratio_interval(pairs: list[tuple[float, float]], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 90% bootstrap interval of median(ours) / median(theirs): the pairs drawn again
    with replacement ``resamples`` times (seeded: the same pairs give the same interval),
    the 5th and 95th percentiles of the ratios they give. Pairs, not each side alone, are
    drawn, as the two processes of a pair ran under the same load. A target of <= 1.0x is
    met beyond this run's noise when the interval's upper end is <= 1.0, and missed beyond
    it when its lower end is above 1.0; an interval across 1.0 is a draw this run cannot call."""
    import random

    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        drawn = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        theirs = statistics.median(t for _, t in drawn)
        ratios.append(statistics.median(o for o, _ in drawn) / theirs if theirs > 0 else math.inf)
    ratios.sort()
    return ratios[int(0.05 * (resamples - 1))], ratios[int(0.95 * (resamples - 1))]


def measure_pairs(rows: list[Row], pairs: int, prime_gb: float) -> None:
    """Every row's ``pairs`` pairs, row after row within a pair; ours first in odd pairs,
    theirs first in even ones, ``prime_gb`` GB primed before each timed process."""
    for i in range(pairs):
        for row in rows:
            row.measure(int(prime_gb * 1e9), theirs_first=i % 2 == 1)
            print(f"  pair {i + 1}: {row.label} vs {row.theirs_name}", file=sys.stderr)


def how_measured(pairs: int, prime_gb: float) -> str:
    """The title's account of :func:`measure_pairs` and of the machine's load now."""
    load = os.getloadavg()
    return (
        f"medians of {pairs} fresh-process pairs (ours first in odd pairs, theirs first in even ones; {prime_gb:g} GB "
        f"of memory touched by a throwaway process before each); ratios ours / theirs; load {load[0]:.1f} "
        f"{load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )


def print_table(text: str, output: Path | None) -> None:
    """Print the table, and write it to ``output`` too when given."""
    print(text)
    if output:
        output.write_text(text + "\n")


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


def _interval(r: Row, field: str) -> str:
    lo, hi = r.interval(field)
    return f"{lo:.2f}-{hi:.2f}"


def markdown(rows: list[Row], title: str) -> str:
    head = (
        "| read (fresh process) | vs | ours wall s | theirs wall s | ratio wall | 90% interval | ours faster "
        "| ours CPU s | theirs CPU s | ratio CPU | 90% interval | warm ours s | warm theirs s | values |"
    )
    lines = [title, "", head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        if r.floor:
            continue
        ow, tw = r.median(0, "wall"), r.median(1, "wall")
        oc, tc = r.median(0, "cpu"), r.median(1, "cpu")
        lines.append(
            f"| {r.label} | {r.theirs_name} | {_s(ow)} | {_s(tw)} | {_ratio(ow, tw)} | {_interval(r, 'wall')} "
            f"| {r.ours_faster()} of {len(r.runs)} | {_s(oc)} | {_s(tc)} | {_ratio(oc, tc)} | {_interval(r, 'cpu')} "
            f"| {_s(r.median(0, 'warm_wall'))} | {_s(r.median(1, 'warm_wall'))} | {r.checks()} |"
        )
    floors = [r for r in rows if r.floor]
    if floors:
        lines += ["", FLOOR_TITLE, "", "| process | vs | its wall s | theirs wall s | ratio wall | 90% interval |"]
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for r in floors:
            w, tw = r.median(0, "wall"), r.median(1, "wall")
            ratio = f"{_ratio(w, tw)} | {_interval(r, 'wall')}"
            lines.append(f"| {r.label} | {r.theirs_name} | {_s(w)} | {_s(tw)} | {ratio} |")
    return "\n".join(lines)


# Beside a read against an outside tool (bcftools): what any reader through zarr pays against it.
FLOOR_TITLE = (
    "What the outside tool leaves any reader through zarr (each paired with it, alternating, as above): "
    "a process that imports zarr and numpy and reads nothing, and the same read from bio2zarr's store"
)


def placeholder() -> str:
    """The table's rows with no numbers: what docs/benchmarks.md shows until measured."""
    head = "| read (fresh process), ours / theirs | A: 10,000 x 25 Mb | C: 100,000 x 2 Mb |"
    lines = [head, "| --- | --- | --- |"]
    lines += [f"| {label} vs {vs} | to be measured | to be measured |" for label, _, _, vs in READS]
    return "\n".join(lines)


# label, op, how ours is opened, what theirs is
READS = [
    ("open + first 1,000 rows of call_genotype", "first_chunk", "open_store", "bio2zarr"),
    ("same through plain `reference://`", "first_chunk", "reference", "bio2zarr"),
    ("`variant_position`", "position", "open_store", "bio2zarr"),
    ("`call_genotype` of 10 samples", "gt10", "open_store", "bio2zarr"),
    ("full `call_genotype`", "gt", "open_store", "bio2zarr"),
    ("`call_genotype_mask`", "mask", "open_store", "bio2zarr"),
    ("1 Mb region", "region", "open_store", "bio2zarr"),
    ("1 Mb region", "region", "open_store", "bcftools view -H -r"),
    ("af-dist", "afdist", "open_store", "bcftools +af-dist"),
    ("`variant_position` over HTTP (loopback Range server)", "position", "http", "bio2zarr over HTTP"),
]


def read_in(op: str, how: str, store: str, extra: dict) -> Callable[[], Run]:
    """A fresh-process read to run later (each pair calls it again)."""
    return lambda: run_read(op, how, store, extra)


def build_rows(args, refs: Path, theirs: Path, bcf: Path, server: Server | None) -> list[Row]:
    region = args.region or middle_megabase(refs)
    extra = {"warm": not args.no_warm, "region": region, "benchmarks": str(HERE)}
    rows = []
    for label, op, how, vs in READS:
        if args.only and op not in args.only:
            continue
        ours_store, theirs_store = str(refs), str(theirs)
        if how == "http":
            if server is None:
                continue
            ours_store, how, theirs_store = f"{server.url}/ours.vcz.json", "open_store", f"{server.url}/bio2zarr.vcz"
        if vs.startswith("bio2zarr"):
            other = read_in(op, "dir", theirs_store, extra)
        elif vs.startswith("bcftools view"):
            other = bcftools_region(indexed_copy(bcf, args.workdir), region)
            floors = [
                ("zarr and numpy imported, nothing read", read_in("floor", "dir", theirs_store, extra)),
                (f"1 Mb region {region}, bio2zarr's store", read_in(op, "dir", theirs_store, extra)),
            ]
            rows += [Row(label, process, other, vs, floor=True) for label, process in floors]
        else:
            other = bcftools_afdist(bcf)
        rows.append(
            Row(label + (f" {region}" if op == "region" else ""), read_in(op, how, ours_store, extra), other, vs)
        )
    for name in args.arrays:  # whole arrays named on the command line (cohort B's FORMAT fields)
        named = {**extra, "field": name}
        rows.append(
            Row(
                f"`{name}`",
                read_in("array", "open_store", str(refs), named),
                read_in("array", "dir", str(theirs), named),
                "bio2zarr",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    if argv is None and sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bcf", type=Path, nargs="?", help="the cohort (a BGZF BCF)")
    parser.add_argument("--workdir", type=Path, help="where both stores are made or found (required)")
    parser.add_argument("--bio2zarr", type=Path, help="bio2zarr's store of the BCF (default: converted in --workdir)")
    parser.add_argument("--pairs", type=int, default=3, help="ours/theirs pairs per read; medians (default 3)")
    parser.add_argument("--region", help="the region read (default: 1 Mb in the middle of the variants)")
    parser.add_argument("--only", help="comma-separated ops: first_chunk,position,gt10,gt,mask,region,afdist")
    parser.add_argument(
        "--arrays",
        default="",
        help="comma-separated arrays also read whole, each a row against bio2zarr's store "
        "(e.g. call_AD,call_DP,call_GQ,call_PL for a cohort with FORMAT fields)",
    )
    parser.add_argument("--no-http", action="store_true", help="no HTTP row (no loopback server)")
    parser.add_argument("--no-warm", action="store_true", help="no second read in each process")
    parser.add_argument(
        "--prime-gb",
        type=float,
        default=4.0,
        help="GB of memory a throwaway process touches before every timed one, so that no side pays for "
        "a virtual machine's balloon returning idle memory to its host (see prime_memory; 0: none; default 4)",
    )
    parser.add_argument("--placeholder", action="store_true", help="print the empty table for the docs and stop")
    parser.add_argument("--output", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    if args.placeholder:
        print(placeholder())
        return
    if args.bcf is None or args.workdir is None:
        parser.error("a BCF and --workdir are needed")
    args.only = set(args.only.split(",")) if args.only else None
    args.arrays = [a for a in args.arrays.split(",") if a]
    args.workdir.mkdir(parents=True, exist_ok=True)
    compile_bytecode()
    refs = our_store(args.bcf, args.workdir)
    theirs = their_store(args.bcf, args.workdir, args.bio2zarr)
    first_opens(refs, theirs)
    server = None if args.no_http else Server(http_stores(args.workdir, refs, theirs))
    try:
        if server is not None:
            local = json.loads(refs.read_text())["templates"]["cache"]
            name = Path(local.removeprefix("file://")).name
            served = args.workdir / "http" / "ours.vcz.json"
            cmd = [str(BIN / "vcfvirtual"), "relocate", "--no-check", str(served), f"{server.url}/{name}"]
            subprocess.run(cmd, check=True, capture_output=True)
        rows = build_rows(args, refs, theirs, args.bcf, server)
        measure_pairs(rows, args.pairs, args.prime_gb)
    finally:
        if server is not None:
            server.stop()
    title = (
        f"{args.bcf.name}: {how_measured(args.pairs, args.prime_gb)}; warm = the same read again in the same process"
    )
    print_table(markdown(rows, title), args.output)


if __name__ == "__main__":
    main()
