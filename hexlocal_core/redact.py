"""Masking secrets before text leaves hexlocal (messages, exceptions, logs, the database).

Pure functions, no I/O:

    redact_url(url)             userinfo and every query value masked:
                                "https://u:p@host/api?token=t" -> "https://****@host/api?token=****"
    redact_urls(text)           the same for every URL inside free text (an exception's str)
    url_secrets(url)            the credential parts of a URL, to scrub from echoed bodies
    scrub(text, secrets)        every secret masked, also when escaped (JSON \\u002d, \\/, HTML
                                entities, %XX), in part (any 8-character run of one), or cut
                                short at the end of the text
    excerpt(text, secrets)      scrub first, then cut: a cut can never expose part of a key
    valid_model_name(name, ...) whether a server-supplied model id may be stored and shown
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

from hexlocal_core.untrusted import clip

__all__ = [
    "MASK",
    "excerpt",
    "redact_url",
    "redact_urls",
    "scrub",
    "url_secrets",
    "valid_model_name",
]

MASK = "****"
EXCERPT_CHARS = 300  # the longest piece of a server's error body a message quotes
WINDOW = 8  # any run this long of a secret counts as the secret (a server's partial echo)
MIN_SECRET = 4  # shorter URL parts (a user "u", a query "v=1") are not worth scrubbing
MIN_PREFIX = 3  # a secret's prefix this long at the end of a cut text is masked
_UNESCAPE_ROUNDS = 3  # double-escaped echoes (\\u005cu002d) unwrap in a round or two

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s\"'<>`]+")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
# A credential however it is labelled ("Bearer x", "token=x", "api_key: x"), even one
# hexlocal does not know (a proxy's own): the label stays, the value goes.
_AUTH_VALUE = re.compile(
    r"(?i)\b(bearer\s+|(?:access_|api_|api-|private_)?(?:token|key|secret|password)"
    r"[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._~+/-]{8,}=*"
)
_MODEL = re.compile(r"^[A-Za-z0-9._:/@+-]{1,200}$")


# --------------------------------------------------------------------------- URLs


def redact_url(url: str) -> str:
    """`url` as it may be shown: no user or password, no query value, no fragment.

    Never raises: a URL that does not parse is masked by pattern instead.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced "[" in the host, say
        return _redact_loose(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, _mask_query(parts.query), fragment))


def redact_urls(text: str) -> str:
    """Every URL inside `text` redacted (exception texts quote the URL they failed on)."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of `url` that are credentials: the password (or a lone user name, which is
    how tokens ride in URLs), and every query value; raw and percent-decoded."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found: list[str] = []
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if userinfo:
        user, _, password = userinfo.partition(":")
        found.append(password if password else user)
    for pair in re.split(r"[&;]", parts.query):
        found.append(pair.partition("=")[2] if "=" in pair else pair)
    variants = {v for s in found for v in (s, unquote(s))}
    return tuple(sorted(v for v in variants if len(v) >= MIN_SECRET))


def _mask_query(query: str) -> str:
    if not query:
        return ""
    masked = []
    for pair in query.split("&"):
        key, eq, _ = pair.partition("=")
        masked.append(f"{clip(key, 40)}={MASK}" if eq else MASK)
    return "&".join(masked)


def _redact_loose(url: str) -> str:
    text = re.sub(r"(://)[^/?#\s]*@", rf"\g<1>{MASK}@", url)
    text = re.sub(r"([?&;][^=&#\s]*=)[^&#\s]*", rf"\g<1>{MASK}", text)
    return re.sub(r"#.*$", f"#{MASK}", text)


# --------------------------------------------------------------------------- echoes


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret masked, however it was echoed.

    Escapes are undone first (a JSON body may spell "sk-" as "sk\\u002d"), so the result is
    the normalised text. A run of WINDOW characters of a secret, in any case, counts as the
    secret, and so does a prefix of one at the very end (the text may have been cut there).
    """
    keys = [s for s in secrets if s]
    text = _AUTH_VALUE.sub(lambda m: f"{m.group(1)}{MASK}", _unescape(text))
    if not keys:
        return text
    hidden = bytearray(len(text))
    folded = text.lower()
    case_blind = len(folded) == len(text)  # lower() keeps positions for all but a few scripts
    for key in keys:
        if case_blind:
            _mark(hidden, folded, key.lower())
        else:
            _mark(hidden, text, key)
    return _apply(text, hidden)


def excerpt(text: str, secrets: Iterable[str], limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of a server's text on one line, scrubbed before the cut."""
    keys = [s for s in secrets if s]
    clean = " ".join(scrub(text, keys).split())
    if len(clean) <= limit:
        return clean
    cut = clean[:limit]
    if cut.endswith("*") and clean[limit] == "*":
        cut = cut.rstrip("*")[: limit - len(MASK)] + MASK  # cut inside a mask: show it whole
    return _mask_cut_prefix(cut, keys) + "…"


def valid_model_name(name: object, secrets: Iterable[str] = ()) -> bool:
    """Whether a model id a server answered with may be stored and shown: a short plain
    identifier (letters, digits, `._:/@+-`) that carries no secret."""
    if not isinstance(name, str) or not _MODEL.match(name):
        return False
    return scrub(name, secrets) == name


def _unescape(text: str) -> str:
    for _ in range(_UNESCAPE_ROUNDS):
        decoded = _JSON_ESCAPE.sub(_json_char, text).replace("\\/", "/")
        decoded = html.unescape(decoded)
        if _PERCENT.search(decoded):
            decoded = unquote(decoded, errors="replace")
        if decoded == text:
            break
        text = decoded
    return text


def _json_char(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    return "?" if 0xD800 <= code <= 0xDFFF else chr(code)  # a lone half of a pair: not text


def _mark(hidden: bytearray, text: str, key: str) -> None:
    start = text.find(key)
    while start >= 0:
        hidden[start : start + len(key)] = b"\x01" * len(key)
        start = text.find(key, start + 1)
    if len(key) >= WINDOW:
        windows = {key[i : i + WINDOW] for i in range(len(key) - WINDOW + 1)}
        for i in range(len(text) - WINDOW + 1):
            if text[i : i + WINDOW] in windows:
                hidden[i : i + WINDOW] = b"\x01" * WINDOW
    for size in range(min(len(key) - 1, len(text)), MIN_PREFIX - 1, -1):
        if text.endswith(key[:size]):
            hidden[len(text) - size :] = b"\x01" * size
            break


def _apply(text: str, hidden: bytearray) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if hidden[i]:
            while i < len(text) and hidden[i]:
                i += 1
            out.append(MASK)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _mask_cut_prefix(cut: str, keys: list[str]) -> str:
    for key in keys:
        for size in range(min(len(key) - 1, len(cut)), MIN_PREFIX - 1, -1):
            if cut.endswith(key[:size]):
                return cut[: min(len(cut) - size, len(cut) - len(MASK))] + MASK
    return cut
