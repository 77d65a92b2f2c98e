"""A study's Markdown (``[[section]]`` files) as HTML for the report.

CommonMark through markdown-it-py, with raw HTML disabled: a study's prose may not bring
``<script>``, event-handler attributes or any other tag into the report (they are shown as
text), and links with ``javascript:``, ``vbscript:``, ``file:`` or ``data:`` targets are not
made links (markdown-it's link validation). The output depends on the text alone (no
timestamps, no ids drawn at random), so reruns are byte-identical.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


@functools.cache
def _parser() -> MarkdownIt:
    """One parser for every section: CommonMark, raw HTML off, typographic replacements off
    (the study's characters are shown as written). Built on first use: ``diff`` and ``verify``
    import the kinds that render reports but never render one (issue 48 item 4)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "typographer": False})


def markdown_html(text: str) -> str:
    """Markdown -> HTML fragment, raw HTML shown as text.

    >>> markdown_html("## Notes\\n\\n*held-out* <script>x()</script>")
    '<h2>Notes</h2>\\n<p><em>held-out</em> &lt;script&gt;x()&lt;/script&gt;</p>\\n'
    >>> markdown_html("[a](javascript:alert(1))")
    '<p>[a](javascript:alert(1))</p>\\n'
    """
    return str(_parser().render(text))
