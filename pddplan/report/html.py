"""A report ``Page`` (``report.page``) as one self-contained HTML file: the CSS inline, every
image a base64 PNG in a ``data:`` URL, no script, no font or anything else fetched. A
Content-Security-Policy meta tag says so to the browser (``CSP``): it may load images from
``data:`` URLs and the inline style, nothing else.

Readable from a phone to a desktop without horizontal scrolling: the page is at most
``MAX_WIDTH`` wide; below ``NARROW_PX`` each table row becomes a block of "head: value"
lines (each cell carries its column's head), and each figure switches to the copy drawn
for a narrow screen (``<picture>``). Long words (paths, fleet texts) wrap anywhere.
"""

from __future__ import annotations

import base64
from html import escape

from pddplan.report.page import Figure, Image, Page, Para, Section, Table

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""What the page may load: its own inline style and ``data:`` images, nothing from a
network or a file."""
NARROW_PX = 720
"""Below this width (CSS pixels) tables stack and figures use their narrow copy."""
MAX_WIDTH = "72rem"
STACK_ABOVE = 3
"""A table of more columns than this stacks its rows on a narrow screen; one of this many
or fewer (a figure and its value) fits as it is."""

STYLE = f"""
*,*::before,*::after{{box-sizing:border-box}}
html{{-webkit-text-size-adjust:100%;text-size-adjust:100%}}
body{{margin:0;background:#fff;color:#1f2328;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}}
header,main,footer{{max-width:{MAX_WIDTH};margin:0 auto;padding:0 1rem}}
header{{padding-top:1rem;border-bottom:2px solid #d0d7de}}
h1{{font-size:1.6rem;margin:.4rem 0}}
h2{{font-size:1.25rem;margin:2rem 0 .6rem;padding-bottom:.2rem;border-bottom:1px solid #d0d7de}}
h3{{font-size:1rem;margin:1.2rem 0 .4rem}}
p{{margin:.5rem 0;overflow-wrap:anywhere}}
.subtitle{{color:#59636e;margin-top:0}}
nav ul{{list-style:none;padding:0;margin:.5rem 0 1rem;display:flex;flex-wrap:wrap;gap:.3rem 1rem}}
nav a{{color:#0b57d0}}
.lead{{font-size:1.1rem;font-weight:600}}
.warn{{background:#fff8c5;border-left:4px solid #d4a72c;padding:.3rem .6rem}}
.note{{color:#59636e}}
table{{border-collapse:collapse;width:100%;margin:.4rem 0 1rem;font-variant-numeric:tabular-nums}}
caption{{caption-side:bottom;text-align:left;color:#59636e;font-size:.9rem;padding-top:.3rem}}
th,td{{padding:.3rem .5rem;border-bottom:1px solid #d8dee4;text-align:left;vertical-align:top;overflow-wrap:break-word}}
td.long{{overflow-wrap:anywhere}}
th{{background:#f6f8fa;font-weight:600}}
td.n,th.n{{text-align:right}}
td.n{{white-space:nowrap}}
figure{{margin:1rem 0 1.5rem}}
figure img{{display:block;max-width:100%;height:auto;border:1px solid #d8dee4}}
figcaption{{color:#59636e;font-size:.9rem;margin-top:.3rem}}
footer{{color:#59636e;font-size:.85rem;margin:2rem auto 1rem}}
@media (max-width:{NARROW_PX - 1}px){{
 body{{font-size:15px}}
 table.stack thead{{display:none}}
 table.stack{{display:flex;flex-direction:column}}
 table.stack caption{{order:2}}
 table.stack tbody,table.stack tr,table.stack td{{display:block;width:100%}}
 table.stack tr{{border-bottom:2px solid #d0d7de;padding:.3rem 0}}
 table.stack td{{border:0;padding:.1rem .2rem;text-align:left;white-space:normal;display:grid;grid-template-columns:minmax(6rem,42%) 1fr;gap:.5rem}}
 table.stack td::before{{content:attr(data-head);font-weight:600;color:#59636e}}
}}
@media print{{nav{{display:none}}}}
"""


NUM = ' class="n"'
"""A numbers column's cells: right-aligned on a wide screen."""


def _data_url(image: Image) -> str:
    return "data:image/png;base64," + base64.b64encode(image.png).decode("ascii")


def _para(p: Para) -> str:
    cls = f' class="{p.kind}"' if p.kind else ""
    return f"<p{cls}>{escape(p.text)}</p>"


LONG_WORD = 18
"""A cell with a word longer than this (a path, a fingerprint) may break it anywhere; the
others break between words only, so that a narrow column is never narrower than its
longest word."""


def _cell_class(text: str, numeric: bool) -> str:
    if numeric:
        return NUM
    if any(len(w) > LONG_WORD for w in text.split()):
        return ' class="long"'
    return ""


def _table(t: Table) -> str:
    out = []
    if t.title:
        out.append(f"<h3>{escape(t.title)}</h3>")
    out.append('<table class="stack">' if len(t.heads) > STACK_ABOVE else "<table>")
    if t.caption:
        out.append(f"<caption>{escape(t.caption)}</caption>")
    heads = "".join(
        f'<th scope="col"{NUM if n else ""}>{escape(h)}</th>'
        for h, n in zip(t.heads, t.numeric, strict=True)
    )
    out.append(f"<thead><tr>{heads}</tr></thead><tbody>")
    for row in t.rows:
        cells = "".join(
            f'<td data-head="{escape(h)}"{_cell_class(c, n)}>{escape(c)}</td>'
            for h, c, n in zip(t.heads, row, t.numeric, strict=True)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _figure(f: Figure, number: int) -> str:
    w, h = f.wide.size
    img = f'<img src="{_data_url(f.wide)}" width="{w}" height="{h}" alt="{escape(f.alt)}">'
    if f.narrow is not None:
        nw, nh = f.narrow.size
        source = (
            f'<source media="(max-width: {NARROW_PX - 1}px)" srcset="{_data_url(f.narrow)}" '
            f'width="{nw}" height="{nh}">'
        )
        img = f"<picture>{source}{img}</picture>"
    return (
        f'<figure id="figure-{escape(f.name)}">{img}'
        f"<figcaption>Figure {number}. {escape(f.caption)}</figcaption></figure>"
    )


def _section(s: Section, numbers: dict[int, int]) -> str:
    body = [f'<section id="{escape(s.id)}">', f"<h2>{escape(s.title)}</h2>"]
    for part in s.parts:
        if isinstance(part, Para):
            body.append(_para(part))
        elif isinstance(part, Table):
            body.append(_table(part))
        else:
            body.append(_figure(part, numbers[id(part)]))
    body.append("</section>")
    return "\n".join(body)


def page_html(page: Page) -> str:
    """``page`` as one HTML5 document that needs nothing but itself."""
    numbers = {id(f): i for i, f in enumerate(page.figures, 1)}
    nav = "".join(
        f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>' for s in page.sections
    )
    sections = "\n".join(_section(s, numbers) for s in page.sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="pddplan">
<title>{escape(page.title)}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{escape(page.title)}</h1>
<p class="subtitle">{escape(page.subtitle)}</p>
<nav aria-label="sections"><ul>{nav}</ul></nav>
</header>
<main>
{sections}
</main>
<footer><p>Written by pddplan from the files named under "Where this comes from"; every
figure is computed by its analytic model, not measured.</p></footer>
</body>
</html>
"""
