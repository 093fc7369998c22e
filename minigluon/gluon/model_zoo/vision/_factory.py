"""Named model builders: `resnet50_v1 = factory("resnet50_v1", get_resnet, 1, 50)`."""


def factory(name, get, *args, **fixed):
    """A function `name(**kwargs)` returning get(*args, **fixed, **kwargs)."""
    def build(**kwargs):
        return get(*args, **fixed, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"The {name} model: {get.__name__}{args!r} with the given options."
    return build
