"""pip install --no-build-isolation bindings/python: builds chorus._C with CMake, then packages
it with the pure-Python sources and libchorus.so (found through the extension's $ORIGIN rpath).

CHORUS_CMAKE_BUILD_DIR: an existing or new build directory to use (default: build/pip at the
repository root); configured once, then built incrementally.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # the wheel carries a compiled extension: tag it for this platform


class CMakeBuild(build_py):
    def run(self):
        build_dir = os.environ.get("CHORUS_CMAKE_BUILD_DIR") or os.path.join(ROOT, "build", "pip")
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release", "-DCHORUS_BUILD_TESTS=OFF",
                "-DPython_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "chorus_python_ext"])
        package_src = os.path.join(build_dir, "python", "chorus")
        package_dst = os.path.join(self.build_lib, "chorus")
        shutil.rmtree(package_dst, ignore_errors=True)
        shutil.copytree(package_src, package_dst,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # The extension needs libchorus.so.<major> (its soname), next to it.
        for lib in glob.glob(os.path.join(build_dir, "runtime", "libchorus.so.*")):
            if not os.path.islink(lib):
                major = "libchorus.so." + os.path.basename(lib).split(".")[2]
                shutil.copy2(lib, os.path.join(package_dst, major))


setup(
    name="chorus",
    version="0.1.0",
    description="Collective communication for data-parallel training (horovod.torch drop-in)",
    python_requires=">=3.9",
    # Copied from the CMake build by CMakeBuild.
    packages=["chorus", "chorus.elastic", "chorus.torch", "chorus.torch.elastic"],
    distclass=BinaryDistribution,
    cmdclass={"build_py": CMakeBuild},
    zip_safe=False,
)
