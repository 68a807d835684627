"""Compiled kernels (Cython, built at install): record framing, the codec's decoders and
the indexer's scan. ``bcf.pxd`` holds the BCF primitives every kernel inlines."""
