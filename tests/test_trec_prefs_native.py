"""The preference measures in C (``core/_trec_prefs.c``'s ``atr_prefs_evaluate``, called here
through ctypes with the records of ``core/_trec.h`` built from ``read_light``'s buffers and
``plan_of``) give the values of the reference twin (``audiorepro.reference.trec_prefs``,
written from the definitions alone, to 1e-12) on every recorded ``-R prefs``/``qrels_prefs``
case (trec_eval's test folder and the seeded recordings; their printed bytes are trec_eval's:
tests/test_trec_native.py) and on generated judgement files, and every input the Python path
refuses with its message is ``ATR_FALLBACK`` (the C prints nothing). The package's Python path
(``metrics/trec_prefs.py``, ``atr_prefs_query`` per query) refuses exactly what the C refuses,
and ``audiorepro trec-eval`` prints the same bytes by both. (While the C was written it was
also held to the numpy implementation it replaced, double for double, on these cases and 2,100
generated ones; the goldens did not move.)"""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audiorepro.cli import main, trec_fast, trec_work
from audiorepro.core.errors import UserError
from audiorepro.core.native import AtrEval, AtrMeasures, AtrOptions, AtrTable, library
from audiorepro.formats.c_numbers import c_atof
from audiorepro.formats.trec import load_run, read_table
from audiorepro.formats.trec_light import LightTable, address, read_light
from audiorepro.formats.trec_prefs import read_prefs
from audiorepro.metrics import trec_prefs
from audiorepro.metrics.trec_measures import check_judgements, parse_measures, plan_of
from audiorepro.reference.trec_prefs import reference_prefs
from tests.test_trec_eval_binary import RECORD, SEEDED
from tests.test_trec_quicktest import CASES

ATR_OK, ATR_FALLBACK = 0, 1

#: Every recorded preference case: (name, trec-eval arguments).
PREFS_CASES = [(expected, argv) for expected, argv in CASES if "prefs" in argv[-3:]
               or any(a in ("prefs", "qrels_prefs") for a in argv)] + [
    (path, [*argv[:-2], str(SEEDED / path.split("/")[0] / argv[-2]),
            str(SEEDED / path.split("/")[0] / argv[-1])])
    for path, _, argv in RECORD if "prefs" in argv or "qrels_prefs" in argv
]  # fmt: skip


def _strings(texts: list[str]) -> Any:
    return (ctypes.c_char_p * max(len(texts), 1))(*[t.encode() for t in texts])


def _table(run: LightTable, keep: list[Any]) -> AtrTable:
    qids = _strings(run.qids)
    keep.append(qids)
    return AtrTable(
        address(run.data), len(run.data), len(run.value), address(run.doc_start),
        address(run.doc_len), address(run.value), None, len(run.qids), qids,
        address(run.start), address(run.stop), address(run.order), run.tag.encode(),
    )  # fmt: skip


def _measures(chosen: dict[str, Any], keep: list[Any]) -> AtrMeasures:
    plan = plan_of(chosen)
    names, owners = _strings(plan.names), _strings(plan.owners)
    count = (ctypes.c_uint8 * max(len(plan.names), 1))(
        *[chosen[o].measure.count for o in plan.owners]
    )
    keep.extend([names, owners, count])
    return AtrMeasures(len(plan.names), names, owners, ctypes.addressof(count), None, 0, None,
                       0, None, 0, None, 0)  # fmt: skip


def _only(debug: str | None) -> str | None:
    """-D's query (``LEVEL.QID``), as cli/trec_work reads it."""
    return None if debug is None else debug.partition(".")[2] or None


def c_evaluate(
    argv: list[str], judgements: str | None = None
) -> tuple[int, list[str], Any, list[float]]:
    """``atr_prefs_evaluate`` on a trec-eval command line's files and options (``judgements``:
    another judgements path): (status, qids, values nq x columns, summary)."""
    options = trec_fast.parse(["trec-eval", *argv])
    assert options is not None
    chosen = parse_measures(list(options["measures"]))
    keep: list[Any] = []
    run = read_light(options["run"], run=True)
    table, measures = _table(run, keep), _measures(chosen, keep)
    only = _only(options["debug"])
    max_ret = options["max_ret"]
    opts = AtrOptions(int(options["per_query"]), int(options["complete"]), 0, 0,
                      -1 if max_ret is None else max_ret, 1, 0,
                      None if only is None else only.encode())  # fmt: skip
    out = AtrEval()
    lib = library()
    status = lib.atr_prefs_evaluate(
        ctypes.addressof(table), (judgements or str(options["qrels"])).encode(),
        int(options["rel_format"] == "qrels_prefs"), ctypes.addressof(measures),
        ctypes.addressof(opts), ctypes.addressof(out),
    )  # fmt: skip
    if status != ATR_OK:
        assert not out.values and not out.qids and out.nq == 0
        return status, [], None, []
    width = out.ncolumns
    qids = [out.qids[k].decode() for k in range(out.nq)]
    values = np.array([out.values[k] for k in range(out.nq * width)]).reshape(out.nq, width)
    summary = [out.summary[j] for j in range(width)]
    lib.atr_prefs_free(ctypes.addressof(out))
    return status, qids, values, summary


