"""Builds the compiled kernels (Cython, C); everything else is in pyproject.toml.

Kernels are compiled at install so that neither importing the codec nor a first read
waits for a compiler. A source install needs a C compiler (as numcodecs' does); the
wheels carry the built modules.

VCFVIRTUAL_KERNELS_SANITIZE=address builds them with AddressSanitizer, for the deep fuzz
run (tests/README.md): the kernels run without bounds checks, and a read outside a
buffer must stop the process there rather than return garbage.
"""

import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = Path("vcfvirtual_codec/_kernels")
SANITIZE = os.environ.get("VCFVIRTUAL_KERNELS_SANITIZE")
COMPILE_ARGS = [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer", "-g"] if SANITIZE else []
LINK_ARGS = [f"-fsanitize={SANITIZE}"] if SANITIZE else []

extensions = [
    Extension(
        f"vcfvirtual_codec._kernels.{pyx.stem}",
        [str(pyx)],
        extra_compile_args=COMPILE_ARGS,
        extra_link_args=LINK_ARGS,
    )
    for pyx in sorted(KERNELS.glob("*.pyx"))
]

# Translated and compiled on every core: an install waits for the kernels' build (~40 s on
# one core), which is most of the codec's install time.
JOBS = os.cpu_count() or 1

setup(
    ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}, nthreads=JOBS),
    options={"build_ext": {"parallel": JOBS}},
)
