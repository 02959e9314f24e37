"""Text and JSON of `ortfix export` and `ortfix wheelhouse`."""

from __future__ import annotations

from ortfix.commands.export import ExportResult
from ortfix.commands.wheelhouse import WheelhouseResult
from ortfix.i18n import N_, Joined, _, tr
from ortfix.safetext import join_lines


def export_json(r: ExportResult) -> dict[str, object]:
    return {"format": r.format.value, "source": r.source, "written": list(r.written), "pins": list(r.pins),
            "hashes": r.hashes, "text": r.text, "undo": r.undo}


def render_export(r: ExportResult) -> str:
    """With -o: what was written; without: the file itself (its last newline is click's)."""
    if r.written:
        if len(r.written) == 2:  # the script and its undo script
            return tr("Wrote {file} and {undo}.", file=r.written[0], undo=r.written[1])
        return tr("Wrote {files}.", files=Joined(N_(", "), r.written))
    return r.text[:-1] if r.text.endswith("\n") else r.text


def wheelhouse_json(r: WheelhouseResult) -> dict[str, object]:
    house = r.wheelhouse
    return {"folder": house.folder, "source": r.source, "files": [dict(f) for f in house.files],
            "ortfix": house.ortfix_source or None, "ortfix_missing": house.ortfix_missing,
            "apply_command": r.apply_command, "install_ortfix_command": r.install_ortfix_command}


def render_wheelhouse(r: WheelhouseResult) -> str:
    house = r.wheelhouse
    lines = [tr("Downloaded {n} wheel(s) into {folder} (manifest: ortfix-wheelhouse.json):", n=len(house.files),
                folder=house.folder)]
    lines += [f"  {f['file']}  ({f['why']})" for f in house.files]
    if house.ortfix_missing:
        lines.append(tr("ortfix itself is not in it: {why}", why=house.ortfix_missing))
    lines += ["", _("On the offline machine:"), f"  {r.apply_command}"]
    if not house.ortfix_missing:
        lines.append(tr("  (ortfix itself: {command})", command=r.install_ortfix_command))
    return join_lines(lines)
