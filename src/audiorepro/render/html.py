"""``report.html``: one self-contained page per study run (no network, no CDN).

Order of the retrieval report, what a reader came for first: the study's title and a
plain-language verdict (what was checked, what passed, what failed; a failing study says so in
its first lines), a short index of the output folder, then **published against reproduced**;
the results per dataset: the canonical tables (click a header to sort), every requested
profile beside canonical, and the plots of all the dataset's models together (r@k curves per
direction, distributions of first-relevant ranks, as inline SVG from :mod:`.plots`, with axis
titles and legends); paired comparisons, metric parity, checkpoint identity (per-clip cosines
charted with their clip names), one collapsed panel of details per cell (intervals, ties,
weights, dataset coverage), each metric definition once with its tie policy (docstring
markup rendered, never leaked), provenance and package versions. Missing values read "Not
recorded / undefined", never 0. The page is a function of the run's numbers: no time, host or
path, ids from table and dataset names, fixed float formatting, so a rerun is byte-identical.
"""

from __future__ import annotations

import html
import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any

from audiorepro.metrics import (
    classification,
    events,
    probe,
    probe_human,
    regression,
    vectors,
)
from audiorepro.metrics.retrieval import DIRECTIONS, metric_by_name, metric_names
from audiorepro.render.plots import Series, bar_chart, line_chart
from audiorepro.render.probe_plots import summary_charts
from audiorepro.render.tables import (
    MISSING_TEXT,
    NOT_APPLICABLE_TEXT,
    NotApplicable,
    Table,
    number,
    slug,
)

_CSS = """
body{font-family:system-ui,sans-serif;max-width:80rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #ddd}
.fail{background:#fde8e8;border-left:6px solid #c0392b;padding:.6rem 1rem}
.pass{background:#e8f6ec;border-left:6px solid #27ae60;padding:.6rem 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{padding:.25rem .6rem;border-bottom:1px solid #eee}
th{cursor:pointer;background:#f6f6f6;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{font-weight:bold}td.na{color:#888;text-align:center}td.missing{color:#888;font-style:italic;font-size:.85em}small.ci{color:#666;font-weight:normal}
details{margin:.4rem 0;border:1px solid #ddd;border-radius:4px;padding:.3rem .8rem}
summary{cursor:pointer;font-weight:600}code{background:#f3f3f3;padding:0 .2rem}
svg text{font-size:10px;font-family:sans-serif}
svg.chart{max-width:100%;height:auto;background:#fff}svg.chart text{font-size:12px;fill:#222}
svg.chart text.ttl{font-size:14px;font-weight:600}svg.chart text.axis-title{font-size:12px;font-style:italic}
.plots{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:0;border:1px solid #eee;padding:.3rem}
.scroll{overflow-x:auto;max-width:100%}p.sub{color:#555;margin-top:-.6rem}
nav.toc{margin:1rem 0;line-height:1.8}h3{margin-top:1.6rem}h4{margin:1rem 0 .3rem}
"""

