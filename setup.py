"""Builds qd's Cython extensions: the reference interpreter, the adstack sizer and the launch plans."""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

opt = os.environ.get("QD_BUILD_OPT", "-O3")
common = dict(
    include_dirs=[np.get_include(), "qd"],
    extra_compile_args=[opt, "-fopenmp", "-fno-strict-aliasing", "-Wno-unused-function"],
    extra_link_args=["-fopenmp"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    # Link libm explicitly so the interpreter binds the same (versioned) libm symbols as native code.
    libraries=["m"],
)
extensions = [
    Extension("qd._interp", ["qd/_interp.pyx"], **common),
    Extension("qd._sizer", ["qd/_sizer.pyx"], **common),
    Extension("qd._launch", ["qd/_launch.pyx"], **common),
]
setup(
    ext_modules=cythonize(extensions, language_level=3,
                          compiler_directives={"boundscheck": False, "wraparound": False,
                                               "cdivision": True, "initializedcheck": False}),
)
