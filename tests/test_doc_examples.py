"""Every runnable code block of README.md and docs/*.md runs, and prints what the document shows.

The convention (console commands, python scripts and their output, pytest examples) is described in
tests/docblocks.py; the tests at the end check the runner itself on small documents.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.docblocks import ROOT, ExampleError, blocks, commands, matches, run_block

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = [block for path in DOCUMENTS for block in blocks(path) if block.runnable]


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.id for block in RUNNABLE])
def test_the_example_prints_what_the_document_shows(block, tmp_path):
    run_block(block, tmp_path)


# --- the runner itself ---------------------------------------------------------------------------
def _document(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "doc.md"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("expected", "actual", "verdict"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "c"], False),
        (["a"], ["a", "b"], False),
        (["a", "b"], ["a"], False),
        (["a", "...", "d"], ["a", "d"], True),
        (["a", "...", "d"], ["a", "b", "c", "d"], True),
        (["a", "...", "d"], ["a", "b", "c"], False),
        (["...", "d"], ["x", "d", "d"], True),
        (["...", "d"], ["d", "x"], False),
        (["a", "..."], ["a"], True),
        (["..."], [], True),
        (["...", "x", "...", "y", "..."], ["x", "y"], True),
        (["...", "x", "...", "y", "..."], ["y", "x"], False),
        (["a ..."], ["a b"], False),  # only a line that is exactly ... is a wildcard
        ([" ..."], ["b"], False),
        (["a   ", "b", "", ""], ["a", "b  "], True),  # trailing spaces and blank lines do not count
        (["a", "", "b"], ["a", "b"], False),  # a blank line inside does
        (["  a"], ["a"], False),  # leading spaces do
    ],
)
def test_matching(expected, actual, verdict):
    assert matches(expected, actual) is verdict


def test_fences_languages_lines_and_output_blocks(tmp_path):
    path = _document(
        tmp_path,
        """\
        # t

        ```console
        $ echo hi
        hi
        ```

        ```python
        print(1)
        ```


        ```output
        1
        ```

        ```python
        print(2)
        ```
        text between
        ```output
        2
        ```

        ````markdown
        ```python
        nested
        ```
        ````

        - a list item:

          ```sh
          indented
          ```
        ~~~toml
        a = 1
        ~~~
        ```
        untagged
        ```
        """,
    )
    found = blocks(path)
    assert [(b.line, b.lang) for b in found] == [
        (3, "console"),
        (8, "python"),
        (13, "output"),
        (17, "python"),
        (21, "output"),
        (25, "markdown"),
        (33, "sh"),
        (36, "toml"),
        (39, ""),
    ]
    assert found[1].output == "1\n"
    assert found[3].output is None  # text between: the output block belongs to nothing
    assert found[5].text == "```python\nnested\n```\n"
    assert found[6].text == "indented\n"
    assert [b.runnable for b in found] == [True, True, False, True, False, False, False, False, False]
    assert found[0].id == "doc.md:3"


def test_commands_expected_output_exit_status_and_continuations(tmp_path):
    path = _document(
        tmp_path,
        """\
        ```console
        $ FOO=1 minibroker list --json
        one
        ...

        $ false
        [exit 1]
        $ echo 'a b' \\
            c
        a b c{spaces}
        ```
        """,
    )
    (block,) = blocks(path)
    block.text = block.text.replace("{spaces}", "   ")
    first, second, third = commands(block)
    assert (first.line, first.argv, first.env, first.expected, first.exit_code) == (
        2,
        ["minibroker", "list", "--json"],
        {"FOO": "1"},
        ["one", "..."],
        0,
    )
    assert (second.argv, second.expected, second.exit_code) == (["false"], [], 1)
    assert (third.line, third.argv, third.expected) == (8, ["echo", "a b", "c"], ["a b c"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("output first\n$ true\n", "starts with a `$ ` command"),
        ("$ ls | wc -l\n", "without a shell; '|' is not supported"),
        ("$ echo 'open\n", "cannot split"),
        ("$ true \\\n", "ends in a backslash"),
    ],
)
def test_console_blocks_the_runner_refuses(tmp_path, body, message):
    (block,) = blocks(_document(tmp_path, f"```console\n{body}```\n"))
    with pytest.raises(ExampleError, match=message.replace("|", r"\|").replace("$", r"\$")):
        commands(block)


def test_a_console_block_runs_and_a_difference_fails_naming_its_line(tmp_path):
    passing = _document(
        tmp_path,
        """\
        ```console
        $ python -c "print('a  '); print('b'); print('c'); print()"
        a
        ...
        $ python -c "import sys; print('bye'); sys.exit(3)"
        bye
        [exit 3]
        $ minibroker --version
        minibroker 0.1.0
        ```
        """,
    )
    (block,) = blocks(passing)
    run_block(block, tmp_path)
    for body, message in [
        ("$ python -c \"print('a')\"\nb\n", r"(?s)doc.md:2: .*stdout differs from the document\n.*-b\n\+a"),
        ("$ python -c 'import sys; sys.exit(2)'\n", "doc.md:2: .* exited 2, the document says 0"),
        ("$ true\n$ python -c 'pass'\n[exit 1]\n", "doc.md:3: .* exited 0, the document says 1"),
        ("$ no-such-program-here\n", "doc.md:2: no program 'no-such-program-here'"),
    ]:
        (block,) = blocks(_document(tmp_path, f"```console\n{body}```\n"))
        with pytest.raises(ExampleError, match=message):
            run_block(block, tmp_path)


def test_the_console_environment_is_fixed(tmp_path, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    (block,) = blocks(
        _document(
            tmp_path,
            """\
            ```console
            $ python -c "import os, sys; print(os.environ['CI'], os.environ['COLUMNS'], sys.stdin.read())"
            true 120
            $ python -c "import minibroker, os; print(os.path.dirname(os.path.dirname(minibroker.__file__)))"
            ROOT
            $ MB_X=1 CI=false python -c "import os; print(os.environ['MB_X'], os.environ['CI'])"
            1 false
            $ python -c "import os; print(os.getcwd(), 'FORCE_COLOR' in os.environ)"
            ROOT False
            ```
            """,
        )
    )
    block.text = block.text.replace("ROOT", str(ROOT))
    run_block(block, tmp_path)


def test_python_blocks_run_in_a_temporary_directory_and_compare_their_output(tmp_path):
    path = _document(
        tmp_path,
        """\
        ```python
        import os
        print(os.listdir("."))
        print("x  ")
        ```

        ```output
        ['example.py']
        x
        ```

        ```python
        raise SystemExit("no")
        ```

        ```python
        print("y")
        ```
        ```output
        z
        ```
        """,
    )
    good, _, failing, different, _ = blocks(path)
    work = tmp_path / "work"
    work.mkdir()
    run_block(good, work)
    for block, message in [(failing, "exited 1, the document says 0"), (different, r"-z\n\+y")]:
        (tmp_path / block.id.replace(":", "-")).mkdir()
        with pytest.raises(ExampleError, match=message):
            run_block(block, tmp_path / block.id.replace(":", "-"))


def test_a_python_block_with_tests_runs_under_pytest(tmp_path):
    path = _document(
        tmp_path,
        """\
        ```python
        def test_passes():
            assert 1 + 1 == 2
        ```

        ```python
        def test_fails():
            assert 1 + 1 == 3
        ```
        """,
    )
    passing, failing = blocks(path)
    run_block(passing, tmp_path)
    with pytest.raises(ExampleError, match=r"exited 1, the document says 0(.|\n)*1 failed"):
        run_block(failing, tmp_path)
