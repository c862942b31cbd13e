def g():
    # A lazy import closes the circle all the same.
    from .a import f
    return f
