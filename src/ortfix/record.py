"""Records: dataclass-like classes defined without per-class code generation, for the classes on `check`'s path.

`dataclasses` compiles six methods per class (one `exec` each) when a module defines it, and importing it pulls
`inspect`, `ast`, `dis` and `tokenize`: a fresh `check` spent a third of its instructions there (speed/__init__.py).
A record's `__init__`, `__eq__`, `__hash__`, `__repr__` and (frozen) `__setattr__`/`__delattr__` are written once,
here, and read each class's field table; they behave as `@dataclass(frozen=...)` gives (tests/test_record.py).

`replace`, `asdict` and `fields` below work on records without importing `dataclasses`. The functions of
`dataclasses` work on records too: `__dataclass_fields__` is built on first use, from a shadow dataclass with the same
fields (which imports `dataclasses` then), so off-path code and tests may keep calling `dataclasses.replace`.
"""

from __future__ import annotations

import sys
from operator import attrgetter

TYPE_CHECKING = False
if not TYPE_CHECKING:  # `typing` is for mypy only: importing it is no part of a check's work (speed/__init__.py)
    def dataclass_transform(**_kwargs: object) -> Callable[[object], object]:
        return lambda decorated: decorated

    def overload(function: object) -> object:  # the last definition is the one that runs, as with typing's
        return function
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar, overload

    from typing_extensions import dataclass_transform

    T = TypeVar("T")

_MISSING: object = type("_Missing", (), {"__repr__": lambda self: "MISSING"})()


class Field:
    """One field of a record: its name, its default (or `default_factory`) and whether repr and == see it. A plain
    class: a NamedTuple `exec`s its `__new__` at import, which is what this module avoids."""

    __slots__ = ("compare", "default", "default_factory", "name", "repr", "type")

    def __init__(self, name: str, default: object, default_factory: Callable[[], object] | None,
                 repr: bool, compare: bool, type: object) -> None:  # dataclasses.Field's names
        self.name = name
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.type = type  # the annotation as written (a string under `from __future__ import annotations`)


@overload
def field(*, default: T, repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, default_factory: Callable[[], T], repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, repr: bool = True, compare: bool = True) -> Any: ...
def field(*, default: object = _MISSING, default_factory: Callable[[], object] | None = None,
          repr: bool = True, compare: bool = True) -> Any:
    """A field's options, as `dataclasses.field` takes them (typed as the field's value, as typeshed does)."""
    return Field("", default, default_factory, repr, compare, None)  # named by the class that holds it


def fields(record: object) -> tuple[Field, ...]:
    """The fields of a record class or instance, in definition order."""
    table: tuple[Field, ...] = record.__record_fields__  # type: ignore[attr-defined]
    return table


def is_record(value: object) -> bool:
    return hasattr(type(value), "__record_fields__")


def replace(record: T, **changes: object) -> T:
    """A copy of `record` with `changes` (as `dataclasses.replace`)."""
    for f in fields(record):
        if f.name not in changes:
            changes[f.name] = getattr(record, f.name)
    return type(record)(**changes)


def asdict(record: object) -> dict[str, object]:
    """`record` as a dict, recursively (as `dataclasses.asdict`)."""
    return {f.name: _plain(getattr(record, f.name)) for f in fields(record)}


def _plain(value: object) -> object:
    if is_record(value):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    import copy
    return copy.deepcopy(value)


def _init(self: object, *args: object, **kwargs: object) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__record_names__  # type: ignore[attr-defined]
    # Every field given, all by position or all by name (most records a check makes: 1,100 of them): assigned in
    # field order at once (the shared methods were 13M instructions of a fresh check, speed/__init__.py).
    if not kwargs and len(args) == len(names):
        self.__dict__.update(zip(names, args))
    elif not args and len(kwargs) == len(names) and all(name in kwargs for name in names):
        values = self.__dict__
        for name in names:
            values[name] = kwargs[name]
    else:
        _init_fields(self, cls, args, kwargs)
    if cls.__record_post_init__:  # type: ignore[attr-defined]
        self.__post_init__()  # type: ignore[attr-defined]


