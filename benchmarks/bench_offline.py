"""Offline benchmark: warm `search_docs` with hex.pm reachable, refusing connections, and
silent (it reads a request and never answers: a blackholed host as a client sees it).

One loopback stand-in for hex.pm serves ../shared/corpus. The project's mix.lock pins the
`--pinned` packages; the `--unpinned` ones are in no lock, so a search of them asks hex.pm
for their newest release (online, its answer is cached five minutes; offline, nothing is
cached, as after a laptop has been offline that long). Each mode starts fresh clients: a
facade built in process (`build()`, the real local embedder) and, unless --no-stdio, the
MCP server over stdio driven by the official MCP SDK client. The first call of each mode
is timed apart: it is the one that finds hex.pm down. The warm calls after it are the
table; the target is offline p50 within 1.2x of online p50, per package and face. Last,
the service sees hex.pm come back: seconds until a search uses it again (the recheck runs
every 30 s).

    python benchmarks/bench_offline.py [--pinned jason@1.4.4] [--unpinned nimble_options]
        [--repeat N] [--warmup N] [--rounds N] [--db PATH] [--timeout S] [--no-stdio]
        [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from attrs import field, frozen
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.adapters.hex import RECHECK_S  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import load_queries  # noqa: E402
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.model import SearchResult  # noqa: E402
from hexlocal_core.service import Hexlocal, build  # noqa: E402
from tests.fakes.fake_hex import FakeHex  # noqa: E402

SHARED = REPO.parent / "shared"
QUERIES = SHARED / "eval" / "dev.jsonl"
DEFAULT_DB = REPO / ".hexlocal-cache" / "bench" / "offline.db"
MODES = ("online", "refused", "silent")
TARGET_RATIO = 1.2
INDEX_TIMEOUT_S = 900.0
CALL_TIMEOUT_S = 120.0  # the silent mode's first call waits out three attempts
# For a package the query set lacks: plain questions any docs answer something to.
FALLBACK_QUERIES = ("getting started", "configuration options", "how to handle errors")
PASSED_ENV = ("HOME", "PATH", "HEXLOCAL_MODEL_CACHE", "AI_EMBED_MODEL", "EMBED_BATCH_SIZE")
LOCK_ENTRY = '  "{name}": {{:hex, :{name}, "{version}", "abc", [:mix], [], "hexpm", "def"}},\n'


@frozen
class Package:
    name: str
    pinned: str | None  # the lock's version, or None: no lock entry
    queries: tuple[str, ...]

    @property
    def kind(self) -> str:
        return f"pinned {self.pinned}" if self.pinned else "unpinned"


@frozen
class Samples:
    """Milliseconds per call, by (mode, face, package); first calls apart."""

    warm: dict[tuple[str, str, str], list[float]] = field(factory=dict)
    first: dict[tuple[str, str, str], list[float]] = field(factory=dict)
    notices: dict[tuple[str, str], str] = field(factory=dict)  # (mode, package) -> codes

    def add(self, key: tuple[str, str, str], ms: float) -> None:
        self.warm.setdefault(key, []).append(ms)


def packages_from(pinned: str, unpinned: str) -> list[Package]:
    by_package: dict[str, list[str]] = {}
    for q in load_queries(QUERIES):
        by_package.setdefault(q.package, []).append(q.query)
    found = []
    for spec in filter(None, pinned.split(",")):
        name, _, version = spec.partition("@")
        if not version:
            raise SystemExit(f"--pinned takes name@version, not {spec!r}")
        found.append(Package(name, version, tuple(by_package.get(name, FALLBACK_QUERIES))))
    for name in filter(None, unpinned.split(",")):
        found.append(Package(name, None, tuple(by_package.get(name, FALLBACK_QUERIES))))
    return found


def write_project(root: Path, packages: Sequence[Package]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    pins = [LOCK_ENTRY.format(name=p.name, version=p.pinned) for p in packages if p.pinned]
    (root / "mix.lock").write_text("%{\n" + "".join(pins) + "}\n")


def environment(fake: FakeHex, db: Path, project: Path, timeout_s: float) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update(
        PYTHONPATH=str(REPO),
        HF_HUB_OFFLINE="1",
        HEX_API_URL=fake.api_url,
        HEX_MIRROR=fake.mirror_url,
        PROJECT_ROOT=str(project),
        DATABASE_PATH=str(db),
        AI_RERANK_MODEL="off",
        HEXLOCAL_SYNC_ON_START="false",
        HEXLOCAL_ANSWER_WHILE_EMBEDDING="false",
        HEXLOCAL_HTTP_TIMEOUT_S=f"{timeout_s:g}",
        INGEST_TIMEOUT_MS=str(int(INDEX_TIMEOUT_S * 1000)),
        PYTHONUNBUFFERED="1",
    )
    return env


def service_for(env: Mapping[str, str]) -> Hexlocal:
    """The facade as the server builds it (so online, hex.pm's answer is cached 5 min)."""
    return build(Settings.from_env(dict(env)))


async def set_mode(fake: FakeHex, mode: str) -> None:
    fake.faults.clear()
    await fake.listen()
    if mode == "refused":
        await fake.refuse()
    elif mode == "silent":
        fake.fail("*", hang=True)


@asynccontextmanager
async def stdio_session(env: Mapping[str, str], errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "hexlocal_mcp"], env=dict(env), cwd=str(REPO)
    )
    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call_service(service: Hexlocal, package: Package, query: str) -> SearchResult:
    result = await service.search_docs(package.name, query)
    if not result.hits:
        raise RuntimeError(f"{package.name}: no hits for {query!r}: {result.notices}")
    return result


