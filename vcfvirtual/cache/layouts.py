"""The transcode cache's layouts."""

from __future__ import annotations

LAYOUTS = ("raw", "bgzf")
