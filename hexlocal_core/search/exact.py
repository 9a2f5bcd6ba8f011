"""Exact lookup: a query that *is* an identifier (`Mod`, `Mod.fun/2`, `c:cb/1`, `t:t/0`)
puts that item's chunks first, straight from the index, for any version."""

from __future__ import annotations

import difflib
import re

from attrs import frozen

from hexlocal_core.index.rows import ItemQuery
from hexlocal_core.index.seam import ChunkReads
from hexlocal_core.ingest.deps_folder import USAGE_RULE_REFS

_IDENT = re.compile(
    r"""^\s*
    (?:(?P<kind>[ct]):)?                       # c: callback, t: type
    (?P<module>(?:[A-Z][\w]*\.)*[A-Z][\w]*)?   # Elixir module path
    (?:\.?(?P<fun>[a-z_][\w]*[?!]?))?          # function / callback / type name
    (?:/(?P<arity>\d{1,3}))?                   # arity
    \s*$""",
    re.VERBOSE,
)
# Erlang modules, in the three spellings agents paste: Elixir's `:ets.new/2`, Erlang's
# `ets:new/2` and ExDoc's title `ets.new/2`; `c:` and `t:` as ExDoc writes them
# (`c:gen_server:handle_call/3`, `t:ets:tid/0`). A bare module needs Elixir's colon
# (`:ets`): a lone lower-case word is prose.
_ERLANG = re.compile(
    r"""^\s*
    (?:(?P<kind>[ct]):)?
    (?P<colon>:)?
    (?P<module>[a-z][\w]*|'[^'\s]{1,100}')
    (?:(?P<sep>[:.])(?P<fun>[a-z_][\w]*|'[^'\s]{1,100}'))?
    (?:/(?P<arity>\d{1,3}))?
    \s*$""",
    re.VERBOSE,
)
_KINDS = {"c": "callback", "t": "type"}


@frozen
class Identifier:
    module: str | None
    function: str | None
    arity: int | None
    kind: str | None  # "callback" | "type" | None
    erlang: bool = False  # an Erlang module (`ets`), in any of its spellings

    @property
    def is_module(self) -> bool:
        return self.function is None

    def __str__(self) -> str:
        """The identifier as ExDoc titles it: `Enum.map/2`, `ets.new/2`, `ets`."""
        member = f"{self.function}/{self.arity}" if self.arity is not None else self.function
        if self.module and member:
            return f"{self.module}.{member}"
        return self.module or member or ""


def parse_identifier(query: str) -> Identifier | None:
    """An identifier the query is exactly, or None. `Mod.fun` without arity also counts."""
    text = query.strip()
    if not text or len(text) > 200 or " " in text:
        return None
    m = _IDENT.match(text)
    if not m:
        return _erlang_identifier(text)
    module, fun, arity, kind = m.group("module"), m.group("fun"), m.group("arity"), m.group("kind")
    if module is None and fun is None:
        return None
    if module is None and arity is None and kind is None:
        return None  # a lone lower-case word is prose, not an identifier
    if module and fun is None and ("." in text.rstrip(".") and text.endswith(".")):
        return None
    return Identifier(module, fun, int(arity) if arity else None, _KINDS.get(kind or ""))


def _erlang_identifier(text: str) -> Identifier | None:
    m = _ERLANG.match(text)
    if not m:
        return None
    module, fun, arity = m.group("module").strip("'"), m.group("fun"), m.group("arity")
    colon, sep, kind = m.group("colon"), m.group("sep"), m.group("kind")
    if fun is None:
        if not colon or arity is not None or kind:
            return None  # `:ets` names a module; `ets` alone is a word
    elif sep == "." and not colon and arity is None:
        return None  # `mix.exs`, `file.read`: a file name or prose, not a call
    elif sep == ":" and colon:
        return None  # `:ets:new` is neither language's spelling
    name = fun.strip("'") if fun else None
    elixir = module.startswith("Elixir.")  # `'Elixir.Enum':map/2`, as Erlang prints it
    return Identifier(
        module.removeprefix("Elixir.") if elixir else module,
        name,
        int(arity) if arity else None,
        _KINDS.get(kind or ""),
        erlang=not elixir,
    )


