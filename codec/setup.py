"""Builds the compiled kernels (Cython, C); everything else is in pyproject.toml.

Kernels are compiled at install so that neither importing the codec nor a first read
waits for a compiler. A source install needs a C compiler (as numcodecs' does); the
wheels carry the built modules.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = ["records"]

extensions = [
    Extension(
        f"vcfvirtual_codec._kernels.{name}",
        [f"vcfvirtual_codec/_kernels/{name}.pyx"],
    )
    for name in KERNELS
]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
