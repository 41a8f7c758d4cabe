"""Package discovery only (the metadata lives in pyproject.toml).

The import package ``paigrid`` is assembled from three top-level folders: ``engine/`` is
``paigrid``, ``kernels/`` is ``paigrid.kernels`` and ``datasets/`` is ``paigrid.datasets``.
``pyproject.toml`` cannot express "find the subpackages of a renamed folder", so they are found
here with setuptools' ``find_packages``: a new subpackage is picked up without a list to edit.
"""

from setuptools import find_packages, setup

FOLDERS = {"paigrid": "engine", "paigrid.kernels": "kernels", "paigrid.datasets": "datasets"}

packages = []
package_dir = {}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages += [package] + [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
