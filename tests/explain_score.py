"""Score `ortfix explain` on the real-message corpus (tests/data/explain/corpus.yaml), judged strictly: the message's
true cause must be named in the TOP explanation's title, cause or fix (words the message itself contains do not
count), no explanation may carry a wrong diagnosis the entry lists, and the normal-output negatives must stay
unrecognised. The pattern id an entry expects is checked by tests/test_explain_corpus.py, not scored here, so that
the score of an older errors.yaml (before its rows had these ids) is comparable.

    .venv/bin/python tests/explain_score.py            # the score, per layer
    .venv/bin/python tests/explain_score.py -v         # and every miss with its reason
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ortfix.explain.patterns import Explanation, Pattern, explain_text, load_default_patterns

CORPUS = Path(__file__).resolve().parent / "data" / "explain" / "corpus.yaml"


@dataclass(frozen=True)
class Entry:
    id: str
    source: str
    layer: str
    text: str
    expect: str
    cause: tuple[tuple[str, ...], ...]
    never: tuple[str, ...]


def load_corpus() -> tuple[list[Entry], list[dict[str, str]]]:
    doc: dict[str, Any] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    entries = [Entry(id=m["id"], source=m["source"], layer=m["layer"], text=m["text"], expect=m["expect"],
                     cause=tuple(tuple(str(w) for w in group) for group in m["cause"]),
                     never=tuple(str(w) for w in m.get("never", ())))
               for m in doc["messages"]]
    return entries, list(doc["negatives"])


def said(e: Explanation) -> str:
    """What an explanation tells the user: its title, cause and fix (the matched text is not counted)."""
    return f"{e.title}\n{e.cause}\n{e.fix}".lower()


def misses(entry: Entry, found: list[Explanation]) -> list[str]:
    """Why `found` does not pass the strict judgement of `entry`; empty when it does."""
    if not found:
        return ["not recognised"]
    top = said(found[0])
    out = [f"the top answer ({found[0].pattern_id}) names none of {list(group)}"
           for group in entry.cause if not any(w.lower() in top for w in group)]
    for e in found:
        out += [f"{e.pattern_id} says {w!r}" for w in entry.never if w.lower() in said(e)]
    return out


def score(patterns: list[Pattern]) -> tuple[Counter[str], Counter[str], list[str], int]:
    """(passed per layer, total per layer, the misses, negatives wrongly recognised)."""
    entries, negatives = load_corpus()
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    report: list[str] = []
    for entry in entries:
        total[entry.layer] += 1
        why = misses(entry, explain_text(entry.text, patterns))
        if why:
            report.append(f"{entry.id} ({entry.source}): " + "; ".join(why))
        else:
            passed[entry.layer] += 1
    false_hits = 0
    for neg in negatives:
        hits = explain_text(neg["text"], patterns)
        if hits:
            false_hits += 1
            report.append(f"negative ({neg['source']}) recognised as {[e.pattern_id for e in hits]}")
    return passed, total, report, false_hits


def main(argv: list[str]) -> int:
    passed, total, report, false_hits = score(load_default_patterns())
    _, negatives = load_corpus()
    for layer in sorted(total):
        print(f"{layer:10} {passed[layer]:3}/{total[layer]}")
    print(f"{'strict':10} {sum(passed.values()):3}/{sum(total.values())}; negatives left alone "
          f"{len(negatives) - false_hits}/{len(negatives)}")
    if "-v" in argv:
        print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
