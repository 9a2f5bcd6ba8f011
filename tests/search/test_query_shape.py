"""Query shapes and error-paste parsing: pure functions, one table each."""

from __future__ import annotations

import pytest

from hexlocal_core.search.query_shape import (
    MAX_CALL_CHARS,
    ErrorQuery,
    Shape,
    count_arguments,
    parse_error,
    shape_of,
)
from hexlocal_core.search.tuning import SearchTuning

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


WHEREIS = """** (ArgumentError) errors were found at the given arguments:

  * 1st argument: not an atom

    :erlang.whereis("pricing_server")
    (my_app 0.1.0) lib/my_app/pricing.ex:8: MyApp.Pricing.server/0
"""
ERLANG_BADARG = (
    "** exception error: bad argument\n"
    '{badarg,[{ets,lookup,[foo,1],[]},{erl_eval,do_apply,7,[{file,"erl_eval.erl"},{line,900}]}]}'
)


# Elixir prints the frame that raised with its arguments, and agents paste the call they
# made: the function is named with as many arguments as the call has (ExDoc's spelling,
# `erlang.whereis/1`, so it meets the item's title), in the order the paste names them.
@pytest.mark.parametrize(
    ("paste", "functions"),
    [
        (WHEREIS, ("erlang.whereis/1", "MyApp.Pricing.server/0")),
        ('    (stdlib 6.2.2.1) :ets.lookup(:session_cache, "u-81")', ("ets.lookup/2",)),
        (
            "{:error, :timeout}\n# returned by :gen_tcp.recv(socket, 0, 5000) while the peer"
            " is still connected",
            ("gen_tcp.recv/3",),
        ),
        ('iex(4)> :binary.split("a,b,,c", ",")', ("binary.split/2",)),
        ('    (elixir 1.18.4) String.to_existing_atom("nope")', ("String.to_existing_atom/1",)),
        ("** (ArgumentError) boom in :erlang.node()", ("erlang.node/0",)),
        ("ets:lookup(foo, 1)", ("ets.lookup/2",)),  # Erlang's own spelling
        ("iex(2)> |> IO.inspect(label: :total)", ("IO.inspect/2",)),  # piped: one more
        # Erlang's stack trace entries, {Mod, Fun, Args | Arity, Location}
        (ERLANG_BADARG, ("ets.lookup/2", "erl_eval.do_apply/7")),
        ("[{:ets, :lookup, [:foo, 1], []}]", ("ets.lookup/2",)),
        # the message's call first, the frames after; one name however often written
        (
            "** (exit) exited in: :gen_server.call(MyApp.Inventory, {:reserve, 42, 3}, 5000)\n"
            "    ** (EXIT) time out\n"
            "    (stdlib 6.2.2.1) gen_server.erl:1128: :gen_server.call/3\n"
            "    (my_app 0.1.0) lib/my_app/checkout.ex:57: MyApp.Checkout.place_order/2",
            ("gen_server.call/3", "MyApp.Checkout.place_order/2"),
        ),
        ("ets:lookup/2 failed: ets:lookup(foo, 1)", ("ets.lookup/2",)),
        # not calls: no `(` right after the name, a map key, a bare tuple, a local call
        ("see Enum.map (with a list) and Enum.map", ()),
        ("%{Enum.map: 1, :ets.lookup => 2}", ()),
        ("{ets, lookup, [foo, 1]}", ()),
        ("iex(4)> split(x)", ()),
        # arguments that cannot be counted name nothing rather than a wrong arity
        (':binary.split("a,b", ","', ()),
        ("Foo.bar(a, b]", ()),
    ],
)
def test_a_pasted_call_names_its_function_with_its_arity(
    paste: str, functions: tuple[str, ...]
) -> None:
    assert parse_error(paste, calls=True).functions == functions


def test_search_reads_only_the_functions_named_with_an_arity_unless_told() -> None:
    # The call reading was not kept (docs/lab/otp-retrieval.md): off by default.
    assert parse_error(WHEREIS).functions == ("MyApp.Pricing.server/0",)
    assert SearchTuning().error_calls is False


# The arity is the number of top-level arguments: commas inside brackets, strings,
# sigils and anonymous functions do not count; Elixir's trailing keywords are one.
@pytest.mark.parametrize(
    ("call", "count"),
    [
        ("()", 0),
        ("( )", 0),
        ("(a)", 1),
        ("(a, b)", 2),
        ("(f(a, b), [c, d], {e, f}, %{g: 1, h: 2}, <<1, 2>>, %S{i: 3, j: 4})", 6),
        ("(#PID<0.318.0>, :get_count, :infinity)", 3),
        ('("a, b", "c\\"d, e")', 2),
        ("('a,b', c)", 2),  # a charlist, or an Erlang quoted atom
        ('(~c"db.internal, x", :inet)', 2),
        ("(~r/a,b/i, ~w[a b, c], ~s(d, e))", 3),
        ('("a#{"b,c"}d", e)', 2),  # an interpolation holds a string of its own
        ("(?,, ?\\), $(, x)", 4),  # character literals, not brackets
        ("(__MODULE__, arg, name: __MODULE__, timeout: 5_000)", 3),
        ("(x, do: 1, else: 2)", 2),
        ("(list, 0, fn x, acc -> x + acc end)", 3),
        ("(if x do 1 else 2 end, 3)", 2),
        ("(x.end, :fn, do_it, end: 1)", 4),  # names, not the keywords
        ("(1 <<< 2, 3 >>> 1)", 2),  # shifts, not binaries
        ("[foo, 1]", 2),  # an Erlang stack entry's argument list
        # unbalanced or too long: no count
        ("(a, b", None),
        ("(a, b]", None),
        ('("a, b)', None),
        ("(a end)", None),
        ("(<<1, 2)", None),
        ("(" + "a, " * MAX_CALL_CHARS + "b)", None),
    ],
)
def test_count_arguments(call: str, count: int | None) -> None:
    assert count_arguments(call, 0)[0] == count


# A paste is capped at MAX_QUERY_CHARS before search, but parse_error is pure and must not
# depend on that: each of these took seconds to minutes while a scan was quadratic, and
# takes milliseconds when linear. The time limit is the assertion.
@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "paste",
    [
        "a/" * 50_000,  # a slashed word the path pattern tried from every character
        "(" * 100_000,
        ":a.b(" * 20_000,  # every call unclosed: each scan would run to the cap
        'A.b("' * 20_000,
        "{a,b,[" * 20_000,
        "Mod.fun(" + "x, " * 40_000,
    ],
    ids=lambda paste: repr(paste[:8]),
)
def test_hostile_pastes_are_parsed_in_linear_time(paste: str) -> None:
    assert parse_error(paste, calls=True).functions == ()
    assert parse_error(paste).functions == ()
