"""The one HTTP layer under the remote adapters (hex.pm, the AI API, GitHub).

    HttpClient          one lazy aiohttp session per adapter, `aclose()` idempotent, and
                        `request()`: the attempts, the waits, the logging, the give-up
    Retry               what an adapter raises for "this attempt failed, another may not"
    Failure             a transport failure (timeout, connection, cut short, redirect loop)
                        to put in words
    join_url            a path under a configured base URL, keeping its query

When to try again is `adapters/http_policy.py`'s (RetryPolicy, the one Retry-After reader);
how much of a body is read is `adapters/http_body.py`'s.

An adapter supplies only what is its own: `handle(response)` turns an answer into its value
or raises its error (wrapped in `Retry` when its policy retries that status), and
`on_failure(failure)` names a transport failure in its words (a `Retry` when worth another
try). Every URL this module shows is redacted, and transport errors are never chained:
aiohttp's exceptions carry the request's URL and headers. aiohttp is imported when a session
is first needed, so importing an adapter stays cheap.

A client given a HostWatch (`adapters/reachability.py`) remembers a host as down when a
request to it gives up without any answer (every attempt refused, unresolvable or timed out
before a response); an answer, whatever its status (a 404, a 429, a 503), proves the host
reachable. While it is down, requests to it fail at once (a Failure of kind "down"), and
the first one past each `recheck_s` starts one HEAD of its URL in the background: any
answer makes the host reachable again for the next request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from attrs import frozen

from hexlocal_core.adapters.http_policy import RetryPolicy
from hexlocal_core.adapters.reachability import HostWatch, host_key
from hexlocal_core.errors import HexlocalError
from hexlocal_core.redact import redact_url, redact_urls, scrub
from hexlocal_core.untrusted import clip

if TYPE_CHECKING:
    import aiohttp

__all__ = ["Failure", "HttpClient", "Retry", "join_url"]

T = TypeVar("T")
log = logging.getLogger("hexlocal.http")


def join_url(base: str, path: str) -> str:
    """`path` appended to the path of `base`, keeping its query: a mirror configured as
    "https://host/repo?token=t" serves "https://host/repo/docs/x.tar.gz?token=t"."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return base + path
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


