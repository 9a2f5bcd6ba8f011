"""The user's path, measured: build the wheel and sdist, install the wheel into a fresh venv,
and run the first search there against loopback stand-ins for Hex and the Hugging Face hub.

Used by scripts/smoke_wheel.sh (which asserts) and benchmarks/bench_first_answer.py (which
prints a table). Runs with the checkout's venv (`.venv/bin/python`): the fakes
(tests/fakes/fake_hex.py, fake_hub.py) and the model package's weights come from there.
The fresh venv sees none of it: its commands run outside the checkout, with HOME, the XDG
dirs, HF_HOME and DATABASE_PATH in a temp dir and HF_HUB_OFFLINE unset.

Installing: `--from-index` is exactly what a user types (`pip install <wheel>`, every
dependency from the configured index; about 2.5-3 min on the 2-core dev box). The default
is the same `pip install <wheel>` resolving the same declared dependencies, but from a
wheelhouse cached per dependency list (`pip download` once, then `--no-index
--find-links`), so a repeated smoke fits in its budget; a new dependency refreshes it.

Last, the uvx form (scripts/uvx_check.py): `hexlocal mcp-config --uvx-from <wheel>` in the
fresh venv, with uv from the package index (`pip install uv`, in a cached venv) and a
fresh uv cache; the `uvx --offline` command it writes must answer initialize with no
network.

    python scripts/fresh_venv.py [--from-index] [--wheel FILE] [--keep] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import uvx_check  # noqa: E402  (scripts/ is not a package)

EMBED_REPO = "sentence-transformers/all-MiniLM-L6-v2"
RERANK_REPO = "cross-encoder/ms-marco-MiniLM-L6-v2"
QUERY = ("jason", "decode keys to atoms", "1.4.4")
SEARCH_TIMEOUT_S = 300.0
SCRIPT_TIMEOUT_S = 30.0
# What the fresh venv's commands inherit from the caller; everything else is set here, so
# no hexlocal or HF setting of the host leaks into "a new user's first search".
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")


class SmokeError(Exception):
    """A step of the user's path failed; the message says which and why."""


@dataclass
class Report:
    """Seconds per step, the first answer's essentials, and what went wrong."""

    wheel: str = ""
    install_mode: str = ""
    build_s: float = 0.0
    venv_s: float = 0.0
    install_s: float = 0.0
    serve_s: float = 0.0
    first_answer_s: float = 0.0
    mcp_s: float = 0.0
    hits: int = 0
    first_url: str = ""
    notices: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    mcp: dict[str, str] = field(default_factory=dict)  # check -> "ok" or the problem
    uvx_first_s: float = 0.0  # mcp-config --uvx-from: uv's cache filled
    uvx_init_s: float = 0.0  # the generated `uvx --offline` command, no network: initialize
    installed_init_s: float = 0.0  # the installed hexlocal-mcp, the same way
    uvx: str = ""  # "ok" or the problem
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hexlocal-smoke"