async def call_stdio(session: ClientSession, package: Package, query: str) -> None:
    result = await session.call_tool(
        "search_docs",
        {"package": package.name, "query": query},
        read_timeout_seconds=CALL_TIMEOUT_S,
    )
    data = result.structured_content
    if result.is_error or not data or not data.get("results"):
        raise RuntimeError(f"{package.name} over stdio: {result.content}")


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def index_all(env: Mapping[str, str], packages: Sequence[Package]) -> None:
    """Every package indexed while hex.pm answers (a second run finds them there)."""
    async with service_for(env) as service:
        for package in packages:
            started = time.perf_counter()
            await service.search_docs(package.name, package.queries[0])
            print(f"{package.name}: ready in {_ms(started) / 1000:.1f} s", file=sys.stderr)


async def measure_mode(
    mode: str,
    fake: FakeHex,
    env: Mapping[str, str],
    packages: Sequence[Package],
    args: argparse.Namespace,
    out: Samples,
    errlog: Path,
) -> None:
    """Fresh clients (nothing remembered), the mode set, a first call each, then warm
    calls alternating faces so both see the same machine load."""
    async with AsyncExitStack() as stack:
        await set_mode(fake, "online")  # the server starts and warms up with hex.pm there
        service = await stack.enter_async_context(service_for(env))
        await service.warm_up()
        session = None
        if args.stdio:
            session = await stack.enter_async_context(stdio_session(env, errlog))
        for package in packages:  # a cold process's first search is not hex.pm's doing
            if package.pinned:  # (an unpinned one would fill the 5-minute metadata cache)
                await call_service(service, package, package.queries[0])
                if session is not None:
                    await call_stdio(session, package, package.queries[0])
        await set_mode(fake, mode)
        for package in packages:
            query = package.queries[0]
            started = time.perf_counter()
            result = await call_service(service, package, query)
            out.first.setdefault((mode, "service", package.name), []).append(_ms(started))
            out.notices[(mode, package.name)] = ",".join(n.code for n in result.notices) or "-"
            if session is not None:
                started = time.perf_counter()
                await call_stdio(session, package, query)
                out.first.setdefault((mode, "stdio", package.name), []).append(_ms(started))
        for package in packages:
            for i in range(args.warmup + args.repeat):
                query = package.queries[i % len(package.queries)]
                started = time.perf_counter()
                await call_service(service, package, query)
                ms = _ms(started)
                if i >= args.warmup:
                    out.add((mode, "service", package.name), ms)
                if session is not None:
                    started = time.perf_counter()
                    await call_stdio(session, package, query)
                    if i >= args.warmup:
                        out.add((mode, "stdio", package.name), _ms(started))


async def recovery_s(fake: FakeHex, env: Mapping[str, str], package: Package) -> float:
    """Seconds from hex.pm answering again until a search of `package` uses it."""
    async with service_for(env) as service:
        await set_mode(fake, "refused")
        await call_service(service, package, package.queries[0])
        await set_mode(fake, "online")
        back = time.perf_counter()
        while time.perf_counter() - back < 3 * RECHECK_S:
            result = await call_service(service, package, package.queries[0])
            if not any(n.code == "registry_unreachable" for n in result.notices):
                return time.perf_counter() - back
            await asyncio.sleep(0.25)
    return float("nan")


def ratio(offline: float, online: float) -> float:
    return offline / online if online > 0 else float("nan")


def report(out: Samples, packages: Sequence[Package], faces: Sequence[str]) -> dict[str, Any]:
    rows = []
    for face in faces:
        for package in packages:
            p50 = {m: percentile(out.warm.get((m, face, package.name), []), 50) for m in MODES}
            row: dict[str, Any] = {
                "face": face,
                "package": package.name,
                "kind": package.kind,
                "p50_ms": {m: round(v, 1) for m, v in p50.items()},
                "first_ms": {
                    m: round(percentile(out.first.get((m, face, package.name), []), 50), 1)
                    for m in MODES
                },
                "ratio": {m: round(ratio(p50[m], p50["online"]), 2) for m in MODES[1:]},
            }
            row["pass"] = all(r <= TARGET_RATIO for r in row["ratio"].values())
            rows.append(row)
    return {"rows": rows, "notices": {f"{m}/{p}": c for (m, p), c in out.notices.items()}}


def table(data: Mapping[str, Any], repeat: int, timeout_s: float, recovery: float) -> Table:
    title = (
        f"warm search_docs p50 ms, hex.pm online vs refusing vs silent ({repeat} calls per "
        f"cell; the first offline call apart, its p50 over rounds; HTTP timeout "
        f"{timeout_s:g} s; hex.pm used again {recovery:.1f} s after it came back)"
    )
    t = Table(title=title, title_justify="left")
    for column in ("face", "package", "kind", "online p50", "refused p50", "silent p50"):
        t.add_column(column, justify="right" if "p50" in column else "left")
    for column in ("first refused", "first silent", "target"):
        t.add_column(column, justify="right" if "first" in column else "left")
    for row in data["rows"]:
        p50, ratios, first = row["p50_ms"], row["ratio"], row["first_ms"]
        t.add_row(
            row["face"],
            row["package"],
            row["kind"],
            f"{p50['online']:.1f}",
            f"{p50['refused']:.1f} ({ratios['refused']:.2f}x)",
            f"{p50['silent']:.1f} ({ratios['silent']:.2f}x)",
            f"{first['refused']:.0f} ms",
            f"{first['silent']:.0f} ms",
            f"{'PASS' if row['pass'] else 'FAIL'} (<= {TARGET_RATIO}x)",
        )
    return t


async def run(args: argparse.Namespace) -> dict[str, Any]:
    packages = packages_from(args.pinned, args.unpinned)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    out = Samples()
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp_name:
        tmp = Path(tmp_name)
        write_project(tmp / "project", packages)
        errlog = tmp / "server-stderr.log"
        async with FakeHex(corpus=SHARED / "corpus") as fake:
            env = environment(fake, args.db, tmp / "project", args.timeout)
            await index_all(env, packages)
            try:
                for round_ in range(args.rounds):  # rounds: no mode owns a quiet spell
                    for mode in MODES:
                        await measure_mode(mode, fake, env, packages, args, out, errlog)
                        print(f"round {round_ + 1}, {mode}: measured", file=sys.stderr)
                back = await recovery_s(fake, env, packages[-1])
            except Exception:
                if errlog.exists():
                    print(errlog.read_text()[-3000:], file=sys.stderr)
                raise
    faces = ("service", "stdio") if args.stdio else ("service",)
    data = report(out, packages, faces)
    data.update(recovery_s=round(back, 2), recheck_s=RECHECK_S, timeout_s=args.timeout)
    data["table"] = table(data, args.repeat * args.rounds, args.timeout, back)
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pinned", default="jason@1.4.4", help="name@version,... in mix.lock")
    parser.add_argument("--unpinned", default="nimble_options", help="name,... in no lock")
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per cell")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per cell")
    parser.add_argument("--rounds", type=int, default=2, help="times each mode is run")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--timeout", type=float, default=2.0, help="HEXLOCAL_HTTP_TIMEOUT_S")
    parser.add_argument("--no-stdio", dest="stdio", action="store_false")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    data = asyncio.run(run(args))
    rendered = data.pop("table")
    return finish(data, rendered, load_before, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
