"""Fixtures of the reference tests."""

from __future__ import annotations

import pytest

from vcfvirtual.io import user_cache
from vcfvirtual.refs import checks


@pytest.fixture
def user_cache_root(tmp_path, monkeypatch):
    """A user cache folder of the test's own (``$VCFVIRTUAL_CACHE_DIR``), and no header
    parsed earlier in this process."""
    folder = tmp_path / "user-cache"
    monkeypatch.setenv(user_cache.ENV, str(folder))
    checks._parsed_header.cache_clear()
    yield folder
    checks._parsed_header.cache_clear()
