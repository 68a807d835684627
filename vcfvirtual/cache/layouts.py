"""The transcode cache's layouts, by name: a layout is one module implementing
:class:`~vcfvirtual.cache.base.CacheLayout` and one entry here."""

from __future__ import annotations

from .base import CacheLayout
from .bgzf import BGZFLayout
from .raw import RawLayout

LAYOUT_WRITERS: dict[str, CacheLayout] = {layout.name: layout for layout in (RawLayout(), BGZFLayout())}
LAYOUTS = tuple(LAYOUT_WRITERS)