class Retry(Exception):
    """An attempt failed in a way the next may not; `after_s` is the server's Retry-After."""

    def __init__(self, error: Exception, after_s: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.after_s = after_s


# "down": not tried, the host is known to be unreachable (`detail` says since when and why).
FailureKind = Literal["timeout", "connect", "cut_short", "redirects", "other", "down"]


@frozen
class Failure:
    """A request that got no usable answer. `detail` is scrubbed and URL-redacted."""

    kind: FailureKind
    url: str  # redacted, for messages
    detail: str
    elapsed_s: float
    # No connection could be made (refused, unresolvable, no route) or nothing answered
    # within the timeout: the host, not this request, is the trouble. A connection the
    # server dropped, or a body that stalled after its headers, is an answer of sorts.
    unreachable: bool = False


class HttpClient:
    """One adapter's aiohttp session, made on first use, and its request loop."""

    def __init__(
        self,
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        trust_env: bool = False,
        auto_decompress: bool = True,
        max_redirects: int = 10,
        watch: HostWatch | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects  # redirects followed per attempt (aiohttp's default)
        self.watch = watch  # None: every request tries, whatever the last one met
        self._checks: dict[str, asyncio.Task[None]] = {}  # host -> its background check
        self._headers = dict(headers or {})  # defaults for every request: never credentials
        self._secrets = tuple(s for s in secrets if s)
        self._trust_env = trust_env  # proxies from the environment, like Mix's HTTP_PROXY
        self._auto_decompress = auto_decompress
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def open(self) -> bool:
        return self._session is not None and not self._session.closed

    def session(self) -> aiohttp.ClientSession:
        """The session, made now if there is none (or it belongs to an earlier event loop)."""
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is not None and self._loop is not loop:
            # A session cannot outlive its loop (a CLI runs one loop per command): let the
            # old one go without touching its dead loop, and the checks that ran on it.
            self._session.detach()
            self._session = None
            self._checks.clear()
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                auto_decompress=self._auto_decompress,
                trust_env=self._trust_env,
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        """Closes the session; safe to call twice, or before any request. A later request
        opens a new one."""
        session, self._session = self._session, None
        try:
            same_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            same_loop = False
        checks = [t for t in self._checks.values() if not t.done()]
        self._checks.clear()
        if same_loop and checks:
            for task in checks:
                task.cancel()
            await asyncio.gather(*checks, return_exceptions=True)
        if session is None or session.closed:
            return
        if same_loop:
            await session.close()
        else:
            session.detach()

    def scrub(self, text: str) -> str:
        """`text` without this client's secrets or any URL's credentials."""
        return redact_urls(scrub(text, self._secrets))

    async def request(
        self,
        method: str,
        url: str,
        *,
        policy: RetryPolicy,
        handle: Callable[[aiohttp.ClientResponse], Awaitable[T]],
        on_failure: Callable[[Failure], Exception],
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        streaming: bool = False,
    ) -> T:
        """Runs attempts until `handle` returns, a final error, or the policy gives up.

        `streaming`: no total deadline (a large tarball is slow but steady), only connect and
        read timeouts. The last error raised after several attempts says how many. A host
        the watch knows to be down is not tried: `on_failure` gets a Failure of kind "down".
        """
        known_down = self._known_down(url)
        if known_down is not None:
            error = on_failure(known_down)
            raise (error.error if isinstance(error, Retry) else error) from None
        for attempt in range(1, policy.attempts + 1):
            try:
                return await self._attempt(
                    method,
                    url,
                    handle,
                    on_failure,
                    headers,
                    params,
                    json,
                    streaming,
                    last=attempt == policy.attempts,
                )
            except Retry as retry:
                wait = policy.wait_s(attempt, retry.after_s)
                if attempt == policy.attempts or wait is None:
                    raise _gave_up(retry.error, attempt) from None
                log.info(
                    "%s; attempt %d of %d in %.2fs",
                    self.scrub(str(retry.error)),
                    attempt + 1,
                    policy.attempts,
                    wait,
                )
                await policy.sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _attempt(
        self,
        method: str,
        url: str,
        handle: Callable[[aiohttp.ClientResponse], Awaitable[T]],
        on_failure: Callable[[Failure], Exception],
        headers: Mapping[str, str] | None,
        params: Mapping[str, str] | None,
        json: Any,
        streaming: bool,
        *,
        last: bool,
    ) -> T:
        import aiohttp

        session = self.session()
        if headers and any(k.lower() == "authorization" for k in headers):
            # aiohttp turns URL userinfo into Basic auth and refuses both at once: the
            # adapter's own credential (a key, a token) wins.
            url = _without_userinfo(url)
        timeout = aiohttp.ClientTimeout(
            total=None if streaming else self.timeout_s,
            sock_connect=self.timeout_s,
            sock_read=self.timeout_s,
        )
        started = time.monotonic()
        answered = unreachable = False
        kind: FailureKind
        try:
            async with session.request(
                method,
                url,
                headers=headers,
                params=params,
                json=json,
                timeout=timeout,
                max_redirects=self.max_redirects,
            ) as response:
                answered = True
                if self.watch is not None:
                    self.watch.mark_up(url)
                return await handle(response)
        except TimeoutError:
            kind, detail = "timeout", f"timed out after {self.timeout_s:g}s"
            unreachable = not answered
        except aiohttp.TooManyRedirects:
            kind, detail = "redirects", f"redirected {self.max_redirects} times"
        except aiohttp.ClientPayloadError as exc:
            kind, detail = "cut_short", str(exc) or type(exc).__name__
        except aiohttp.ClientConnectionError as exc:
            kind, detail = "connect", str(exc) or type(exc).__name__
            unreachable = isinstance(exc, aiohttp.ClientConnectorError)
        except aiohttp.ClientError as exc:  # an invalid URL, too many redirects
            kind, detail = "other", f"{type(exc).__name__}: {exc}"
        failure = Failure(
            kind,
            clip(redact_url(url), 500),
            clip(self.scrub(detail), 500),
            time.monotonic() - started,
            unreachable,
        )
        error = on_failure(failure)
        if (
            self.watch is not None
            and failure.unreachable
            and (last or not isinstance(error, Retry))
        ):
            self.watch.mark_down(url, failure.detail)  # the request gives up: nothing answered
        raise error from None

    def _known_down(self, url: str) -> Failure | None:
        """The Failure to answer with at once when the watch knows `url`'s host is down;
        the first such request past the recheck time starts a check in the background."""
        if self.watch is None:
            return None
        down = self.watch.down(url)
        if down is None:
            return None
        if self.watch.due(url):
            self._start_check(url)
        detail = (
            f"unreachable since {down.since} ({down.reason}); not tried again until "
            f"a check in the background, every {self.watch.recheck_s:g}s, gets an answer"
        )
        return Failure("down", clip(redact_url(url), 500), detail, 0.0, unreachable=True)

    def _start_check(self, url: str) -> None:
        key = host_key(url)
        running = self._checks.get(key)
        if running is not None and not running.done():
            return
        self._checks[key] = asyncio.get_running_loop().create_task(self._check(url))

    async def _check(self, url: str) -> None:
        """One HEAD of `url`: any answer, whatever its status, makes its host reachable;
        so does a connection it accepts and drops (the next request says what it meant)."""
        import aiohttp

        assert self.watch is not None  # only started by a watching client
        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            async with self.session().head(url, timeout=timeout, allow_redirects=False):
                pass
        except TimeoutError:
            detail = f"timed out after {self.timeout_s:g}s"
        except aiohttp.ClientConnectorError as exc:
            detail = str(exc) or type(exc).__name__
        except aiohttp.ClientError:
            self.watch.mark_up(url)
            return
        except Exception as exc:  # a task's error would go unseen: it is the next check's
            detail = f"{type(exc).__name__}: {exc}"
        else:
            self.watch.mark_up(url)
            return
        self.watch.mark_down(url, clip(self.scrub(detail), 500))  # next check: an interval on

    async def checks_done(self) -> None:
        """Waits for the background checks under way (tests, and a clean shutdown)."""
        running = [t for t in self._checks.values() if not t.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def _gave_up(error: Exception, attempts: int) -> Exception:
    """The last attempt's error, saying how many attempts were made (when more than one).

    The message is extended in place so the error keeps its type and fields (a
    RateLimited keeps its `reset_at`).
    """
    if attempts > 1 and isinstance(error, HexlocalError) and len(error.args) == 1:
        error.args = (f"{error.args[0]}; gave up after {attempts} attempts",)
    return error


def _without_userinfo(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
