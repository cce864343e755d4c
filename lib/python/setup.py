# SPDX-License-Identifier: MIT
"""Builds the moecache Python package: moecache._moecache (a C extension over
libmoecache's public API) and the pure-Python moecache.table and
moecache.torch.

The extension links libmoecache statically (its symbols hidden), so that the
package needs nothing but itself at run time. MOECACHE_INCLUDE and
MOECACHE_LIBDIR name the public headers and the folder of libmoecache.a
(the top Makefile passes build/include and build/lib).
"""
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
include = os.environ.get("MOECACHE_INCLUDE", os.path.join(here, "..", "..", "build", "include"))
libdir = os.environ.get("MOECACHE_LIBDIR", os.path.join(here, "..", "..", "build", "lib"))

ext = Extension(
    "moecache._moecache",
    sources=["src/_moecache.c"],
    include_dirs=[include],
    extra_objects=[os.path.join(libdir, "libmoecache.a")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wshadow",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wstrict-prototypes", "-Wmissing-prototypes"],
    extra_link_args=["-Wl,--exclude-libs,ALL", "-pthread"],
    depends=["src/dlpack_abi.h"],
)

setup(
    name="moecache",
    version="0.1",
    description="Python binding of libmoecache: a machine-wide MoE expert cache",
    license="MIT",
    packages=["moecache"],
    package_data={"moecache": ["py.typed", "*.pyi"]},
    ext_modules=[ext],
    python_requires=">=3.9",
)
