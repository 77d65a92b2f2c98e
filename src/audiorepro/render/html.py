"""``report.html``: one self-contained page per study run (no network, no CDN).

Order: a plain-language summary (what was checked, what passed, what failed; a failing study
says so in its first lines), the result tables (click a header to sort), one collapsible panel
per cell (headline numbers with their bootstrap intervals, r@k curves and the distribution of
first-relevant ranks as inline SVG, tie bounds, provenance), paired comparisons, checkpoint
identity (per-clip cosines as SVG), published-vs-reproduced, the metric definitions with their
tie policy, and the environment's package versions. Missing values read "Not recorded /
undefined", never 0. The page is a function of the run's numbers: no time, host or path.
"""

from __future__ import annotations

import html
import inspect
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
from audiorepro.metrics.retrieval import DIRECTIONS, METRICS
from audiorepro.render.tables import MISSING_TEXT, Table, slug

_CSS = """
body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #ddd}
.fail{background:#fde8e8;border-left:6px solid #c0392b;padding:.6rem 1rem}
.pass{background:#e8f6ec;border-left:6px solid #27ae60;padding:.6rem 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{padding:.25rem .6rem;border-bottom:1px solid #eee}
th{cursor:pointer;background:#f6f6f6;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{font-weight:bold}td.missing{color:#888;font-style:italic}small.ci{color:#666;font-weight:normal}
details{margin:.4rem 0;border:1px solid #ddd;border-radius:4px;padding:.3rem .8rem}
summary{cursor:pointer;font-weight:600}code{background:#f3f3f3;padding:0 .2rem}
svg text{font-size:10px;font-family:sans-serif}
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
        return f"{value:.{digits}f}"
    return str(value)


def table_html(table: Table, table_id: str) -> str:
    """A sortable HTML table; best values bold, missing values spelled out."""
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
            data = repr(v) if isinstance(v, float) else str(v)
            cls = "num" + (" best" if i in best[j] else "") if not isinstance(v, str) else ""
            ci = table.intervals[i][j] if table.intervals else None
            extra = (
                ""
                if ci is None
                else f'<br><small class="ci">[{ci[0]:.{table.digits}f}, {ci[1]:.{table.digits}f}]</small>'
            )
            cells.append(
                f'<td class="{cls}" data-value="{_e(data)}">{_e(_fmt(v, table.digits))}{extra}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    notes = "".join(f"<p><em>{_e(n)}</em></p>" for n in table.notes)
    return (
        f'<table class="sortable" id="{_e(table_id)}"><caption>{_e(table.title)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{notes}"
    )


def svg_lines(series: dict[str, list[float | None]], *, title: str, xlabels: list[str]) -> str:
    """A small line chart (values in [0, 1]) as inline SVG."""
    width, height, pad = 320, 180, 30
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    n = max((len(v) for v in series.values()), default=0)
    step = (width - 2 * pad) / max(n - 1, 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="{pad - 4}" y="{pad + 3}" text-anchor="end">1</text>',
        f'<text x="{pad - 4}" y="{height - pad + 3}" text-anchor="end">0</text>',
    ]
    for i, label in enumerate(xlabels):
        parts.append(
            f'<text x="{pad + i * step:.1f}" y="{height - pad + 14}" text-anchor="middle">{_e(label)}</text>'
        )
    for c, (name, values) in enumerate(series.items()):
        points = [
            f"{pad + i * step:.1f},{height - pad - v * (height - 2 * pad):.1f}"
            for i, v in enumerate(values)
            if v is not None
        ]
        color = colors[c % len(colors)]
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(points)}"/>'
        )
        parts.append(
            f'<text x="{width - pad}" y="{pad + 12 * c}" fill="{color}" text-anchor="end">{_e(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def svg_bars(
    values: list[float], labels: list[str], *, title: str, lo: float = 0.0, hi: float = 1.0
) -> str:
    """A bar chart of values in ``[lo, hi]`` as inline SVG."""
    width, height, pad = max(160, 24 * len(values) + 60), 180, 30
    step = (width - 2 * pad) / max(len(values), 1)
    span = hi - lo if hi > lo else 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="{pad - 4}" y="{pad + 3}" text-anchor="end">{hi:g}</text>',
        f'<text x="{pad - 4}" y="{height - pad + 3}" text-anchor="end">{lo:g}</text>',
    ]
    for i, (v, label) in enumerate(zip(values, labels, strict=True)):
        h = max(0.0, min(1.0, (v - lo) / span)) * (height - 2 * pad)
        x = pad + i * step + 2
        parts.append(
            f'<rect x="{x:.1f}" y="{height - pad - h:.1f}" width="{max(step - 4, 1):.1f}" '
            f'height="{h:.1f}" fill="#1f77b4"><title>{_e(label)}: {v:.6f}</title></rect>'
        )
        parts.append(
            f'<text x="{x + step / 2 - 2:.1f}" y="{height - pad + 12}" text-anchor="middle">{i + 1}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


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
    curves = svg_lines(
        {d: cell["curves"][d] for d in DIRECTIONS},
        title=f"r@k for k = 1..10, {cell['id']}",
        xlabels=[str(k) for k in range(1, 11)],
    )
    hist = "".join(
        svg_bars(
            [
                c / max(sum(cell["rank_histogram"][d]["counts"]), 1)
                for c in cell["rank_histogram"][d]["counts"]
            ],
            cell["rank_histogram"][d]["bins"],
            title=f"first relevant rank, {d} (fraction of queries per bin)",
        )
        for d in DIRECTIONS
    )
    bins = ", ".join(
        f"{i + 1}: {b}" for i, b in enumerate(cell["rank_histogram"][DIRECTIONS[0]]["bins"])
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
        f"<tbody>{''.join(rows)}</tbody></table>{curves}<p>Rank bins: {_e(bins)}</p>{hist}<ul>{ties}</ul>"
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


def _definitions() -> str:
    items = []
    for name, metric in METRICS.items():
        doc = inspect.getdoc(metric.func) or ""
        first = doc.split("\n\n")[0].replace("\n", " ")
        formula = next(
            (p.replace("\n", " ") for p in doc.split("\n\n") if p.startswith("Formula")), ""
        )
        items.append(
            f"<li><code>{_e(name)}</code> ({'higher' if metric.higher_is_better else 'lower'} is better): "
            f"{_e(first)} {_e(formula)}</li>"
        )
    return "<ul>" + "".join(items) + "</ul>"


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


def render_report(study: Any, bundle: Mapping[str, Any], tables: dict[str, Table]) -> str:
    v = bundle["verification"]
    result_tables = "".join(
        table_html(t, f"table-{name}")
        for name, t in tables.items()
        if name not in ("parity", "identity", "published")
    )
    panels = "".join(_cell_panel(c) for c in bundle["cells"])
    paired = bundle["paired_bootstrap"]
    paired_rows = "".join(
        f"<tr><td>{_e(p['dataset'])}</td><td>{_e(p['a'])} − {_e(p['b'])}</td><td>{p['direction']}</td>"
        f"<td>{_e(p['metric'])}</td><td class='num'>{p['difference']:.4f}</td>"
        f"<td>[{p['low']:.4f}, {p['high']:.4f}]</td></tr>"
        for p in paired
    )
    paired_html = (
        "<table class='sortable' id='table-paired'><thead><tr><th>dataset</th><th>difference</th><th>direction</th>"
        f"<th>metric</th><th>value</th><th>95% paired interval</th></tr></thead><tbody>{paired_rows}</tbody></table>"
        if paired
        else f"<p>{MISSING_TEXT}: no two models share a dataset's queries.</p>"
    )
    identity_svgs = "".join(
        svg_bars(
            b["audio_embedding_cosine_per_clip"],
            b["clip_ids"],
            title=f"audio cosine per clip, {b['hf_checkpoint']} vs {b['control']}",
            lo=-1.0,
            hi=1.0,
        )
        for b in v["checkpoint_identities"]
    )
    packages = ""
    versions = next(
        (
            c["model_meta"].get("versions")
            for c in bundle["cells"]
            if c.get("model_meta", {}).get("versions")
        ),
        None,
    )
    if versions:
        packages = (
            "<ul>"
            + "".join(f"<li>{_e(k)} {_e(val)}</li>" for k, val in sorted(versions.items()))
            + "</ul>"
        )
    else:
        packages = "<p>Package versions of the run: see manifest.json (this report holds no host or time).</p>"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>audiorepro report: {_e(study.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>audiorepro report: {_e(study.title)}</h1>{selection_html(bundle)}{_summary(bundle)}"
        f"<h2>Results</h2>{result_tables}"
        f"<h2>Cells</h2>{panels}"
        f"<h2>Paired comparisons</h2>{paired_html}"
        f"<h2>Metric parity</h2>{table_html(tables['parity'], 'table-parity')}"
        f"<h2>Checkpoint identity</h2>{table_html(tables['identity'], 'table-identity')}{identity_svgs}"
        f"<h2>Published against reproduced</h2>{table_html(tables['published'], 'table-published')}"
        f"<h2>Metric definitions (v{bundle['definitions_version']}, {_e(bundle['study']['tie_policy'])} ties)</h2>"
        f"{_definitions()}"
        f"<h2>Provenance</h2><p>Study {_e(bundle['study']['name'])}, sha256 <code>{_e(bundle['study']['sha256'])}</code>.</p>"
        f"<h2>Environment</h2>{packages}"
        f"<script>{_JS}</script></body></html>\n"
    )


def _probe_summary(bundle: Mapping[str, Any]) -> str:
    v = bundle["verification"]
    runs = bundle["runs"]
    targets = max((len((r["report"] or {}).get("regression", {})) for r in runs), default=0)
    checked = (
        f"{len(runs)} run(s) of {len({r['model'] for r in runs})} model(s): regression "
        f"({targets} targets), classification, events and speaker vectors recomputed from the "
        f"predictions; {sum(v['golden']['counts'].values())} published value(s)."
    )
    parity = v.get("metric_parity")
    saved = sum(len(r.get("saved_files", {})) for r in runs)
    if saved:
        checked += f" {saved} saved measurement file(s)"
        checked += (
            f"; {len(parity['cells'])} saved number(s) compared with the predictions, "
            f"{len(parity['reference'])} recomputed number(s) with the reference definitions."
            if parity
            else "; no run has predictions to compare them with."
        )
    if v["failures"]:
        items = "".join(f"<li>{_e(f)}</li>" for f in v["failures"])
        title = "INCOMPLETE" if not v["probe_complete"] else "FAILED"
        return (
            f'<div class="fail" id="summary"><strong>{title}: {len(v["failures"])} problem(s).</strong>'
            f"<ul>{items}</ul><p>Checked: {_e(checked)}</p></div>"
        )
    return f'<div class="pass" id="summary"><strong>PASSED: every declared run is complete and every check holds.</strong><p>Checked: {_e(checked)}</p></div>'


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
        f"<table><thead><tr><th>true \\ predicted</th>{head}</tr></thead><tbody>{body}</tbody></table></details>"
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
                items.append(
                    f"<li><code>{_e(name)}</code>: {_e(doc.split(chr(10) + chr(10))[0])} {_e(formula)}</li>"
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
    """Per run: every recorded number of each saved file, with a link to that exact file."""
    out = []
    for run in bundle["runs"]:
        parts = []
        for split, path in run.get("saved_files", {}).items():
            name = f"panel_{slug(run['id'])}_{slug(split)}"
            if name in tables:
                parts.append(
                    f"<h4>{_e(split)}</h4>{table_html(tables[name], f'table-{name}')}"
                    f'<p><a href="{_e(path)}">Exact metric JSON</a> (sha256 '
                    f"<code>{_e(run['saved_sha256'][split])}</code>)</p>"
                )
        if parts:
            attrs = ", ".join(f"{k} {v}" for k, v in run.get("attributes", {}).items())
            out.append(
                f"<details class='cell'><summary>{_e(run['id'])}: {_e(run['model'])}"
                f"{' (' + _e(attrs) + ')' if attrs else ''}</summary>{''.join(parts)}</details>"
            )
    return "".join(out)


def render_probe_report(
    study: Any,
    bundle: Mapping[str, Any],
    tables: dict[str, Table],
    narrative: Sequence[tuple[str, str]] = (),
) -> str:
    """The probe study's report. ``narrative``: (title, HTML) sections the study supplies."""
    main = [n for n in ("task_leaders", "leaders", "families", "family_means") if n in tables]
    parity = [n for n in ("metric_parity",) if n in tables]
    targets = [n for n in tables if n.startswith(("target_", "saved_target_"))]
    panels = [n for n in tables if n.startswith("panel_")]
    saved = [
        n
        for n in tables
        if n
        in ("burst_speaker", "burst_classes", "adapters", "retention", "completion", "training")
        or n.startswith(("public_", "human_prompts_", "human_dimensions_"))
    ]
    skip = {*main, *parity, *targets, *panels, *saved}
    other = [n for n in tables if n not in skip]
    target_panels = "".join(
        f"<details class='cell'><summary>{_e(tables[n].title)}</summary>{table_html(tables[n], f'table-{n}')}</details>"
        for n in targets
    )

    def block(names: Sequence[str]) -> str:
        return "".join(table_html(tables[n], f"table-{n}") for n in names)

    prose = "".join(f"<h2>{_e(title)}</h2>{text}" for title, text in narrative)
    credits = getattr(study, "credits", None)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>audiorepro report: {_e(study.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>audiorepro report: {_e(study.title)}</h1>{_probe_summary(bundle)}"
        + (f"<h2>Saved vs recomputed numbers</h2>{block(parity)}" if parity else "")
        + f"<h2>Task leaders</h2>{block(main)}"
        + (f"<h2>Saved measurements</h2>{block(saved)}" if saved else "")
        + f"<h2>Regression targets</h2>{target_panels}"
        + f"<h2>Classification, events, speaker vectors</h2>{block(other)}"
        + f"{''.join(_confusion(r) for r in bundle['runs'])}"
        + (f"<h2>Per-run panels</h2>{_panels(bundle, tables)}" if panels else "")
        + prose
        + f"<h2>Metric definitions</h2>{_probe_definitions()}"
        + f"<h2>Provenance</h2>{_probe_provenance(bundle)}"
        + (f"<p class='credits'>{_e(credits)}</p>" if credits else "")
        + f"<script>{_JS}</script></body></html>\n"
    )
