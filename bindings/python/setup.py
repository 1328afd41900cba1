"""pip install --no-build-isolation bindings/python: builds chorus._C and chorusrun with CMake,
then packages them with the pure-Python sources, libchorus.so (found through the extension's
$ORIGIN rpath) and the chorus-timeline tool, and installs the `chorusrun` and `chorus-timeline`
commands (bindings/python/commands: they run what the package carries).

The build directory: CHORUS_CMAKE_BUILD_DIR if set; else build/ at the repository root when
scripts/build.sh (or scripts/demo.sh, scripts/test.sh) has configured it there, so a built tree
is reused, not rebuilt; else build/pip, configured once, then built incrementally.
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


def _build_dir():
    chosen = os.environ.get("CHORUS_CMAKE_BUILD_DIR")
    if chosen:
        return chosen
    main_build = os.path.join(ROOT, "build")
    if os.path.exists(os.path.join(main_build, "build.ninja")):
        return main_build
    return os.path.join(ROOT, "build", "pip")


class CMakeBuild(build_py):
    def run(self):
        build_dir = _build_dir()
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release", "-DCHORUS_BUILD_TESTS=OFF",
                "-DPython_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "chorus_python_ext",
                               "chorusrun"])
        package_src = os.path.join(build_dir, "python", "chorus")
        package_dst = os.path.join(self.build_lib, "chorus")
        shutil.rmtree(package_dst, ignore_errors=True)
        shutil.copytree(package_src, package_dst,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # What the commands run (commands/): the launcher and the timeline tool.
        os.makedirs(os.path.join(package_dst, "bin"))
        shutil.copy2(os.path.join(build_dir, "launcher", "chorusrun"),
                     os.path.join(package_dst, "bin", "chorusrun"))
        for tool in ("chorus_timeline.py", "chorus_flight.py"):
            shutil.copy2(os.path.join(ROOT, "timeline", "tools", tool),
                         os.path.join(package_dst, "bin", tool))
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
    scripts=["commands/chorusrun", "commands/chorus-timeline"],
    zip_safe=False,
)
