"""`@record`: the frozen, slotted classes of the message bodies (messages.py).

They were `@dataclass(frozen=True, slots=True)`; a dataclass writes and compiles its
methods' source for each class, about 0.7 ms apiece, so the 18 bodies cost every process
of a job 12 ms of its start. A record gets the same behaviour from shared functions: an
__init__ over the annotated fields (positional or by name, the class attributes as
defaults), == and hash over the fields for instances of the same class, a repr, and
FrozenInstanceError on assignment. `replace(**changes)` is dataclasses.replace.

>>> @record
... class Point:
...     x: int
...     y: int = 0
>>> Point(1) == Point(x=1, y=0), Point(1).replace(y=2)
(True, Point(x=1, y=2))
"""
from dataclasses import FrozenInstanceError

__all__ = ["record"]


def record(cls):
    """Class decorator: `cls` as a frozen class with slots for its annotated fields."""
    fields = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {name: cls.__dict__[name] for name in fields if name in cls.__dict__}
    body = {k: v for k, v in cls.__dict__.items()
            if k not in defaults and k not in ("__dict__", "__weakref__")}
    body.update(__slots__=fields, _fields=fields, _defaults=defaults)
    for name, method in _METHODS.items():
        body.setdefault(name, method)     # a class's own == and hash stay (RowIds)
    return type(cls)(cls.__name__, cls.__bases__, body)


def _init(self, *args, **kwargs):
    fields = self._fields
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, "
                        f"got {len(args)}")
    for name, value in zip(fields, args):
        object.__setattr__(self, name, value)
    for name in fields[len(args):]:
        if name in kwargs:
            value = kwargs.pop(name)
        elif name in self._defaults:
            value = self._defaults[name]
        else:
            raise TypeError(f"{type(self).__name__}() is missing the argument {name!r}")
        object.__setattr__(self, name, value)
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got unexpected or repeated arguments "
                        f"{sorted(kwargs)}")


def _values(self):
    return tuple(getattr(self, name) for name in self._fields)


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self):
    return hash(_values(self))


def _repr(self):
    inside = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
    return f"{type(self).__qualname__}({inside})"


def _frozen(self, name, *value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _replace(self, **changes):
    return type(self)(**{**dict(zip(self._fields, _values(self))), **changes})


_METHODS = {"__init__": _init, "__eq__": _eq, "__hash__": _hash, "__repr__": _repr,
            "__setattr__": _frozen, "__delattr__": _frozen, "replace": _replace}
