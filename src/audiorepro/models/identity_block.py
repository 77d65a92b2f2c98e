"""The record of one checkpoint identity check (:func:`audiorepro.models.identity.compare`),
apart from the check itself: the bundles that hold it are read (``diff``, ``verify OUT``,
the schemas) without importing the model stack the check runs."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = ["IdentityBlock"]


class IdentityBlock(TypedDict):
    """One identity check (:func:`compare`): the fixture, both models, their embeddings'
    agreement and the verdict, as ``verification.json``'s ``checkpoint_identity`` holds it."""

    fixture: str
    n: int
    hf_checkpoint: str
    control: str
    audio_embedding_cosine_per_clip: list[float]
    text_embedding_cosine_per_clip: list[float]
    similarity_matrix_correlation: float | None
    similarity_matrix_max_abs_diff: float | None
    verdict: str  #: IDENTICAL, DIFFERENT or PREPROCESSING
    #: the weights compared (:func:`weights_report`) and the embeddings' summary
    weights: dict[str, Any]
    embeddings: dict[str, Any]
    diagnosis: dict[str, Any] | None  #: what differs, where the weights agree and embeddings not
    a: dict[str, Any]  #: each side's embedder meta
    b: dict[str, Any]
    n_captions: int
    clip_ids: list[str]
    determinism: dict[str, Any]  #: the kernels' settings (models.pipelines)
