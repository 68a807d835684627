"""An xarray backend: ``xr.open_dataset("cohort.bcf.vcz.json", engine="vcfvirtual")``."""

from __future__ import annotations

import os

from xarray.backends import BackendEntrypoint


class VcfVirtualBackend(BackendEntrypoint):
    """Open the Kerchunk JSON that ``vcfvirtual index`` writes, checking its cache first."""

    description = "Open a vcfvirtual store (the Kerchunk JSON of vcfvirtual index) as a VCF Zarr dataset"
    url = "https://github.com/sgkit-dev/vcf-zarr-spec"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "check")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, check: bool = True):
        import xarray as xr

        from .refs.open import open_store

        store = open_store(filename_or_obj, check=check)
        return xr.open_zarr(store, consolidated=False, drop_variables=drop_variables, chunks=None)

    def guess_can_open(self, filename_or_obj) -> bool:
        try:
            return os.fspath(filename_or_obj).endswith(".vcz.json")
        except TypeError:
            return False
