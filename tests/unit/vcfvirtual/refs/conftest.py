"""Fixtures of the reference tests."""

from __future__ import annotations

from typing import Any

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


def count_calls(monkeypatch, owner: Any, name: str) -> list:
    """``owner.name`` patched to record each call's second argument (the references' path,
    for the checks) before calling through; the list of what it recorded."""
    calls = []
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls
