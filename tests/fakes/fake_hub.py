"""A stand-in for the Hugging Face hub on 127.0.0.1, serving real files from disk.

The endpoints huggingface_hub calls to download a model (2.x, `file_download.py`):

    GET  /api/models/{repo}/revision/{rev}   {"id", "sha", "siblings": [{"rfilename", "size"}]}
    HEAD /{repo}/resolve/{rev}/{file}        X-Repo-Commit, ETag, Content-Length; no body
    GET  /{repo}/resolve/{rev}/{file}        the bytes; `Range: bytes=N-` answers 206

An unknown repo answers 404 with `X-Error-Code: RepoNotFound`, an unknown file 404 with
`X-Error-Code: EntryNotFound` (and X-Repo-Commit), as the hub does. Every request is
recorded. Faults per file name (fnmatch), optionally for the first N requests only:
an HTTP status, a stall (sleep before answering), a truncated body (full Content-Length
announced, half sent, connection dropped) or a short body (fewer bytes than the HEAD
announced, with a matching Content-Length).

Standalone (benchmarks): `python -m tests.fakes.fake_hub --port 0 REPO=FOLDER ...` prints
its base URL, then serves until killed; point HF_ENDPOINT at it.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from aiohttp import web
from attrs import define, field, frozen

from tests.fakes.loopback import AsyncServerContext, root_url, serve

COMMIT = "c0ffee" + "0" * 34  # a 40-hex commit id, like the hub's
_RANGE = re.compile(r"^bytes=(\d+)-$")
_CHUNK = 1 << 20


@frozen
class HubRequest:
    method: str
    path: str
    range: str | None


@define
class HubFault:
    """What to do to requests for files matching `pattern`."""

    pattern: str
    method: str = "GET"  # "GET", "HEAD" or "*"
    status: int | None = None
    stall_s: float = 0.0
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
    path: Path
    size: int
    sha256: str


def _describe(path: Path) -> _File:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return _File(path, path.stat().st_size, digest.hexdigest())


@define
class FakeHub(AsyncServerContext):
    """`repos`: repo id -> {filename in the repo: file on disk}."""

    repos: Mapping[str, Mapping[str, Path]]
    commit: str = COMMIT
    port: int = 0
    faults: list[HubFault] = field(factory=list)
    requests: list[HubRequest] = field(factory=list)
    _files: dict[str, dict[str, _File]] = field(factory=dict)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return root_url(self._runner, "the fake hub")

    def fault(self, pattern: str, **kwargs: object) -> HubFault:
        fault = HubFault(pattern, **kwargs)  # type: ignore[arg-type]
        self.faults.append(fault)
        return fault

    def files_of(self, method: str, path_part: str = "/resolve/") -> list[str]:
        return [r.path for r in self.requests if r.method == method and path_part in r.path]

    async def start(self) -> Self:
        self._files = {
            repo: {name: _describe(path) for name, path in files.items()}
            for repo, files in self.repos.items()
        }
        app = web.Application()
        app.router.add_get("/api/models/{org}/{name}/revision/{rev}", self._info)
        app.router.add_get("/api/models/{org}/{name}", self._info)
        app.router.add_route("HEAD", "/{org}/{name}/resolve/{rev}/{file:.+}", self._resolve)
        app.router.add_route("GET", "/{org}/{name}/resolve/{rev}/{file:.+}", self._resolve)
        self._runner = await serve(app, port=self.port)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _record(self, request: web.Request) -> None:
        self.requests.append(HubRequest(request.method, request.path, request.headers.get("Range")))

    def _repo(self, request: web.Request) -> tuple[str, dict[str, _File] | None]:
        repo = f"{request.match_info['org']}/{request.match_info['name']}"
        return repo, self._files.get(repo)

    async def _info(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        repo, files = self._repo(request)
        if files is None:
            return _repo_not_found()
        siblings = [{"rfilename": n, "size": f.size} for n, f in sorted(files.items())]
        body = {"id": repo, "modelId": repo, "sha": self.commit, "private": False}
        return web.json_response({**body, "siblings": siblings})

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        self._record(request)
        repo, files = self._repo(request)
        if files is None:
            return _repo_not_found()
        filename = request.match_info["file"]
        fault = next((f for f in self.faults if f.applies(request.method, filename)), None)
        if fault is not None:
            fault.hits += 1
            if fault.stall_s:
                await asyncio.sleep(fault.stall_s)
            if fault.status is not None:
                return web.json_response(
                    {"error": "injected fault"}, status=fault.status, headers=self._commit()
                )
        found = files.get(filename)
        if found is None:
            headers = {"X-Error-Code": "EntryNotFound", **self._commit()}
            return web.json_response({"error": "Entry not found"}, status=404, headers=headers)
        if request.method == "HEAD":
            return await self._head(request, found)
        return await self._body(request, found, fault)

    def _commit(self) -> dict[str, str]:
        return {"X-Repo-Commit": self.commit}

    def _headers(self, found: _File) -> dict[str, str]:
        return {**self._commit(), "ETag": f'"{found.sha256}"', "Accept-Ranges": "bytes"}

    async def _head(self, request: web.Request, found: _File) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers=self._headers(found))
        response.content_length = found.size
        await response.prepare(request)
        return response

    async def _body(
        self, request: web.Request, found: _File, fault: HubFault | None
    ) -> web.StreamResponse:
        start = _range_start(request.headers.get("Range"))
        end = found.size
        if fault is not None and fault.short:
            end = found.size // 2  # a proxy that cut the file, with an honest length
        status = 206 if start else 200
        headers = self._headers(found)
        if start:
            headers["Content-Range"] = f"bytes {start}-{found.size - 1}/{found.size}"
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = end - start
        await response.prepare(request)
        cut = start + (end - start) // 2 if fault is not None and fault.truncate else end
        with found.path.open("rb") as fh:
            fh.seek(start)
            position = start
            while position < cut:
                block = fh.read(min(_CHUNK, cut - position))
                await response.write(block)
                position += len(block)
        if cut < end:
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response


def _range_start(value: str | None) -> int:
    match = _RANGE.match(value or "")
    return int(match.group(1)) if match else 0


def _repo_not_found() -> web.Response:
    headers = {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}
    return web.json_response({"error": "Repository not found"}, status=404, headers=headers)


def folder_repo(folder: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """The named files of a folder, as one repo's contents."""
    return {name: folder / name for name in names if (folder / name).is_file()}


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("repos", nargs="+", help="REPO_ID=FOLDER (every file in FOLDER)")
    args = parser.parse_args()
    repos: dict[str, dict[str, Path]] = {}
    for spec in args.repos:
        repo, _, folder = spec.partition("=")
        root = Path(folder)
        repos[repo] = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    hub = FakeHub(repos, port=args.port)
    await hub.start()
    print(hub.url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