def run(cmd: Sequence[str | Path], *, timeout: float = 600.0, **kwargs: Any) -> str:
    """Run a command; on failure raise SmokeError with its last output lines."""
    try:
        done = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs
        )
    except subprocess.TimeoutExpired as exc:
        raise SmokeError(f"{Path(str(cmd[0])).name} timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SmokeError(f"`{' '.join(map(str, cmd))}` exited {done.returncode}:\n{tail}")
    return done.stdout


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, round(time.perf_counter() - started, 1)


def venv_bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def make_venv(path: Path) -> Path:
    """A venv from the interpreter the checkout venv was made from, so nothing of the
    checkout's venv (its site-packages, its pip) reaches the new one."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    run([base, "-m", "venv", path])
    return path


# ----------------------------------------------------------------------------- build


def copy_sources(dest: Path) -> Path:
    """The working tree's files (tracked and new, not ignored) in a temp dir, so a build
    writes no egg-info or build/ into the checkout that others are editing."""
    try:
        listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO)
        names = [n for n in listed.split("\0") if n]
    except (SmokeError, FileNotFoundError):
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if _plain_source(p)]
    for name in names:
        source = REPO / name
        if source.is_file():  # a file deleted in the work tree is still listed
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def _plain_source(path: Path) -> bool:
    skipped = {".git", ".venv", "__pycache__", ".hexlocal-cache", "dist", "build"}
    return path.is_file() and not skipped.intersection(path.relative_to(REPO).parts)


def build_tools() -> Path:
    """A cached venv with `build` and the project's build requirements, keyed by them:
    `--no-isolation` then builds without fetching setuptools on every run."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    requires = sorted(pyproject["build-system"]["requires"]) + ["build"]
    venv = cache_root() / f"tools-{_digest(requires)}"
    done = venv / ".complete"  # a venv left half-made by an interrupted run is redone
    if not done.exists():
        shutil.rmtree(venv, ignore_errors=True)
        make_venv(venv)
        run([venv_bin(venv, "python"), "-m", "pip", "install", "-q", *requires])
        done.touch()
    return venv_bin(venv, "python")


def build_dists(work: Path) -> tuple[Path, Path]:
    """sdist, then the wheel built from that sdist (what `python -m build` does), so a file
    missing from the sdist breaks the wheel here rather than for a user."""
    source = copy_sources(work / "src")
    out = work / "dist"
    run([build_tools(), "-m", "build", "--no-isolation", "--outdir", out, source])
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SmokeError(f"expected one wheel and one sdist in {out}, found {os.listdir(out)}")
    return wheels[0], sdists[0]


# --------------------------------------------------------------------------- install


# Data files the code loads from its own package, search/fitted/: a wheel without the error
# map degrades silently, one without the learned weights cannot search.
PACKAGE_DATA = (
    "hexlocal_core/search/fitted/error_adapter.npz",
    "hexlocal_core/search/fitted/learned_rank.json",
)


def missing_data(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    return [name for name in PACKAGE_DATA if name not in names]


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode("utf-8")
    return sorted(line for line in metadata.splitlines() if line.startswith("Requires-Dist:"))


def wheelhouse(wheel: Path) -> Path:
    """Every dependency's file for this wheel's declared dependencies (extras excluded by
    pip), downloaded once per distinct dependency list and Python version."""
    key = _digest([*requires_dist(wheel), sys.version.split()[0]])
    house = cache_root() / f"wheelhouse-{key}"
    if not house.is_dir():
        partial = house.with_name(house.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run([sys.executable, "-m", "pip", "download", "-q", "-d", partial, wheel], timeout=900)
        for own in partial.glob(wheel.name.split("-")[0] + "-*"):
            own.unlink()  # the wheel under test always comes from this build
        partial.rename(house)
    return house


def install(venv: Path, wheel: Path, *, from_index: bool) -> str:
    pip = [venv_bin(venv, "python"), "-m", "pip", "install", "-q"]
    if from_index:
        run([*pip, wheel], timeout=900)
        return "pip install <wheel> (configured index)"
    house = wheelhouse(wheel)
    # --no-compile: skipping the .pyc pass saves ~30 s here; Python compiles on first import.
    run([*pip, "--no-index", "--find-links", house, "--no-compile", wheel], timeout=900)
    return f"pip install <wheel> (cached wheelhouse {house.name})"


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- servers


@contextmanager
def loopback_server(args: Sequence[str | Path], log: Path) -> Iterator[str]:
    """Start one of tests/fakes as a process; yield the base URL it prints first."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", *map(str, args)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise SmokeError(f"{args[0]} did not start: {log.read_text()[-800:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def model_folders(work: Path) -> dict[str, Path]:
    """The hub's two repos, as `REPO@COMMIT` (the commit hexlocal pins each to): the model
    package's real MiniLM files, and the tests' same-shaped cross-encoder stand-in
    (MiniLM's encoder plus a seeded head), cached."""
    sys.path.insert(0, str(REPO))
    from hexlocal_core.adapters import model_sources

    embed = model_sources.pypi_model_dir()
    if embed is None:
        raise SmokeError(f"the checkout venv lacks the model weights: {model_sources.PYPI_INSTALL}")
    rerank = cache_root() / "stand-in-reranker"
    if not (rerank / "model.safetensors").is_file():
        from tests.support.model_fixtures import write_stand_in_reranker

        write_stand_in_reranker(work / "reranker")
        shutil.rmtree(rerank, ignore_errors=True)
        shutil.copytree(work / "reranker", rerank)
    pins = model_sources.PINNED_REVISIONS
    return {f"{EMBED_REPO}@{pins[EMBED_REPO]}": embed, f"{RERANK_REPO}@{pins[RERANK_REPO]}": rerank}


# ------------------------------------------------------------------------ first run


def user_env(home: Path, hub_url: str, hex_url: str, venv: Path) -> dict[str, str]:
    """A new user's shell: the venv on PATH, HOME and every cache in temp, the network at
    the loopback fakes, and HF_HUB_OFFLINE unset (nothing here sets it)."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_CONFIG_HOME=str(home / "config"),
        HF_HOME=str(home / "hf"),
        HF_ENDPOINT=hub_url,
        HEX_API_URL=f"{hex_url}/api",
        HEX_MIRROR=f"{hex_url}/repo",
        DATABASE_PATH=str(home / "index.db"),
        PROJECT_ROOT=str(home / "project"),
    )
    return env


def first_search(report: Report, venv: Path, env: Mapping[str, str], cwd: Path) -> None:
    package, query, version = QUERY
    cmd = [venv_bin(venv, "hexlocal"), "search", package, query, "--version", version, "--json"]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [str(c) for c in cmd],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SEARCH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        report.failures.append(f"the first search did not answer within {SEARCH_TIMEOUT_S:.0f} s")
        return
    report.first_answer_s = round(time.perf_counter() - started, 1)
    report.stderr_tail = done.stderr.strip().splitlines()[-6:]
    if done.returncode != 0:
        report.failures.append(f"hexlocal search exited {done.returncode}: {done.stderr[-600:]}")
        return
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        report.failures.append(f"hexlocal search --json printed no JSON: {done.stdout[:300]!r}")
        return
    results = answer.get("results") or []
    report.hits = len(results)
    report.notices = list(answer.get("notices") or [])
    report.first_url = str(results[0].get("hexdocs_url") or "") if results else ""
    if not results:
        report.failures.append(f"the first search found nothing; notices: {report.notices}")
    elif not report.first_url.startswith("https://"):
        report.failures.append(f"the first hit has no hexdocs_url: {results[0]}")


def check_mcp_script(
    report: Report, venv: Path, env: Mapping[str, str], cwd: Path, version: str
) -> None:
    """`hexlocal-mcp --help` / `--version` must print and exit, not start a server (which,
    with stdin closed, would exit 0 too, having printed nothing on stdout)."""
    for flag, expected in (("--help", "hexlocal-mcp"), ("--version", version)):
        try:
            done = subprocess.run(
                [str(venv_bin(venv, "hexlocal-mcp")), flag],
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=SCRIPT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            verdict = f"still running after {SCRIPT_TIMEOUT_S:.0f} s (it started the server?)"
        else:
            verdict = _script_verdict(done, expected)
        report.mcp[flag] = verdict
        if verdict != "ok":
            report.failures.append(f"hexlocal-mcp {flag}: {verdict}")


def _script_verdict(done: subprocess.CompletedProcess[str], expected: str) -> str:
    if "server starting" in done.stderr:
        return "started the MCP server instead of printing and exiting"
    if done.returncode != 0:
        return f"exited {done.returncode}: {done.stderr.strip()[-200:]}"
    if expected not in done.stdout:
        return f"stdout lacks {expected!r}: {done.stdout.strip()[:200]!r}"
    return "ok"


def check_uvx(
    report: Report, venv: Path, wheel: Path, env: Mapping[str, str], cwd: Path, house: Path | None
) -> None:
    """`mcp-config --uvx-from <wheel>` writes `uvx --offline ...`, which must then answer
    initialize with every route to a package index closed; the installed command is timed
    alike for comparison (benchmarks/bench_client_start.py repeats it)."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    try:
        uv_bin = uvx_check.uv_tools(cache_root(), base)
        hexlocal = venv_bin(venv, "hexlocal")
        with ExitStack() as stack:
            index = stack.enter_context(uvx_check.simple_index(house)) if house else None
            shell = uvx_check.uv_env(env, uv_bin, cwd.parent / "uv-cache", base, index)
            generated = uvx_check.generated_command
            command, report.uvx_first_s = timed(generated, hexlocal, wheel, shell, cwd)
        # The loopback index is gone now, as a laptop's index is when it is offline.
        closed = uvx_check.offline(shell)
        report.uvx_init_s = round(uvx_check.initialize_s(command, closed, cwd), 2)
        installed = [str(venv_bin(venv, "hexlocal-mcp"))]
        report.installed_init_s = round(uvx_check.initialize_s(installed, closed, cwd), 2)
        report.uvx = "ok"
    except (uvx_check.UvxError, subprocess.SubprocessError, OSError, ValueError) as exc:
        report.uvx = str(exc)
        report.failures.append(f"uvx form: {exc}")


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def run_fresh(
    *, from_index: bool, wheel: Path | None = None, keep: bool = False, log: Any = None
) -> Report:
    """The whole path; every step's seconds in the report; servers always stopped.
    `wheel`: test that file (a release's artifact) instead of building one."""
    say = log or (lambda message: print(message, file=sys.stderr, flush=True))
    report = Report()
    work = Path(tempfile.mkdtemp(prefix="hexlocal-smoke-"))
    try:
        if wheel is None:
            say(f"building the sdist and wheel in {work} ...")
            (wheel, _sdist), report.build_s = timed(build_dists, work)
        wheel = wheel.absolute()
        report.wheel = wheel.name
        report.failures += [f"the wheel lacks {name}" for name in missing_data(wheel)]
        say(f"fresh venv, then {wheel.name} into it ...")
        venv, report.venv_s = timed(make_venv, work / "venv")
        report.install_mode, report.install_s = timed(install, venv, wheel, from_index=from_index)
        home = work / "home"
        (home / "project").mkdir(parents=True)
        with ExitStack() as servers:
            serving = time.perf_counter()
            folders = model_folders(work)
            hub_args: list[str | Path] = ["tests.fakes.fake_hub", "--port", "0"]
            hub_args += [f"{repo}={folder}" for repo, folder in folders.items()]
            hub = servers.enter_context(loopback_server(hub_args, work / "hub.log"))
            hex_args = ["tests.fakes.fake_hex", "--port", "0"]
            hex_url = servers.enter_context(loopback_server(hex_args, work / "hex.log"))
            env = user_env(home, hub, hex_url, venv)
            report.serve_s = round(time.perf_counter() - serving, 1)
            say("first search in the fresh venv (downloads the model from the loopback hub) ...")
            first_search(report, venv, env, home / "project")
            _, report.mcp_s = timed(
                check_mcp_script, report, venv, env, home / "project", wheel_version(wheel)
            )
            say("the uvx form: mcp-config --uvx-from, then its start with no network ...")
            house = None if from_index else wheelhouse(wheel)
            check_uvx(report, venv, wheel, env, home / "project", house)
            say("stopping the fakes ...")
    except SmokeError as exc:
        report.failures.append(str(exc))
    finally:
        if keep:
            say(f"kept {work}")
        else:
            _, seconds = timed(shutil.rmtree, work, ignore_errors=True)
            say(f"removed {work} in {seconds:.1f} s")
    return report


def describe(report: Report) -> str:
    lines = [
        f"wheel          {report.wheel or '-'}",
        f"install        {report.install_mode or '-'}",
        f"build          {report.build_s:6.1f} s  (sdist, then the wheel from it)",
        f"venv           {report.venv_s:6.1f} s",
        f"install        {report.install_s:6.1f} s",
        f"fakes          {report.serve_s:6.1f} s  (loopback Hex and hub started)",
        f"first answer   {report.first_answer_s:6.1f} s  ({report.hits} hits; model download "
        "from the loopback hub included)",
        f"first url      {report.first_url or '-'}",
    ]
    lines += [f"notice         {n.get('code')}: {n.get('message')}" for n in report.notices]
    lines.append(f"mcp checks     {report.mcp_s:6.1f} s")
    lines += [f"mcp {flag:<11}{verdict}" for flag, verdict in report.mcp.items()]
    lines += [
        f"uvx first run  {report.uvx_first_s:6.1f} s  (mcp-config --uvx-from: uv's cache filled)",
        f"uvx offline    {report.uvx_init_s:6.2f} s  to initialize, no network "
        f"(installed hexlocal-mcp: {report.installed_init_s:.2f} s)",
        f"uvx form       {report.uvx or '-'}",
    ]
    lines += [f"FAILED         {failure}" for failure in report.failures]
    lines.append("smoke: OK" if report.ok else f"smoke: FAILED ({len(report.failures)})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--from-index", action="store_true", help="install dependencies from the pip index"
    )
    parser.add_argument("--wheel", type=Path, help="test this wheel instead of building one")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    # The wrapper's trap sends TERM to the whole group: unwind, so the temp dir goes too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    if args.wheel is not None and not args.wheel.is_file():
        parser.error(f"--wheel {args.wheel}: no such file")
    report = run_fresh(from_index=args.from_index, wheel=args.wheel, keep=args.keep)
    print(describe(report))
    print(f"total          {time.perf_counter() - started:6.1f} s")
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
