"""Masking secrets: URL credentials, echoed keys (escaped, partial, cut), names, model ids."""

from __future__ import annotations

import json

import pytest

from hexlocal_core.redact import (
    MASK,
    excerpt,
    redact_url,
    redact_urls,
    scrub,
    url_secrets,
    valid_model_name,
)
from hexlocal_core.untrusted import clip

KEY = "sk-adv0cafe1234567890abcdefSECRET"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://repo.hex.pm", "https://repo.hex.pm"),
        ("https://hex.pm/api", "https://hex.pm/api"),
        ("https://user:pass@mirror.example/repo", "https://****@mirror.example/repo"),
        ("https://tok3n@mirror.example", "https://****@mirror.example"),
        ("https://a:b@c@host:8443/x", "https://****@host:8443/x"),  # the last @ ends userinfo
        ("https://h/v1?api_key=k3y&region=eu", "https://h/v1?api_key=****&region=****"),
        ("https://h/v1?token=t#frag", "https://h/v1?token=****#****"),
        ("https://h/v1?bare-token", "https://h/v1?****"),
        ("http://u:p@[::1/x?token=t", "http://****@[::1/x?token=****"),  # does not parse
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_urls_in_free_text() -> None:
    text = "Cannot connect to https://u:hunter22@h:1/x?key=abc (refused); see http://ok/y"
    assert redact_urls(text) == (
        "Cannot connect to https://****@h:1/x?key=**** (refused); see http://ok/y"
    )


def test_url_secrets() -> None:
    assert url_secrets("https://user:pa55word@h/x?token=t0ken%2Bx&v=1") == (
        "pa55word",
        "t0ken%2Bx",
        "t0ken+x",
    )
    assert url_secrets("https://tok3n123@h") == ("tok3n123",)  # a lone user is the token
    assert url_secrets("https://h/x") == ()


@pytest.mark.parametrize(
    "echo",
    [
        f"invalid key {KEY}",
        "invalid key " + KEY.replace("-", "\\u002d"),  # JSON-escaped
        "invalid key " + KEY.replace("-", "\\u002D"),
        "invalid key " + "".join(f"\\u{ord(c):04x}" for c in KEY),  # every char escaped
        "invalid key " + KEY.replace("-", "\\\\u002d"),  # escaped twice
        "invalid key " + KEY.replace("-", "&#45;"),  # HTML entity
        "invalid key " + KEY.replace("-", "%2D"),  # percent-encoded
        f"invalid key {KEY.upper()}",  # a server that shouts
        f"invalid key {KEY[3:]}",  # without its prefix
        f"invalid key {KEY[:12]}...{KEY[-4:]}",  # the usual partial echo
        f"key ends the body: {KEY[:5]}",  # cut short by the server (a prefix at the end)
    ],
)
def test_scrub_catches_every_echo(echo: str) -> None:
    cleaned = scrub(echo, [KEY])
    assert MASK in cleaned
    for piece in (KEY, KEY[3:], KEY[:12], KEY[8:16], KEY[-8:], KEY[:5]):
        assert piece.lower() not in cleaned.lower(), cleaned


def test_scrub_unescapes_a_json_body() -> None:
    body = json.dumps({"error": {"message": f"bad key {KEY}", "path": "a/b"}}).replace("/", "\\/")
    assert scrub(body, [KEY]) == '{"error": {"message": "bad key ****", "path": "a/b"}}'


def test_scrub_masks_labelled_credentials_it_does_not_know() -> None:
    text = "headers: Authorization: Bearer abcdefgh12345678, api_key=zyxwvuts9876 ok"
    assert scrub(text, []) == "headers: Authorization: Bearer ****, api_key=**** ok"
    assert scrub("the token provided is too many tokens", []) == (
        "the token provided is too many tokens"
    )


@pytest.mark.parametrize("at", range(280, 301 + len(KEY)))
def test_excerpt_cut_never_shows_part_of_the_key(at: int) -> None:
    body = "x" * at + KEY + " and more text " * 20
    shown = excerpt(body, [KEY], limit=300)
    assert len(shown) <= 301  # 300 characters and the ellipsis
    for size in range(3, len(KEY) + 1):
        assert KEY[:size] not in shown, (at, size, shown[-40:])
    assert "**" not in shown.replace(MASK, "") or shown.endswith(MASK + "…")


def test_excerpt_masks_a_prefix_left_at_the_cut() -> None:
    # The whole body was scrubbed, but a short prefix of the key alone (below the 8-char
    # window) can still sit at the cut: it is masked too.
    body = "y" * 296 + KEY[:6] + "zzzz"
    assert excerpt(body, [KEY], limit=300) == "y" * 296 + MASK + "…"


def test_excerpt_is_one_line() -> None:
    assert excerpt("a\n\n b\tc", []) == "a b c"


def test_clip() -> None:
    assert clip("jason") == "jason"
    long = clip("a" * 5000)
    assert len(long) == 200 and long.endswith("…")
    assert clip("a\nb\x00c\ud800") == "a?b?c?"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("mistral-embed", True),
        ("text-embedding-3-small", True),
        ("org/model:v1.2@latest+q4", True),
        ("", False),
        ("m" * 201, False),
        (f"Bearer {KEY}", False),
        (KEY, False),  # plausible characters, but it is the key
        (f"model-{KEY[5:20]}", False),  # carries a piece of the key
        ("model\nname", False),
        ("mod el", False),
        (42, False),
        (None, False),
    ],
)
def test_valid_model_name(name: object, ok: bool) -> None:
    assert valid_model_name(name, [KEY]) is ok
