"""A stand-in for the Hugging Face hub on 127.0.0.1, serving real files from disk.

The endpoints huggingface_hub 2.x calls to download a model (`file_download.py`,
`utils/_xet.py`), answered as the hub answers them:

    GET  /api/models/{repo}/revision/{rev}        {"id", "sha", "siblings": [{"rfilename", "size"}]}
    HEAD /{repo}/resolve/{rev}/{file}             X-Repo-Commit, ETag, Content-Length; no body
    GET  /{repo}/resolve/{rev}/{file}             the bytes; `Range: bytes=N-` answers 206
    GET  /api/models/{repo}/xet-read-token/{rev}  a Xet token: X-Xet-Cas-Url,
                                                  X-Xet-Access-Token, X-Xet-Token-Expiration
                                                  (and the same as JSON, which hf_xet reads)

`rev` is `main` or the repo's commit (40 hex); another revision answers 404 with
`X-Error-Code: RevisionNotFound`. An unknown repo answers 404 `RepoNotFound`, an unknown
file 404 `EntryNotFound` (with X-Repo-Commit). A renamed repo (`renamed`: old -> new)
answers every request under its old name with a 307 to the same path under the new one,
as the hub does; two names renamed to each other make a redirect loop.

Files matching `xet` (the weights, by default) live in Xet storage, as the real hub's
do: their HEAD answers 302 to another host (a CDN: `localhost` instead of `127.0.0.1`,
which serves the bytes to a client without hf_xet) carrying X-Xet-Hash, X-Linked-Size,
X-Linked-Etag and a `Link: <token url>; rel="xet-auth"`. With hf_xet, huggingface_hub
then asks the token endpoint and hf_xet fetches the file from the CAS the token names:
either this server's (`/cas`, below) or, with `xet_store`, an hf_xet `local://` store the
files are uploaded into at start. The CAS speaks Xet's V2 reconstruction API:

    GET  /cas/v2/reconstructions/{xet hash}   Bearer token; terms and xorb byte ranges (JSON)
    GET  /cas/xorbs/{xorb hash}               `Range: bytes=a-b` of a xorb: chunk headers + data
    POST /cas/v1/telemetry                    200

How a file is laid out in xorbs is tests/fakes/xet_storage.py's.

Every request is recorded. Faults per file name (fnmatch), optionally for the first N
requests only: an HTTP status, a stall (sleep before answering, or after `stall_after`
bytes of the body), a rate limit, a truncated body (full Content-Length announced, half
sent, connection dropped) or a short body (fewer bytes than the HEAD announced, with a
matching Content-Length). Method "CAS" aims at the xorb fetches of a Xet file.

Standalone (benchmarks, the smoke): `python -m tests.fakes.fake_hub --port 0
REPO[@COMMIT]=FOLDER ...` prints its base URL, then serves until killed; point
HF_ENDPOINT at it.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import hashlib
import re
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

from aiohttp import web
from attrs import define, field, frozen

from tests.fakes.loopback import AsyncServerContext, root_url, serve
from tests.fakes.xet_storage import Xorb, reconstruction, store, xorb_reader, xorb_size

COMMIT = "c0ffee" + "0" * 34  # a 40-hex commit id, like the hub's
XET_FILES = ("*.safetensors", "*.onnx")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_BLOCK = 1 << 16
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


@frozen
class HubRequest:
    method: str
    path: str
    range: str | None


@define
class HubFault:
    """What to do to requests for files matching `pattern`."""

    pattern: str
    method: str = "GET"  # "GET", "HEAD", "CAS" (Xet xorb fetches) or "*"
    status: int | None = None
    stall_s: float = 0.0
    stall_after: int | None = None  # stall after this many bytes of the body, not before
    rate: int | None = None  # bytes per second
    truncate: bool = False
    short: bool = False
    times: int | None = None  # only the first N matching requests; None: all
    hits: int = 0

    def applies(self, method: str, filename: str) -> bool:
        if self.method not in ("*", method) or not fnmatch.fnmatch(filename, self.pattern):
            return False
        return self.times is None or self.hits < self.times


@frozen
class _File:
    name: str
    path: Path
    size: int
    sha256: str
    xet_hash: str | None = None
    xorbs: tuple[Xorb, ...] = ()


def _describe(name: str, path: Path) -> _File:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return _File(name, path, path.stat().st_size, digest.hexdigest())


def _in_xet(found: _File, nonce: str) -> _File:
    """`found` as Xet storage holds it (see tests/fakes/xet_storage.py)."""
    xet_hash, xorbs = store(found.size, found.sha256, nonce)
    return _File(found.name, found.path, found.size, found.sha256, xet_hash, xorbs)


@define
class FakeHub(AsyncServerContext):
    """`repos`: repo id -> {filename in the repo: file on disk}."""

    repos: Mapping[str, Mapping[str, Path]]
    commit: str = COMMIT
    port: int = 0
    commits: Mapping[str, str] = field(factory=dict)  # repo -> its commit, when not `commit`
    renamed: Mapping[str, str] = field(factory=dict)  # old repo id -> new repo id
    xet: tuple[str, ...] = XET_FILES
    xet_store: Path | None = None  # an hf_xet local:// store, instead of the CAS here
    token: str = field(factory=lambda: secrets.token_hex(8))
    faults: list[HubFault] = field(factory=list)
    requests: list[HubRequest] = field(factory=list)
    _files: dict[str, dict[str, _File]] = field(factory=dict)
    _xorbs: dict[str, tuple[_File, Xorb]] = field(factory=dict)
    _by_xet_hash: dict[str, _File] = field(factory=dict)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return root_url(self._runner, "the fake hub")

    @property
    def cas_url(self) -> str:
        return f"local://{self.xet_store}" if self.xet_store is not None else f"{self.url}/cas"

    def commit_of(self, repo: str) -> str:
        return self.commits.get(repo, self.commit)

    def xet_hash(self, repo: str, filename: str) -> str | None:
        return self._files[repo][filename].xet_hash

    def fault(self, pattern: str, **kwargs: object) -> HubFault:
        fault = HubFault(pattern, **kwargs)  # type: ignore[arg-type]
        self.faults.append(fault)
        return fault

    def files_of(self, method: str, path_part: str = "/resolve/") -> list[str]:
        return [r.path for r in self.requests if r.method == method and path_part in r.path]

    async def start(self) -> Self:
        nonce = secrets.token_hex(8)
        for repo, files in self.repos.items():
            described = {name: _describe(name, path) for name, path in files.items()}
            for name, found in described.items():
                if found.size and any(fnmatch.fnmatch(name, p) for p in self.xet):
                    described[name] = _in_xet(found, nonce)
            self._files[repo] = described
        if self.xet_store is not None:
            await asyncio.to_thread(self._upload_to_store, self.xet_store)
        for described in self._files.values():
            for found in described.values():
                if found.xet_hash is not None:
                    self._by_xet_hash[found.xet_hash] = found
                    self._xorbs.update({x.hash: (found, x) for x in found.xorbs})
        self._runner = await serve(self._app(), port=self.port)
        return self

    def _app(self) -> web.Application:
        app = web.Application()
        repo = "{org}/{name}"
        app.router.add_get(f"/api/models/{repo}/revision/{{rev}}", self._info)
        app.router.add_get(f"/api/models/{repo}/xet-read-token/{{rev}}", self._xet_token)
        app.router.add_route("HEAD", f"/{repo}/resolve/{{rev}}/{{file:.+}}", self._resolve)
        app.router.add_route("GET", f"/{repo}/resolve/{{rev}}/{{file:.+}}", self._resolve)
        app.router.add_get("/xet-bridge/{hash}", self._bridge)
        app.router.add_get("/cas/v2/reconstructions/{hash}", self._reconstruction)
        app.router.add_get("/cas/xorbs/{hash}", self._xorb)
        app.router.add_post("/cas/v1/telemetry", self._telemetry)
        return app

    def _upload_to_store(self, store: Path) -> None:
        """The Xet files into an hf_xet local store, each under the hash hf_xet gives it."""
        import hf_xet

        session = hf_xet.XetSession()
        for described in self._files.values():
            for name, found in list(described.items()):
                if found.xet_hash is None:
                    continue
                with session.new_upload_commit(endpoint=f"local://{store}") as commit:
                    upload = commit.start_upload_file(str(found.path))
                xet_hash = upload.result().xet_info.hash
                described[name] = _File(name, found.path, found.size, found.sha256, xet_hash)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- the hub ------------------------------------------------------------------------

    def _record(self, request: web.Request) -> None:
        self.requests.append(HubRequest(request.method, request.path, request.headers.get("Range")))

    def _lookup(self, request: web.Request) -> tuple[str, dict[str, _File]] | web.Response:
        """The repo and its files, or the answer for a renamed or unknown repo or revision."""
        repo = f"{request.match_info['org']}/{request.match_info['name']}"
        if repo in self.renamed:
            moved = request.path_qs.replace(f"/{repo}/", f"/{self.renamed[repo]}/", 1)
            return web.Response(status=307, headers={"Location": moved})
        files = self._files.get(repo)
        if files is None:
            return _error(404, "RepoNotFound", "Repository not found")
        revision = request.match_info["rev"]
        if revision not in ("main", self.commit_of(repo)):
            return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return repo, files

    async def _info(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        found = self._lookup(request)
        if isinstance(found, web.Response):
            return found
        repo, files = found
        siblings = [{"rfilename": n, "size": f.size} for n, f in sorted(files.items())]
        body = {"id": repo, "modelId": repo, "sha": self.commit_of(repo), "private": False}
        return web.json_response({**body, "siblings": siblings})

    async def _xet_token(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        found = self._lookup(request)
        if isinstance(found, web.Response):
            return found
        expires = int(time.time()) + 3600
        headers = {
            "X-Xet-Cas-Url": self.cas_url,
            "X-Xet-Access-Token": self.token,
            "X-Xet-Token-Expiration": str(expires),
        }
        body = {"accessToken": self.token, "exp": expires, "casUrl": self.cas_url}
        return web.json_response(body, headers=headers)

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        lookup = self._lookup(request)
        if isinstance(lookup, web.Response):
            return lookup
        repo, files = lookup
        filename = request.match_info["file"]
        fault = self._fault(request.method, filename)
        if fault is not None:
            if fault.stall_s and fault.stall_after is None:
                await asyncio.sleep(fault.stall_s)
            if fault.status is not None:
                return web.json_response(
                    {"error": "injected fault"}, status=fault.status, headers=self._commit(repo)
                )
        found = files.get(filename)
        if found is None:
            headers = {"X-Error-Code": "EntryNotFound", **self._commit(repo)}
            return web.json_response({"error": "Entry not found"}, status=404, headers=headers)
        if found.xet_hash is not None:
            return self._to_xet(request, repo, found)
        if request.method == "HEAD":
            return await self._head(request, repo, found)
        return await self._body(request, repo, found, fault)

    def _fault(self, method: str, filename: str) -> HubFault | None:
        fault = next((f for f in self.faults if f.applies(method, filename)), None)
        if fault is not None:
            fault.hits += 1
        return fault

    def _commit(self, repo: str) -> dict[str, str]:
        return {"X-Repo-Commit": self.commit_of(repo)}

    def _headers(self, repo: str, found: _File) -> dict[str, str]:
        return {**self._commit(repo), "ETag": f'"{found.sha256}"', "Accept-Ranges": "bytes"}

    def _to_xet(self, request: web.Request, repo: str, found: _File) -> web.Response:
        """A Xet file's answer: a redirect off the hub, carrying what hf_xet needs."""
        assert found.xet_hash is not None
        revision = request.match_info["rev"]
        token_url = f"{self.url}/api/models/{repo}/xet-read-token/{revision}"
        cdn = self.url.replace("127.0.0.1", "localhost")
        headers = {
            **self._commit(repo),
            "Location": f"{cdn}/xet-bridge/{found.xet_hash}",
            "ETag": f'"{found.sha256[:40]}"',
            "X-Linked-Etag": f'"{found.sha256}"',
            "X-Linked-Size": str(found.size),
            "X-Xet-Hash": found.xet_hash,
            "Link": f'<{token_url}>; rel="xet-auth"',
        }
        return web.Response(status=302, headers=headers)

    async def _head(self, request: web.Request, repo: str, found: _File) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers=self._headers(repo, found))
        response.content_length = found.size
        await response.prepare(request)
        return response

    async def _body(
        self, request: web.Request, repo: str, found: _File, fault: HubFault | None
    ) -> web.StreamResponse:
        start = _range(request.headers.get("Range"), found.size)[0]
        end = found.size
        if fault is not None and fault.short:
            end = found.size // 2  # a proxy that cut the file, with an honest length
        headers = self._headers(repo, found)
        if start:
            headers["Content-Range"] = f"bytes {start}-{found.size - 1}/{found.size}"
        response = web.StreamResponse(status=206 if start else 200, headers=headers)
        response.content_length = end - start
        await response.prepare(request)
        cut = start + (end - start) // 2 if fault is not None and fault.truncate else end
        with found.path.open("rb") as fh:
            fh.seek(start)
            await _stream(response, lambda _, n: fh.read(n), start, cut, fault)
        if cut < end:
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response

    async def _bridge(self, request: web.Request) -> web.StreamResponse:
        """The CDN a Xet file's HEAD points at: its plain bytes, for clients without hf_xet."""
        self._record(request)
        found = self._by_xet_hash.get(request.match_info["hash"])
        if found is None:
            return web.Response(status=404)
        start = _range(request.headers.get("Range"), found.size)[0]
        response = web.StreamResponse(status=206 if start else 200)
        response.content_length = found.size - start
        await response.prepare(request)
        with found.path.open("rb") as fh:
            fh.seek(start)
            await _stream(response, lambda _, n: fh.read(n), start, found.size, None)
        await response.write_eof()
        return response

    # --- the CAS ------------------------------------------------------------------------

    async def _reconstruction(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=401, text="missing or expired Xet token")
        found = self._by_xet_hash.get(request.match_info["hash"])
        if found is None:
            return web.Response(status=404, text="file not found")
        first, last = _range(request.headers.get("Range"), found.size)
        if first >= found.size:
            return web.Response(status=416)
        cas = f"{self.url}/cas"
        return web.json_response(reconstruction(cas, found.size, found.xorbs, first, last))

    async def _xorb(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        entry = self._xorbs.get(request.match_info["hash"])
        if entry is None:
            return web.Response(status=404)
        found, xorb = entry
        size = xorb_size(found.size, xorb)
        first, last = _range(request.headers.get("Range"), size)
        fault = self._fault("CAS", found.name)
        response = web.StreamResponse(status=206)
        response.content_length = last - first + 1
        await response.prepare(request)
        with found.path.open("rb") as fh:
            read = xorb_reader(fh, found.size, xorb)
            await _stream(response, read, first, last + 1, fault)
        await response.write_eof()
        return response

    async def _telemetry(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(status=200)


def _error(status: int, code: str, message: str) -> web.Response:
    headers = {"X-Error-Code": code, "X-Error-Message": message}
    return web.json_response({"error": message}, status=status, headers=headers)


def _range(value: str | None, size: int) -> tuple[int, int]:
    """`bytes=a-b` (b inclusive, optional) as (a, b); the whole of `size` when absent."""
    match = _RANGE.match(value or "")
    if match is None:
        return 0, size - 1
    last = int(match.group(2)) if match.group(2) else size - 1
    return int(match.group(1)), min(last, size - 1)


async def _stream(
    response: web.StreamResponse,
    read: Callable[[int, int], bytes],
    start: int,
    end: int,
    fault: HubFault | None,
) -> None:
    """Bytes start..end (exclusive) in blocks, as `fault` slows or stalls them."""
    position = start
    while position < end:
        if fault is not None and fault.stall_after is not None:
            if position - start >= fault.stall_after:
                await asyncio.sleep(fault.stall_s)
                fault = None  # then the rest at full speed
        block = read(position, min(_BLOCK, end - position))
        if not block:
            break
        await response.write(block)
        position += len(block)
        if fault is not None and fault.rate:
            await asyncio.sleep(len(block) / fault.rate)


def folder_repo(folder: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """The named files of a folder, as one repo's contents."""
    return {name: folder / name for name in names if (folder / name).is_file()}


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("repos", nargs="+", help="REPO_ID[@COMMIT]=FOLDER (every file in FOLDER)")
    args = parser.parse_args()
    repos: dict[str, dict[str, Path]] = {}
    commits: dict[str, str] = {}
    for spec in args.repos:
        name, _, folder = spec.partition("=")
        repo, _, commit = name.partition("@")
        if commit:
            if not _COMMIT_RE.match(commit):
                parser.error(f"{commit!r} is not a 40-hex commit id")
            commits[repo] = commit
        root = Path(folder)
        repos[repo] = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    hub = FakeHub(repos, port=args.port, commits=commits)
    await hub.start()
    print(hub.url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
