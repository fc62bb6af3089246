"""Frozen value classes for the types every ``pinwise run`` loads, without ``dataclasses``.

Importing ``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``): about
10 ms, and each class it builds costs another 0.5 ms; for the five types a plain
``pinwise run --no-verify --cpus 0`` needs (Policy, Placement, Plan, Rounds, Machine) that was a
third of its start-up (benchmarks/pin_overhead.py compares it with hwloc-bind). Those five derive
from :class:`Frozen`, and so do the options records of the commands that share their module with
``pinwise run`` (pinwise.cli.placing); every other type of pinwise is a frozen dataclass.

A subclass declares its fields as annotations and their defaults as class attributes, as for a
dataclass::

    class Rounds(Frozen):
        size: int
        count: int
        threads: int = 0

and gets a constructor (positional or keyword arguments), ``__repr__``, ``__eq__`` and
``__hash__`` over the fields, ``replace(**changes)``, and a ``__post_init__`` hook to check its
invariants. Assigning to a field raises AttributeError.
"""

from __future__ import annotations


class Frozen:
    """An immutable record whose fields are the subclass's annotations, in order."""

    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = tuple(name for name in cls.__dict__.get("__annotations__", {}) if not name.startswith("_"))
        cls._fields = tuple(dict.fromkeys(cls._fields + own))
        required_after_default = [name for i, name in enumerate(cls._fields)
                                  if not hasattr(cls, name) and any(hasattr(cls, f) for f in cls._fields[:i])]
        if required_after_default:
            raise TypeError(f"{cls.__name__}: field {required_after_default[0]!r} without a default follows one with")

    def __init__(self, *args, **kwargs):
        name = type(self).__name__
        if len(args) > len(self._fields):
            raise TypeError(f"{name} takes at most {len(self._fields)} arguments ({len(args)} given)")
        values = dict(zip(self._fields, args))
        for key, value in kwargs.items():
            if key not in self._fields:
                raise TypeError(f"{name} has no field {key!r}")
            if key in values:
                raise TypeError(f"{name} got {key!r} twice")
            values[key] = value
        missing = [field for field in self._fields if field not in values and not hasattr(type(self), field)]
        if missing:
            raise TypeError(f"{name} needs {', '.join(missing)}")
        for key, value in values.items():
            object.__setattr__(self, key, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Check the fields' invariants (raise on a bad value); nothing by default."""

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to {name!r}: a {type(self).__name__} is frozen (use replace)")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete {name!r}: a {type(self).__name__} is frozen")

    def _values(self) -> tuple:
        return tuple(getattr(self, field) for field in self._fields)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self):
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def replace(self, **changes):
        """A copy with ``changes`` applied (checked again by ``__post_init__``)."""
        return type(self)(**{**dict(zip(self._fields, self._values())), **changes})
