"""Where compiled apps live: a Mix project's `_build`, and the installed Elixir's own libs.

Both answer with a `BuildApp`: the `ebin` folder and the version its `<app>.app` file
declares (`{vsn, "1.14.0"}`), which is the version the docs belong to. Nothing here reads
the environment: callers pass `ELIXIR_HOME` and `PATH` in.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from hexlocal_core.versions import read_app_vsn

log = logging.getLogger("hexlocal.ingest.beam_sources")

DEFAULT_ENVS = ("dev", "test", "prod")


@frozen
class BuildApp:
    """A compiled OTP application with docs to read."""

    app: str
    version: str
    ebin: Path
    env: str | None = None  # the Mix env ("dev") for _build apps, None for Elixir's own


def app_version(ebin: Path, app: str) -> str | None:
    """The `vsn` of `ebin/<app>.app`, or None when the file is absent or has none."""
    return read_app_vsn(ebin / f"{app}.app")


def find_build_app(
    project_root: Path, app: str, *, envs: Sequence[str] = DEFAULT_ENVS
) -> BuildApp | None:
    """`<project_root>/_build/<env>/lib/<app>/ebin`, trying `envs` in order, then any other
    env folder in name order; the first with a readable version wins."""
    build = project_root / "_build"
    for env in build_envs(build, envs):
        ebin = build / env / "lib" / app / "ebin"
        if not ebin.is_dir():
            continue
        version = app_version(ebin, app)
        if version is None:
            log.debug("%s has no vsn in %s.app; trying the next env", ebin, app)
            continue
        return BuildApp(app=app, version=version, ebin=ebin, env=env)
    return None


def build_envs(build: Path, preferred: Sequence[str] = DEFAULT_ENVS) -> list[str]:
    """The env folders of `_build`: `preferred` in order, then any other in name order."""
    try:
        present = sorted(p.name for p in build.iterdir() if p.is_dir())
    except OSError:
        return []
    return [env for env in preferred if env in present] + [
        env for env in present if env not in preferred
    ]


def find_elixir_lib(
    app: str, elixir_home: Path | None, *, path: str | None = None
) -> BuildApp | None:
    """`<elixir_home>/lib/<app>/ebin` for one of Elixir's own apps (elixir, eex, ex_unit,
    iex, logger, mix). Without `elixir_home`, the `elixir` found on `path` (os PATH when
    None) is followed through its symlinks: `<home>/bin/elixir` gives `<home>`."""
    home = elixir_home if elixir_home is not None else elixir_home_from_path(path)
    if home is None:
        return None
    ebin = home / "lib" / app / "ebin"
    if not ebin.is_dir():
        return None
    version = app_version(ebin, app)
    if version is None:
        return None
    return BuildApp(app=app, version=version, ebin=ebin)


def elixir_home_from_path(path: str | None = None) -> Path | None:
    """The installation folder of the `elixir` on `path`, when its layout is the usual one.

    Version-manager shims (asdf) are scripts, not symlinks, so they resolve to the shim
    folder, which has no `lib/elixir/ebin`: those give None and the caller passes
    ELIXIR_HOME instead.
    """
    found = shutil.which("elixir", path=path)
    if found is None:
        return None
    try:
        home = Path(found).resolve(strict=True).parent.parent
    except (OSError, RuntimeError):  # a broken or looping symlink
        return None
    return home if (home / "lib" / "elixir" / "ebin").is_dir() else None
