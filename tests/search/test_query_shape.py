"""Query shapes and error-paste parsing: pure functions, one table each."""

from __future__ import annotations

import pytest

from hexlocal_core.search.query_shape import ErrorQuery, Shape, parse_error, shape_of

FUNCTION_CLAUSE = (
    "** (FunctionClauseError) no function clause matching in "
    + """Plug.Conn.put_resp_header/3

    The following arguments were given to Plug.Conn.put_resp_header/3:

        # 1
        %Plug.Conn{adapter: {Plug.Cowboy.Conn, :...}, owner: #PID<0.532.0>}

    (plug 1.19.2) lib/plug/conn.ex:733: Plug.Conn.put_resp_header/3
    (my_app 0.1.0) lib/my_app/router.ex:12: anonymous fn/2 in MyApp.Router.call/2
"""
)
LOG_LINE = (
    "09:41:54.123 [error] Postgrex.Protocol (#PID<0.123.0>) failed to connect: "
    "** (DBConnection.ConnectionError) tcp connect (localhost:5432): connection refused"
)


@pytest.mark.parametrize(
    ("query", "shape"),
    [
        ("Plug.Conn.put_resp_header/3", Shape.IDENTIFIER),
        ("c:handle_begin/2", Shape.IDENTIFIER),
        ("t:GenMagic.Server.option/0", Shape.IDENTIFIER),
        ("Ecto.Multi", Shape.IDENTIFIER),
        ("encode_to_iodata!/2", Shape.IDENTIFIER),
        (":queue_target", Shape.IDENTIFIER),
        ("stale_error_field", Shape.IDENTIFIER),
        ("telemetry:span/3", Shape.IDENTIFIER),
        ("mix ecto.gen.migration", Shape.IDENTIFIER),
        ("--log-migrations-sql", Shape.IDENTIFIER),
        ("boruta.gen.migration", Shape.IDENTIFIER),
        ("authentication", Shape.PROSE),  # one word, but a question, not a symbol
        ("banker's rounding", Shape.PROSE),
        ("how do I stream a response body?", Shape.PROSE),
        # Prose that mentions an exception is still prose: no `** (...)`, no log noise.
        ("ArgumentError: cannot convert decimal to integer", Shape.PROSE),
        (FUNCTION_CLAUSE, Shape.ERROR),
        (LOG_LINE, Shape.ERROR),
        ('** (Mix) The task "phx.server" could not be found', Shape.ERROR),
        ("[warning] request took too long", Shape.ERROR),
        ('warning: variable "conn" is unused\n  lib/app/router.ex:12', Shape.ERROR),
    ],
)
def test_shape_of(query: str, shape: Shape) -> None:
    assert shape_of(query) is shape


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            FUNCTION_CLAUSE,
            ErrorQuery(
                exceptions=("FunctionClauseError",),
                message=(
                    "no function clause matching in Plug.Conn.put_resp_header/3 The following"
                    " arguments were given to Plug.Conn.put_resp_header/3: # %Plug.Conn{adapter:"
                    " {Plug.Cowboy.Conn, :...}, owner: } Plug.Conn.put_resp_header/3"
                    " anonymous fn/2 in MyApp.Router.call/2"
                ),
                # the function the message names first; the app's own frames come after
                functions=("Plug.Conn.put_resp_header/3", "MyApp.Router.call/2"),
            ),
        ),
        (
            LOG_LINE,
            ErrorQuery(
                exceptions=("DBConnection.ConnectionError",),
                message=(
                    "Postgrex.Protocol ( ) failed to connect: tcp connect (localhost: ):"
                    " connection refused"
                ),
                functions=(),
            ),
        ),
        (
            "** (DBConnection.ConnectionError) connection not available and request was"
            " dropped from queue after 2000ms",
            ErrorQuery(
                exceptions=("DBConnection.ConnectionError",),
                message="connection not available and request was dropped from queue after ms",
                functions=(),
            ),
        ),
        (
            "2026-11-30T10:00:01.123Z ** (ArgumentError) errors were found at the given"
            " arguments: #Reference<0.1.2.3> in :ets.lookup/2 ref 9f86d081884c7d659a2f",
            ErrorQuery(
                exceptions=("ArgumentError",),
                message="errors were found at the given arguments: in :ets.lookup/2 ref",
                functions=("ets.lookup/2",),
            ),
        ),
    ],
)
def test_parse_error_keeps_the_message_and_the_raising_function(
    query: str, expected: ErrorQuery
) -> None:
    assert parse_error(query) == expected


def test_the_error_text_the_arms_read_has_no_run_specific_noise() -> None:
    text = parse_error(FUNCTION_CLAUSE).text
    for noise in ("#PID", "0.532.0", "lib/plug/conn.ex", "733", "1.19.2"):
        assert noise not in text
    assert text.startswith("FunctionClauseError no function clause matching in")


# A paste is capped at MAX_QUERY_CHARS before search, but parse_error is pure and must not
# depend on that: each of these took seconds to minutes while a scan was quadratic, and
# takes milliseconds when linear. The time limit is the assertion.
@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "paste",
    [
        "a/" * 50_000,  # a slashed word the path pattern tried from every character
    ],
    ids=lambda paste: repr(paste[:8]),
)
def test_hostile_pastes_are_parsed_in_linear_time(paste: str) -> None:
    assert parse_error(paste).functions == ()
