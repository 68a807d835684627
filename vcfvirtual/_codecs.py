"""Importing this module registers the ``vcfvirtual.bcf`` codecs (numcodecs and, with
zarr 3, zarr's registry).

Entry points register them for any process; registering again here means codecs resolve
even in an environment whose entry points are stale (e.g. an un-reinstalled editable
build). It is a module of its own, imported by what opens or builds stores, rather than
done by ``import vcfvirtual``: the codec loads zarr and numcodecs (~0.4 s), which commands
that never read a store (``vcfvirtual --help``) should not wait for.
"""

from vcfvirtual_codec import codec

codec.register()
