"""The documentation site builds without a warning (broken links, missing pages, API
references that no longer resolve)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mkdocs_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "open_store" in api and "BCFParser" in api
