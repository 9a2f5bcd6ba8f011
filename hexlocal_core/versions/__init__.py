"""Which version's docs to use: Hex SemVer, the project's pins and the resolution chain.

One module per reason to change, leaves first (imports point up this list only):

    semver.py      Hex SemVer: parse, order, nearest versions, the latest stable release
    requirement.py Elixir version requirements (`~> 1.4`) and the newest release one allows
    names.py       valid Hex package names; the apps that ship with Elixir
    terms.py       the Elixir literal parser mix.lock is written in
    lockfile.py    mix.lock entries; the bounded, cached lock reader
    location.py    the walk up from PROJECT_ROOT: the Mix project root and its mix.lock
    erlang_terms.py  Erlang terms as `.app` files hold them
    app_file.py    an `.app` file: its name, vsn, modules and the applications it starts
    pins.py        .tool-versions / mise.toml pins, for any tool (elixir, erlang)
    probe_run.py   running `elixir`/`erl` outside the project, no crash dump, never orphaned
    probes.py      `_build` app versions, the pinned Elixir, `elixir --version`
    resolution.py  the chain: explicit -> mix.lock -> _build -> Hex latest stable
    otp.py         an OTP install's release and application versions; explicit OTP versions
    otp_apps.py    module -> OTP application; the OTP applications a project uses
    otp_probe.py   the project's OTP: HEXLOCAL_OTP_ROOT, pin, asdf/mise, `erl` on PATH

Import from the package (`from hexlocal_core.versions import resolve_version`); the
modules are the seams, the package is the interface.
"""

from __future__ import annotations

from hexlocal_core.model import LockEntry
from hexlocal_core.versions.app_file import read_app_vsn
from hexlocal_core.versions.location import find_lock, find_mix_root, project_dirs
from hexlocal_core.versions.lockfile import LockFile, load_lock, parse_lock, read_lock
from hexlocal_core.versions.names import ELIXIR_APPS, MAX_NAME_LENGTH, validate_package_name
from hexlocal_core.versions.otp import (
    OTP_APPS,
    NotAnOtpInstall,
    OtpInstall,
    OtpVersion,
    otp_version_for,
    parse_otp_release,
    read_otp_install,
    release_matches,
)
from hexlocal_core.versions.otp_apps import ModuleOwners, module_apps, project_otp_apps
from hexlocal_core.versions.otp_probe import OtpFound, find_otp, pinned_otp
from hexlocal_core.versions.probe_run import ProbeRun, run_probe
from hexlocal_core.versions.probes import build_version, elixir_on_path, pinned_elixir
from hexlocal_core.versions.resolution import (
    LATEST,
    explain_missing_docs,
    resolve_version,
    why_no_docs,
)
from hexlocal_core.versions.semver import (
    MAX_VERSION_LENGTH,
    SemVer,
    is_stable,
    nearest_versions,
    parse_version,
    pick_latest,
    try_parse_version,
)
from hexlocal_core.versions.terms import LockTooLarge, MalformedLock

__all__ = [
    "ELIXIR_APPS",
    "LATEST",
    "MAX_NAME_LENGTH",
    "MAX_VERSION_LENGTH",
    "LockEntry",
    "LockFile",
    "LockTooLarge",
    "MalformedLock",
    "ModuleOwners",
    "NotAnOtpInstall",
    "OTP_APPS",
    "OtpFound",
    "OtpInstall",
    "OtpVersion",
    "ProbeRun",
    "SemVer",
    "build_version",
    "elixir_on_path",
    "explain_missing_docs",
    "find_lock",
    "find_mix_root",
    "find_otp",
    "is_stable",
    "load_lock",
    "module_apps",
    "nearest_versions",
    "otp_version_for",
    "parse_lock",
    "parse_otp_release",
    "parse_version",
    "pick_latest",
    "pinned_elixir",
    "pinned_otp",
    "project_dirs",
    "project_otp_apps",
    "read_app_vsn",
    "read_lock",
    "read_otp_install",
    "release_matches",
    "resolve_version",
    "run_probe",
    "try_parse_version",
    "validate_package_name",
    "why_no_docs",
]
