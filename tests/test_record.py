"""ortfix/record.py: records behave as the dataclasses they replace (each check compares with a real dataclass)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from ortfix import record


@record.frozen
class Inner:
    soname: str
    size: int = 0


@dataclasses.dataclass(frozen=True)
class InnerDc:
    soname: str
    size: int = 0


@record.frozen
class Outer:
    name: str
    inner: Inner
    copies: tuple[Inner, ...] = ()
    env: dict[str, str] = record.field(default_factory=dict)
    report: str = record.field(default="", repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class OuterDc:
    name: str
    inner: InnerDc
    copies: tuple[InnerDc, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    report: str = dataclasses.field(default="", repr=False, compare=False)


@record.mutable
class Counter:
    hits: list[str] = record.field(default_factory=list)
    total: int = 0

    def __post_init__(self) -> None:
        self.total = len(self.hits)


@dataclasses.dataclass
class CounterDc:
    hits: list[str] = dataclasses.field(default_factory=list)
    total: int = 0

    def __post_init__(self) -> None:
        self.total = len(self.hits)


def _pair(report: str = "raw") -> tuple[Outer, OuterDc]:
    return (Outer("a", Inner("libcudart.so.12", 3), (Inner("x"),), {"K": "v"}, report=report),
            OuterDc("a", InnerDc("libcudart.so.12", 3), (InnerDc("x"),), {"K": "v"}, report=report))


def test_repr_matches_dataclasses() -> None:
    rec, dc = _pair()
    assert repr(rec) == repr(dc).replace("Dc(", "(")
    assert "raw" not in repr(rec)  # repr=False


def test_eq_and_hash_follow_compare_fields() -> None:
    a, _ = _pair("one")
    b, _ = _pair("two")
    assert a == b and hash(a.inner) == hash(Inner("libcudart.so.12", 3))  # report has compare=False
    assert a != dataclasses.replace(a, name="b")
    assert Inner("x") != InnerDc("x") and Inner("x") != ("x", 0)  # another class never compares equal
    assert {Inner("x"), Inner("x", 0)} == {Inner("x")}


def test_frozen_raises_as_dataclasses() -> None:
    rec, dc = _pair()
    for obj in (rec, dc):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
            obj.name = "b"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.name  # type: ignore[misc]


def test_defaults_factories_and_post_init() -> None:
    one, two = Counter(), Counter()
    one.hits.append("a")
    assert two.hits == [] and Counter(["x", "y"]).total == 2 and CounterDc(["x", "y"]).total == 2
    one.total = 5  # mutable
    assert Counter.__hash__ is None and CounterDc.__hash__ is None
    assert repr(Counter(["q"])) == repr(CounterDc(["q"])).replace("CounterDc", "Counter")


def test_every_way_of_giving_the_fields_builds_what_a_dataclass_builds() -> None:
    """All by position, all by name in any order (record.py's shortcuts), and the mixes and defaults between."""
    made = [Inner("s", 2), Inner(size=2, soname="s"), Inner(soname="s", size=2), Inner("s", size=2)]
    dcs = [InnerDc("s", 2), InnerDc(size=2, soname="s"), InnerDc(soname="s", size=2), InnerDc("s", size=2)]
    assert [vars(r) for r in made] == [vars(d) for d in dcs] == [{"soname": "s", "size": 2}] * 4
    assert [list(vars(r)) for r in made] == [["soname", "size"]] * 4  # field order, as a dataclass assigns
    assert vars(Inner("s")) == vars(InnerDc("s")) and vars(Inner(soname="s")) == vars(InnerDc(soname="s"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Inner(soname="x", nope=1)  # type: ignore[call-arg]  (as many names as fields, one of them wrong)
    assert Counter([], 0).total == 0 and Counter(hits=["a"], total=0).total == 1  # __post_init__ on each way

    class Later(Inner):  # not a record itself: its __post_init__ is not called, as a dataclass's subclass's is not
        def __post_init__(self) -> None:
            raise AssertionError("called")

    class LaterDc(InnerDc):
        def __post_init__(self) -> None:
            raise AssertionError("called")

    assert vars(Later("s")) == vars(LaterDc("s"))


def test_init_errors_are_type_errors() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'soname'"):
        Inner()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Inner("x", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'soname'"):
        Inner("x", soname="y")  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4 were given"):
        Inner("x", 1, 2)  # type: ignore[call-arg]


def test_replace_asdict_fields_match_dataclasses() -> None:
    rec, dc = _pair()
    assert record.asdict(rec) == dataclasses.asdict(dc)
    assert record.asdict(rec)["copies"] == ({"soname": "x", "size": 0},)  # tuples stay tuples
    assert record.asdict(rec)["env"] is not rec.env  # a copy, as dataclasses gives
    changed = record.replace(rec, name="b")
    assert changed.name == "b" and changed.inner is rec.inner and changed.report == "raw"
    assert [f.name for f in record.fields(rec)] == [f.name for f in dataclasses.fields(dc)]


def test_dataclasses_functions_accept_records() -> None:
    rec, dc = _pair()
    assert dataclasses.is_dataclass(rec)
    assert dataclasses.asdict(rec) == dataclasses.asdict(dc)
    assert dataclasses.replace(rec, name="b") == record.replace(rec, name="b")
    assert [(f.name, f.repr, f.compare) for f in dataclasses.fields(Outer)] == \
        [(f.name, f.repr, f.compare) for f in dataclasses.fields(OuterDc)]


def test_check_path_does_not_import_dataclasses() -> None:
    code = "import sys, ortfix.check.facts, ortfix.cli.render; print('dataclasses' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_uncached_matrix_load_does_not_import_dataclasses() -> None:
    # The first `check` after an install (or a change to compat/) validates the matrix files: still check's path.
    code = ("import sys; from ortfix.compat.load import load_matrix; load_matrix(use_cache=False); "
            "print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_misuse_is_refused_as_dataclasses_refuses_it() -> None:
    for make in (record.mutable, dataclasses.dataclass):
        with pytest.raises(TypeError, match="cannot inherit non-frozen"):
            make(type("Child", (Inner if make is record.mutable else InnerDc,), {}))
    for make in (record.frozen, lambda cls: dataclasses.dataclass(frozen=True)(cls)):
        with pytest.raises(TypeError, match="cannot inherit frozen"):
            make(type("Child", (Counter if make is record.frozen else CounterDc,), {}))

    def own_init(self: object) -> None: ...

    with pytest.raises(TypeError, match="writes its own __init__"):  # @dataclass would keep it; a record cannot
        record.mutable(type("Initialised", (), {"__init__": own_init}))
    with pytest.raises(TypeError, match="__setattr__"):
        record.frozen(type("Guarded", (), {"__setattr__": object.__setattr__}))
