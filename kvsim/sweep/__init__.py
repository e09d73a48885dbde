"""Many runs of one scenario: compare, repeats, plan, sweep.

`kvsim.sweep` is this package and also the Python API's `kvsim.sweep(spec, ...)`: calling the package calls
kvsim/sweep/run.py `sweep_table` (its module class gets a __call__), since importing any of its modules
makes `kvsim.sweep` name the package.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from kvsim.sweep.run import sweep_table

        return sweep_table(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