# What an identifier's kind means in stored doc types. A module's own docs are every chunk
# of the module that is not one of its members.
MEMBER_TYPES = ("function", "macro", "callback", "macrocallback", "type", "opaque")
KIND_TYPES = {"callback": ("callback", "macrocallback"), "type": ("type", "opaque")}


def item_query(ident: Identifier) -> ItemQuery:
    """The stored item an identifier names, in the index's terms."""
    if ident.is_module:
        return ItemQuery(ident.module, not_doc_types=MEMBER_TYPES)
    return ItemQuery(
        ident.module,
        ident.function,
        ident.arity,
        doc_types=KIND_TYPES.get(ident.kind or "", ()),
    )


def exact_chunk_ids(
    reads: ChunkReads, package: str, ident: Identifier, *, limit: int = 20
) -> list[int]:
    """Chunk ids of the identified item (its own ref first, then its heading sub-items)."""
    return reads.exact_ids(package, item_query(ident), limit=limit)


USAGE_RULES_LEAD = 2  # usage-rules chunks put first for a how-should-I-use question


def usage_rules_lead(reads: ChunkReads, package: str, ranked: list[int]) -> list[int]:
    """The package's usage-rules chunks to lead a how-should-I-use answer: those retrieval
    ranked, in its order, else the rules' first chunk; none when the package has none."""
    rules = reads.ids_by_ref(package, USAGE_RULE_REFS)
    if not rules:
        return []
    found = [cid for cid in dict.fromkeys(ranked) if cid in rules]
    return (found or [min(rules)])[:USAGE_RULES_LEAD]


def similar_titles(
    reads: ChunkReads, package: str, ident: Identifier, *, limit: int = 5
) -> list[str]:
    """Documented identifiers near one that is not: the same name at other arities or in
    other modules, else the module's items spelt like it (or its first ones), else any
    member spelt like it; for a module, its own items, else the modules spelt like it.
    For a `not_found` notice that helps."""
    if ident.function:
        found = reads.titles_named(package, ident.function, ident.module, limit)
        if found:
            return found
    if ident.module and not ident.function:
        own = reads.titles_in_module(package, ident.module, limit)
        if own:
            return own
        modules = reads.module_names(package, MANY_TITLES)
        return difflib.get_close_matches(ident.module, modules, n=limit, cutoff=CLOSE)
    titles = reads.titles_in_module(package, ident.module, MANY_TITLES) if ident.module else []
    if titles:
        return closest_titles(ident.function or "", titles, limit, ident.arity) or titles[:limit]
    # No module, or one the package does not have (`Jasn.decod/2`): any member spelt like it.
    members = reads.member_titles(package, MANY_TITLES)
    return closest_titles(ident.function or "", members, limit, ident.arity)


MANY_TITLES = 6000  # items read to find a misspelt one among (Kernel: ~400; elixir: ~4,000)


def closest_titles(
    function: str, titles: list[str], limit: int, arity: int | None = None
) -> list[str]:
    """The titles whose function name is spelt close to `function`: most of one is the
    other's prefix (`decod` -> `decode/2`), or difflib finds them close (`redce` ->
    `reduce/3`); the asked arity first among equals."""

    def score(other: str) -> float:
        short, long = sorted((function, other), key=len)
        if long.startswith(short) and len(short) >= PREFIX_SHARE * len(long):
            return 1.0 + len(short) / len(long)
        matcher = difflib.SequenceMatcher(None, function, other)
        # The bounds first: thousands of names are compared when the module is unknown.
        if matcher.real_quick_ratio() < CLOSE or matcher.quick_ratio() < CLOSE:
            return 0.0
        return matcher.ratio()

    scored = []
    for n, title in enumerate(titles):
        ident = parse_identifier(title)
        if ident is None or ident.function is None:
            continue
        value = score(ident.function)
        if value >= CLOSE:
            scored.append((-round(value, 3), arity is not None and ident.arity != arity, n, title))
    return [title for *_, title in sorted(scored)][:limit]


PREFIX_SHARE = 0.7  # `red` is not `redce` misspelt; `decod` is `decode` cut short
CLOSE = 0.75  # difflib's ratio for one or two letters wrong in a name of eight or more
