"""Build hook: copies into the package what it ships from the repository.

- data/h200-results.json (the project's measured H200 table) ->
  ktune/data/h200-results.json, always (a build without it fails);
- libktune.so -> ktune/lib/libktune.so, from $KTUNE_LIB when set, else the
  repository's build/libktune.so when it exists; a build without one still
  installs, and the package then finds the library through KTUNE_LIB or
  ktune.load(lib=...) at run time.

Nothing is copied into the source tree: the copies go to the build folder
only.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class BuildPy(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "ktune")
        table = os.path.join(REPO, "data", "h200-results.json")
        if not os.path.isfile(table):
            raise SystemExit(f"ktune setup: {table} not found: build from a ktune checkout")
        os.makedirs(os.path.join(pkg, "data"), exist_ok=True)
        shutil.copyfile(table, os.path.join(pkg, "data", "h200-results.json"))
        lib = os.environ.get("KTUNE_LIB") or os.path.join(REPO, "build", "libktune.so")
        if os.path.isfile(lib):
            os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
            shutil.copyfile(lib, os.path.join(pkg, "lib", "libktune.so"))
            print(f"ktune setup: bundled {lib}")
        elif os.environ.get("KTUNE_LIB"):
            raise SystemExit(f"ktune setup: KTUNE_LIB={lib} is not a file")
        else:
            print("ktune setup: no libktune.so bundled (set KTUNE_LIB at build or run time)")


setup(cmdclass={"build_py": BuildPy})
