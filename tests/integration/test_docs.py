"""The documentation works as written.

* The site builds without a warning (broken links, missing pages, API references that no
  longer resolve).
* Every Python and shell block of the README and of docs/ runs, in page order, in a folder
  holding the example files the pages name (``cohort.bcf``, ``chr20.bcf``...). Placeholder
  services are real ones on loopback: ``s3://bucket`` is a bucket of a moto S3 server
  (reached through the standard ``AWS_ENDPOINT_URL``), ``http://minio:9000`` is that server,
  ``https://data.example.org/...`` and ``https://host/...`` an HTTP server with Range
  support serving the page's folder, ``tcp://scheduler:8786`` a local Dask scheduler, and
  ``aws s3 cp`` a stand-in for the AWS CLI. A block is skipped only when an HTML comment
  ``<!-- docs-test: skip: REASON -->`` right above it says why; ``<!-- docs-test: lines -->``
  runs each line of a shell block on its own from the page's starting folder (a list of
  alternatives).
* The README's two set-up commands are the ones CI runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from .. import bcfdata
from ..conftest import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNNABLE = {"python": "python", "bash": "bash", "sh": "bash"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(\w+)(?::\s*(.*?))?\s*-->")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    source: str
    directive: str | None
    reason: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the directive just above each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        directive = _DIRECTIVE.search(above)
        blocks.append(
            Block(
                str(path.relative_to(ROOT)),
                start + 1,
                lang,
                "\n".join(lines[start + 1 : end]) + "\n",
                directive.group(1) if directive else None,
                directive.group(2) if directive else None,
            )
        )
        i = end + 1
    return blocks


def runnable_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang in RUNNABLE for b in page_blocks(p))]


def test_mkdocs_builds_strict(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "open_store" in api and "BCFParser" in api


def test_site_settings_point_at_this_project():
    """No link to another project's repository (this one has no public home yet), and
    code blocks scroll rather than being cut off."""
    settings = (ROOT / "mkdocs.yml").read_text()
    assert "repo_url" not in settings or "vcfvirtual" in settings.split("repo_url:", 1)[1].split("\n", 1)[0]
    assert "css/extra.css" in settings and "overflow-x: auto" in (ROOT / "docs" / "css" / "extra.css").read_text()


def test_readme_set_up_commands_are_what_ci_runs():
    """The README's two set-up commands (install + example, tests) run verbatim in CI."""
    setup = [b for b in page_blocks(ROOT / "README.md") if b.directive == "skip" and "set-up" in (b.reason or "")]
    assert len(setup) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    for block in setup:
        assert block.source.strip() in ci, f"{block.where} is not in .ci/run"


def test_install_lines_exist():
    """No page tells anyone to pip install a distribution the package index does not have:
    the reader is installed from a clone as ``./codec`` (``"./codec[s3]"`` for S3), the
    indexer's extras as ``-e '.[extra]'``."""
    for page in [*PAGES, ROOT / "codec" / "README.md"]:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"pip install (-\S+ )*['\"]?vcfvirtual", text), page
        for line in re.findall(r"pip install [^`\n]*codec[^`\n]*", text):
            assert re.search(r"(\./codec(?!\[)|\"\./codec\[s3\]\")", line), f"{page}: {line}"


