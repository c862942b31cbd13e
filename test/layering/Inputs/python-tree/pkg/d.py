from typing import TYPE_CHECKING

from . import a  # a submodule: fine
from .a import f  # noqa: F401

if TYPE_CHECKING:  # never runs: not counted
    from . import f  # noqa: F811