def python_evaluate(argv: list[str]) -> Any:
    """The package's Python path (``metrics.trec_prefs.evaluate_prefs``) on the same command
    line: its Evaluation, or its UserError."""
    options = trec_fast.parse(["trec-eval", *argv])
    assert options is not None
    chosen = parse_measures(list(options["measures"]))
    check_judgements(chosen, options["rel_format"])
    prefs = read_prefs(options["qrels"], qrels_form=options["rel_format"] == "qrels_prefs",
                       number=c_atof)  # fmt: skip
    run = read_table(options["run"], run=True)
    return trec_prefs.evaluate_prefs(prefs, run, measures=chosen, max_ret=options["max_ret"],
                                     complete=options["complete"],
                                     only_query=_only(options["debug"]))  # fmt: skip


def twin_evaluate(argv: list[str]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """The reference twin's values of the same command line: the queries evaluated (those of
    the judgements the run has, ``-c`` all, ``-D`` one, in qid order; a query the run lacks
    ranked as trec_eval's stand-in document) and each one's families."""
    options = trec_fast.parse(["trec-eval", *argv])
    assert options is not None
    prefs = read_prefs(options["qrels"], qrels_form=options["rel_format"] == "qrels_prefs",
                       number=c_atof)  # fmt: skip
    scores, only = load_run(options["run"]).scores, _only(options["debug"])
    qids = [q for q in prefs if (only is None or q == only)
            and (options["complete"] or q in scores)]  # fmt: skip
    lines = {q: [(x.jg, x.jsg, x.docno, x.level) for x in prefs[q]] for q in qids}
    stand_in = {trec_prefs.STAND_IN: 1.0}
    max_ret = options["max_ret"]
    return qids, {
        q: reference_prefs(lines[q], scores.get(q, stand_in), max_ret=max_ret) for q in qids
    }


def assert_twin(argv: list[str]) -> None:
    """The C's values are the twin's, query by query and on ``all`` (counts summed, the rest
    averaged over the queries)."""
    status, qids, values, summary = c_evaluate(argv)
    assert status == ATR_OK
    expected_qids, twin = twin_evaluate(argv)
    assert qids == expected_qids
    names = plan_of(parse_measures(list(trec_fast.parse(["trec-eval", *argv])["measures"]))).names
    for j, name in enumerate(names):
        if name not in trec_prefs.PREFS_FAMILIES:
            continue
        column = [twin[q][name] for q in qids]
        for i, q in enumerate(qids):
            assert values[i, j] == pytest.approx(column[i], abs=1e-12, nan_ok=True), (q, name)
        count = trec_prefs.PREFS_FAMILIES[name][1]
        total = math.fsum(column)
        assert summary[j] == pytest.approx(total if count else total / len(qids), abs=1e-9), name


def test_every_recorded_prefs_case_is_counted() -> None:
    # quicktest's three preference lines; per seeded folder 4 (prefs, -M4, -c, qrels_prefs)
    assert len(PREFS_CASES) == 3 + 12 * 4


@pytest.mark.parametrize(("name", "argv"), PREFS_CASES, ids=[c[0] for c in PREFS_CASES])
def test_recorded_cases_give_the_twin_s_values(name: str, argv: list[str]) -> None:
    assert_twin(argv)


DOCS = ["d0", "d1", "d10", "d2", "d3", "d4", "d5", "ceci_nest_pas_un_docno"]
LEVELS = ["0", "0", "0.0", "1", "2", "3", "0.5", "-1", "2e0"]


@st.composite
def judgement_file(draw: st.DrawFn, consistent: bool) -> tuple[str, bool, list[str]]:
    """(text, qrels_form, qids): a few queries, each of judgement groups of one or more
    sub-groups (``consistent``: one hidden level per document and group, as a user's
    preferences would be; else levels drawn line by line, so that two levels, level 0 and
    above and cycles occur), duplicate lines, levels 0 and negative, comments."""
    qrels_form = draw(st.booleans())
    lines = ["# judgements"]
    qids = draw(st.lists(st.sampled_from(["1", "2", "10", "q3"]), min_size=1, max_size=3,
                         unique=True))  # fmt: skip
    for q in qids:
        for g in range(draw(st.integers(1, 3))):
            hidden = {d: draw(st.sampled_from(LEVELS)) for d in DOCS}
            for s in range(1 if qrels_form else draw(st.integers(1, 3))):
                docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6))
                for d in docs:
                    level = hidden[d] if consistent else draw(st.sampled_from(LEVELS))
                    lines.append(f"{q} g{g} {d} {level}" if qrels_form
                                 else f"{q}\tg{g} s{s} {d}  {level}")  # fmt: skip
                if draw(st.booleans()):
                    lines.append("")
    order = draw(st.permutations(range(1, len(lines))))
    text = "\n".join([lines[0], *[lines[i] for i in order]]) + "\n"
    return text, qrels_form, qids


