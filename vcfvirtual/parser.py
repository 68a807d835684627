"""VirtualiZarr's parser protocol: ``open_virtual_dataset(url, registry, parser=BCFParser())``.

The parser keeps its options in ``__init__`` and does its IO in ``__call__``: it indexes the
BCF (writing the transcode cache, no references) and returns the ManifestStore whose arrays
decode through the ``vcfvirtual.bcf`` codec, so ``vds.vz.to_kerchunk(...)`` and
``vds.vz.to_icechunk(...)`` keep the codec in what they write.
"""

from __future__ import annotations

from urllib.parse import urlparse

from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ManifestStore

from . import _codecs  # noqa: F401  (registers the codecs, for stale entry points)
from .cache.columns import DEFAULT_SAMPLES_CHUNK_SIZE
from .cache.names import LayoutName
from .errors import VcfVirtualError


class BCFParser:
    """Index a BCF into a virtual VCF Zarr ManifestStore.

    Parameters
    ----------
    cache_path
        Where the transcode cache goes; default ``<bcf>.vcz.cache.columns`` (``.cache.bcf``
        for the ``bgzf`` and ``raw`` layouts) next to the BCF.
    variants_chunk_size, cache_layout, samples_chunk_size, inflate_threads
        As for :func:`vcfvirtual.index` (``samples_chunk_size``: the columns layout's
        samples blocks).
    force
        Overwrite an existing cache (default True: opening the same BCF twice rewrites the
        same bytes, so the parser stays stateless, as VirtualiZarr's parsers are).
    progress
        Show progress bars while indexing (default False; None shows them on a terminal).

    Examples
    --------
    >>> from virtualizarr import open_virtual_dataset  # doctest: +SKIP
    >>> vds = open_virtual_dataset("file:///data/x.bcf", registry=registry, parser=BCFParser())  # doctest: +SKIP
    >>> vds.vz.to_kerchunk("x.json", format="json")  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        cache_path=None,
        variants_chunk_size: int | None = None,
        cache_layout: LayoutName | None = None,
        samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
        inflate_threads: int = 0,
        force: bool = True,
        progress: bool | None = False,
    ):
        self.cache_path = cache_path
        self.variants_chunk_size = variants_chunk_size
        self.cache_layout = cache_layout
        self.samples_chunk_size = samples_chunk_size
        self.inflate_threads = inflate_threads
        self.force = force
        self.progress = progress

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Index the BCF at ``url`` and return its store.

        Parameters
        ----------
        url
            A local path or ``file://`` URL of the BCF (or VCF).
        registry
            The caller's object store registry. The store reads the cache this call
            writes, always a local file, through a local-file registry of its own, so
            the caller's registry need not reach local files.

        Returns
        -------
        ManifestStore
            The virtual VCF Zarr store, its arrays decoding through ``vcfvirtual.bcf``.

        Raises
        ------
        VcfVirtualError
            ``url`` is remote, or indexing fails (an unreadable or malformed BCF, an
            output that cannot be written: the subclasses :func:`vcfvirtual.index` raises).
        """
        from .api import index

        return index(
            _local_path(url),
            refs_path=False,
            cache_path=self.cache_path,
            variants_chunk_size=self.variants_chunk_size,
            cache_layout=self.cache_layout,
            samples_chunk_size=self.samples_chunk_size,
            inflate_threads=self.inflate_threads,
            force=self.force,
            progress=self.progress,
        )


def _local_path(url: str) -> str:
    parsed = urlparse(str(url))
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else str(url)
    raise VcfVirtualError(
        url,
        f"BCFParser reads local BCFs only, not {parsed.scheme}:// URLs yet",
        hint="copy the BCF locally, or see the project's issue on remote sources",
    )
