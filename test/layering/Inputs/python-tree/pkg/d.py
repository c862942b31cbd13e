from . import a  # a submodule: fine
from .a import f  # noqa: F401
