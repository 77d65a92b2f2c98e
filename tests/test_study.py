"""Study files: a valid one loads; every broken one fails before work starts, naming the key."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from audiorepro.core.errors import UserError
from audiorepro.specs.study import load_study, parse_study
from tests.conftest import FIXTURES

DUMP = FIXTURES / "dumps" / "synthetic_5cap.npz"
SHA = hashlib.sha256(DUMP.read_bytes()).hexdigest()


def _study(tmp_path: Path, body: str) -> Path:
    (tmp_path / "d.npz").write_bytes(DUMP.read_bytes())
    path = tmp_path / "study.toml"
    path.write_text(body)
    return path


VALID = f"""
schema = "audiorepro.study/1"
name = "s1"
profiles = ["canonical", "trec"]

[[cell]]
id = "m/d"
model = "m"
dataset = "d"
dump = "d.npz"
sha256 = "{SHA}"

[[published]]
cell = "m/d"
tolerance = 1e-9
provenance = "seed kit output"
values = {{ "t2a/r@1" = 0.5 }}
"""


def test_valid_study_loads(tmp_path: Path) -> None:
    study = load_study(_study(tmp_path, VALID))
    assert study.name == "s1" and study.tie_policy == "pessimistic"
    assert study.cells[0].dump == (tmp_path / "d.npz").resolve()
    assert study.cells[0].profiles == ("canonical", "trec")
    assert study.published[0].values == {"t2a/r@1": 0.5}
    assert study.bootstrap.resamples == 1000 and study.bootstrap.level == 0.95


@pytest.mark.parametrize(
    "old, new, key, message",
    [
        ('name = "s1"', 'name = "s 1"', "name", "letters, digits"),
        ('name = "s1"', "", "name", "is missing"),
        ('name = "s1"', 'name = "s1"\ncolour = 1', "colour", "unknown key"),
        ('["canonical", "trec"]', '["canonical", "beir"]', "profiles", "unknown profile 'beir'"),
        ('dataset = "d"\n', "", "cell[0].dataset", "is missing"),
        ('dump = "d.npz"', 'dump = "nope.npz"', "cell[0].dump", "does not exist"),
        (f'sha256 = "{SHA}"', 'sha256 = "' + "0" * 64 + '"', "cell[0].sha256", "the study expects"),
        (f'sha256 = "{SHA}"', 'sha256 = "abc"', "cell[0].sha256", "64 lowercase hex"),
        ('cell = "m/d"', 'cell = "x"', "published[0].cell", "not a cell of this study"),
        ('"t2a/r@1"', '"t2a/r@0"', "published[0].values.t2a/r@0", "unknown metric"),
        ('"t2a/r@1"', '"up/r@1"', "published[0].values.up/r@1", "unknown metric"),
        ("= 0.5", '= "0.5"', "published[0].values.t2a/r@1", "expected a number"),
        ("tolerance = 1e-9", "tolerance = -1", "published[0].tolerance", ">= 0"),
        ('provenance = "seed kit output"\n', "", "published[0].provenance", "is missing"),
        ('schema = "audiorepro.study/1"', 'schema = "audiorepro.study/2"', "schema", "expected"),
    ],
)
def test_broken_study_names_the_key(
    tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    assert old in VALID
    with pytest.raises(UserError, match=message) as info:
        load_study(_study(tmp_path, VALID.replace(old, new, 1)))
    assert info.value.key == key
    assert info.value.source == str((tmp_path / "study.toml").resolve())


def test_repeated_cell_id(tmp_path: Path) -> None:
    cell = VALID[VALID.index("[[cell]]") : VALID.index("[[published]]")]
    with pytest.raises(UserError, match="repeats cell id 'm/d'") as info:
        load_study(_study(tmp_path, VALID + cell))
    assert info.value.key == "cell[1].id"


def test_datasets_whose_names_slug_alike_are_refused_naming_both(tmp_path: Path) -> None:
    # a/b and a_b would both write tables/a_b_t2a.csv: the second silently replaced the first.
    cell = VALID[VALID.index("[[cell]]") : VALID.index("[[published]]")]
    body = VALID.replace('dataset = "d"', 'dataset = "a/b"') + cell.replace(
        'id = "m/d"', 'id = "m/e"'
    ).replace('dataset = "d"', 'dataset = "a_b"')
    with pytest.raises(UserError, match=re.escape("'a_b' and 'a/b' (cell[0].dataset)")) as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == "cell[1].dataset"


def test_a_dataset_name_too_long_for_a_file_name_is_refused(tmp_path: Path) -> None:
    body = VALID.replace('dataset = "d"', f'dataset = "{"x" * 300}"')
    with pytest.raises(UserError, match="300 bytes long") as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == "cell[0].dataset"


@pytest.mark.parametrize("number", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("where", ["tolerance", "value", "bootstrap"])
def test_a_non_finite_number_is_refused_with_one_message(
    tmp_path: Path, number: str, where: str
) -> None:
    # tolerance = inf made every value PASS; one rule and one message for every number.
    if where == "tolerance":
        body, key = VALID.replace("tolerance = 1e-9", f"tolerance = {number}"), "tolerance"
    elif where == "value":
        body, key = VALID.replace('"t2a/r@1" = 0.5', f'"t2a/r@1" = {number}'), "t2a/r@1"
    else:
        body = VALID.replace(
            'profiles = ["canonical", "trec"]', f"bootstrap = {{ level = {number} }}"
        )
        key = "level"
    with pytest.raises(
        UserError, match=re.escape("expected a finite number (nan and inf are refused)")
    ) as info:
        load_study(_study(tmp_path, body))
    assert str(info.value.key).endswith(key)


def test_a_negative_bootstrap_seed_is_refused(tmp_path: Path) -> None:
    body = VALID.replace('profiles = ["canonical", "trec"]', "bootstrap = { seed = -1 }")
    with pytest.raises(UserError, match="expected an integer in") as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == "bootstrap.seed"


@pytest.mark.parametrize(("profile", "metric"), [("trec", "t2a/P@1"), ("dcase", "R@1")])
def test_profile_metric_names_are_checked_at_load(
    tmp_path: Path, profile: str, metric: str
) -> None:
    # A misspelled trec/dcase name was NOT VERIFIED (exit 1) after the work, not exit 2 first.
    body = VALID.replace(
        'profiles = ["canonical", "trec"]', 'profiles = ["canonical", "trec", "dcase"]'
    )
    body = body.replace('"t2a/r@1" = 0.5', f'"{metric}" = 0.5').replace(
        "tolerance = 1e-9", f'profile = "{profile}"\ntolerance = 1e-9'
    )
    with pytest.raises(UserError, match=f"unknown {profile} metric") as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == f"published[0].values.{metric}"


def test_extract_cell_settings_are_validated(tmp_path: Path) -> None:
    body = VALID.replace(
        f'dump = "d.npz"\nsha256 = "{SHA}"',
        f'extract = {{ model = "tiny-laion", audio = "{FIXTURES / "audio"}", '
        f'captions = "{FIXTURES / "audio" / "captions.csv"}", settings = {{ batch_sise = 2 }} }}',
    )
    with pytest.raises(UserError, match="unknown preprocessing setting") as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == "batch_sise"


def test_not_toml(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not valid TOML"):
        parse_study("[[cell", tmp_path / "s.toml")


def test_clap_study_matches_the_published_golden_and_is_not_verified_without_dumps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from audiorepro.cli import main
    from audiorepro.specs.published import load_published
    from tests.conftest import GOLDEN, ROOT

    study = load_study(ROOT / "studies" / "clap_retrieval.toml", strict=False)
    published = {
        c.dump: c.values for c in load_published(GOLDEN / "published" / "clap_retrieval.toml")
    }
    # the golden names the seed kit's dumps <org>__<model>__<dataset>__dump.npz
    assert {
        study.cell(p.cell).id.replace("/", "__") + "__dump.npz": p.values for p in study.published
    } == published
    # every cell makes its own dump from the data `fetch` prepares, on a GPU
    assert all(c.extract is not None and c.extract.device == "cuda" for c in study.cells)
    assert {c.model for c in study.cells} == {
        "laion/clap-htsat-fused",
        "laion/clap-htsat-unfused",
        "630k-audioset-best",
        "630k-audioset-fusion-best",
    }
    (check,) = study.identity
    assert (check.a, check.b, check.expect) == (
        "laion/clap-htsat-fused",
        "630k-audioset-fusion-best",
        "different checkpoints",
    )
    # no data here: every published value is NOT VERIFIED, never a pass
    assert main(["verify", str(ROOT / "studies" / "clap_retrieval.toml")]) == 1
    assert "0 passed, 0 failed, 32 not verified" in capsys.readouterr().out


def test_unverified_dump_hash_refuses_to_reproduce(tmp_path: Path) -> None:
    body = VALID.replace(f'sha256 = "{SHA}"', 'sha256 = "to be filled on first verified download"')
    with pytest.raises(UserError, match=f"no verified SHA-256 .* hashes to {SHA}") as info:
        load_study(_study(tmp_path, body))
    assert info.value.key == "cell[0].sha256"
