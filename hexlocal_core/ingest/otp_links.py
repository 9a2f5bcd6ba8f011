"""Where erlang.org publishes an OTP application's docs, for an item's ref.

OTP >= 27's docs are ExDoc's, one site per application, so a ref is a path under it:

    stdlib, 27   ets.html#new/2   https://www.erlang.org/docs/27/apps/stdlib/ets.html#new/2

Older releases were built by erl_docgen into one `man/` folder for every application,
with anchors of their own: `new-2` for a function, `Module:handle_call-3` for a
callback, `type-tid` for a type (the forms links to those pages have always used):

    stdlib, 25   ets.html#new/2                    .../25/man/ets.html#new-2
                 gen_server.html#c:handle_call/3   .../25/man/gen_server.html#Module:handle_call-3
                 ets.html#t:tid/0                  .../25/man/ets.html#type-tid
"""

from __future__ import annotations

from collections.abc import Callable

ERLANG_ORG = "https://www.erlang.org/docs"
FIRST_EXDOC_MAJOR = 27  # the first release whose docs ExDoc built


def otp_link(app: str, otp_major: int) -> Callable[[str], str]:
    """ref -> URL of the docs of `app` as published for OTP `otp_major`."""
    if otp_major >= FIRST_EXDOC_MAJOR:
        base = f"{ERLANG_ORG}/{otp_major}/apps/{app}/"
        return lambda ref: base + ref
    man = f"{ERLANG_ORG}/{otp_major}/man/"
    return lambda ref: man + _man_ref(ref)


def _man_ref(ref: str) -> str:
    """An ExDoc ref in erl_docgen's anchor form; an anchor it has no form for is dropped
    (the page is still right)."""
    page, _, anchor = ref.partition("#")
    if not anchor:
        return page
    if anchor.startswith("t:"):
        name = anchor[2:].rpartition("/")[0]
        return f"{page}#type-{name}" if name else page
    prefix, anchor = ("Module:", anchor[2:]) if anchor.startswith("c:") else ("", anchor)
    name, slash, arity = anchor.rpartition("/")
    if not (name and slash and arity.isdigit()):
        return page
    return f"{page}#{prefix}{name}-{arity}"