def test_every_skipped_block_says_why():
    for page in PAGES:
        for block in page_blocks(page):
            if block.directive is not None:
                assert block.directive in ("skip", "lines"), f"{block.where}: unknown directive {block.directive}"
            if block.directive == "skip":
                assert block.reason, f"{block.where}: a skipped block must say why"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The files the pages name, as a user following them would have them: written once
    per run, in the base folder pytest-xdist's workers share (every page copies it before
    running anything, so none changes it), under a lock whichever worker comes first."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    work = base / "docs-pristine"
    with open(base / "docs-pristine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not work.exists():
            partial = base / f"docs-pristine.partial-{os.getpid()}"
            _write_pristine(partial)
            partial.rename(work)  # whole or absent
    return work


def _write_pristine(work: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_example import write_example
    finally:
        sys.path.remove(str(ROOT / "examples"))
    example = write_example(work / "examples" / "data" / "example.bcf")
    shutil.copy(example, work / "cohort.bcf")
    bcfdata.bcftools("index", "-f", work / "cohort.bcf")
    bcfdata.bcftools("view", "--no-version", "-Oz", "-o", work / "cohort.vcf.gz", work / "cohort.bcf")
    for contig in ("chr20", "chr21"):
        bcfdata.bcftools("view", "--no-version", "-r", contig, "-Ob", "-o", work / f"{contig}.bcf", work / "cohort.bcf")


@pytest.fixture(scope="module")
def aws_shim(tmp_path_factory):
    """`aws s3 cp [--recursive] SRC DST`, the one AWS CLI command the pages use, through s3fs
    (``--recursive``: SRC's files into the folder DST, as the AWS CLI copies a folder)."""
    bin_dir = tmp_path_factory.mktemp("aws-shim")
    script = bin_dir / "aws"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent("""
        import os, sys, s3fs
        assert sys.argv[1:3] == ["s3", "cp"], sys.argv
        recursive = sys.argv[3] == "--recursive"
        src, dst = sys.argv[3 + recursive : 5 + recursive]
        fs = s3fs.S3FileSystem()
        if recursive:
            for name in sorted(os.listdir(src)):
                fs.put_file(os.path.join(src, name), dst.rstrip("/").removeprefix("s3://") + "/" + name)
            sys.exit(0)
        if dst.endswith("/"):
            dst += src.rsplit("/", 1)[-1]
        fs.put_file(src, dst.removeprefix("s3://"))
    """)
    )
    script.chmod(0o755)
    return bin_dir


def _services(text: str, work: Path, s3_server, http_server, request) -> tuple[dict, dict]:
    """(environment, URL substitutions) for the placeholder services a page names."""
    env, subs = {}, {}
    if "s3://" in text or "minio" in text:
        import s3fs

        endpoint = s3_server["endpoint_url"]
        env.update(
            AWS_ENDPOINT_URL=endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        subs["http://minio:9000"] = endpoint
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server)
        if fs.exists("bucket"):
            fs.rm("bucket", recursive=True)
        fs.call_s3("create_bucket", Bucket="bucket")
        fs.put_file(str(work / "cohort.bcf"), "bucket/cohort.bcf")
    if "https://data.example.org/" in text or "https://host/" in text:
        base = http_server(work)
        subs["https://data.example.org/cohorts/"] = base
        subs["https://host/vcz/"] = base
    if "tcp://scheduler:8786" in text:
        distributed = pytest.importorskip("distributed")
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
        request.addfinalizer(cluster.close)
        subs["tcp://scheduler:8786"] = cluster.scheduler_address
    subs["file:///data/cohort.bcf"] = f"file://{work}/cohort.bcf"
    subs["file:///mnt/copy/"] = f"file://{work}/"
    return env, subs


@pytest.fixture
def http_server():
    import http.server

    from .test_remote_read import RangeHandler

    servers = []

    def serve(directory: Path) -> str:
        handler = type("Handler", (RangeHandler,), {"directory": str(directory), "stats": {}})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        serve_in_thread(server)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page, pristine, aws_shim, s3_server, http_server, request, tmp_path):
    blocks = [b for b in page_blocks(page) if b.lang in RUNNABLE and b.directive != "skip"]
    if not blocks:
        pytest.skip("every block of this page is skipped, each with its reason")
    work = shutil.copytree(pristine, tmp_path / "work", symlinks=True)
    text = "".join(b.source for b in blocks)
    env, subs = _services(text, work, s3_server, http_server, request)
    plan = []
    for b in blocks:
        source = b.source
        for placeholder, live in subs.items():
            source = source.replace(placeholder, live)
        plan.append({"lang": RUNNABLE[b.lang], "source": source, "where": b.where, "lines": b.directive == "lines"})
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"pristine": str(pristine), "blocks": plan}))
    path = os.pathsep.join([str(Path(sys.executable).parent), str(aws_shim), os.environ.get("PATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "tests.docs_runner", str(plan_file)],
        cwd=work,
        # This checkout's codec too: a venv's editable install may point at another checkout.
        env={**os.environ, **env, "PATH": path, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "codec")])},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
