"""A face: it re-exports."""
from .a import f  # noqa: F401
