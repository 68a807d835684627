"""The local staging of a run whose outputs are named by URL.

Outputs are made in a private local folder and uploaded once complete, the cache before
the references that name it: an object store shows an object only when its upload has
finished, so readers never see references without their cache. Whatever way the run
ends (success, an error, an interruption), the folder goes; on failure, so does what was
already uploaded, so nothing half-made stands under the final names.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from .. import interrupts
from . import remote as storage
from .parts import part_url

logger = logging.getLogger(__name__)


class Staging:
    """A context manager over one run's staging folder.

    Parameters
    ----------
    folder : Path or None
        The staging folder to create on entry (it must not exist); None for a run
        with nothing to upload, where :meth:`publish` only places the references.
    cache : tuple of (Path, str) or None
        (local file or folder of parts, URL) of the cache to upload, or None; a folder's
        parts are uploaded one by one under its URL (``<url>/part-000000``...).
    refs : tuple of (Path, str) or None
        (local file, URL) of the references to upload, or None.
    storage_options : dict or None
        fsspec options reaching the URLs.
    """

    def __init__(
        self,
        folder: Path | None,
        *,
        cache: tuple[Path, str] | None = None,
        refs: tuple[Path, str] | None = None,
        storage_options: dict | None = None,
    ):
        self.folder = folder
        self.cache = cache
        self.refs = refs
        self.storage_options = storage_options
        self.uploaded: list[str] = []

    def __enter__(self) -> Staging:
        if self.folder is not None:
            self.folder.mkdir(mode=0o700)  # private, as mkdtemp makes one
        return self

    def written_in_place(self, urls: list[str]) -> None:
        """Objects the run wrote under their final URLs (a cache made of parts, uploaded
        by its writers): removed, as uploads are, if the run fails after all."""
        self.uploaded.extend(urls)

    def publish(self, place_references: Callable[[], None] | None = None) -> None:
        """Upload the cache, put the references in place locally (``place_references``,
        e.g. their rename from a temporary), then upload the references."""
        interrupts.raise_pending()  # an interrupted run publishes nothing (vcfvirtual.interrupts)
        if self.cache is not None:
            logger.info("uploading the cache to %s", self.cache[1])
            self._upload(*self.cache)
        if place_references is not None:
            place_references()
        if self.refs is not None:
            self._upload(*self.refs)

    def _upload(self, local: Path, url: str) -> None:
        if local.is_dir():  # a cache made of parts: each one, under the folder's URL
            for part in sorted(local.iterdir()):
                self._upload(part, part_url(url, part.name))
            return
        storage.upload(local, url, self.storage_options)
        self.uploaded.append(url)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if kind is not None:
                self._withdraw()
        finally:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)

    def _withdraw(self) -> None:
        """A failed run: what was uploaded goes again. Best effort: the run's own error
        is the one to report."""
        for url in self.uploaded:
            try:
                storage.remove(url, self.storage_options)
            except Exception:  # noqa: BLE001 - the remote library's own errors
                logger.warning("could not remove %s, uploaded by this failed run", url)
        self.uploaded.clear()
