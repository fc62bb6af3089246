"""pinwise.frozen: the dataclass stand-in of the types every `pinwise run` loads behaves like a
frozen dataclass in everything pinwise relies on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pinwise.frozen import Frozen


class Point(Frozen):
    x: int
    y: int = 0
    label: str = "p"

    def __post_init__(self):
        if self.x < 0:
            raise ValueError("x must be >= 0")


def test_constructor_defaults_equality_hash_and_repr():
    assert Point(1) == Point(x=1) == Point(1, 0, "p")
    assert Point(1, 2) != Point(1, 3) and Point(1) != (1, 0, "p")
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert repr(Point(1, label="q")) == "Point(x=1, y=0, label='q')"
    assert Point._fields == ("x", "y", "label")


@pytest.mark.parametrize("call, words", [
    (lambda: Point(), "needs x"),
    (lambda: Point(1, 2, "a", 4), "at most 3 arguments"),
    (lambda: Point(1, x=2), "got 'x' twice"),
    (lambda: Point(1, z=2), "no field 'z'"),
])
def test_bad_construction_is_refused_like_a_dataclass(call, words):
    with pytest.raises(TypeError, match=words):
        call()


def test_frozen_and_replace_checks_again():
    point = Point(1, 2)
    with pytest.raises(AttributeError, match="frozen"):
        point.x = 3
    with pytest.raises(AttributeError, match="frozen"):
        del point.y
    moved = point.replace(y=5)
    assert moved == Point(1, 5) and point == Point(1, 2)
    with pytest.raises(ValueError, match="x must be"):
        point.replace(x=-1)


def test_a_required_field_after_a_default_is_a_definition_error():
    with pytest.raises(TypeError, match="without a default follows one with"):
        class Bad(Frozen):
            a: int = 0
            b: int


def test_the_types_of_a_plain_run_do_not_load_dataclasses():
    """What the start-up target rests on (benchmarks/pin_overhead.py): `pinwise run --no-verify
    --cpus 0` resolves its plan without importing dataclasses (or numpy)."""
    code = ("import sys; from pinwise.cli import build_parser; from pinwise.placement import Placement, resolve; "
            "from pinwise.pinning.launcher import program_environment; build_parser(); "
            "plan = resolve(Placement(cpus='0')); program_environment(plan, None); "
            "print(sorted(m for m in ('dataclasses', 'numpy', 'inspect', 'shutil', 'typing', 'pathlib', 'tempfile') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
