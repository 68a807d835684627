"""The transcode cache's layouts."""

from __future__ import annotations

# The codec decodes every layout, so its list is the one list (the codec is the lower layer).
from vcfvirtual_codec.spec import LAYOUTS as LAYOUTS
