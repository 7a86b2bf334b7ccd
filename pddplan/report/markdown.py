"""A report ``Page`` (``report.page``) as Markdown with its figures as PNG files beside it:
``report.md`` and ``report-figures/NAME.png``, linked by relative paths, so the folder can be
moved, committed or attached as a whole. The same sections, tables, captions and figures as
the HTML report (``report.html``); a figure's text alternative is its alt text."""

from __future__ import annotations

from pddplan.report.page import Figure, Page, Para, Section, Table


def _cell(text: str) -> str:
    """A table cell's text: a pipe escaped, a line break a space."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _inline(text: str) -> str:
    """Paragraph text that Markdown shows as written: its emphasis and link marks escaped."""
    for ch in ("\\", "*", "_", "`", "[", "]", "<", ">"):
        text = text.replace(ch, "\\" + ch)
    return text


def _para(p: Para) -> str:
    if p.kind == "lead":
        return f"**{_inline(p.text)}**"
    if p.kind == "warn":
        return f"> {_inline(p.text)}"
    return _inline(p.text)


def _table(t: Table) -> str:
    out = []
    if t.title:
        out.append(f"**{_inline(t.title)}**\n")
    out.append("| " + " | ".join(_cell(h) for h in t.heads) + " |")
    out.append("| " + " | ".join("---:" if n else "---" for n in t.numeric) + " |")
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        out.append(f"\n{_inline(t.caption)}")
    return "\n".join(out)


def _figure(f: Figure, number: int, folder: str) -> str:
    alt = f.alt.replace("[", "(").replace("]", ")").replace("\n", " ")
    return f"![{alt}]({folder}/{f.name}.png)\n\n*Figure {number}. {_inline(f.caption)}*"


def _section(s: Section, numbers: dict[int, int], folder: str) -> str:
    parts = [f'<a id="{s.id}"></a>\n\n## {s.title}']
    for part in s.parts:
        if isinstance(part, Para):
            parts.append(_para(part))
        elif isinstance(part, Table):
            parts.append(_table(part))
        else:
            parts.append(_figure(part, numbers[id(part)], folder))
    return "\n\n".join(parts)


def page_markdown(page: Page, folder: str) -> tuple[str, dict[str, bytes]]:
    """``page`` as Markdown whose images are ``FOLDER/NAME.png`` (``folder``: relative to
    the Markdown file), and those images: file name -> PNG bytes."""
    numbers = {id(f): i for i, f in enumerate(page.figures, 1)}
    toc = "\n".join(f"- [{s.title}](#{s.id})" for s in page.sections)
    body = "\n\n".join(_section(s, numbers, folder) for s in page.sections)
    text = f"# {page.title}\n\n{_inline(page.subtitle)}\n\n{toc}\n\n{body}\n"
    return text, {f"{f.name}.png": f.wide.png for f in page.figures}