_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,col){
    th.addEventListener('click',function(){
      var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows);
      var asc=th.getAttribute('data-order')!=='asc';
      t.querySelectorAll('th').forEach(function(h){h.removeAttribute('data-order');});
      th.setAttribute('data-order',asc?'asc':'desc');
      rows.sort(function(a,b){
        var x=a.cells[col].getAttribute('data-value'), y=b.cells[col].getAttribute('data-value');
        var nx=parseFloat(x), ny=parseFloat(y), r;
        if(x===''&&y===''){r=0;}else if(x===''){return 1;}else if(y===''){return -1;}
        else if(!isNaN(nx)&&!isNaN(ny)){r=nx-ny;}else{r=x<y?-1:(x>y?1:0);}
        return asc?r:-r;
      });
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return MISSING_TEXT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number(value, digits)  # 1e-9 never reads as 0.0000
    return str(value)


def kind_report(
    title: str,
    failures: Sequence[str],
    tables: Mapping[str, Table],
    *,
    preamble: str = "",
    paragraphs: Sequence[str] = (),
) -> str:
    """The one-page report of a kind without a report of its own (zero-shot, linear probe,
    speaker verification): the title, ``preamble`` (HTML: a partial run's selection), the
    verdict, the failures, ``paragraphs`` (HTML), then every table."""
    status = "PASSED" if not failures else f"FAILED ({len(failures)} problem(s))"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title></head><body>",
        f"<h1>{_e(title)}</h1>",
        *([preamble] if preamble else []),
        f"<p><strong>{_e(status)}</strong></p>",
    ]
    if failures:
        parts.append("<ul>" + "".join(f"<li>{_e(f)}</li>" for f in failures) + "</ul>")
    parts += paragraphs
    for i, (name, table) in enumerate(tables.items()):
        parts.append(table_html(table, f"t{i}-{slug(name)}"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def table_html(
    table: Table, table_id: str, links: Mapping[tuple[int, int], tuple[str, str]] | None = None
) -> str:
    """A sortable HTML table; best values bold, missing values spelled out; ``links`` maps
    (row, column) to the ``(href, title)`` its value links to (a leaderboard's number to the
    run that made it)."""
    best = table.best()
    arrows = {True: " ↑", False: " ↓", None: ""}
    head = "".join(
        f"<th>{_e(c)}</th>"
        for c in [table.row_header, *(c.name + arrows[c.higher_is_better] for c in table.columns)]
    )
    rows = []
    for i, (label, values) in enumerate(table.rows):
        cells = [f'<td data-value="{_e(label)}">{_e(label)}</td>']
        for j, v in enumerate(values):
            if v is None:
                cells.append(f'<td class="missing" data-value="">{MISSING_TEXT}</td>')
                continue
            if isinstance(v, NotApplicable):
                cells.append(f'<td class="na" data-value="">{NOT_APPLICABLE_TEXT}</td>')
                continue
            data = repr(v) if isinstance(v, float) else str(v)
            cls = "num" + (" best" if i in best[j] else "") if not isinstance(v, str) else ""
            ci = table.intervals[i][j] if table.intervals else None
            extra = (
                ""
                if ci is None
                else f'<br><small class="ci">[{ci[0]:.{table.digits}f}, {ci[1]:.{table.digits}f}]</small>'
            )
            text = _e(_fmt(v, table.digits))
            link = (links or {}).get((i, j))
            if link is not None:
                text = f'<a href="{_e(link[0])}" title="{_e(link[1])}">{text}</a>'
            cells.append(f'<td class="{cls}" data-value="{_e(data)}">{text}{extra}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    notes = "".join(f"<p><em>{_e(n)}</em></p>" for n in table.notes)
    return (
        f'<table class="sortable" id="{_e(table_id)}"><caption>{_e(table.title)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{notes}"
    )


def _summary(bundle: Mapping[str, Any]) -> str:
    v = bundle["verification"]
    counts = v["golden"]["counts"]
    cells = bundle["cells"]
    checked = (
        f"{len(cells)} cell(s): metrics under definitions v{bundle['definitions_version']} "
        f"({bundle['study']['tie_policy']} ties), harness against the independent reference, "
        f"{len(v['checkpoint_identities'])} checkpoint-identity check(s), "
        f"{sum(counts.values())} published value(s)."
    )
    if v["failures"]:
        items = "".join(f"<li>{_e(f)}</li>" for f in v["failures"])
        return (
            f'<div class="fail" id="summary"><strong>FAILED: {len(v["failures"])} problem(s).</strong>'
            f"<ul>{items}</ul><p>Checked: {_e(checked)}</p></div>"
        )
    return (
        f'<div class="pass" id="summary"><strong>PASSED: every check holds.</strong> '
        f"<p>Checked: {_e(checked)} Published values: {counts.get('PASS', 0)} passed.</p></div>"
    )


def _cell_panel(cell: dict[str, Any]) -> str:
    """A cell's details, collapsed: headline numbers with intervals, ties, identity of inputs
    (its plots are drawn beside the other models' in the Results section)."""
    title = f"{cell['id']} — {cell['model']} on {cell['dataset']}"
    if cell.get("error"):
        return f"<details><summary>{_e(title)} (not computed)</summary><p>{_e(cell['error'])}</p></details>"
    rows = []
    for d in DIRECTIONS:
        for m in ("r@1", "r@5", "r@10", "map"):
            value = cell["metrics"][d].get(m)
            lo, hi = cell["intervals"][d].get(m, [None, None])
            ci = MISSING_TEXT if lo is None else f"[{lo:.4f}, {hi:.4f}]"
            rows.append(
                f"<tr><td>{d}</td><td>{_e(m)}</td><td class='num'>{_e(_fmt(value))}</td><td>{ci}</td></tr>"
            )
    ties = "".join(
        f"<li>{d}: {t['queries_affected']} queries affected by ties</li>"
        for d, t in cell["ties"].items()
    )
    meta = cell.get("model_meta", {})
    return (
        f"<details class='cell'><summary>{_e(title)}</summary>"
        f"<p>{cell['n_clips']} clips, {cell['n_captions']} captions; dump sha256 <code>{_e(cell['dump_sha256'])}</code></p>"
        f"<table><thead><tr><th>direction</th><th>metric</th><th>value</th><th>95% bootstrap interval</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table><ul>{ties}</ul>"
        f"<p>Model: {_e(meta.get('model', MISSING_TEXT))}; revision {_e(meta.get('revision') or MISSING_TEXT)}; "
        f"weights: {_weights(meta)}</p>{_coverage(meta)}</details>"
    )


def _coverage(meta: dict[str, Any]) -> str:
    """Which clips of the published set the dump has (a dataset prepared by fetch)."""
    ds = meta.get("inputs", {}).get("dataset")
    if not ds:
        return ""
    selection = ds.get("caption_selection")
    chosen = ""
    if isinstance(selection, dict):
        chosen = (
            f"; caption selection {_e(selection.get('rule'))} ({selection.get('captions')} "
            f"captions, caption-id list sha256 <code>{_e(selection.get('caption_ids_sha256'))}"
            "</code>)"
        )
    return (
        f"<p>Dataset {_e(ds.get('name'))}: {ds.get('clips_present')} of "
        f"{ds.get('clips_expected')} clips present ({ds.get('clips_missing')} missing); "
        f"present-clip list sha256 <code>{_e(ds.get('present_sha256'))}</code>{chosen}</p>"
    )


def _weights(meta: dict[str, Any]) -> str:
    weights = meta.get("weights_sha256")
    if not weights:
        return MISSING_TEXT
    return ", ".join(
        f"{_e(name)} sha256 <code>{_e(digest)}</code>" for name, digest in sorted(weights.items())
    )


_ROLE = re.compile(r":[a-z]+:`([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`")
_LEADING_NAME = re.compile(r"^``[^`]+``:\s*")


def doc_html(text: str) -> str:
    """A docstring's prose as HTML: reST literals and roles become ``<code>``, Python's
    ``None`` (a value the reader never sees) reads "undefined".

    >>> doc_html("``r@k``: the top ``k``; :func:`mean` of x < y; None without pairs.")
    '<code>r@k</code>: the top <code>k</code>; <code>mean</code> of x &lt; y; undefined without pairs.'
    """
    text = re.sub(r"\bNone\b", "undefined", text)
    text = _ROLE.sub(r"``\1``", text)
    out, last = [], 0
    for match in _LITERAL.finditer(text):
        out.append(_e(text[last : match.start()]))
        out.append(f"<code>{_e(match.group(1) or match.group(2))}</code>")
        last = match.end()
    out.append(_e(text[last:]))
    return "".join(out)


def _paragraphs(func: Any) -> tuple[str, str]:
    """(first paragraph, the paragraph starting "Formula") of a function's docstring, each
    on one line."""
    doc = inspect.getdoc(func) or ""
    paragraphs = [p.replace("\n", " ") for p in doc.split("\n\n")]
    formula = next((p for p in paragraphs if p.startswith("Formula")), "")
    return paragraphs[0], formula


def _definitions(cutoffs: Sequence[int] | None = None) -> str:
    """Each canonical definition once: metrics sharing one function (r@1, r@5, r@10) are one
    entry naming all of them (with a study's ``k``: definitions 1.1's at those cutoffs)."""
    groups: dict[Any, list[str]] = {}
    for name in metric_names(cutoffs):
        groups.setdefault(metric_by_name(name).func, []).append(name)
    items = []
    for func, names in groups.items():
        first, formula = _paragraphs(func)
        first = _LEADING_NAME.sub("", first)
        direction = "higher" if metric_by_name(names[0]).higher_is_better else "lower"
        codes = ", ".join(f"<code>{_e(n)}</code>" for n in names)
        items.append(
            f"<li><strong>{codes}</strong> ({direction} is better): {doc_html(first)} "
            f"{doc_html(formula)}</li>"
        )
    return "<ul class='definitions'>" + "".join(items) + "</ul>"


def selection_html(bundle: Mapping[str, Any]) -> str:
    """What part of the study ran, and on which device, when ``--cells``/``--device`` said.

    >>> selection_html({"selection": {"cells": "a*", "device": None, "ran": ["a1"],
    ...                 "of": ["a1", "b1"], "partial": True}})
    "<p class='partial'><strong>A part of the study</strong>: 1 of its 2 cells (--cells a*): a1.</p>"
    """
    sel = bundle.get("selection")
    if not sel:
        return ""
    what = (
        f"<strong>A part of the study</strong>: {len(sel['ran'])} of its {len(sel['of'])} cells "
        f"(--cells {_e(sel['cells'])}): {_e(', '.join(sel['ran']))}."
        if sel["partial"]
        else f"Every cell of the study (--cells {_e(str(sel['cells']))})."
        if sel["cells"] is not None
        else ""
    )
    if sel["device"] is not None:
        what += f" Models ran on --device {_e(sel['device'])}."
    return f"<p class='partial'>{what.strip()}</p>"


def _datasets(bundle: Mapping[str, Any]) -> list[str]:
    return list(dict.fromkeys(c["dataset"] for c in bundle["cells"]))


def _series_name(cell: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> str:
    """A cell's legend entry: its model, or its id where two cells share the model."""
    same = sum(1 for c in cells if c["model"] == cell["model"])
    return str(cell["model"] if same == 1 else cell["id"])


def _dataset_plots(dataset: str, cells: Sequence[Mapping[str, Any]]) -> str:
    """r@k curves of every model of the dataset on one chart per direction, then the
    distributions of first-relevant ranks, likewise."""
    done = [c for c in cells if not c.get("error") and c.get("curves")]
    if not done:
        return f"<p>{MISSING_TEXT}: no cell of {_e(dataset)} was computed, so nothing to plot.</p>"
    words = {"t2a": "text to audio", "a2t": "audio to text"}
    charts = []
    for d in DIRECTIONS:
        charts.append(
            line_chart(
                [Series(_series_name(c, done), tuple(c["curves"][d])) for c in done],
                chart_id=f"plot-rk-{slug(dataset)}-{d}",
                title=f"{dataset}, {words[d]}: r@k",
                x_title="k (cut-off)",
                y_title="r@k (fraction of queries)",
                xlabels=[str(k) for k in range(1, len(done[0]["curves"][d]) + 1)],
            )
        )
    for d in DIRECTIONS:
        series = []
        for c in done:
            counts = c["rank_histogram"][d]["counts"]
            total = max(sum(counts), 1)
            series.append(Series(_series_name(c, done), tuple(n / total for n in counts)))
        charts.append(
            bar_chart(
                series,
                chart_id=f"plot-ranks-{slug(dataset)}-{d}",
                title=f"{dataset}, {words[d]}: first relevant rank",
                x_title="position of the first relevant item",
                y_title="fraction of queries",
                xlabels=done[0]["rank_histogram"][d]["bins"],
            )
        )
    return "<div class='plots'>" + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"


def _scroll(table: Table, table_id: str) -> str:
    return f"<div class='scroll'>{table_html(table, table_id)}</div>"


def _results(bundle: Mapping[str, Any], tables: dict[str, Table]) -> str:
    """Per dataset: the canonical tables, the requested profiles beside canonical, the plots;
    then any other result table."""
    parts, shown = [], {"parity", "identity", "published"}
    for dataset in _datasets(bundle):
        cells = [c for c in bundle["cells"] if c["dataset"] == dataset]
        names = [f"{slug(dataset)}_{d}" for d in DIRECTIONS]
        profiles = [f"{n}_profiles" for n in names]
        parts.append(f"<h3 id='dataset-{_e(slug(dataset))}'>{_e(dataset)}</h3>")
        parts += [_scroll(tables[n], f"table-{n}") for n in names if n in tables]
        if any(n in tables for n in profiles):
            parts.append("<h4>Requested profiles beside canonical</h4>")
            parts += [_scroll(tables[n], f"table-{n}") for n in profiles if n in tables]
        parts.append(f"<h4>Plots</h4>{_dataset_plots(dataset, cells)}")
        shown |= {*names, *profiles}
    parts += [_scroll(t, f"table-{n}") for n, t in tables.items() if n not in shown]
    return "".join(parts)


def _paired_html(bundle: Mapping[str, Any]) -> str:
    paired = bundle["paired_bootstrap"]
    if not paired:
        return f"<p>{MISSING_TEXT}: no two models share a dataset's queries.</p>"
    rows = "".join(
        f"<tr><td>{_e(p['dataset'])}</td><td>{_e(p['a'])} − {_e(p['b'])}</td><td>{p['direction']}</td>"
        f"<td>{_e(p['metric'])}</td><td class='num'>{p['difference']:.4f}</td>"
        f"<td>[{p['low']:.4f}, {p['high']:.4f}]</td></tr>"
        for p in paired
    )
    return (
        "<div class='scroll'><table class='sortable' id='table-paired'><thead><tr><th>dataset</th>"
        "<th>difference</th><th>direction</th><th>metric</th><th>value</th>"
        f"<th>95% paired interval</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _identity_plots(blocks: Sequence[Mapping[str, Any]]) -> str:
    """Per identity check: the audio embedding cosine of every fixture clip (named), and the
    text embedding cosine of every fixture caption (numbered: the fixture has several
    captions per clip)."""
    if not blocks:
        return "<p>The study declares no checkpoint-identity check.</p>"
    charts = []
    for i, b in enumerate(blocks):
        audio, text = b["audio_embedding_cosine_per_clip"], b["text_embedding_cosine_per_clip"]
        clips = list(b["clip_ids"])
        if len(clips) != len(audio):
            clips = [str(j + 1) for j in range(len(audio))]
        pair = f"{b['hf_checkpoint']} vs {b['control']}"
        for kind, values, labels, axis in (
            ("audio", audio, clips, "fixture clip"),
            ("text", text, [str(j + 1) for j in range(len(text))], "fixture caption"),
        ):
            charts.append(
                bar_chart(
                    [Series(f"{kind} embedding cosine", tuple(values))],
                    chart_id=f"plot-identity-{i + 1}-{kind}",
                    title=f"{pair}: {kind} embedding cosine per {axis.split()[1]}",
                    x_title=axis,
                    y_title="cosine similarity",
                    xlabels=labels,
                    lo=-1.0,
                    hi=1.0,
                )
            )
    return "<div class='plots'>" + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"


def _environment(bundle: Mapping[str, Any]) -> str:
    versions = next(
        (
            c["model_meta"].get("versions")
            for c in bundle["cells"]
            if c.get("model_meta", {}).get("versions")
        ),
        None,
    )
    if not versions:
        return "<p>Package versions of the run: see manifest.json (this report holds no host or time).</p>"
    return (
        "<ul>" + "".join(f"<li>{_e(k)} {_e(v)}</li>" for k, v in sorted(versions.items())) + "</ul>"
    )


def page(title: str, body: str) -> str:
    """A whole page in the reports' style (sortable tables), ``body`` its HTML."""
    return _page(title, body)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>{body}"
        f"<script>{_JS}</script></body></html>\n"
    )


def render_report(study: Any, bundle: Mapping[str, Any], tables: dict[str, Table]) -> str:
    """The retrieval study's report: verdict, published against reproduced, results per
    dataset (canonical, the requested profiles, plots), then the checks and the details."""
    v, meta = bundle["verification"], bundle["study"]
    sections = [
        (
            "published",
            "Published against reproduced",
            _scroll(tables["published"], "table-published"),
        ),
        ("results", "Results", _results(bundle, tables)),
        ("paired", "Paired comparisons", _paired_html(bundle)),
        ("parity", "Metric parity", _scroll(tables["parity"], "table-parity")),
        (
            "identity",
            "Checkpoint identity",
            _scroll(tables["identity"], "table-identity")
            + _identity_plots(v["checkpoint_identities"]),
        ),
        ("cells", "Cells", "".join(_cell_panel(c) for c in bundle["cells"])),
        (
            "definitions",
            f"Metric definitions (v{bundle['definitions_version']}"
            + (f".{bundle['definitions_minor']}" if "definitions_minor" in bundle else "")
            + f", {meta['tie_policy']} ties)",
            _definitions(meta.get("k")),
        ),
        (
            "provenance",
            "Provenance",
            f"<p>Study {_e(meta['name'])}, sha256 <code>{_e(meta['sha256'])}</code>.</p>",
        ),
        ("environment", "Environment", _environment(bundle)),
    ]
    toc = " · ".join(f"<a href='#{sid}'>{_e(head)}</a>" for sid, head, _ in sections)
    body = (
        f"<h1>{_e(study.title)}</h1><p class='sub'>audiorepro report of study "
        f"<code>{_e(meta['name'])}</code></p>{selection_html(bundle)}{_summary(bundle)}"
        f"{_folder_index(tables)}"
        f"<nav class='toc'>{toc}</nav>"
        + "".join(f"<h2 id='{sid}'>{_e(head)}</h2>{content}" for sid, head, content in sections)
    )
    return _page(study.title, body)


#: What each output of a retrieval run is, for the index at the top of the report.
_FILES = (
    ("report.html", "this page"),
    (
        "bundle.json.gz",
        "every number of the run and every input's SHA-256 (what verify and diff read)",
    ),
    (
        "verification.json",
        "the checks: metric parity, checkpoint identity, published values, failures",
    ),
    ("manifest.json", "SHA-256 of every input and output, the environment, time and host"),
    ("README.txt", "this index as plain text, for a reader without a browser"),
    (
        "cache/",
        "where the run extracted here: the extracted embeddings (and the demo's generated "
        "inputs), reused by a rerun; not an output, so the manifest does not list it",
    ),
)


def _folder_index(tables: Mapping[str, Table]) -> str:
    """The output folder's short index: what each file is (this page is written beside them)."""
    items = [f"<li><code>{_e(name)}</code>: {_e(what)}</li>" for name, what in _FILES]
    items.insert(
        4,
        f"<li><code>tables/</code>: the {len(tables)} tables of this page, each as <code>.csv</code> "
        "(full precision), <code>.md</code> and <code>.tex</code>: "
        + ", ".join(f"<code>{_e(n)}</code>" for n in tables)
        + "</li>",
    )
    return (
        "<details class='files' id='files'><summary>What this output folder holds</summary>"
        f"<ul>{''.join(items)}</ul></details>"
    )


def _rests_on(v: Mapping[str, Any]) -> dict[str, int]:
    """What the verdict rests on (``verification.json``'s ``rests_on``), each a count."""
    rests = v.get("rests_on")
    if isinstance(rests, Mapping):
        return {k: int(rests.get(k, 0)) for k in ("completion", "gates", "parity", "published")}
    parity = v.get("metric_parity") or {}
    return {
        "completion": 0,
        "gates": 0,
        "parity": len(parity.get("cells", [])) + len(parity.get("reference", [])),
        "published": sum(v["golden"]["counts"].values()),
    }


def _probe_summary(bundle: Mapping[str, Any]) -> str:
    """The probe verdict: what it rests on, each with its count (completion, gates, parity
    with the predictions, published values), and what was read; nothing checked is never a
    pass."""
    v = bundle["verification"]
    runs = bundle["runs"]
    rests = _rests_on(v)
    predicted = sum(1 for r in runs if r.get("predictions_sha256"))
    saved = sum(len(r.get("saved_files", {})) for r in runs)
    read = f"{len(runs)} run(s) of {len({r['model'] for r in runs})} model(s)"
    read += (
        f": {predicted} with predictions (their metrics recomputed from them)"
        if predicted
        else ": none with predictions (no metric is recomputed)"
    )
    read += f", {saved} saved measurement file(s) read as they are" if saved else ""
    parity = v.get("metric_parity")
    rests_on = (
        f"completion of {rests['completion']} declared run(s), {rests['gates']} gate(s), "
        f"{rests['parity']} number(s) compared with the predictions or the reference "
        f"definitions, {rests['published']} published value(s)"
    )
    checked = f"Rests on: {rests_on}. Read: {read}."
    # The comparison is summarized per run after the panels: the verdict points to it.
    link = " <a href='#parity'>Saved vs recomputed, per run</a>." if parity else ""
    if v["failures"]:
        items = "".join(f"<li>{_e(f)}</li>" for f in v["failures"])
        title = "INCOMPLETE" if not v["probe_complete"] else "FAILED"
        return (
            f'<div class="fail" id="summary"><strong>{title}: {len(v["failures"])} problem(s).</strong>'
            f"<ul>{items}</ul><p>{_e(checked)}{link}</p></div>"
        )
    if not any(rests.values()):
        return (
            '<div class="fail" id="summary"><strong>NOTHING CHECKED: no completion rule, gate, '
            "predictions or published value to check the runs against.</strong>"
            f"<p>{_e(checked)}</p></div>"
        )
    return f'<div class="pass" id="summary"><strong>PASSED: every declared run is complete and every check holds.</strong><p>{_e(checked)}{link}</p></div>'


def _confusion(run: dict[str, Any]) -> str:
    cls = (run["report"] or {}).get("classification")
    if not cls:
        return ""
    names = list(cls["per_class"])
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    body = "".join(
        f"<tr><th>{_e(names[i])}</th>" + "".join(f"<td class='num'>{c}</td>" for c in row) + "</tr>"
        for i, row in enumerate(cls["confusion_matrix"])
    )
    return (
        f"<details class='cell'><summary>{_e(run['model'])} on {_e(run['corpus'] or MISSING_TEXT)}: confusion matrix</summary>"
        f"<div class='scroll'><table><thead><tr><th>true \\ predicted</th>{head}</tr></thead><tbody>{body}</tbody></table></div></details>"
    )


def _probe_definitions() -> str:
    items = []
    for module in (regression, classification, events, vectors, probe_human, probe):
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("_") or func.__module__ != module.__name__:
                continue
            doc = inspect.getdoc(func) or ""
            formula = next(
                (p.replace("\n", " ") for p in doc.split("\n\n") if p.startswith("Formula")), ""
            )
            if formula:
                first = doc.split("\n\n")[0].replace("\n", " ")
                items.append(
                    f"<li><code>{_e(name)}</code>: {doc_html(first)} {doc_html(formula)}</li>"
                )
    return "<ul>" + "".join(items) + "</ul>"


def _probe_provenance(bundle: Mapping[str, Any]) -> str:
    items = "".join(
        f"<li>{_e(r['id'])} ({_e(r['model'])}, {_e(r['family'])}): predictions sha256 "
        f"<code>{_e(r['predictions_sha256'] or MISSING_TEXT)}</code></li>"
        for r in bundle["runs"]
    )
    return f"<p>Study {_e(bundle['study']['name'])}, sha256 <code>{_e(bundle['study']['sha256'])}</code>.</p><ul>{items}</ul>"


def _panels(bundle: Mapping[str, Any], tables: dict[str, Table]) -> str:
    """Per run: every recorded number of each saved file, with a link to that exact file, and
    the run's derived numbers with their formulas."""
    out = []
    for run in bundle["runs"]:
        parts = []
        for split, path in run.get("saved_files", {}).items():
            name = f"panel_{slug(run['id'])}_{slug(split)}"
            if name in tables:
                parts.append(
                    f"<h4>{_e(split)}</h4>{_scroll(tables[name], f'table-{name}')}"
                    f'<p><a href="{_e(path)}">Exact metric JSON</a> (sha256 '
                    f"<code>{_e(run['saved_sha256'][split])}</code>)</p>"
                )
        derived = f"panel_{slug(run['id'])}_derived"
        if derived in tables:
            parts.append(f"<h4>derived</h4>{_scroll(tables[derived], f'table-{derived}')}")
        if parts:
            attrs = ", ".join(f"{k} {v}" for k, v in run.get("attributes", {}).items())
            out.append(
                f"<details class='cell'><summary>{_e(run['id'])}: {_e(run['model'])}"
                f"{' (' + _e(attrs) + ')' if attrs else ''}</summary>{''.join(parts)}</details>"
            )
    return "".join(out)


#: A table longer than this is collapsed (its title and row count stay in view): a reader
#: scrolls past no long table to reach the next result.
LONG_TABLE_ROWS = 50

#: The probe report's sections by the tables they show, in reading order after the verdict.
_LEADERS = ("task_leaders", "leaders")
_SUMMARIES = ("families", "family_means")
_SAVED = ("burst_speaker", "burst_classes", "adapters", "retention", "completion", "training")
_SAVED_PREFIXES = ("summary_", "public_", "human_prompts_", "human_dimensions_")
_AFTER_PANELS = ("metric_parity_summary", "metric_parity", "unused_keys")


def _probe_block(tables: Mapping[str, Table], names: Sequence[str]) -> str:
    """The named tables, each in its own horizontal scroll box; a long one collapsed."""
    parts = []
    for n in names:
        box = _scroll(tables[n], f"table-{n}")
        rows = len(tables[n].rows)
        if rows > LONG_TABLE_ROWS:
            box = (
                f"<details class='long' id='long-{_e(n)}'><summary>{_e(tables[n].title)} "
                f"({rows} rows; also <code>tables/{_e(n)}.csv</code>)</summary>{box}</details>"
            )
        parts.append(box)
    return "".join(parts)


def _charted(tables: Mapping[str, Table], names: Sequence[str]) -> str:
    """Each summary table followed by its charts."""
    return "".join(_probe_block(tables, [n]) + summary_charts(tables, [n]) for n in names)


def _probe_parity(tables: Mapping[str, Table]) -> str:
    """Saved vs recomputed: the per-run summary in view, every compared number on demand."""
    if "metric_parity" not in tables:
        return ""
    full = tables["metric_parity"]
    summary = (
        _scroll(tables["metric_parity_summary"], "table-metric_parity_summary")
        if "metric_parity_summary" in tables
        else ""
    )
    return (
        f"<h2 id='parity'>Saved vs recomputed numbers</h2>{summary}"
        f"<details class='parity-full' id='parity-full'><summary>Every compared number "
        f"({len(full.rows)} rows; also <code>tables/metric_parity.csv</code>)</summary>"
        f"{_scroll(full, 'table-metric_parity')}</details>"
    )


def _probe_sections(tables: Mapping[str, Table]) -> dict[str, list[str]]:
    """Each table name under the section that shows it (``other``: what no section names)."""
    names = list(tables)
    sections = {
        "leaders": [n for n in _LEADERS if n in tables],
        "summaries": [n for n in _SUMMARIES if n in tables],
        "saved": [n for n in names if n in _SAVED or n.startswith(_SAVED_PREFIXES)],
        "targets": [n for n in names if n.startswith(("target_", "saved_target_"))],
        "panels": [n for n in names if n.startswith("panel_")],
    }
    taken = {n for group in sections.values() for n in group} | set(_AFTER_PANELS)
    sections["other"] = [n for n in names if n not in taken]
    return sections


def _generated(bundle: Mapping[str, Any]) -> str:
    """The report's time (a study with a result manifest: the module's report shows it):
    ``SOURCE_DATE_EPOCH``'s when the run had one, else where the run's clock time is."""
    if "result_manifest" not in bundle:
        return ""
    stamp = bundle["result_manifest"].get("generated_utc")
    if stamp:
        return f" · report generated <time>{_e(stamp)}</time> (UTC)"
    return " · report generated at the run's time (<code>manifest.json</code>, <code>time</code>)"


def render_probe_report(
    study: Any,
    bundle: Mapping[str, Any],
    tables: dict[str, Table],
    narrative: Sequence[tuple[str, str]] = (),
    figures: Sequence[tuple[str, str]] = (),
) -> str:
    """The probe study's report, read from the top: the verdict; the leaders and the summaries
    with their charts, then ``figures`` ((title, HTML): the confusion heatmaps, the history
    curves); the saved measurements, targets and other results; the per-run panels; saved vs
    recomputed per run (every compared number on demand); the study's prose, definitions and
    provenance. ``narrative``: (title, HTML) sections the study supplies."""
    sec = _probe_sections(tables)
    target_panels = "".join(
        f"<details class='cell'><summary>{_e(tables[n].title)}</summary>{_scroll(tables[n], f'table-{n}')}</details>"
        for n in sec["targets"]
    )
    unused = (
        f"<h2>Saved keys no table used</h2>{_probe_block(tables, ['unused_keys'])}"
        if "unused_keys" in tables
        else ""
    )
    prose = "".join(f"<h2>{_e(title)}</h2>{text}" for title, text in narrative)
    # The summaries' plots belong with the summaries, above every per-run result.
    plots = "".join(
        f"<h2 id='figure-{i}' class='figure'>{_e(title)}</h2>{text}"
        for i, (title, text) in enumerate(figures)
    )
    credits = getattr(study, "credits", None)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(study.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(study.title)}</h1><p class='sub'>audiorepro report of study "
        f"<code>{_e(bundle['study']['name'])}</code>{_generated(bundle)}</p>"
        f"{_probe_summary(bundle)}"
        + (
            f"<h2 id='leaders'>Task leaders</h2>{_charted(tables, sec['leaders'])}"
            if sec["leaders"]
            else ""
        )
        + (
            f"<h2 id='summaries'>Family means</h2>{_charted(tables, sec['summaries'])}"
            if sec["summaries"]
            else ""
        )
        + plots
        + (
            f"<h2>Saved measurements</h2>{_probe_block(tables, sec['saved'])}"
            if sec["saved"]
            else ""
        )
        + (f"<h2>Regression targets</h2>{target_panels}" if target_panels else "")
        + (
            f"<h2>Classification, events, speaker vectors</h2>{_probe_block(tables, sec['other'])}"
            if sec["other"]
            else ""
        )
        + f"{''.join(_confusion(r) for r in bundle['runs'])}"
        + (f"<h2>Per-run panels</h2>{_panels(bundle, tables)}" if sec["panels"] else "")
        + _probe_parity(tables)
        + unused
        + prose
        + f"<h2>Metric definitions</h2>{_probe_definitions()}"
        + f"<h2>Provenance</h2>{_probe_provenance(bundle)}"
        + (f"<p class='credits'>{_e(credits)}</p>" if credits else "")
        + f"<script>{_JS}</script></body></html>\n"
    )