@st.composite
def run_file(draw: st.DrawFn, qids: list[str]) -> str:
    """A run over some of the queries (one the judgements lack too), tied scores."""
    lines = []
    for q in draw(st.lists(st.sampled_from([*qids, "7"]), min_size=1, unique=True)):
        docs = draw(st.lists(st.sampled_from([*DOCS[:-1], "x"]), min_size=1, unique=True))
        for rank, d in enumerate(docs):
            score = draw(st.sampled_from(["1", "2", "0.5", "-3", "2.0"]))
            lines.append(f"{q} Q0 {d} {rank} {score} tag{q}")
    return "\n".join(lines) + "\n"


@st.composite
def command(draw: st.DrawFn, consistent: bool) -> tuple[str, str, list[str]]:
    text, qrels_form, qids = draw(judgement_file(consistent))
    run = draw(run_file(qids))
    options = ["-R", "qrels_prefs" if qrels_form else "prefs", "-m", "all_prefs",
               "-m", "num_q", "-m", "runid"]  # fmt: skip
    max_ret = draw(st.sampled_from([None, 1, 2, 4]))
    if max_ret is not None:
        options.append(f"-M{max_ret}")
    if draw(st.booleans()):
        options.append("-c")
    if draw(st.integers(0, 4)) == 0:
        options += ["-D", "1." + draw(st.sampled_from([*qids, "7"]))]
    return text, run, options


def check_command(tmp: Path, case: tuple[str, str, list[str]]) -> None:
    """ATR_FALLBACK exactly where the package's Python path refuses the input (the same
    message through ``trec-eval``: test_trec_eval_words_a_refusal_as_before), else the
    twin's values, and the Python path's values are the C's doubles."""
    text, run, options = case
    (tmp / "prefs").write_text(text)
    (tmp / "run").write_text(run)
    argv = [*options, str(tmp / "prefs"), str(tmp / "run")]
    try:
        ours = python_evaluate(argv)
    except UserError:
        assert c_evaluate(argv)[0] == ATR_FALLBACK
        return
    assert_twin(argv)
    status, qids, values, summary = c_evaluate(argv)
    assert status == ATR_OK and ours.qids == qids and list(ours.summary) == summary
    assert np.array_equal(np.asarray(ours.values, float), values, equal_nan=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command(consistent=True))
def test_generated_consistent_judgements_give_the_twin_s_values(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, str, list[str]]
) -> None:
    check_command(tmp_path_factory.mktemp("prefs"), case)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command(consistent=False))
def test_generated_free_judgements_fall_back_exactly_where_python_refuses(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, str, list[str]]
) -> None:
    check_command(tmp_path_factory.mktemp("prefs"), case)


