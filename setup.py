"""pip install . (pyproject.toml): the project's CMake builds the module (target tarnn_python), and
the package holds it, its type stubs and the shipped models (PREFIX/share/tarnn/models, where
tarnn.Model("mnist") finds them, as `tarnn --model mnist` does). docs/PYTHON.md.

Environment:
  TARNN_CMAKE_BUILD_DIR  a CMake build folder to reuse (configured for this Python, with the
                         module on): only the module is built there. Without it, or when it does
                         not fit, a folder of the package's own (build/setuptools/temp.*/cmake).
  CMAKE_ARGS             more arguments for that folder's configure (e.g. -DTARNN_CUDA=ON).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(tarnn VERSION ([0-9.]+)", f.read()).group(1)


def cache_entries(build_dir):
    """NAME -> value of a build folder's CMakeCache.txt ({} without one)."""
    entries = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"([A-Za-z_0-9]+):[A-Z]+=(.*)", line.rstrip("\n"))
                if m:
                    entries[m.group(1)] = m.group(2)
    except OSError:
        pass
    return entries


def why_not_reusable(build_dir):
    """None where the folder builds this Python's module, else why not."""
    cache = cache_entries(build_dir)
    if not cache:
        return "no CMakeCache.txt there"
    if os.path.realpath(cache.get("CMAKE_HOME_DIRECTORY", "")) != os.path.realpath(SOURCE):
        return "configured for another source tree"
    if cache.get("TARNN_PYTHON", "OFF").upper() not in ("ON", "TRUE", "1"):
        return "its TARNN_PYTHON is OFF"
    python = cache.get("_Python_EXECUTABLE") or cache.get("Python_EXECUTABLE", "")
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return f"configured for {python}, not {sys.executable}"
    return None


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("TARNN_CMAKE_BUILD_DIR", "")
        why = why_not_reusable(build_dir) if build_dir else None
        if why:
            print(f"setup.py: not reusing TARNN_CMAKE_BUILD_DIR={build_dir}: {why}", file=sys.stderr)
        if not build_dir or why:
            build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            self.configure(build_dir)
        subprocess.run(["cmake", "--build", build_dir, "--target", "tarnn_python",
                        "-j", str(os.cpu_count() or 1)], check=True)
        built = os.path.join(build_dir, "python")
        module = os.path.join(built, "tarnn" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.isfile(module):
            sys.exit(f"setup.py: the build made no {module}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(module, target)
        shutil.copyfile(os.path.join(built, "tarnn.pyi"),
                        os.path.join(os.path.dirname(target), "tarnn.pyi"))

    @staticmethod
    def configure(build_dir):
        # only what the module needs: no tests; the CUDA plugin is not part of the package
        args = ["cmake", "-S", SOURCE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}", "-DTARNN_PYTHON=ON",
                "-DTARNN_BUILD_TESTS=OFF", "-DTARNN_CUDA=OFF"]
        subprocess.run(args + shlex.split(os.environ.get("CMAKE_ARGS", "")), check=True)


def models():
    """data_files for models/NAME/* -> PREFIX/share/tarnn/models/NAME/."""
    out = []
    for name in sorted(os.listdir(os.path.join(SOURCE, "models"))):
        folder = os.path.join("models", name)
        files = sorted(os.path.join(folder, f) for f in os.listdir(os.path.join(SOURCE, folder)))
        out.append((f"share/tarnn/models/{name}",
                    [f for f in files if os.path.isfile(os.path.join(SOURCE, f))]))
    return out


# setuptools' own folders: in the reused CMake folder, else in the build/ that .gitignore covers
BUILD_BASE = os.path.join(os.environ.get("TARNN_CMAKE_BUILD_DIR") or "build", "setuptools")
os.makedirs(BUILD_BASE, exist_ok=True)

setup(
    version=version(),
    ext_modules=[Extension("tarnn", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    data_files=models(),
    zip_safe=False,
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
