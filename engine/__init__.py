"""paigrid: which training architecture and interconnect make a deep-learning job fastest.

The analytical model of the Alibaba-PAI workload study (Wang et al., IISWC 2019), evaluated by
numba kernels (``paigrid.kernels``) over a labelled grid of workloads x hardware and stored as
an HDF5 cube.  See the README for the model, the cube and the commands, and docs/api.md for
the Python API:

    paigrid.open_dataset(path)     a cube as a lazy xarray.Dataset, with the ds.paigrid accessor
    paigrid.open_dataset(path, group="llm")   the cube's LLM jobs (transformers), same accessor
    paigrid.sweep(spec, out)       a sweep from Python (workloads and LLM models), as an xarray.Dataset

The package's source lives in folders of other names: ``engine/`` is this package, ``paigrid``
(``paigrid.query`` is ``engine/query.py``), ``kernels/`` is ``paigrid.kernels`` and
``datasets/`` is ``paigrid.datasets``; docs/development.md maps every module by layer.

The public names are imported on first use (module ``__getattr__``), so ``import paigrid`` or
``import paigrid.cube`` loads neither xarray, the writer nor numba.
"""

__version__ = "0.2.0"

#: public name -> the module that defines it, imported when the name is first used
_LAZY = {"open_dataset": "paigrid.xarray_api", "sweep": "paigrid.orchestration"}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    """Import a public name's module on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'paigrid' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, the lazy public ones included."""
    return sorted(set(globals()) | set(__all__))