#: Inputs the Python path refuses with its message: (judgements, run, -R format, options).
REFUSED = {
    "a line of 4 fields": ("1 u s a 2\n1 u b 0\n", "prefs", []),
    "a line of 5 fields (qrels_prefs)": ("1 u s a 2\n", "qrels_prefs", []),
    "a line of 6 fields": ("1 u s a 2 x\n", "prefs", []),
    "no judgement": ("# nothing\n\n", "prefs", []),
    "not UTF-8": ("1 u s \xff 1\n", "prefs", []),
    "two levels in one sub-group": ("1 u s a 2\n1 u s a 1\n", "prefs", []),
    "level 0 and above 0": ("1 u s a 2\n1 u s b 0\n1 u t b 1\n1 u t c 0\n", "prefs", []),
    "cyclic preferences": ("1 u s a 2\n1 u s b 1\n1 u t b 2\n1 u t a 1\n", "prefs", []),
    "no query in common": ("5 u s a 2\n5 u s b 1\n", "prefs", []),
    "no query under -D": ("1 u s a 2\n1 u s b 1\n", "prefs", ["-D", "1.9"]),
}
#: Inputs the Python path reads and the C leaves to it (its reader's rules beyond ASCII, C's
#: atof beyond the exact decimals, standard input).
LEFT_TO_PYTHON = {
    "a non-ASCII docno": ("1 u s \u00e9t\u00e9 2\n1 u s a 1\n", "prefs", []),
    "a hexadecimal level": ("1 u s a 0x1p1\n1 u s b 1\n", "prefs", []),
    "an infinite level": ("1 u s a inf\n1 u s b 1\n", "prefs", []),
    "a NUL in a docno": ("1 u s a\x00b 2\n1 u s b 1\n", "prefs", []),
}
RUN = "1 Q0 a 1 2 r\n1 Q0 b 2 1 r\n"


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_python_refuses_falls_back(case: str, tmp_path: Path) -> None:
    text, rel_format, options = REFUSED[case]
    (tmp_path / "prefs").write_bytes(text.encode("latin-1"))
    (tmp_path / "run").write_text(RUN)
    argv = ["-R", rel_format, "-m", "all_prefs", *options, str(tmp_path / "prefs"),
            str(tmp_path / "run")]  # fmt: skip
    with pytest.raises(UserError):
        python_evaluate(argv)
    assert c_evaluate(argv)[0] == ATR_FALLBACK


@pytest.mark.parametrize("case", sorted(LEFT_TO_PYTHON))
def test_what_the_c_does_not_read_falls_back(case: str, tmp_path: Path) -> None:
    text, rel_format, options = LEFT_TO_PYTHON[case]
    (tmp_path / "prefs").write_text(text)
    (tmp_path / "run").write_text(RUN)
    argv = ["-R", rel_format, "-m", "all_prefs", *options, str(tmp_path / "prefs"),
            str(tmp_path / "run")]  # fmt: skip
    assert python_evaluate(argv).qids == ["1"]  # read, and evaluated
    assert c_evaluate(argv)[0] == ATR_FALLBACK


def test_standard_input_and_a_missing_file_fall_back(tmp_path: Path) -> None:
    (tmp_path / "run").write_text(RUN)
    for path in ("-", str(tmp_path / "missing")):
        argv = ["-R", "prefs", "-m", "prefs", str(tmp_path / "run"), str(tmp_path / "run")]
        assert c_evaluate(argv, judgements=path)[0] == ATR_FALLBACK


@pytest.mark.parametrize(("name", "argv"), PREFS_CASES, ids=[c[0] for c in PREFS_CASES])
def test_trec_eval_takes_the_compiled_path_with_the_same_bytes(
    name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    taken: list[bool] = []
    light = trec_work._light_prefs

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = light(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(trec_work, "_light_prefs", spy)
    assert main(["trec-eval", *argv]) == 0
    fast = capsys.readouterr().out
    monkeypatch.setattr(trec_work, "LIGHT", False)
    assert main(["trec-eval", *argv]) == 0
    assert fast == capsys.readouterr().out
    assert taken == [True]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_trec_eval_words_a_refusal_as_before(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, rel_format, options = REFUSED[case]
    (tmp_path / "prefs").write_bytes(text.encode("latin-1"))
    (tmp_path / "run").write_text(RUN)
    argv = ["trec-eval", "-R", rel_format, "-m", "all_prefs", *options,
            str(tmp_path / "prefs"), str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    try:
        python_evaluate(argv[1:])
    except UserError as exc:
        assert err == f"audiorepro: error: {exc}\n"


_PROBE = (
    "import json, sys\n"
    "from audiorepro.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


@pytest.mark.parametrize("rel_format", ["prefs", "qrels_prefs"])
def test_a_prefs_run_imports_no_numpy(rel_format: str) -> None:
    """A whole ``-R prefs``/``qrels_prefs`` run in a fresh process: no numpy, numba, scipy,
    click or dataclasses imported; the recorded output."""
    folder, out = SEEDED / "prefs-03", "out.00" if rel_format == "prefs" else "out.03"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "trec-eval", "-q", "-m", "all_prefs", "-R", rel_format,
         str(folder / rel_format), str(folder / "run")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    heavy = ("numpy", "numba", "scipy", "click", "dataclasses")
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []
    assert done.stdout == (folder / out).read_text()
