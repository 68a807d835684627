"""vcfvirtual: existing BCF files served as virtual VCF Zarr stores."""

import sys

__version__ = "0.1.0"

# VirtualiZarr 2 and zarr 3 need 3.12: a forced install on an older Python says so in one line.
if sys.version_info < (3, 12):  # noqa: UP036
    raise ImportError(
        f"vcfvirtual needs Python >= 3.12, this is {sys.version.split()[0]}; to read stores "
        "someone shared, vcfvirtual-codec (codec/) alone installs on Python >= 3.10"
    )

__all__ = [
    "index",
    "index_with_summary",
    "run_index",
    "IndexOptions",
    "open_store",
    "select_region",
    "BCFParser",
    "VcfVirtualError",
    "__version__",
]

# The library API loads numpy, pysam and (opening stores) zarr, VirtualiZarr and xarray; a reader that only
# needs the codec (resolved through entry points), or the command line's --help, should
# not pay for them, so they load on first use. The modules that build or open stores
# register the codecs (vcfvirtual._codecs); importing the package alone does not.
_LAZY = {
    "index": ("api", "index"),
    "index_with_summary": ("api", "index_with_summary"),
    "run_index": ("api", "run_index"),
    "IndexOptions": ("plan", "IndexOptions"),
    "open_store": ("refs.open", "open_store"),
    "select_region": ("regions", "select_region"),
    "BCFParser": ("parser", "BCFParser"),
    "VcfVirtualError": ("errors", "VcfVirtualError"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
