"""kvsim: a discrete-event simulator for KV-cache capacity planning of LLM serving.

`kvsim.run(scenario, **overrides) -> Result`, `kvsim.load`, `kvsim.compare`, `kvsim.sweep` and `kvsim.plan`
(kvsim/api.py) are the Python API;
they are imported on first use, so `import kvsim` stays light. Every bad input raises `kvsim.KvsimError`
with the one-line message the command line prints.
"""

__version__ = "0.1.0"

from kvsim import native as _native  # noqa: E402  (first: decides compiled or Python for every hot module)

_native.install()

from kvsim.errors import KvsimError, KvsimWarning  # noqa: E402  (light: the error every API call raises)

__all__ = ["KvsimError", "KvsimWarning", "__version__"]

_API = ("run", "load", "Result", "compare", "sweep", "plan")


def __getattr__(name: str):
    if name == "sweep":  # the package kvsim.sweep, callable as the API's sweep()
        import kvsim.sweep

        return kvsim.sweep
    if name in _API:
        from kvsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'kvsim' has no attribute {name!r}")
