"""Builds the compiled kernels (Cython, C); everything else is in pyproject.toml.

Kernels are compiled at install so that neither importing the codec nor a first read
waits for a compiler. A source install needs a C compiler (as numcodecs' does); the
wheels carry the built modules.
"""

from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = Path("vcfvirtual_codec/_kernels")

extensions = [
    Extension(f"vcfvirtual_codec._kernels.{pyx.stem}", [str(pyx)]) for pyx in sorted(KERNELS.glob("*.pyx"))
]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
