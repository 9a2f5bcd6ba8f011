"""The team deployment (deploy/) and its docs agree with the server they configure.

A mistake here fails silently at a team's first `docker compose up`: a misspelt variable is
ignored, a port that is not the server's makes a dead health check, a package missing from
the image is an ImportError in production. Each test reads one file and checks it against
the code (CLI options, `config.ENV_VARIABLES`, `hexlocal_mcp.http`, pyproject).
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from hexlocal_cli.main import cli
from hexlocal_core.config import ENV_VARIABLES, Settings
from hexlocal_mcp.http import DEFAULT_PORT, HEALTH_PATH, MCP_PATH, is_loopback
from tests.support.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
DOCS = (REPO_ROOT / "docs" / "deployment.md", REPO_ROOT / "docs" / "backup.md")
# Read by libraries hexlocal drives (huggingface_hub, Python), not by Settings.
OTHER_READERS = {"HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT", "PYTHONUNBUFFERED"}
# The PostgreSQL store's selector (read by the index layer, not listed in Settings).
KNOWN = set(ENV_VARIABLES) | OTHER_READERS | {"DATABASE_URL"}
_VAR = re.compile(r"\$\{(\w+)(?:(:?-)([^}]*)|:?\?[^}]*)?\}")


def interpolate(text: str) -> str:
    """Compose's `${VAR:-default}` becomes the default, any other `${VAR...}` `<VAR>`."""
    return _VAR.sub(lambda m: m.group(3) if m.group(2) else f"<{m.group(1)}>", text)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(interpolate((DEPLOY / "compose.yaml").read_text()))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def server(compose: dict[str, Any]) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"]["hexlocal"]
    return service


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    pairs = [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]
    return [(p[0].upper(), p[1] if len(p) > 1 else "") for p in pairs]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in dockerfile_instructions():
        if instruction == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", args))
    return env


def final_stage() -> list[tuple[str, str]]:
    steps = dockerfile_instructions()
    last_from = max(i for i, (instruction, _) in enumerate(steps) if instruction == "FROM")
    return steps[last_from:]


def serve_command() -> click.Context:
    """The image's CMD, parsed by the real `hexlocal serve` command."""
    [cmd] = [json.loads(args) for instruction, args in final_stage() if instruction == "CMD"]
    assert cmd[:2] == ["hexlocal", "serve"], cmd
    serve = cli.commands["serve"]
    return serve.make_context("serve", list(cmd[2:]))


def test_the_database_is_pgvector_and_the_url_reaches_it(
    compose: dict[str, Any], server: dict[str, Any]
) -> None:
    db = compose["services"]["db"]
    assert db["image"].startswith("pgvector/pgvector:pg"), db["image"]
    url = urlsplit(server["environment"]["DATABASE_URL"])
    env = db["environment"]
    assert url.scheme == "postgresql"
    assert url.hostname == "db" and url.port == 5432
    assert (url.username, url.path) == (env["POSTGRES_USER"], "/" + env["POSTGRES_DB"])
    assert url.password == env["POSTGRES_PASSWORD"] == "<POSTGRES_PASSWORD>"  # one variable
    # hexlocal's first migration needs the database up, not merely started.
    assert server["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_token_is_a_secret_file_never_a_value(
    compose: dict[str, Any], server: dict[str, Any]
) -> None:
    env = server["environment"]
    assert "HEXLOCAL_HTTP_TOKEN" not in env  # a literal would end up in `docker inspect`
    path = Path(env["HEXLOCAL_HTTP_TOKEN_FILE"])
    assert path.parent == Path("/run/secrets")
    assert path.name in server["secrets"]
    assert compose["secrets"][path.name]["file"].startswith("./secrets/")
    ignored = (DEPLOY / ".gitignore").read_text().split()
    assert "secrets/" in ignored and ".env" in ignored


def test_every_variable_set_is_one_something_reads(server: dict[str, Any]) -> None:
    unknown = (set(server["environment"]) | set(image_env())) - KNOWN
    assert not unknown, f"nothing reads {sorted(unknown)}"


