"""The text form of an upgrade report: 80 columns, what breaks first.

A function of the report's dict (the JSON contract), so the CLI and the MCP tool print
the same thing from the same data. Order: a one-line verdict, what breaks (removed),
then deprecated, signature and docs changes, each with its call sites; what looks like a
break but is not; requirement changes; the changelog lines (a few per version); notices.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

WIDTH = 80
CHANGELOG_LINES = 6  # per version in the text; the JSON has up to 40
HEADINGS = {
    "removed": "BREAKS: removed (the call will fail)",
    "deprecated": "DEPRECATED",
    "signature_changed": "SIGNATURE CHANGED",
    "docs_changed": "DOCS CHANGED",
}


def render(report: Mapping[str, Any]) -> str:
    lines = [*_verdict(report)]
    affected = report["affected"]
    for change, heading in HEADINGS.items():
        group = [a for a in affected if a["change"] == change]
        if group:
            lines += ["", heading]
            for entry in group:
                lines += _entry(entry["identifier"], entry["detail"], entry["call_sites"])
    if report["not_affected"]:
        lines += ["", "NOT A BREAK"]
        for entry in report["not_affected"]:
            lines += _entry(entry["identifier"], entry["why"], entry["call_sites"])
    if report["requirements"]:
        lines += ["", "REQUIREMENTS"]
        lines += [line for r in report["requirements"] for line in _requirement(r)]
    if report["changelog"]:
        lines += ["", f"CHANGELOG {report['from']} -> {report['to']} (modules you use first)"]
        for version in report["changelog"]:
            lines += _changelog(version)
    if report["notices"]:
        lines += ["", "NOTICES"]
        for notice in report["notices"]:
            lines += _wrap(f"{notice['code']}: {notice['message']}", "  ", "    ")
    return "\n".join(lines)


def _verdict(report: Mapping[str, Any]) -> list[str]:
    affected = report["affected"]
    breaks = sum(1 for a in affected if a["change"] == "removed")
    sites = report["call_sites"]
    head = (
        f"{report['package']} {report['from']} -> {report['to']}: "
        f"{breaks} break{'s' if breaks != 1 else ''}, "
        f"{len(affected)} used entr{'ies' if len(affected) != 1 else 'y'} changed"
    )
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in report["diff"].items() if n)
    return [
        *_wrap(head, "", "  "),
        *_wrap(
            f"({report['from']}: {report['from_source']}; {report['to']}: "
            f"{report['to_source']}; the whole diff: "
            f"{counts or 'no change'}; call sites read: {sites['beams']} compiled, "
            f"{sites['source']} from source)",
            "",
            " ",
        ),
    ]


def _entry(identifier: str, detail: str, sites: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = _wrap(identifier, "  ", "    ")
    for part in detail.split("\n"):
        lines += _wrap(part, "    ", "      ")
    for site in sites:
        lines += _wrap(_site(site), "    at ", "       ")
    return lines


def _site(site: Mapping[str, Any]) -> str:
    where = site["file"] or "(no file)"
    if site["line"] is not None:
        where = f"{where}:{site['line']}"
    text = f"{where} in {site['caller']}" if site["caller"] else where
    return f"{text} (via {site['via']})" if site.get("via") else text


def _requirement(r: Mapping[str, Any]) -> list[str]:
    if r["locked"] is None:
        state = "the project does not lock it"
    elif r["satisfied"] is False:
        state = f"mix.lock pins {r['locked']}: update it too"
    elif r["satisfied"]:
        state = f"mix.lock's {r['locked']} meets it"
    else:
        state = f"mix.lock pins {r['locked']}"
    was = f" (was {r['previous']})" if r.get("previous") else ""
    return _wrap(
        f"{r['package']} {r['requirement']}{was}: {state}; from {r['source']}", "  ", "    "
    )


def _changelog(version: Mapping[str, Any]) -> list[str]:
    lines = [f"  {version['version']}"]
    shown = version["lines"][:CHANGELOG_LINES]
    for line in shown:
        lines += _wrap(line, "    * ", "      ")
    more = len(version["lines"]) - len(shown) + version.get("omitted", 0)
    if more:
        lines.append(f"    ({more} more)")
    return lines


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]
