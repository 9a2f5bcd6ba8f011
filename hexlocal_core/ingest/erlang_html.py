"""EEP-48 `application/erlang+html` docs -> markdown, written as OTP 27's own markdown is.

OTP 23-26 (erl_docgen) and EDoc store docs as a tree: a list whose items are UTF-8
binaries and `{Tag, Attrs, Content}` elements, `Attrs` a list of `{atom, binary}` pairs.
The element rules are OTP's `shell_docs` renderer's, and the link rules ExDoc's Erlang
autolinker's, so a page converted here reads like the same page in an OTP >= 27 beam:

    p, h1-h6, br                 paragraphs, `#` headings, line breaks
    pre                          a fenced block, `erlang` (`<code type="none">`: `text`)
    code, em/i, strong/b         `code`, *em*, **strong**
    ul, ol, li                   `- ` / `1. ` items, nested items indented
    ul class="types"             "Types:" and one item per type (`li name=T` -> `T()`)
    dl, dt, dd                   `- **term** - description` (as OTP 27's markdown has it)
    div class=warning|note|...   an ExDoc admonition: `> #### Warning {: .warning }`
    blockquote, div class=quote  `> ` quoted
    a rel=seeerl|seemfa|seetype  ExDoc autolinks: [text](`m:ets`), [text](`ets:new/2`),
                                 [text](`c:gen_server:handle_call/3`), [text](`t:ets:tid/0`)
    a rel=seeguide|seeapp|...    the text alone (ExDoc drops these links too)
    a href=http(s)://...         [text](url)
    any other tag                its content

Docs are untrusted: nesting is capped (`MAX_DEPTH` elements) and so is the work, counted
as the characters every block produces on its way up (`MAX_WORK`), so a hostile tree of
deep lists cannot cost minutes or gigabytes. Either cap raises `ErlangHtmlError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from attrs import frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest.etf import Term
from hexlocal_core.ingest.html_markdown import code_block
from hexlocal_core.model import Atom
from hexlocal_core.untrusted import clip, decode_text

FORMAT = "application/erlang+html"
MAX_DEPTH = 40  # OTP's docs nest about 8 elements deep
MAX_WORK = 8 * 1024 * 1024  # characters; OTP 25's largest doc (re's) renders to 123,000
SEE = "https://erlang.org/doc/link/"

_BLOCK_TAGS = frozenset(
    {"p", "div", "blockquote", "pre", "ul", "ol", "li", "dl", "dt", "dd", "br"}
    | {"h1", "h2", "h3", "h4", "h5", "h6"}
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# class -> (title, ExDoc admonition style), the titles and styles OTP 27's markdown uses.
_ADMONITIONS = {
    "warning": ("Warning", "warning"),
    "note": ("Note", "info"),
    "change": ("Change", "info"),
    "do": ("Do", "tip"),
    "dont": ("Don't", "error"),
}
_SPACES = re.compile(r"\s+")
_TIGHT_NESTED = re.compile(r"\n\n(?=[ \t]*(?:- |\d+\. ))")
_NOT_PARAGRAPH = re.compile(r"(?:```|- |\d+\. |> |#|\|)")
_LINK_SCHEMES = ("http://", "https://", "mailto:", "ftp://")
_BARE_ATOM = re.compile(r"[a-z][A-Za-z0-9_@]*")
_RESERVED = frozenset(
    "after and andalso band begin bnot bor bsl bsr bxor case catch cond div else end fun if "
    "let maybe not of or orelse receive rem try when xor".split()
)


class ErlangHtmlError(IngestError):
    """A doc is not erlang+html, or is beyond the depth or work caps."""


@frozen
class _Element:
    tag: str
    attrs: dict[str, str]
    content: Sequence[Term]


def to_markdown(
    content: Term,
    *,
    module: str | None = None,
    max_depth: int = MAX_DEPTH,
    max_work: int = MAX_WORK,
) -> str:
    """The markdown of one doc (a module's or an entry's `<<"en">>` value). Links to
    `module`'s own functions and types name them without it, as OTP 27's markdown does
    (`select/1`, not `ets:select/1`), and a link whose text is its target is that code.

    :raises ErlangHtmlError: (an IngestError) the tree is malformed, nests deeper than
        `max_depth` elements, or costs more than `max_work` characters to render.
    """
    renderer = _Renderer(max_depth, max_work, module)
    return "\n\n".join(renderer.blocks(_content(content), 0))


def quote_atom(name: str) -> str:
    """An atom as Erlang writes it: `ets`, `'Elixir.Enum'`, `'end'`."""
    if _BARE_ATOM.fullmatch(name) and name not in _RESERVED:
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def inline_code(text: str) -> str:
    """`text` as a markdown code span, fenced past any backticks it holds."""
    if not text:
        return ""
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def see_target(rel: str, href: str) -> str | None:
    """The ExDoc autolink target of an erl_docgen `see*` link, or None when ExDoc keeps
    only the text (guides, apps, commands, C references, files) or the href is malformed."""
    kind = rel.removeprefix(SEE)
    if kind == "seeerl":
        return _module_target(href)
    if kind == "seemfa":
        return _mfa_target(href)
    if kind == "seetype":
        return _type_target(href)
    return None


def _module_target(href: str) -> str | None:
    url, _, fragment = href.partition("#")
    parts = url.split(":")
    module = parts[-1] if len(parts) <= 2 else ""
    if not module:
        return None
    return f"m:{quote_atom(module)}" + (f"#{fragment}" if fragment else "")


def _mfa_target(href: str) -> str | None:
    pieces = href.split("Module:")
    if len(pieces) > 2:
        return None
    prefix = "c:" if len(pieces) == 2 else ""
    parts = "".join(pieces).split(":")
    if len(parts) > 2:
        return None
    fixed = _fixup(parts[-1])
    return prefix + fixed if fixed else None


def _type_target(href: str) -> str | None:
    parts = href.split(":")
    if len(parts) > 2:
        return None
    name = parts[-1]
    if "(" in name:
        name = name.split("(", 1)[0] + "/0"
    elif "/" not in name.partition("#")[2]:
        name += "/0"  # erl_docgen names a type without its arity; most have none
    fixed = _fixup(name)
    return f"t:{fixed}" if fixed else None


def _fixup(mfa: str) -> str | None:
    """`mod#f/a` -> `mod:f/a`, `#f/a` -> `f/a` (names quoted as atoms), else None."""
    module, sep, fa = mfa.partition("#")
    name, slash, arity = fa.partition("/")
    if not sep or not slash or not name or not arity.isdigit() or len(arity) > 3:
        return None
    return (f"{quote_atom(module)}:" if module else "") + f"{quote_atom(name)}/{int(arity)}"


def _content(term: Term) -> list[Term]:
    if isinstance(term, bytes):
        return [term]
    if isinstance(term, list):
        return term
    raise ErlangHtmlError("erlang+html content is neither a list nor a binary")


def _node(term: Term) -> str | _Element:
    if isinstance(term, bytes):
        return decode_text(term)
    if not (isinstance(term, tuple) and len(term) == 3 and isinstance(term[0], Atom)):
        # The type, not the value: a repr of a hostile term could be megabytes.
        raise ErlangHtmlError(f"not an erlang+html element: a {type(term).__name__}")
    tag, attrs, content = term[0].name, term[1], term[2]
    if not isinstance(attrs, list):
        raise ErlangHtmlError(f"<{clip(tag, 40)}> attributes are not a list")
    return _Element(tag, _attributes(attrs), _content(content))


def _attributes(attrs: list[Term]) -> dict[str, str]:
    """`[{href, <<"...">>}]` -> {"href": "..."}; pairs of any other shape are ignored."""
    out: dict[str, str] = {}
    for attr in attrs:
        if isinstance(attr, tuple) and len(attr) == 2 and isinstance(attr[0], Atom):
            value = attr[1]
            if isinstance(value, bytes):
                out.setdefault(attr[0].name, decode_text(value))
    return out


class _Renderer:
    def __init__(self, max_depth: int, max_work: int, module: str | None) -> None:
        self.max_depth = max_depth
        self.max_work = max_work
        self.work = 0
        self.local = f"{quote_atom(module)}:" if module else None

    def spend(self, text: str) -> str:
        self.work += len(text)
        if self.work > self.max_work:
            raise ErlangHtmlError(f"doc renders to more than {self.max_work} characters")
        return text

    def enter(self, depth: int) -> int:
        if depth >= self.max_depth:
            raise ErlangHtmlError(f"erlang+html elements nest deeper than {self.max_depth}")
        return depth + 1

    # -- blocks ------------------------------------------------------------------------
    def blocks(self, parts: Iterable[Term], depth: int) -> list[str]:
        out: list[str] = []
        run: list[str] = []

        def flush() -> None:
            text = "\n".join(line.strip() for line in "".join(run).split("\n")).strip()
            if text:
                out.append(self.spend(text))
            run.clear()

        for part in parts:
            checkpoint()
            node = _node(part)
            if isinstance(node, str):
                run.append(_SPACES.sub(" ", node))
            elif node.tag in _BLOCK_TAGS and node.tag != "br" or self.has_block(node):
                flush()
                out.extend(self.block(node, depth))
            else:
                run.append(self.inline(node, depth))
        flush()
        return out

    def has_block(self, el: _Element) -> bool:
        return any(
            isinstance(c, tuple)
            and len(c) == 3
            and isinstance(c[0], Atom)
            and c[0].name in _BLOCK_TAGS
            and c[0].name != "br"
            for c in el.content
        )

    def block(self, el: _Element, depth: int) -> list[str]:
        inner = self.enter(depth)
        tag = el.tag
        if tag in _HEADINGS:
            text = " ".join(self.inline_children(el, inner).split())
            return [self.spend(f"{'#' * _HEADINGS[tag]} {text}")] if text else []
        if tag == "pre":
            return self.code_block(el, inner)
        if tag in ("ul", "ol"):
            if el.attrs.get("class") == "types":
                return self.types(el, inner)
            return self.items(el, inner, ordered=tag == "ol")
        if tag == "dl":
            return self.definitions(el, inner)
        if tag == "blockquote" or (tag == "div" and el.attrs.get("class") == "quote"):
            return self.quoted(self.blocks(el.content, inner), None)
        if tag == "div" and el.attrs.get("class"):
            return self.quoted(self.blocks(el.content, inner), _admonition(el.attrs["class"]))
        return self.blocks(el.content, inner)

    def code_block(self, el: _Element, depth: int) -> list[str]:
        code = "".join(self.text(el, depth))
        code = code.removeprefix("\n").rstrip()
        if not code.strip():
            return []
        lang = "erlang"
        for child in el.content:
            node = _node(child)
            if isinstance(node, _Element) and node.attrs.get("type") == "none":
                lang = "text"
        return [self.spend(code_block(code, lang))]

    def items(self, el: _Element, depth: int, *, ordered: bool) -> list[str]:
        items: list[str] = []
        for child in el.content:
            node = _node(child)
            parts = node.content if isinstance(node, _Element) and node.tag == "li" else [child]
            body = "\n\n".join(self.blocks(parts, depth))
            if not body:
                continue
            marker = f"{len(items) + 1}. " if ordered else "- "
            body = _TIGHT_NESTED.sub("\n", body)
            items.append(self.spend(marker + _indent_rest(body, " " * len(marker))))
        return [self.spend("\n".join(items))] if items else []

    def types(self, el: _Element, depth: int) -> list[str]:
        """erl_docgen's list of a function's types: `li class=type` a type, `li name=T` a
        type from the module's metadata, `li class=description` text for the one before."""
        items: list[list[str]] = []  # each item's lines, joined once at the end
        for child in el.content:
            node = _node(child)
            if not isinstance(node, _Element):
                continue
            if node.attrs.get("class") == "description" and items:
                text = "\n\n".join(self.blocks(node.content, depth))
                if text:
                    items[-1].append(self.spend(_indent_rest("  " + text, "  ")))
                continue
            text = " ".join(self.inline_children(node, depth).split())
            if not text and node.attrs.get("name"):
                text = inline_code(node.attrs["name"] + "()")
            elif text and not any(isinstance(c, tuple) for c in node.content):
                text = inline_code(text)  # plain text is a type expression
            if text:
                items.append([self.spend("- " + text)])
        if not items:
            return []
        return ["Types:", self.spend("\n".join(line for item in items for line in item))]

    def definitions(self, el: _Element, depth: int) -> list[str]:
        out: list[str] = []
        terms: list[str] = []
        for child in el.content:
            node = _node(child)
            if not isinstance(node, _Element):
                continue
            if node.tag == "dt":
                text = " ".join(self.inline_children(node, depth).split())
                if text:
                    terms.append(f"**{text}**")
                continue
            body = self.blocks(node.content, depth)
            if node.tag != "dd":
                out.extend(body)
                continue
            out.append(self.spend(_definition(", ".join(terms), body)))
            terms = []
        if terms:
            out.append(self.spend(_definition(", ".join(terms), [])))
        out = [item for item in out if item]
        return [self.spend("\n".join(out))] if out else []

    def quoted(self, body: list[str], label: str | None) -> list[str]:
        if not body:
            return []
        text = "\n\n".join(body)
        if label:
            text = f"#### {label}\n\n{text}"
        return [
            self.spend("\n".join((">" + (" " + line if line else "")) for line in text.split("\n")))
        ]

    # -- inline ------------------------------------------------------------------------
    def inline(self, el: _Element, depth: int) -> str:
        """An inline element's markdown; what it costs is spent, as every level copies
        its content once more."""
        return self.spend(self._inline(el, self.enter(depth)))

    def _inline(self, el: _Element, inner_depth: int) -> str:
        tag = el.tag
        if tag == "br":
            return "\n"
        if tag == "code":
            return inline_code(" ".join("".join(self.text(el, inner_depth)).split()))
        inner = self.inline_children(el, inner_depth)
        if tag == "a":
            return self.link(el, inner.strip())
        if tag in ("em", "i") and inner.strip():
            return f"*{inner.strip()}*"
        if tag in ("strong", "b") and inner.strip():
            return f"**{inner.strip()}**"
        return inner

    def inline_children(self, el: _Element, depth: int) -> str:
        out: list[str] = []
        for child in el.content:
            node = _node(child)
            if isinstance(node, str):
                out.append(_SPACES.sub(" ", node))
            else:
                out.append(self.inline(node, depth))
        return "".join(out)

    def link(self, el: _Element, inner: str) -> str:
        href = el.attrs.get("href", "")
        rel = el.attrs.get("rel", "")
        if rel.startswith(SEE):
            target = see_target(rel, href)
            app = href.split(":", 1)[0] if href.count(":") >= 1 else ""
            if app and inner.startswith(f"`//{app}/"):
                inner = "`" + inner.removeprefix(f"`//{app}/")
            if not (target and inner):
                return inner
            target = self.localised(target)
            code = inline_code(target)
            return inner if inner == code else f"[{inner}]({code})"
        if not href.startswith(_LINK_SCHEMES) or any(c in href for c in " <>\n\t"):
            return inner
        return f"[{inner}]({href})" if inner else f"<{href}>"

    def localised(self, target: str) -> str:
        """`ets:select/1` -> `select/1` in ets's own docs (`c:` and `t:` kept)."""
        prefix = target[:2] if target[:2] in ("c:", "t:") else ""
        if self.local and target.startswith(prefix + self.local):
            return prefix + target[len(prefix + self.local) :]
        return target

    def text(self, el: _Element, depth: int) -> list[str]:
        """Every text in `el`, raw (what a `pre` or `code` shows)."""
        out: list[str] = []
        for child in el.content:
            node = _node(child)
            if isinstance(node, str):
                out.append(node)
            else:
                out.extend(self.text(node, self.enter(depth)))
        return out


def _admonition(css_class: str) -> str:
    known = _ADMONITIONS.get(css_class)
    if known:
        title, style = known
    else:
        title = " ".join(re.sub(r"[^A-Za-z0-9_ -]", " ", css_class).split())[:40].title()
        style = "info"
    return f"{title} {{: .{style} }}" if title else ""


def _definition(term: str, body: list[str]) -> str:
    """One `- **term** - description` item; a description that starts with a code block or a
    list goes on the lines below, indented."""
    first, rest = (body[0], body[1:]) if body else ("", [])
    if term and first and not _NOT_PARAGRAPH.match(first):
        head, blocks = f"{term} - {first}", rest
    elif term:
        head, blocks = term, body
    else:
        head, blocks = first, rest
    text = "\n\n".join([head, *blocks]) if head else "\n\n".join(blocks)
    return "- " + _indent_rest(text, "  ") if text else ""


def _indent_rest(text: str, pad: str) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0]] + [(pad + line) if line else "" for line in lines[1:]])
