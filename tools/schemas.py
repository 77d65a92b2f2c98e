#!/usr/bin/env python3
"""Write the JSON Schemas of audiorepro's file formats into docs/schemas/, or check them.

The schemas are generated from the declarations the package validates with (the pydantic
models of ``audiorepro.specs``) and the typed records it writes (``audiorepro.metrics``,
``audiorepro.runner.output.outputs``), so that editors can check a study as it is typed. Usage::

    python tools/schemas.py           # regenerate docs/schemas/*.schema.json
    python tools/schemas.py --check   # exit 1 when a file differs from a regeneration
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.checks.diff_report import SCHEMA as DIFF_SCHEMA  # noqa: E402
from audiorepro.checks.diff_report import DiffDocument  # noqa: E402
from audiorepro.core.io import json_dumps  # noqa: E402
from audiorepro.metrics.retrieval import SCHEMA as METRICS_SCHEMA  # noqa: E402
from audiorepro.metrics.retrieval import MetricsReport  # noqa: E402
from audiorepro.runner.kinds.hear import HearBundle, HearVerification  # noqa: E402
from audiorepro.runner.kinds.hear.spec import HearStudyFile  # noqa: E402
from audiorepro.runner.kinds.linear_probe import LinearProbeBundle, LinearProbeVerification  # noqa: E402
from audiorepro.runner.kinds.linear_probe.spec import LinearProbeStudyFile  # noqa: E402
from audiorepro.runner.kinds.probe.measurements import AdapterFile, HeldOutFile, PublicFile  # noqa: E402
from audiorepro.runner.kinds.probe.published import SCHEMA as PROBE_PUBLISHED_SCHEMA  # noqa: E402
from audiorepro.runner.kinds.probe.published import ProbePublishedFile  # noqa: E402
from audiorepro.runner.kinds.probe.records import ProbeBundle, ProbeVerification  # noqa: E402
from audiorepro.runner.kinds.probe.spec import ProbeStudyFile  # noqa: E402
from audiorepro.runner.kinds.retrieval.records import (  # noqa: E402
    RetrievalBundle,
    RetrievalVerification,
)
from audiorepro.runner.kinds.retrieval.spec import RetrievalStudyFile  # noqa: E402
from audiorepro.runner.kinds.speaker_verification import (  # noqa: E402
    SpeakerBundle,
    SpeakerVerification,
)
from audiorepro.runner.kinds.speaker_verification.spec import SpeakerVerificationStudyFile  # noqa: E402
from audiorepro.runner.kinds.zeroshot import ZeroshotBundle, ZeroshotVerification  # noqa: E402
from audiorepro.runner.kinds.zeroshot.spec import ZeroshotStudyFile  # noqa: E402
from audiorepro.specs.published import SCHEMA as PUBLISHED_SCHEMA  # noqa: E402
from audiorepro.specs.published import PublishedFile  # noqa: E402
from audiorepro.specs.registry import SCHEMA as REGISTRY_SCHEMA  # noqa: E402
from audiorepro.specs.registry import RegistryFile  # noqa: E402
from audiorepro.specs.schema import json_schema  # noqa: E402
from audiorepro.specs.study import SCHEMA as STUDY_SCHEMA  # noqa: E402

OUT = ROOT / "docs" / "schemas"
BASE = "https://audiorepro.invalid/schemas/"
#: file stem -> (type, title); TOML formats validate as the JSON of their parsed document.
FORMATS: dict[str, tuple[Any, str]] = {
    "study": (
        RetrievalStudyFile
        | ProbeStudyFile
        | ZeroshotStudyFile
        | LinearProbeStudyFile
        | SpeakerVerificationStudyFile
        | HearStudyFile,
        f"audiorepro study ({STUDY_SCHEMA}, TOML): a retrieval, probe, zero-shot, "
        "linear-probe, speaker-verification or HEAR study",
    ),
    "published": (PublishedFile, f"audiorepro published values ({PUBLISHED_SCHEMA}, TOML)"),
    "probe-published": (
        ProbePublishedFile,
        f"audiorepro published probe values ({PROBE_PUBLISHED_SCHEMA}, TOML): checked against "
        "a probe study's saved measurements",
    ),
    "registry": (RegistryFile, f"audiorepro checkpoint registry ({REGISTRY_SCHEMA}, TOML)"),
    "metrics": (MetricsReport, f"audiorepro metrics --json ({METRICS_SCHEMA})"),
    "measurements": (
        HeldOutFile | PublicFile | AdapterFile,
        "saved probe measurements (JSON) named by [run.metrics.<split>]: held-out metrics "
        "(test, validation, ...), public benchmarks (split 'public') or an adapter "
        "(split 'adapter...'); see docs/measurements.md",
    ),
    "verification": (
        RetrievalVerification
        | ProbeVerification
        | ZeroshotVerification
        | LinearProbeVerification
        | SpeakerVerification
        | HearVerification,
        "audiorepro reproduce: verification.json (retrieval, probe, zero-shot, linear-probe, "
        "speaker-verification or HEAR study)",
    ),
    "diff": (
        DiffDocument,
        f"audiorepro diff --json ({DIFF_SCHEMA}): two runs compared, every number with its "
        "tier, bound and causes",
    ),
    "bundle": (
        RetrievalBundle
        | ProbeBundle
        | ZeroshotBundle
        | LinearProbeBundle
        | SpeakerBundle
        | HearBundle,
        "audiorepro reproduce: bundle.json.gz, decompressed (retrieval, probe, zero-shot, "
        "linear-probe, speaker-verification or HEAR study)",
    ),
}


def build() -> dict[str, str]:
    """File name -> canonical JSON text of every schema."""
    return {
        f"{stem}.schema.json": json_dumps(
            json_schema(kind, title=title, schema_id=f"{BASE}{stem}.schema.json")
        )
        for stem, (kind, title) in FORMATS.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    texts = build()
    stale = sorted(
        name
        for name, text in texts.items()
        if not (OUT / name).is_file() or (OUT / name).read_text() != text
    )
    extra = sorted(p.name for p in OUT.glob("*.schema.json") if p.name not in texts)
    if args.check:
        for name in stale + extra:
            print(
                f"docs/schemas/{name} is not current: run python tools/schemas.py", file=sys.stderr
            )
        return 1 if stale or extra else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (OUT / name).write_text(texts[name])
        print(f"wrote docs/schemas/{name} ({len(json.loads(texts[name]).get('$defs', {}))} defs)")
    for name in extra:
        (OUT / name).unlink()
        print(f"removed docs/schemas/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
