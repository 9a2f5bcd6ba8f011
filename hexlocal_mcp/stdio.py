"""The stdio transport: every line a client sends gets exactly one JSON-RPC answer.

The MCP SDK's stdio reader hands a line it cannot decode to the session as an exception,
and the session only logs it: the client then waits for an answer that never comes. That
happens for lines a real client sends: a string cut inside an emoji (a lone surrogate
such as "\\ud800"), a 5,000-digit integer, deeply nested arguments, a NUL after the JSON,
a JSON-RPC batch. This module replaces that reader (and, to keep one writer, the
writer): `screen` decides for each line whether it goes to the server or is answered
here, and `serve` runs a FastMCP server over the process's stdin and stdout with it.

    unparseable JSON, invalid UTF-8              -32700 parse error (the id when it can be read)
    a batch, a non-object, a malformed envelope  -32600 invalid request (the id when it can)
    a line over MAX_LINE_BYTES or nested deeper
    than MAX_DEPTH                               -32600, read without recursion or buffering
    a lone surrogate or a huge number in a
    tools/call argument                          a tool error result naming the argument
    ... anywhere else in a request               -32602 invalid params

Notifications (no id) get no answer, as JSON-RPC requires; a refused one is logged.

Stdin closing is how a client stops the server. `serve` reports it through `on_eof`;
`main` uses that to bound the exit: work stuck in a thread (a parser that cannot be
interrupted) must not keep the process alive after its client is gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from attrs import frozen
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter
from mcp_types.jsonrpc import ErrorData

if TYPE_CHECKING:
    from fastmcp import FastMCP

log = logging.getLogger("hexlocal.mcp.stdio")

MAX_LINE_BYTES = 4 * 1024 * 1024  # a tool call is a few KB; 4 MiB leaves room for any real one
MAX_DEPTH = 100  # MCP messages nest a handful of levels; the JSON parser recurses per level
MAX_INT_DIGITS = 100  # no argument needs more; CPython refuses to parse over 4,300
READ_CHUNK = 64 * 1024
DRAIN_S = 1.0  # how long replies already queued may take to reach stdout at shutdown

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = int | str
Outbound = SessionMessage | str  # a message for the SDK's encoder, or a JSON line of our own


# -- screening one line -----------------------------------------------------------------------


@frozen
class Hostile:
    """A value parsed from the line that no argument may hold; `what` describes it."""

    what: str


def screen(line: bytes) -> SessionMessage | Outbound | None:
    """What to do with one line: pass a message on (`SessionMessage`), answer it here
    (a JSON line, `str`), or nothing (a blank line, a refused notification)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(None, PARSE_ERROR, f"the line is not valid UTF-8 (byte {exc.start})")
    if not text.strip():
        return None  # a keep-alive newline is not a message
    if nesting_depth(text) > MAX_DEPTH:
        return _error(
            recover_id(text),
            INVALID_REQUEST,
            f"the message nests deeper than {MAX_DEPTH} levels; send flat arguments",
        )
    try:
        data = json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_no_constant
        )
    except (ValueError, RecursionError) as exc:
        where = f" at character {exc.pos + 1}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return _error(recover_id(text), PARSE_ERROR, f"not valid JSON: {reason}{where}")
    return _screen_value(data)


def _screen_value(data: Any) -> SessionMessage | str | None:
    if isinstance(data, list):
        return _batch_reply(data)
    if not isinstance(data, dict):
        return _error(None, INVALID_REQUEST, "a JSON-RPC message must be a JSON object")
    raw_id = data.get("id")
    request_id = raw_id if _is_id(raw_id) else None
    is_request = "method" in data and "id" in data
    if "id" in data and raw_id is not None and request_id is None:
        return _error(None, INVALID_REQUEST, "the id must be a string or an integer")
    found = find_hostile(data)
    if found is not None:
        return _hostile_reply(data, request_id, is_request, *found)
    try:
        message = jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValueError as exc:
        return _error(request_id, INVALID_REQUEST, _envelope_problem(exc))
    return SessionMessage(message)