def _init_fields(self: object, cls: type, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    table: tuple[Field, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    if len(args) > len(table):
        raise TypeError(f"{cls.__qualname__}.__init__() takes {len(table) + 1} positional arguments "
                        f"but {len(args) + 1} were given")
    values = self.__dict__
    for i, f in enumerate(table):
        if i < len(args):
            if f.name in kwargs:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument '{f.name}'")
            values[f.name] = args[i]
        elif f.name in kwargs:
            values[f.name] = kwargs.pop(f.name)
        elif f.default is not _MISSING:
            values[f.name] = f.default
        elif f.default_factory is not None:
            values[f.name] = f.default_factory()
        else:
            raise TypeError(f"{cls.__qualname__}.__init__() missing 1 required positional argument: '{f.name}'")
    if kwargs:
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")


def _eq(self: object, other: object) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key: Callable[[object], tuple[object, ...]] = self.__class__.__record_key__  # type: ignore[attr-defined]
    return key(self) == key(other)


def _hash(self: object) -> int:
    key: Callable[[object], tuple[object, ...]] = self.__class__.__record_key__  # type: ignore[attr-defined]
    return hash(key(self))


def _repr(self: object) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _frozen_setattr(self: object, name: str, value: object) -> None:
    if type(self).__dict__.get("__record_frozen__") or any(f.name == name for f in fields(self)):
        from dataclasses import FrozenInstanceError
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self: object, name: str) -> None:
    if type(self).__dict__.get("__record_frozen__") or any(f.name == name for f in fields(self)):
        from dataclasses import FrozenInstanceError
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _key(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names) if names else (lambda obj: ())


class _DataclassFields:
    """`__dataclass_fields__`, built on first use from a shadow dataclass, so that `dataclasses`' functions work."""

    def __init__(self) -> None:
        self._built: dict[type, dict[str, object]] = {}

    def __get__(self, instance: object, owner: type) -> dict[str, object]:
        if owner not in self._built:
            self._built[owner] = self._build(owner)
        return self._built[owner]

    @staticmethod
    def _build(owner: type) -> dict[str, object]:
        import dataclasses
        namespace: dict[str, object] = {"__annotations__": {f.name: f.type for f in fields(owner)}}
        for f in fields(owner):
            if f.default_factory is not None:
                namespace[f.name] = dataclasses.field(default_factory=f.default_factory, repr=f.repr, compare=f.compare)
            elif f.default is not _MISSING:
                namespace[f.name] = dataclasses.field(default=f.default, repr=f.repr, compare=f.compare)
            else:
                namespace[f.name] = dataclasses.field(repr=f.repr, compare=f.compare)
        shadow: type = dataclasses.dataclass(type(owner.__name__, (), namespace))
        table: dict[str, object] = getattr(shadow, "__dataclass_fields__")  # noqa: B009  (mypy: no such attribute)
        return table


def _own_annotations(cls: type) -> dict[str, object]:
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063  (typing_extensions is no runtime dependency)
    if own is None and sys.version_info >= (3, 10):
        own = cls.__annotations__  # 3.14 evaluates annotations lazily; 3.10+ gives a class only its own
    return dict(own or {})


def _refuse_misuse(cls: type, frozen: bool) -> None:
    """TypeError where `@dataclass` would refuse `cls`, or would keep what `_define` would overwrite unseen."""
    if "__init__" in cls.__dict__ or (frozen and ("__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__)):
        raise TypeError(f"{cls.__qualname__}: a record writes its own __init__ "  # i18n: english (a programming error)
                        "(and, frozen, __setattr__/__delattr__)")
    for base in cls.__mro__[1:]:
        if "__record_fields__" in base.__dict__ and bool(base.__dict__.get("__record_frozen__")) != frozen:
            raise TypeError(f"cannot inherit {'' if frozen else 'non-'}frozen record {cls.__qualname__} from a "
                            f"{'non-' if frozen else ''}frozen one")


def _define(cls: type[T], frozen: bool) -> type[T]:
    _refuse_misuse(cls, frozen)
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        inherited.update({f.name: f for f in base.__dict__.get("__record_fields__", ())})
    for name, annotation in _own_annotations(cls).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        spec = cls.__dict__.get(name, _MISSING)
        if isinstance(spec, Field):
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
            inherited[name] = Field(name, spec.default, spec.default_factory, spec.repr, spec.compare, annotation)
        else:
            inherited[name] = Field(name, spec, None, True, True, annotation)
    table = tuple(inherited.values())
    methods: dict[str, object] = {
        "__record_fields__": table, "__record_key__": _key(tuple(f.name for f in table if f.compare)),
        "__record_names__": tuple(f.name for f in table), "__record_post_init__": hasattr(cls, "__post_init__"),
        "__match_args__": tuple(f.name for f in table), "__dataclass_fields__": _DataclassFields(), "__init__": _init}
    if "__repr__" not in cls.__dict__:
        methods["__repr__"] = _repr
    if "__eq__" not in cls.__dict__:
        methods["__eq__"] = _eq
    if frozen:
        methods.update(__record_frozen__=True, __setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    own_hash = cls.__dict__.get("__hash__", _MISSING)
    if own_hash is _MISSING or (own_hash is None and "__eq__" in cls.__dict__):  # as dataclasses decides
        methods["__hash__"] = _hash if frozen else None
    for name, value in methods.items():
        setattr(cls, name, value)
    return cls


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` without code generation."""
    return _define(cls, frozen=True)


@dataclass_transform(field_specifiers=(field,))
def mutable(cls: type[T]) -> type[T]:
    """`@dataclass` without code generation."""
    return _define(cls, frozen=False)
