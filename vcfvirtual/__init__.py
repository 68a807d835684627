"""vcfvirtual: existing BCF files served as virtual VCF Zarr stores."""

__version__ = "0.1.0"

from . import codec as _codec  # noqa: E402

# Registering on import as well as through entry points means codecs resolve even in
# an environment whose entry points are stale (e.g. an un-reinstalled editable build).
_codec.register()

from .api import index, open_store  # noqa: E402
from .errors import VcfVirtualError  # noqa: E402
from .regions import select_region  # noqa: E402

__all__ = ["index", "open_store", "select_region", "VcfVirtualError", "__version__"]
