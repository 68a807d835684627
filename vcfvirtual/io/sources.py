"""Opening an input where it is: a local path, or a URL reached through fsspec (``s3://``,
``gs://``, ``https://``), so that a worker of a partitioned index reads its own part of
a remote BCF by range requests instead of the caller streaming it all."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, BinaryIO, cast

from ..errors import NotBCFError
from . import remote

StorageOptions = Mapping[str, Any] | None


def open_source(path: str | os.PathLike[str], storage_options: StorageOptions = None) -> BinaryIO:
    """``path`` opened for reading (seekable; a URL's file reads ahead in large blocks).

    Raises
    ------
    NotBCFError
        A local file that cannot be opened.
    VcfVirtualError
        A URL that cannot be read.
    """
    if remote.is_url(path):
        return cast(BinaryIO, remote.open_input(path, dict(storage_options or {})))
    try:
        return open(path, "rb")
    except OSError as e:
        raise NotBCFError(os.fspath(path), f"cannot open: {e.strerror}") from None


def source_size(path: str | os.PathLike[str], storage_options: StorageOptions = None) -> int:
    """The size in bytes of a local file or of the object at a URL."""
    if remote.is_url(path):
        fs, inner = remote.filesystem(path, dict(storage_options or {}))
        return int(fs.size(inner))
    return os.path.getsize(path)
