"""get_docs without a package: the module names its package (`usecases/locate.py`).

The fake hex serves real tarballs; `_build` holds `.app` files as `mix compile` writes them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_core.errors import NotFound
from hexlocal_core.search.exact import parse_identifier
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.locate import Origin, Owner, choose, guess, module_atom, spelt_like
from hexlocal_core.versions.app_file import app_modules, read_app_spec, read_app_vsn
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder, project_root

pytestmark = pytest.mark.integration

JASON_MODULES = ["Elixir.Jason", "Elixir.Jason.Decoder", "Elixir.Jason.Encode"]


def app_file(root: Path, app: str, vsn: str, modules: list[str]) -> Path:
    ebin = root / "_build" / "dev" / "lib" / app / "ebin"
    ebin.mkdir(parents=True, exist_ok=True)
    listed = ",".join(f"'{m}'" for m in modules)
    path = ebin / f"{app}.app"
    path.write_text(
        f"{{application,{app},\n [{{applications,[kernel,stdlib,elixir]}},\n"
        f'  {{description,"{app}"}},\n  {{modules,[{listed}]}},\n'
        f'  {{registered,[]}},\n  {{vsn,"{vsn}"}}]}}.\n'
    )
    return path


def make(fake: FakeHex, tmp_path: Path, pins: dict[str, str]) -> Hexlocal:
    settings = settings_for(fake, tmp_path, ai_rerank_model="off", sync_on_start=False)
    root = settings.project_root
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    lines = [
        f'  "{n}": {{:hex, :{n}, "{v}", "a", [:mix], [], "hexpm", "b"}},' for n, v in pins.items()
    ]
    (root / "mix.lock").write_text("%{\n" + "\n".join(lines) + "\n}\n")
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    service = make(fake_hex, tmp_path, {"jason": "1.4.4"})
    app_file(project_root(service), "jason", "1.4.4", JASON_MODULES)
    yield service
    await service.aclose()


async def test_the_lock_s_compiled_app_names_the_package(svc: Hexlocal) -> None:
    result = await svc.get_docs(None, "Jason.decode/2")
    assert (result.package, result.version) == ("jason", "1.4.4")
    assert result.hits and result.hits[0].title == "Jason.decode/2"
    located = [n for n in result.notices if n.code == "package_located"]
    assert located and "jason (mix.lock)" in located[0].message


async def test_without_a_lock_the_module_name_is_a_guess_hex_confirms(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(fake_hex, tmp_path, {})
    try:
        result = await service.get_docs(None, "Jason.Encoder")
        assert result.package == "jason" and result.hits
        assert any("guessed" in n.message for n in result.notices)
    finally:
        await service.aclose()


async def test_an_indexed_package_answers_for_its_modules(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(fake_hex, tmp_path, {})
    try:
        await service.ingest("nimble_options", "1.1.1")
        result = await service.get_docs(None, "NimbleOptions.ValidationError")
        assert result.package == "nimble_options"
        assert any("indexed here" in n.message for n in result.notices)
    finally:
        await service.aclose()


async def test_a_module_two_packages_claim_is_answered_from_the_first_with_a_notice(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(fake_hex, tmp_path, {"jason": "1.4.4", "jason_fork": "0.1.0"})
    try:
        app_file(project_root(service), "jason", "1.4.4", JASON_MODULES)
        app_file(project_root(service), "jason_fork", "0.1.0", ["Elixir.Jason"])
        result = await service.get_docs(None, "Jason")
        assert result.package == "jason"
        several = [n for n in result.notices if n.code == "module_in_several_packages"]
        assert several and "jason_fork (mix.lock)" in several[0].message
    finally:
        await service.aclose()


async def test_a_module_nobody_has_is_a_clear_error(svc: Hexlocal) -> None:
    with pytest.raises(NotFound, match="no package found for :etz.new/2"):
        await svc.get_docs(None, ":etz.new/2")
    with pytest.raises(NotFound, match="Pass package="):
        await svc.get_docs("erlang", "Jason.decode/2")  # no OTP app holds an Elixir module


def test_choose_keeps_the_sources_order() -> None:
    tables = [
        (Origin.LOCK, {"jason": frozenset({"Elixir.Jason"})}),
        (Origin.ELIXIR, {"elixir": frozenset({"Elixir.Enum"})}),
        (Origin.OTP, {"stdlib": frozenset({"ets"}), "kernel": frozenset({"logger"})}),
    ]
    assert choose("ets", tables) == (Owner("stdlib", Origin.OTP),)
    assert choose("logger", tables) == (Owner("kernel", Origin.OTP),)  # :logger is kernel's
    assert choose("Elixir.Enum", tables) == (Owner("elixir", Origin.ELIXIR),)
    assert choose("nope", tables) == ()


@pytest.mark.parametrize(
    ("text", "atom", "guessed"),
    [
        ("Jason.decode/2", "Elixir.Jason", "jason"),
        ("Phoenix.LiveView.mount/3", "Elixir.Phoenix.LiveView", "phoenix"),
        ("NimbleOptions", "Elixir.NimbleOptions", "nimble_options"),
        (":ets.new/2", "ets", None),
        ("decode/2", None, None),
    ],
)
def test_module_atoms_and_guesses(text: str, atom: str | None, guessed: str | None) -> None:
    ident = parse_identifier(text)
    assert ident is not None
    assert module_atom(ident) == atom
    assert guess(ident) == guessed


def test_spelt_like_suggests_known_modules() -> None:
    known = ["Elixir.Jason", "ets", "gen_server", "Elixir.GenServer"]
    assert spelt_like("etz", known) == ("ets",)
    assert spelt_like("Elixir.Jasn", known) == ("Jason",)


def test_app_files_are_read_as_mix_and_otp_write_them(tmp_path: Path) -> None:
    path = app_file(tmp_path, "jason", "1.4.4", JASON_MODULES)
    assert app_modules(path) == frozenset(JASON_MODULES)
    assert read_app_spec(path).applications == ("kernel", "stdlib", "elixir")
    assert read_app_vsn(path) == "1.4.4"
    otp = tmp_path / "kernel.app"
    otp.write_text(
        "%% comment {modules, [fake]}\n{application, kernel,\n [{modules, [application,\n"
        "\t     ets_not_here, % trailing\n\t     logger]},\n  {applications, []}]}.\n"
    )
    assert app_modules(otp) == frozenset({"application", "ets_not_here", "logger"})
    assert read_app_vsn(otp) is None  # no vsn: None, not an error
    assert app_modules(tmp_path / "absent.app") == frozenset()
    (tmp_path / "odd.app").write_text("{modules, [")  # unterminated: nothing, no error
    assert app_modules(tmp_path / "odd.app") == frozenset()
