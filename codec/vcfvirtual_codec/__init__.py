"""vcfvirtual-codec: the ``vcfvirtual.bcf`` codec and the BCF primitives it decodes with.

Readers need only this package (registered through entry points); the indexer,
``vcfvirtual``, builds on it.
"""

__version__ = "0.1.0"