def test_the_example_env_file_matches_the_compose_file() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    used = {m.group(1) for m in _VAR.finditer(text)}
    required = {m.group(1) for m in _VAR.finditer(text) if ":?" in m.group(0)}
    example = {
        line.split("=", 1)[0]
        for line in (DEPLOY / "env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert example <= used, f"env.example sets what compose never reads: {example - used}"
    assert required <= example, f"env.example leaves out {required - example}"


def test_the_port_and_health_check_are_the_servers(
    compose: dict[str, Any], server: dict[str, Any]
) -> None:
    ctx = serve_command()
    assert ctx.params["http_"] is True
    # Inside a container, loopback is unreachable through Docker's port forwarding.
    assert not is_loopback(ctx.params["host"]), ctx.params["host"]
    port = ctx.params["port"]
    [published] = server["ports"]
    host_ip, host_port, container_port = published.split(":")
    assert (host_ip, int(host_port), int(container_port)) == ("127.0.0.1", DEFAULT_PORT, port)
    health = f"http://127.0.0.1:{port}{HEALTH_PATH}"
    assert health in " ".join(server["healthcheck"]["test"])
    [image_check] = [args for instruction, args in final_stage() if instruction == "HEALTHCHECK"]
    assert health in image_check
    assert ("EXPOSE", str(port)) in final_stage()
    caddy = re.sub(r"#.*", "", (DEPLOY / "Caddyfile").read_text())
    [upstream] = re.findall(r"reverse_proxy\s+(\S+)", caddy)
    assert upstream == f"hexlocal:{port}" and "hexlocal" in compose["services"]
    assert re.search(r"flush_interval\s+-1", caddy)  # SSE answers must not be buffered


def test_docker_waits_longer_than_the_servers_shutdown_grace(server: dict[str, Any]) -> None:
    stop = server["stop_grace_period"]
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", stop)
    assert match, f"stop_grace_period {stop!r}: write it in seconds, like 10s"
    seconds = float(match.group(1))
    grace = Settings.from_env({}).http_shutdown_grace_s
    assert "HEXLOCAL_HTTP_SHUTDOWN_GRACE_S" not in server["environment"]
    assert seconds > grace, (stop, grace)


def test_the_model_caches_are_on_the_mounted_volume(
    compose: dict[str, Any], server: dict[str, Any]
) -> None:
    mounts = {}
    for spec in server["volumes"]:
        source, target = spec.split(":")[:2]
        mounts[target] = source
    env = image_env()
    for variable in ("HF_HOME", "HEXLOCAL_MODEL_CACHE"):
        path = Path(env[variable])
        owners = [t for t in mounts if path.is_relative_to(t)]
        assert owners, f"{variable}={path} is not on a volume: lost at every restart"
        assert mounts[owners[0]] in compose["volumes"], "a named volume, declared"


def test_the_image_copies_every_package_the_wheel_ships() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = {
        p.name
        for p in REPO_ROOT.iterdir()
        if (p / "__init__.py").is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)
    }
    copied = {
        args.split()[0]
        for instruction, args in dockerfile_instructions()
        if instruction == "COPY" and not args.startswith("--from")
    }
    assert shipped and shipped <= copied, f"the image misses {shipped - copied}"
    assert {"pyproject.toml", project["project"]["readme"]} <= set(
        " ".join(a for i, a in dockerfile_instructions() if i == "COPY").split()
    )
    kept = {line[1:] for line in (DEPLOY / "Dockerfile.dockerignore").read_text().split()}
    assert shipped | {"pyproject.toml"} <= kept, "the build context leaves them out"


def _code_spans(text: str) -> list[str]:
    """Fenced code lines and inline `code`, where commands and variables are written."""
    spans: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            spans.append(line.strip())
        else:
            spans.extend(re.findall(r"`([^`]+)`", line))
    return spans


def _command_lines(text: str) -> list[list[str]]:
    """Each `hexlocal ...` command line written in the docs, as words."""
    lines = []
    for span in _code_spans(text):
        # (a compose service is also called hexlocal: `docker compose run hexlocal hexlocal ...`)
        for m in re.finditer(r'(?:^|"|&& |hexlocal )hexlocal ([^"|#>]*)', span):
            lines.append(m.group(1).split())
    return lines


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_name_only_commands_options_and_variables_that_exist(doc: Path) -> None:
    text = doc.read_text()
    commands = _command_lines(text)
    assert commands, "no hexlocal command found: the parser above is out of date"
    for words in commands:
        command: click.Command = cli
        for word in words:
            if isinstance(command, click.Group) and word in command.commands:
                command = command.commands[word]
            elif word.startswith("--"):
                options = {o for p in command.params for o in p.opts}
                assert word in options, f"`hexlocal {' '.join(words)}`: no option {word}"
            elif isinstance(command, click.Group):
                pytest.fail(f"`hexlocal {' '.join(words)}`: no command {word}")
    compose_vars = set(_VAR.findall((DEPLOY / "compose.yaml").read_text()))
    named = set(re.findall(r"\b(?:HEXLOCAL|AI|MCP|HF|HEX|DATABASE|EMBED|MEMORY)_[A-Z0-9_]+", text))
    unknown = named - KNOWN - {name for name, *_ in compose_vars}
    assert not unknown, f"{doc.name} names settings nothing reads: {sorted(unknown)}"
    # A URL of the server names one of its two paths.
    for path in re.findall(r"https?://(?:docs\.example\.com|127\.0\.0\.1:\d+)(/[\w/]*)", text):
        assert path in (MCP_PATH, HEALTH_PATH), f"{doc.name}: the server has no {path}"
