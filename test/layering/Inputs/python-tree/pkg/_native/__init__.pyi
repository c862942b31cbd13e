# A package of stubs, as nanobind.stubgen writes a compiled module's: its
# relative imports name its own submodules.
from . import sub as sub
