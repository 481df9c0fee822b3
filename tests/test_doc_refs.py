"""Cross-references to a docs section by name (``docs/weights.md, "What they reach"``) resolve.

Code, configs and docs point into docs/*.md by section name rather than by line or anchor; a section that is
renamed or moved to another file must take its references along. A name resolves when a heading or a bold lead
(``**Name** ...``) of the named file starts with it (case and backticks ignored, as readers search for it).
"""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# docs/NAME.md, then an optional comma or opening bracket, then the quoted section name; a reference may run over
# a line break, inside a comment or docstring.
REF = re.compile(r'(docs/[A-Za-z0-9_]+\.md)[,:]?\s*\(?\s*"([^"\n]{3,160})"')


def _norm(text):
    return re.sub(r"\s+", " ", text.replace("`", "")).strip().rstrip(".").lower()


def section_names(text):
    """Headings and bold leads of a markdown text, normalised."""
    names = re.findall(r"(?m)^#+\s+(.*)$", text) + re.findall(r"\*\*(.+?)\*\*", text, flags=re.S)
    return [_norm(n) for n in names]


def references(text):
    """``[(doc path, section name)]`` named in ``text`` (line breaks and comment markers between them joined)."""
    flat = re.sub(r"\n\s*(?:#\s*)?", " ", text)
    return [(m.group(1), m.group(2)) for m in REF.finditer(flat)]


def test_references_parse_across_lines_and_comments():
    text = '# see docs/weights.md, "What they\n# reach" and docs/a.md ("B c") or docs/c.md "D e"'
    assert references(text) == [("docs/weights.md", "What they reach"), ("docs/a.md", "B c"), ("docs/c.md", "D e")]
    names = section_names("## What they reach, against the floors\n\n**Six times the `schedule`.** text")
    assert "what they reach, against the floors" in names and "six times the schedule" in names


def _tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        pytest.skip("not a git checkout")
    this = os.path.relpath(os.path.abspath(__file__), ROOT)  # its own examples name sections that do not exist
    return [f for f in out.stdout.split()
            if f.endswith((".md", ".py")) and not f.startswith("results/") and f != this]


def test_every_named_section_exists():
    names, missing, seen = {}, [], 0
    for path in _tracked():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        for doc, name in references(text):
            target = os.path.join(ROOT, doc)
            if not os.path.exists(target):
                missing.append(f"{path}: {doc} does not exist")
                continue
            if doc not in names:
                with open(target, encoding="utf-8") as f:
                    names[doc] = section_names(f.read())
            seen += 1
            if not any(n.startswith(_norm(name)) for n in names[doc]):
                missing.append(f'{path}: {doc} has no section "{name}"')
    assert seen >= 40, f"only {seen} references found: is the pattern still right?"
    assert not missing, "\n".join(missing)
