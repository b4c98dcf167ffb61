"""Every link of README.md and docs/*.md leads somewhere inside the repository or to a public URL.

A relative link names an existing file or directory (relative to the document); a ``#fragment`` on a
markdown target (or alone, for the document itself) names one of its headings by GitHub's anchor rule;
no link names an absolute local path. Links inside code (fenced blocks, inline code spans) are text.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docblocks import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^ *(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")
# [text](target "title") and ![alt](target); the text may hold one level of brackets (an image in a link)
_INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.MULTILINE)
_HTML = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ANCHOR = re.compile(r"""<a\b[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose(text: str, spans: bool = False) -> str:
    """The document without its fenced blocks and (unless ``spans``) its code spans, each replaced by blank
    text, lines kept. Headings keep their code spans: GitHub's anchors include their text."""
    kept, fence = [], None
    for line in text.splitlines():
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening[1]
            kept.append("")
        elif fence is not None:
            if opening and opening[1][0] == fence[0] and len(opening[1]) >= len(fence):
                fence = None
            kept.append("")
        else:
            kept.append(line)
    text = "\n".join(kept)
    return text if spans else _CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span[0]), text)


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link and image of a markdown file, outside code."""
    text = prose(path.read_text(encoding="utf-8"))
    found = sorted(
        (match.start(), match[1].strip("<>"))
        for pattern in (_INLINE, _REFERENCE, _HTML)
        for match in pattern.finditer(text)
    )
    return [(text.count("\n", 0, start) + 1, target) for start, target in found]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*|(?<!\w)_|_(?!\w))", "", text)  # emphasis, not snake_case
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file: its headings' slugs (repeats numbered -1, -2...) and named anchors."""
    text = prose(path.read_text(encoding="utf-8"), spans=True)
    found: set[str] = set(_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading[2])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def problems(path: Path) -> list[str]:
    """What is wrong with the links of one document, one line each, naming its line."""
    found = []
    for line, target in links(path):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}"
        if target.startswith("file:") or target.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", target):
            found.append(f"{where}: {target} is an absolute local path; link relative to the document")
            continue
        if _SCHEME.match(target):
            continue  # a URL (https, mailto...)
        name, _, fragment = target.partition("#")
        file = (path.parent / unquote(name)).resolve() if name else path
        if not file.exists():
            found.append(f"{where}: {target}: no such file")
        elif fragment and file.suffix == ".md" and unquote(fragment).lower() not in anchors(file):
            found.append(f"{where}: {target}: no heading #{fragment} in {file.name}")
        elif name and not file.is_relative_to(ROOT):
            found.append(f"{where}: {target} leads out of the repository")
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.relative_to(ROOT).as_posix() for p in DOCUMENTS])
def test_every_link_resolves(path):
    assert problems(path) == []


# --- the checker itself --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Analysing traces on Spark", "analysing-traces-on-spark"),
        ("`minibroker run` and its report", "minibroker-run-and-its-report"),
        ("What's here: 1.0 — the API", "whats-here-10--the-api"),
        ("retry_poison_dlt (**bold**)", "retry_poison_dlt-bold"),
        ("[Links](https://example.org) too", "links-too"),
        ("Kafka × RocketMQ", "kafka--rocketmq"),
    ],
)
def test_slugs_follow_github(heading, anchor):
    assert slug(heading) == anchor


def test_links_are_checked_and_code_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.test_doc_links.ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Setup\n\n## Setup\n", encoding="utf-8")
    (tmp_path / "pic.png").write_bytes(b"")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Top\n"
        "[ok](docs/other.md) [ok](docs/other.md#setup) [ok](docs/other.md#setup-1) ![ok](pic.png)\n"
        "[ok](#top) [ok](https://kafka.apache.org/documentation/) [ok](docs/other.md 'title')\n"
        "[missing](docs/nope.md) [no heading](docs/other.md#install) [here](#nowhere)\n"
        "[absolute](/home/user/README.md) [file](file:///tmp/x.md) [out](../elsewhere.md)\n"
        "`[code](not/checked.md)`\n"
        "```\n[fenced](not/checked.md)\n```\n"
        "[ref]: docs/missing.md\n",
        encoding="utf-8",
    )
    (tmp_path.parent / "elsewhere.md").write_text("", encoding="utf-8")
    assert problems(readme) == [
        "README.md:4: docs/nope.md: no such file",
        "README.md:4: docs/other.md#install: no heading #install in other.md",
        "README.md:4: #nowhere: no heading #nowhere in README.md",
        "README.md:5: /home/user/README.md is an absolute local path; link relative to the document",
        "README.md:5: file:///tmp/x.md is an absolute local path; link relative to the document",
        "README.md:5: ../elsewhere.md leads out of the repository",
        "README.md:10: docs/missing.md: no such file",
    ]
