"""Checkpoint registry files (``audiorepro.checkpoints/1``, TOML): the format, declared once.

What an entry means (which weights a name stands for, how they are verified and loaded) is
:mod:`audiorepro.models.registry`; this module only says what a registry file may hold
(JSON Schema in ``docs/schemas/registry.schema.json``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.specs.schema import Spec

SCHEMA = "audiorepro.checkpoints/1"
WeightSha256 = Annotated[
    str,
    Field(
        pattern=rf"^([0-9a-f]{{64}}|{PLACEHOLDER})$",
        description=f"the file's SHA-256: 64 hex digits or {PLACEHOLDER!r}",
    ),
]


class ArchitectureSpec(Spec):
    """laion-clap's model constructor arguments."""

    enable_fusion: bool = Field(False, description="a bool (true or false)")
    amodel: str = Field("HTSAT-tiny", description="the audio tower (laion-clap's amodel)")
    tmodel: str = Field("roberta", description="the text tower (laion-clap's tmodel)")


class EntrySpec(Spec):
    """One checkpoint: where its files are, what they must hash to, how to preprocess."""

    format: Literal["hf", "laion", "py", "hear"] = Field(
        description="'hf', 'laion', 'py' (a Python encoder) or 'hear' (a HEAR 2021 module)"
    )
    repo: str | None = Field(None, description="a hub repository (with a revision)")
    revision: str | None = Field(None, description="the full commit revision (40 hex)")
    path: str | None = Field(
        None, description="hf: a local folder; py: the encoder's .py file (relative to this file)"
    )
    file: str | None = Field(
        None, description="laion: the checkpoint file; hear: the weights file (relative path)"
    )
    module: str | None = Field(None, description="py, hear: the module's dotted name")
    factory: str | None = Field(None, description="py: the function returning the Encoder")
    hub_cache: str | None = Field(None, description="a hub cache folder for offline use")
    weights: dict[str, WeightSha256] = Field(
        min_length=1, description="a table of file name -> sha256 (at least one file)"
    )
    architecture: ArchitectureSpec = Field(default_factory=ArchitectureSpec, description="a table")
    preprocessing: dict[str, Any] = Field(
        default_factory=dict, description="a table of preprocessing settings"
    )
    files: dict[str, WeightSha256] = Field(
        default_factory=dict,
        description="a table of file name -> sha256 of the other files a model needs "
        "(config, tokenizer, preprocessor; the placeholder: pinned by the revision only)",
    )
    sizes: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, description="a table of file name -> size in bytes"
    )
    support: list[str] = Field(
        default_factory=list, description="names of [support.NAME] repositories it loads"
    )
    description: str | None = Field(None, description="what the checkpoint is")
    provenance: str | None = Field(None, description="where each value was seen, how sure")


class SupportSpec(Spec):
    """A hub repository a model's library loads by itself (laion-clap's text models)."""

    repo: str = Field(description="the hub repository id")
    revision: str = Field(pattern=r"^[0-9a-f]{40}$", description="the full commit (40 hex)")
    allow: list[str] = Field(default_factory=list, description="file names or glob patterns")
    weights_one_of: list[str] = Field(
        default_factory=list, description="weight files: the first the revision has is fetched"
    )
    provenance: str | None = Field(None, description="where the revision was seen, how sure")


class RegistryFile(Spec):
    """A checkpoint registry (``audiorepro.checkpoints/1``)."""

    schema_: str = Field(alias="schema", pattern=f"^{SCHEMA}$", description=repr(SCHEMA))
    checkpoints: dict[str, EntrySpec] = Field(
        min_length=1, description="[checkpoints.NAME] tables (at least one)"
    )
    support: dict[str, SupportSpec] = Field(
        default_factory=dict, description="[support.NAME] hub repositories (fetched pinned)"
    )
