"""Anchor text: what the docs say about an item where they refer to it.

ExDoc docs describe each other constantly: a guide links `[group by a key](`Enum.group_by/3`)`,
a function's doc says "see `Kernel.SpecialForms.with/1`", an older generation's HTML holds
`<a href="Enum.html#group_by/3">` (read here as the markdown link the HTML reader makes of
it). The sentence around such a reference is someone else's description of the target,
often in a user's words rather than the target's own.

`references` finds every reference in an item's markdown and keeps the sentence (or, in
a long sentence, the clause) around it, flattened to plain words; `resolve` maps each to
an item ref of a known package. Both are pure: the caller supplies what the index holds.
Code blocks and iex sessions are not descriptions and are skipped, and so are project
boilerplate pages (a changelog names every function once, describing none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from attrs import frozen

from hexlocal_core.model import DocItem

MAX_CONTEXT_CHARS = 320  # longer sentences keep a window of words around the reference
_BOILERPLATE = re.compile(
    r"^(?:changelog|changes|history|news|release[-_]?notes|license|licence|notice"
    r"|code[-_]of[-_]conduct|contributing)\.html$",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SESSION = re.compile(r"^\s*(?:iex(?:\([^)]*\))?>|\.\.\.(?:\([^)]*\))?>|\$ )")
# [text](dest): dest without spaces (ExDoc's autolinks are `...` inside the parentheses)
_LINK = re.compile(r"\[(?P<text>[^\]\n]{1,200})\]\((?P<dest>[^)\s]{1,300})\)")
_TICK = re.compile(r"`(?P<code>[^`\n]{1,120})`")
_NAME = r"[a-z_][a-zA-Z0-9_]*[?!]?"
_MODULE = r"(?::?[A-Za-z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)*)"
# Mod.fun/2, c:Mod.fun/2, t:Mod.type/0, fun/2, operators are left alone
_MFA = re.compile(
    rf"^(?P<kind>[ct]:)?(?:(?P<mod>{_MODULE})\.)?(?P<fun>{_NAME})/(?P<arity>\d{{1,3}})$"
)
_MOD = re.compile(rf"^(?:m:)?(?P<mod>{_MODULE})(?:#(?P<anchor>[\w-]+))?$")
_EXTRA = re.compile(
    r"^e:(?:(?P<pkg>[a-z][a-z0-9_]*):)?(?P<page>[\w.-]+?)(?:\.md|\.html)?(?:#(?P<anchor>[\w-]+))?$"
)
_HEXDOCS = re.compile(
    r"^https?://hexdocs\.pm/(?P<pkg>[a-z][a-z0-9_]*)/(?:\d[^/]*/)?(?P<page>[^#?]+?\.html)(?:#(?P<anchor>\S+))?$"
)
_PAGE = re.compile(r"^(?P<page>[\w.-]+?)\.(?:md|html)(?:#(?P<anchor>\S+))?$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[*(\"'])")
_FLATTEN_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_SPACES = re.compile(r"\s+")
_KIND_PREFIX = re.compile(r"(?<![\w:])[mct]:(?=[A-Za-z:])")  # ExDoc's `m:Mod`, `c:Mod.cb/1`


@frozen
class Target:
    """What a reference points at: a ref in its package (None: the package that holds the
    ref, the source's own first), or a local `fun/arity` to look up in `module` first."""

    ref: str
    package: str | None = None
    local: bool = False  # a bare fun/arity: the source's module, then Kernel


@frozen
class Reference:
    """One reference found in an item: where it is, what it points at, its context."""

    source_ref: str
    target: Target
    text: str
    mention: str = ""  # the reference as the context shows it (link words or identifier)


@frozen
class Anchor:
    """A resolved reference: the context, attached to the item it describes."""

    package: str  # the target item's package
    ref: str  # the target item
    source_package: str
    source_ref: str
    text: str
    mention: str = ""


def references(item: DocItem) -> list[Reference]:
    """Every reference in the item's prose, with the sentence or clause around it."""
    if _BOILERPLATE.match(item.page):
        return []
    out: list[Reference] = []
    for sentence in _sentences(item.markdown):
        for span, target in _targets(sentence, item):
            text = _context(sentence, span)
            if text:
                mention = _context(sentence[span[0] : span[1]], (0, span[1] - span[0]))
                out.append(Reference(item.ref, target, text, mention))
    return out


def _sentences(markdown: str) -> Iterator[str]:
    """Prose sentences: paragraphs and list items split at sentence ends, code skipped."""
    block: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            yield from _split(block)
            block = []
            continue
        if fenced or _SESSION.match(line):
            continue
        stripped = line.strip()
        if stripped.startswith("|"):  # a table row: its cells, one sentence
            yield from _split(block)
            block = []
            yield " ".join(c.strip() for c in stripped.strip("|").split("|") if c.strip())
            continue
        starts_item = stripped[:2] in ("* ", "- ") or stripped.startswith("#")
        if not stripped or starts_item:
            yield from _split(block)
            block = []
        if stripped:
            block.append(stripped.lstrip("#").strip())
    yield from _split(block)


def _split(block: list[str]) -> Iterator[str]:
    if block:
        yield from (s for s in _SENTENCE_END.split(" ".join(block)) if s.strip())


def _targets(sentence: str, item: DocItem) -> Iterator[tuple[tuple[int, int], Target]]:
    linked: list[tuple[int, int]] = []
    for m in _LINK.finditer(sentence):
        linked.append(m.span())
        target = _link_target(m["dest"].strip("`"), m["dest"].startswith("`"), item)
        if target is not None:
            yield m.span(), target
    for m in _TICK.finditer(sentence):
        if any(a <= m.start() < b for a, b in linked):
            continue
        target = _code_target(m["code"].strip(), item)
        if target is not None:
            yield m.span(), target


def _link_target(dest: str, code: bool, item: DocItem) -> Target | None:
    if code:
        return _code_target(dest, item) or _extra_target(dest)
    hexdocs = _HEXDOCS.match(dest)
    if hexdocs:
        return Target(_anchored(hexdocs["page"], hexdocs["anchor"]), package=hexdocs["pkg"])
    if dest.startswith("#"):
        return Target(_anchored(item.page, dest[1:]), package=item.package)
    page = _PAGE.match(dest)
    if page and "/" not in dest.split("#", 1)[0]:
        return Target(_anchored(f"{page['page']}.html", page["anchor"]))
    return None


def _extra_target(dest: str) -> Target | None:
    m = _EXTRA.match(dest)
    if m is None:
        return None
    return Target(_anchored(f"{m['page']}.html", m["anchor"]), package=m["pkg"])


def _code_target(code: str, item: DocItem) -> Target | None:
    mfa = _MFA.match(code)
    if mfa:
        kind = mfa["kind"] or ""
        anchor = f"{kind}{mfa['fun']}/{mfa['arity']}"
        if mfa["mod"]:
            return Target(f"{mfa['mod'].lstrip(':')}.html#{anchor}")
        module = item.module or item.page.removesuffix(".html")
        return Target(f"{module}.html#{anchor}", local=True)
    mod = _MOD.match(code)
    if mod and (code.startswith("m:") or "." in code or mod["mod"][:1].isupper()):
        return Target(_anchored(f"{mod['mod'].lstrip(':')}.html", mod["anchor"]))
    return None


def _anchored(page: str, anchor: str | None) -> str:
    return f"{page}#{anchor}" if anchor else page


def _context(sentence: str, span: tuple[int, int]) -> str:
    """The sentence flattened (links to their words, no backticks); a long one is cut to
    the clause, or a window of words, around the reference."""
    start, end = span
    if len(sentence) > MAX_CONTEXT_CHARS:
        half = MAX_CONTEXT_CHARS // 2
        lo = max(0, start - half)
        hi = min(len(sentence), end + half)
        lo = sentence.rfind(" ", 0, lo) + 1 if lo else 0
        cut = sentence.find(" ", hi)
        sentence = sentence[lo : cut if cut != -1 else len(sentence)]
    flat = _KIND_PREFIX.sub("", _FLATTEN_LINK.sub(r"\1", sentence).replace("`", ""))
    return _SPACES.sub(" ", flat).strip(" *-:")


def resolve(
    refs: Iterable[Reference],
    source_package: str,
    known: Mapping[str, frozenset[str]],
    module_home: Mapping[str, str],
) -> list[Anchor]:
    """Anchors for the references that point at an item some known package holds.

    `known`: package -> its item refs; `module_home`: page ("Enum.html") -> the package
    that documents it. A reference without a package is looked up in the source's own
    package, then in the page's home; a local fun/arity also in Kernel and its special
    forms, as ExDoc's autolinker does. A reference to an item's own sections, or from a
    section to its item, describes nothing new and is dropped.
    """
    out: list[Anchor] = []
    for ref in refs:
        found = _resolve_one(ref.target, source_package, known, module_home)
        if found is None or _same_item(found[1], ref.source_ref):
            continue
        package, target = found
        out.append(Anchor(package, target, source_package, ref.source_ref, ref.text, ref.mention))
    return out


def _resolve_one(
    target: Target,
    source_package: str,
    known: Mapping[str, frozenset[str]],
    module_home: Mapping[str, str],
) -> tuple[str, str] | None:
    candidates = [target.ref]
    if target.local:
        anchor = target.ref.split("#", 1)[1]
        candidates += [f"Kernel.html#{anchor}", f"Kernel.SpecialForms.html#{anchor}"]
    for ref in candidates:
        page, _, anchor = ref.partition("#")
        for package in _homes(target.package, source_package, page, module_home):
            refs = known.get(package, frozenset())
            if ref in refs:
                return package, ref
            if anchor and not target.local and page in refs and _section(anchor):
                return package, page  # a section the parser merged into its page
    return None


def _homes(
    explicit: str | None, source: str, page: str, module_home: Mapping[str, str]
) -> list[str]:
    if explicit is not None:
        return [explicit]
    home = module_home.get(page)
    return [source] if home in (None, source) else [source, home]


def _section(anchor: str) -> bool:
    return "/" not in anchor


def _same_item(target: str, source: str) -> bool:
    return target == source or source.startswith(target + "-") or target.startswith(source + "-")


def mine(
    items_by_package: Mapping[str, Sequence[DocItem]],
) -> list[Anchor]:
    """Every anchor among these packages' items, within and across packages."""
    known = {p: frozenset(i.ref for i in items) for p, items in items_by_package.items()}
    module_home: dict[str, str] = {}
    for package, items in items_by_package.items():
        for item in items:
            if "#" not in item.ref:
                module_home.setdefault(item.ref, package)
    out: list[Anchor] = []
    for package, items in items_by_package.items():
        for item in items:
            out.extend(resolve(references(item), package, known, module_home))
    return out
