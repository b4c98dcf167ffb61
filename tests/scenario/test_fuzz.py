"""Hypothesis: mutated scenario documents load or fail with one ScenarioError line per problem."""

from __future__ import annotations

import tomllib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.cli import main
from minibroker.scenario import ScenarioError, parse_scenario
from minibroker.scenario.loader.limits import MAX_PROBLEMS
from tests.scenario.corpus import DOCUMENTS, dump, paths

ODD_VALUES = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(-3, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@st.composite
def mutated(draw) -> str:
    import copy

    doc = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(doc)))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        last = where[-1]
        action = draw(st.sampled_from(["replace", "delete", "rename"]))
        if action == "replace":
            parent[last] = draw(ODD_VALUES)
        elif action == "delete":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=6)) + "_"] = parent.pop(last)
        if not paths(doc):
            break
    text = dump(doc)
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = (
            text[:cut]
            + draw(st.sampled_from(["", "[", "]]", "=", '"', "\x00", "é", "\n[[steps]]\n"]))
            + text[cut:]
        )
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_documents_load_or_fail_with_one_line(text):
    try:
        parse_scenario(text, "fuzz.toml")
    except ScenarioError as error:
        assert 1 <= len(error.problems) <= MAX_PROBLEMS + 1
        assert str(error) == "\n".join(error.problems)
        for line in error.problems:
            assert line.startswith("fuzz.toml") or line.startswith("... and ")
            assert "\n" not in line
            assert "Traceback" not in line


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_check_command_exits_0_or_2_with_one_line(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_text(text, encoding="utf-8")
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["check", str(path)])
    assert code in (0, 2)
    if code == 2:
        lines = err.getvalue().splitlines()
        assert 1 <= len(lines) <= MAX_PROBLEMS + 1
        assert all(
            line.startswith(f"minibroker: {path}") or line.startswith("minibroker: ... and ")
            for line in lines
        )


def test_the_writer_round_trips_the_library():
    for doc in DOCUMENTS:
        assert tomllib.loads(dump(doc)) == doc
        parse_scenario(dump(doc), "round-trip.toml")
