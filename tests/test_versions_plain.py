"""compat/versions.py's Version: ordered, equal, hashed and printed exactly as packaging.version.Version over a large
generated set of version strings (plain releases, leading and trailing zeros, pre/post/dev/local, epochs, spellings
packaging normalises, invalid text), and plain releases never import packaging.version (issue 22, check's speed)."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest
from packaging.version import InvalidVersion as PackagingInvalid
from packaging.version import Version as PackagingVersion

from ortfix.compat.versions import InvalidVersion, Version, same_version

RELEASES = ["0", "1", "01", "1.0", "1.00", "1.0.0", "1.0.0.0", "1.2", "1.2.0", "1.02", "1.10", "1.9.9", "2",
            "10.0.1", "0.0", "0.1", "12.4", "12.4.0", "8.6", "535.104.12", "1.22.0", "1.22", "1.3", "007.0800",
            "1.22.0.0.0.1", "99999999999999999999.1"]
SUFFIXES = ["", "a1", "b2", "rc1", ".post1", ".dev0", "rc1.post2.dev3", "+local", "+ubuntu.1", "+0", ".post0+abc.5",
            "-1", "alpha1", "c3", "pre1", "-dev", "_post2"]
SPELLINGS = ["v1.0", "V1.2.0", " 1.0", "1.0 ", "\t2.1\n", "0!1.0", "1!0.5", "1!1.0.0", "1.0.RC1", "1.0-a1"]
INVALID = ["", ".", "1.", ".1", "1..2", "a", "1.0.x", "1 .0", "1,0", "-1", "1.0+", "1.0++a", "²", "1.²",
           "\u0661.\u0662", "1.0\x00", "1.0.", "0x10", "1_0", "+1", "1.0+local+x", "latest", "1.0 1"]


def _corpus() -> list[str]:
    texts = [r + s for r in RELEASES for s in SUFFIXES] + SPELLINGS + INVALID
    rng = random.Random(22)
    for _ in range(400):  # random plain releases with leading and trailing zeros
        texts.append(".".join(rng.choice(["0", "00", "1", "01", "2", "9", "10", "010", "100"])
                              for _ in range(rng.randint(1, 5))))
    return texts


CORPUS = _corpus()


def _parse(cls: type, text: str) -> object:
    try:
        return cls(text)
    except (InvalidVersion, PackagingInvalid):
        return None


def test_valid_invalid_printed_and_parts_as_packaging() -> None:
    for text in CORPUS:
        theirs, ours = _parse(PackagingVersion, text), _parse(Version, text)
        assert (theirs is None) == (ours is None), text
        if isinstance(theirs, PackagingVersion) and isinstance(ours, Version):
            assert str(ours) == str(theirs), text
            assert repr(ours) == repr(theirs), text
            assert (ours.release, ours.major, ours.minor, ours.micro) == \
                (theirs.release, theirs.major, theirs.minor, theirs.micro), text
            assert (ours.is_prerelease, ours.is_postrelease, ours.is_devrelease, ours.public, ours.base_version) == \
                (theirs.is_prerelease, theirs.is_postrelease, theirs.is_devrelease, theirs.public,
                 theirs.base_version), text
            assert ours.packaging() == theirs


def test_invalid_text_raises_a_value_error() -> None:
    for text in INVALID:
        with pytest.raises(ValueError, match="Invalid version"):
            Version(text)
    with pytest.raises(InvalidVersion):
        Version(None)  # type: ignore[arg-type]  (what packaging refuses, refused alike)
    assert not same_version("1.0.x", Version("1.0"))
    assert same_version("1.0.0", Version("1"))


def test_ordering_equality_and_hash_as_packaging_for_every_pair() -> None:
    parsed = [(t, _parse(PackagingVersion, t), _parse(Version, t)) for t in CORPUS]
    pairs = [(t, a, b) for t, a, b in parsed if isinstance(a, PackagingVersion) and isinstance(b, Version)]
    ops = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"]
    sample = random.Random(22).sample(pairs, 180)  # 32,400 pairs; the sort below orders all of them
    for (t1, a1, b1), (t2, a2, b2) in itertools.product(sample, repeat=2):
        for op in ops:
            expected = getattr(a1, op)(a2)
            assert getattr(b1, op)(b2) == expected, (t1, op, t2)
            assert getattr(b1, op)(a2) == expected, (t1, op, t2, "against packaging's")
        if b1 == b2:
            assert hash(b1) == hash(b2), (t1, t2)
    assert [str(b) for b in sorted(b for _, _, b in pairs)] == [str(a) for a in sorted(a for _, a, _ in pairs)]


def test_packaging_versions_compare_with_ours_from_either_side() -> None:
    assert PackagingVersion("1.22") == Version("1.22.0")
    assert PackagingVersion("1.22rc1") < Version("1.22")
    assert PackagingVersion("1.23") > Version("1.22.9")
    assert Version("1.0") != "1.0"  # no version: unequal, as packaging's
    with pytest.raises(TypeError):
        Version("1.0") < "1.1"  # noqa: B015
    assert max([Version("1.9"), Version("1.10"), Version("1.10rc1")]) == Version("1.10")
    assert len({Version("1"), Version("1.0"), Version("1.0.0"), Version("0!1.0"), Version("v1.0")}) == 1


def test_plain_versions_do_not_import_packaging() -> None:
    code = ("import sys\nfrom ortfix.compat.versions import Version\n"
            "assert Version('1.22.0') == Version('1.22') < Version('1.23.0') and str(Version('01.2')) == '1.2'\n"
            "assert hash(Version('1.0')) == hash(Version('1'))\n"
            "assert 'packaging.version' not in sys.modules, 'imported'\n"
            "Version('1.22rc1')\nassert 'packaging.version' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
