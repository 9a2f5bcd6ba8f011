"""Reading an answer's body without holding more of it than its caller allows.

    read_capped         collects a stream, refusing past a cap or short of Content-Length
    read_body           the whole body of a response, held to a cap (decoded or not)
    read_error_text     the start of an error answer, as text to quote
    TooLarge, Truncated what the readers raise (the adapter names the URL)

Apart from `adapters/http.py`'s request loop because it is called from the other side: an
adapter's `handle(response)` reads the body in its own way (a docs tarball, a JSON answer,
an error to quote), while the loop only decides whether another attempt is made. The limits
change with what is downloaded, not with how requests are retried.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

__all__ = ["TooLarge", "Truncated", "read_body", "read_capped", "read_error_text"]

ERROR_BODY_BYTES = 64 * 1024  # what is read of an error answer: enough for any message
CHUNK_BYTES = 64 * 1024


class TooLarge(Exception):
    """A body outgrew its cap (the adapter turns it into an error naming the URL)."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size  # the announced size, or None when the stream went past the cap


class Truncated(Exception):
    """Fewer bytes arrived than Content-Length announced."""


async def read_capped(
    chunks: AsyncIterable[bytes], cap: int, announced: int | None = None
) -> bytes:
    """Collects a streamed body, refusing before it holds more than `cap` bytes.

    Raises TooLarge as soon as the announced length or the running total exceeds the cap,
    so an oversized download is abandoned after at most one chunk past the limit.
    """
    if announced is not None and announced > cap:
        raise TooLarge(announced)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise TooLarge(None)
    if announced is not None and len(body) != announced:
        raise Truncated(f"{len(body)} of {announced} bytes")
    return bytes(body)


async def read_body(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body of `response`, at most `cap` bytes (TooLarge past it)."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    # Content-Length counts the encoded bytes; a decompressed stream cannot be held to it.
    announced = response.content_length if encoding in ("", "identity") else None
    return await read_capped(response.content.iter_chunked(CHUNK_BYTES), cap, announced)


async def read_error_text(response: aiohttp.ClientResponse, cap: int = ERROR_BODY_BYTES) -> str:
    """The start of an error answer's body as text: enough to quote, never all of a huge one."""
    import aiohttp

    body = bytearray()
    try:
        async for chunk in response.content.iter_chunked(CHUNK_BYTES):
            body += chunk
            if len(body) >= cap:
                break
    except aiohttp.ClientPayloadError:
        pass  # an error answer cut short still says what it says
    return bytes(body[:cap]).decode("utf-8", "replace")