def _hostile_reply(
    data: dict[str, Any], request_id: RequestId | None, is_request: bool, path: str, what: str
) -> str | None:
    method = data.get("method")
    if not is_request or request_id is None:
        log.warning("dropped a %s notification: %s in %s", method, what, path)
        return None
    if method == "tools/call" and path.startswith("params.arguments."):
        argument = path.removeprefix("params.arguments.")
        message = (
            f"invalid arguments: {argument} holds {what}. Send valid Unicode text and "
            "numbers of ordinary size, then call again."
        )
        return _tool_error(request_id, message)
    return _error(request_id, INVALID_PARAMS, f"{path} holds {what}")


def _batch_reply(items: list[Any]) -> str:
    """JSON-RPC batches were dropped from MCP: each request in one gets -32600."""
    message = "batches are not supported; send each JSON-RPC message on its own line"
    ids = [item["id"] for item in items if isinstance(item, dict) and _is_id(item.get("id"))]
    if not ids:
        return _error(None, INVALID_REQUEST, message)
    return "[" + ",".join(_error(i, INVALID_REQUEST, message) for i in ids) + "]"


def _envelope_problem(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    first = errors(include_url=False)[0] if callable(errors) else None
    if first is None:
        return "not a JSON-RPC 2.0 message"
    where = ".".join(str(p) for p in first["loc"][1:]) or "message"
    return f"not a JSON-RPC 2.0 message ({where}: {first['msg']})"


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _parse_int(text: str) -> int | Hostile:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return Hostile(f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float | Hostile:
    value = float(text)
    if not math.isfinite(value) or len(text) > MAX_INT_DIGITS * 4:
        return Hostile(f"a number out of range ({text[:20]}...)")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def find_hostile(data: Any) -> tuple[str, str] | None:
    """(path, description) of the first value no argument may hold, else None.

    Iterative, so a deep value cannot exhaust the stack (depth is bounded before parsing
    anyway); keys are checked too, since a key becomes an argument name.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Hostile):
            return path.lstrip("."), value.what
        if isinstance(value, str) and _has_surrogate(value):
            return path.lstrip(".") or "a value", _SURROGATE
        if isinstance(value, dict):
            for key, item in value.items():
                if _has_surrogate(key):
                    return (path + ".<key>").lstrip("."), _SURROGATE
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}", item) for i, item in enumerate(value))
    return None


_SURROGATE = "an unpaired UTF-16 surrogate (a character cut in half, e.g. inside an emoji)"


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


# -- reading structure without parsing ---------------------------------------------------------

# A JSON string (escapes included) or one structural character; everything else is skipped.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def nesting_depth(text: str) -> int:
    """How deep the brackets of `text` nest (strings skipped); stops past MAX_DEPTH."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0  # cannot be too deep: skip the scan for the common case
    depth = deepest = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def recover_id(text: str) -> RequestId | None:
    """The top-level "id" of a line that cannot be parsed whole, when it can be read.

    Walks the tokens of the outermost object only (no recursion, nothing built), so a
    client whose request was refused still learns which request it was.
    """
    depth = 0
    expect_key = False
    key: str | None = None
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "{[":
            if depth == 0 and token == "[":
                return None  # a batch or an array: no single id
            depth += 1
            expect_key = depth == 1 and token == "{"
            key = None
        elif token in "}]":
            depth -= 1
            if depth <= 0:
                return None
        elif depth != 1:
            continue
        elif token == ",":
            expect_key, key = True, None
        elif token == ":":
            expect_key = False
        elif expect_key:
            key = _string_token(token)
        elif key == "id":
            return _id_token(token)
    return None


def _string_token(token: str) -> str | None:
    if not token.startswith('"'):
        return None
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _id_token(token: str) -> RequestId | None:
    if token.startswith('"'):
        value = _string_token(token)
        return value if value is not None and not _has_surrogate(value) else None
    if re.fullmatch(r"-?\d{1,18}", token):
        return int(token)
    return None


# -- replies ------------------------------------------------------------------------------------


def _error(request_id: RequestId | None, code: int, message: str) -> str:
    reply = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
    return reply.model_dump_json(by_alias=True, exclude_unset=True)


def _tool_error(request_id: RequestId, message: str) -> str:
    result = {"content": [{"type": "text", "text": message}], "isError": True}
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result).model_dump_json()


def encode(item: Outbound) -> bytes:
    """One line of protocol for stdout; a reply that cannot be encoded becomes an error."""
    if isinstance(item, str):
        return item.encode("utf-8") + b"\n"
    try:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        return text.encode("utf-8") + b"\n"
    except (ValueError, UnicodeError):
        log.exception("a reply could not be encoded")
        request_id = getattr(item.message, "id", None)
        if request_id is None:
            return b""
        text = _error(request_id, INTERNAL_ERROR, "the reply could not be encoded as UTF-8")
        return text.encode("utf-8") + b"\n"


# -- the transport ------------------------------------------------------------------------------


async def read_lines(fd: int) -> AsyncIterator[bytes | int]:
    """Lines from `fd` without their newline; an over-long line yields its length instead.

    Reads in a worker thread (stdin may be a pipe, a file or a terminal), keeps at most
    MAX_LINE_BYTES of one line in memory, and ends at EOF.
    """
    buffer = bytearray()
    skipped = 0  # > 0 while discarding the rest of an over-long line
    while True:
        chunk = await anyio.to_thread.run_sync(os.read, fd, READ_CHUNK, abandon_on_cancel=True)
        if not chunk:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if skipped:
                yield skipped + end - start
                skipped = 0
            else:
                buffer += chunk[start:end]
                yield bytes(buffer)
                buffer.clear()
            start = end + 1
        rest = chunk[start:]
        if skipped:
            skipped += len(rest)
        elif len(buffer) + len(rest) > MAX_LINE_BYTES:
            skipped = len(buffer) + len(rest)
            buffer.clear()
        else:
            buffer += rest
    if skipped:
        yield skipped
    elif buffer.strip():
        yield bytes(buffer)  # a last line without its newline


def too_long(size: int) -> str:
    return _error(
        None,
        INVALID_REQUEST,
        f"the line is {size:,} bytes; the limit is {MAX_LINE_BYTES:,}. Send smaller arguments.",
    )


@contextlib.asynccontextmanager
async def transport(
    in_fd: int, out_fd: int, *, on_eof: Callable[[], None] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams a low-level MCP server runs on, over two descriptors."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, outbound = anyio.create_memory_object_stream[Outbound](32)
    answers = server_writes.clone()  # the reader's own handle: the server closes its one

    async def reader() -> None:
        async with to_server, answers:
            async for line in read_lines(in_fd):
                decided = too_long(line) if isinstance(line, int) else screen(line)
                if isinstance(decided, SessionMessage):
                    await to_server.send(decided)
                elif decided is not None:
                    await answers.send(decided)
        log.info("stdin closed: shutting down")
        if on_eof is not None:
            on_eof()

    async def writer() -> None:
        async with outbound:
            async for item in outbound:
                data = encode(item)
                if data:
                    await anyio.to_thread.run_sync(_write_all, out_fd, data)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        writing = _Task(writer)
        tasks.start_soon(writing.run)
        try:
            yield server_reads, server_writes
        finally:
            # The server has stopped. Let replies already queued out, then stop reading.
            await server_writes.aclose()
            await answers.aclose()
            with anyio.move_on_after(DRAIN_S, shield=True):
                await writing.done.wait()
            tasks.cancel_scope.cancel()


class _Task:
    """A coroutine function and an event set when it has finished."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = anyio.Event()

    async def run(self) -> None:
        try:
            await self.fn()
        finally:
            self.done.set()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the protocol; fd 0 reads /dev/null and fd 1 goes
    to stderr meanwhile, so a stray print or a child process cannot touch the wire."""
    sys.stdout.flush()
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
    finally:
        os.close(devnull)
    try:
        yield in_fd, out_fd
    finally:
        sys.stdout.flush()
        os.dup2(in_fd, 0)
        os.dup2(out_fd, 1)
        # in_fd stays open: a reader thread may still block on it until the process exits.


async def serve(
    server: FastMCP[Any],
    *,
    in_fd: int,
    out_fd: int,
    on_eof: Callable[[], None] | None = None,
) -> None:
    """Run `server` over the two descriptors until the input ends.

    This is what FastMCP's own `run_stdio_async` does (fastmcp 4.2), with this module's
    transport in place of the SDK's stdio one: its lifespan around the low-level server.
    """
    from fastmcp.server.context import reset_transport, set_transport

    token = set_transport("stdio")
    try:
        async with server._lifespan_manager():
            async with transport(in_fd, out_fd, on_eof=on_eof) as (read, write):
                low_level = server._mcp_server
                await low_level.run(read, write, low_level.create_initialization_options())
    finally:
        reset_transport(token)
