"""``hear-mlp-v1``: HEAR 2021's downstream predictor, heareval 2021.1.3's
``heareval/predictions/task_predictions.py`` in plain torch (no pytorch-lightning).

The definition (docs/hear.md, "hear-mlp-v1"), per task:

1. Seeding, once per task, as ``seed_everything(42)``: Python's ``random`` and torch's
   generator seeded with 42 (here a forked torch generator, so the caller's is untouched).
2. Grid: heareval's ``PARAM_GRID`` (or ``FAST``/``FASTER``), updated by heareval's
   ``TASK_SPECIFIC_PARAM_GRID`` for the task's name and the task's
   ``evaluation_params.task_specific_param_grid``; its points in scikit-learn's
   ``ParameterGrid`` order, shuffled by ``random.shuffle`` (the seeded generator); the first
   ``grid_points`` (8) are trained on the first data split (train/valid, or fold 0's).
3. Training one point (heareval's model and pytorch-lightning 1.9.5's loop): the network
   ``[Linear -> norm -> Dropout -> ReLU] x hidden_layers -> Linear`` built in heareval's order
   (torch's default init, then ``initialization(weight, gain)``), one ``torch.rand(64, dim)``
   draw (heareval's ``torchinfo.summary`` input), the optimizer; each epoch one int64 draw
   (the training DataLoader's base seed), the training rows in file order (never shuffled:
   heareval passes the split as a list, so its ``split_name == "train"`` test is false) in
   batches, ``zero_grad``, loss (cross-entropy on the one-hot's argmax, or BCE with logits),
   ``backward``, ``step``; every ``check_val_every_n_epoch`` epochs one more draw (the
   validation DataLoader) and validation in eval mode: the first score of the task (an event
   task's on the events of the best post-processing setting, chosen as heareval's
   ``sort(reverse=True)`` of (score with NaN as 0, setting) chooses) or, where the task sets
   ``use_scoring_for_early_stopping`` false, the validation loss. The monitored value is
   compared as pytorch-lightning logs it (:func:`logged`: float32, or float64 for a score
   heareval returns as a numpy float64): a strictly better one
   (or the first) is the checkpoint; early stopping stops on a non-finite value or after
   ``patience`` validations without a strictly better one.
4. Model selection: points sorted (stably) by their checkpoint's validation value; the best
   point's hyperparameters are trained on the other data splits (folds), in order, on the
   same generator.
5. Test: each split's checkpoint in eval mode on its test rows; an event task's events with
   the post-processing chosen at the checkpoint's epoch.

Rows are in heareval's order (:func:`audiorepro.formats.hear_embeddings.row_order`), so that
the same generator draws give the same network; tests/test_hear_mlp.py runs heareval's own
predictor on the same embeddings and compares the predictions.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.formats.hear import METADATA_FILE, HearTask, data_splits
from audiorepro.formats.hear_embeddings import frame_labels, row_order
from audiorepro.metrics import hear as scores
from audiorepro.metrics.hear_events import Setting, events_by_file, postprocessing_settings
from audiorepro.runner.kinds.hear.frames import _event_score, _twin_score
from audiorepro.runner.kinds.hear.scene import (
    SCENE_SCORES,
    TWIN_SCORES,
    FoldPrediction,
    fold_scores,
)
from audiorepro.runner.kinds.hear.spec import MLP

if TYPE_CHECKING:
    import torch

SEED: Final = 42
#: heareval's ``torchinfo.summary(self.predictor, input_size=(64, nfeatures))`` draws this.
SUMMARY_ROWS: Final = 64

#: heareval 2021.1.3's ``PARAM_GRID`` (torch classes and functions by name).
PARAM_GRID: Final[dict[str, tuple[Any, ...]]] = {
    "hidden_layers": (1, 2),
    "hidden_dim": (1024,),
    "dropout": (0.1,),
    "lr": (3.2e-3, 1e-3, 3.2e-4, 1e-4),
    "patience": (20,),
    "max_epochs": (500,),
    "check_val_every_n_epoch": (3,),
    "batch_size": (1024,),
    "hidden_norm": ("BatchNorm1d",),
    "norm_after_activation": (False,),
    "embedding_norm": ("Identity",),
    "initialization": ("xavier_uniform_", "xavier_normal_"),
    "optim": ("Adam",),
}
GRIDS: Final[dict[str, dict[str, tuple[Any, ...]]]] = {
    "default": PARAM_GRID,
    "fast": {**PARAM_GRID, "max_epochs": (10, 50), "check_val_every_n_epoch": (3, 10)},
    "faster": {
        **PARAM_GRID,
        "hidden_layers": (0, 1),
        "hidden_dim": (64, 128),
        "patience": (1, 3),
        "max_epochs": (10,),
        "check_val_every_n_epoch": (1,),
    },
}
#: heareval's ``TASK_SPECIFIC_PARAM_GRID`` ("sed_eval is very slow").
TASK_SPECIFIC_PARAM_GRID: Final = {"dcase2016_task2": {"check_val_every_n_epoch": (10,)}}
#: heareval's runner's default number of grid points.
GRID_POINTS: Final = 8

_NORMS: Final = ("BatchNorm1d", "Identity", "LayerNorm")
_COUNTS: Final = frozenset(
    {"batch_size", "check_val_every_n_epoch", "hidden_dim", "max_epochs", "patience"}
)
_INITS: Final = ("xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_")
_CHOICES: Final[dict[str, tuple[Any, ...]]] = {
    "hidden_norm": _NORMS,
    "embedding_norm": _NORMS,
    "initialization": _INITS,
    "optim": ("Adam", "SGD"),
}


@dataclass(frozen=True)
class GridPoint:
    """One point of the grid (heareval's ``conf``)."""

    batch_size: int
    check_val_every_n_epoch: int
    dropout: float
    embedding_norm: str
    hidden_dim: int
    hidden_layers: int
    hidden_norm: str
    initialization: str
    lr: float
    max_epochs: int
    norm_after_activation: bool
    optim: str
    patience: int

    def hparams(self) -> dict[str, Any]:
        """As ``test.predicted-scores.json`` records them (torch names spelled out)."""
        out: dict[str, Any] = dict(sorted(self.__dict__.items()))
        out["hidden_norm"] = f"torch.nn.{self.hidden_norm}"
        out["embedding_norm"] = f"torch.nn.{self.embedding_norm}"
        out["initialization"] = f"torch.nn.init.{self.initialization}"
        out["optim"] = f"torch.optim.{self.optim}"
        return out


def _check_values(key: str, values: Any, src: Path, where: str) -> tuple[Any, ...]:
    def bad(message: str) -> UserError:
        return UserError(message, source=src, key=where)

    if not isinstance(values, list | tuple) or not values:
        raise bad(f"expected a non-empty list of values, got {values!r}")
    if key in _CHOICES:
        wrong = [v for v in values if v not in _CHOICES[key]]
        if wrong:
            raise bad(f"{wrong[0]!r} is not one of {list(_CHOICES[key])}")
    elif key == "norm_after_activation":
        if not all(isinstance(v, bool) for v in values):
            raise bad(f"expected true or false, got {values!r}")
    elif not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise bad(f"expected numbers, got {values!r}")
    elif key in _COUNTS and not all(isinstance(v, int) and v >= 1 for v in values):
        raise bad(f"expected whole numbers of at least 1, got {values!r}")
    return tuple(values)


def grid_points(task: HearTask, grid: str = "default") -> list[GridPoint]:
    """The task's grid points in heareval's order before sampling: ``ParameterGrid`` over the
    sorted keys (the last key varying fastest), then ``random.shuffle`` seeded with 42.

    >>> from pathlib import Path
    >>> from audiorepro.formats.hear import HearTaskMetadata
    >>> meta = HearTaskMetadata("t", None, None, "scene", "multiclass", "trainvaltest",
    ...     ("train", "valid", "test"), 1.0, ("top1_acc",), True, {})
    >>> points = grid_points(HearTask(Path("t"), meta, (), {}, {}))
    >>> len(points), points[0].hidden_layers, points[0].lr, points[0].initialization
    (16, 1, 0.0001, 'xavier_normal_')
    """
    if grid not in GRIDS:
        raise UserError(f"{grid!r} is not one of {sorted(GRIDS)}", key="grid")
    final: dict[str, tuple[Any, ...]] = dict(GRIDS[grid])
    final.update(TASK_SPECIFIC_PARAM_GRID.get(task.metadata.task_name, {}))
    extra = task.metadata.evaluation_params.get("task_specific_param_grid", {})
    src = task.path / METADATA_FILE
    where = "evaluation_params.task_specific_param_grid"
    if not isinstance(extra, dict):
        raise UserError(f"expected a JSON object, got {extra!r}", source=src, key=where)
    for key, values in extra.items():
        if key not in PARAM_GRID:
            raise UserError(
                f"is not one of heareval's grid keys {sorted(PARAM_GRID)}",
                source=src,
                key=f"{where}.{key}",
            )
        final[key] = _check_values(key, values, src, f"{where}.{key}")
    keys = sorted(final)
    points = [
        GridPoint(**dict(zip(keys, values, strict=True)))
        for values in itertools.product(*(final[k] for k in keys))
    ]
    if any(p.max_epochs < p.check_val_every_n_epoch for p in points):
        raise UserError(
            "has a point whose max_epochs is below its check_val_every_n_epoch (no validation "
            "would run, heareval fails)",
            source=src,
            key=where,
        )
    random.Random(SEED).shuffle(points)
    return points


# --- rows ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """A split group's rows in heareval's order: features, multi-hot targets, and for event
    tasks each row's file and timestamp (ms)."""

    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.float32]
    files: list[str]
    stamps: list[float]
    splits: tuple[str, ...]


def task_rows(
    task: HearTask,
    emb: Mapping[str, Mapping[str, Any]],
    stamps: Mapping[str, Mapping[str, Any]] | None,
    splits: Sequence[str],
) -> Rows:
    """The rows of ``splits`` (concatenated in the given order, as heareval's ConcatDataset),
    each split's files in the order its ``<split>.embeddings.npy`` holds them."""
    index = {label: i for i, label in enumerate(task.vocabulary)}
    order = row_order(task)
    xs: list[Any] = []
    ys: list[npt.NDArray[np.float32]] = []
    files: list[str] = []
    times: list[float] = []
    for s in splits:
        for name in order[s]:
            if stamps is None:
                xs.append(np.asarray(emb[s][name], dtype=np.float32)[None])
                labels: list[list[str]] = [list(task.scene_labels[s][name])]
            else:
                xs.append(np.asarray(emb[s][name], dtype=np.float32))
                labels = frame_labels(task.events[s][name], stamps[s][name])
                files += [name] * len(labels)
                times += [float(t) for t in stamps[s][name]]
            y = np.zeros((len(labels), len(index)), dtype=np.float32)
            for i, row in enumerate(labels):
                y[i, [index[label] for label in row]] = 1.0
            ys.append(y)
    return Rows(np.concatenate(xs), np.concatenate(ys), files, times, tuple(splits))


# --- one grid point ------------------------------------------------------------------------


@contextmanager
def _seeded() -> Iterator[None]:
    """torch's default generator seeded with 42 for the task (restored afterwards), one
    intra-op thread (float32 sums in a fixed order on every machine)."""
    import torch

    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def build_network(nfeatures: int, nlabels: int, point: GridPoint) -> torch.nn.Module:
    """heareval's ``FullyConnectedPrediction`` (its modules built in its order), after its
    unused ``embedding_norm`` (no draws)."""
    import torch

    init = getattr(torch.nn.init, point.initialization)
    norm = getattr(torch.nn, point.hidden_norm)
    net = torch.nn.Module()
    net.embedding_norm = getattr(torch.nn, point.embedding_norm)(nfeatures)
    layers: list[torch.nn.Module] = []
    dim, last = nfeatures, "linear"
    for _ in range(point.hidden_layers):
        linear = torch.nn.Linear(dim, point.hidden_dim)
        init(linear.weight, gain=torch.nn.init.calculate_gain(last))
        layers.append(linear)
        if not point.norm_after_activation:
            layers.append(norm(point.hidden_dim))
        layers += [torch.nn.Dropout(point.dropout), torch.nn.ReLU()]
        if point.norm_after_activation:
            layers.append(norm(point.hidden_dim))
        dim, last = point.hidden_dim, "relu"
    net.hidden = torch.nn.Sequential(*layers) if layers else torch.nn.Identity()
    net.projection = torch.nn.Linear(dim, nlabels)
    init(net.projection.weight, gain=torch.nn.init.calculate_gain(last))
    return net


def _logits(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return net.projection(net.hidden(x))


def _loss(logits: torch.Tensor, y: torch.Tensor, multilabel: bool) -> torch.Tensor:
    import torch

    if multilabel:
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
    return torch.nn.functional.cross_entropy(logits, y.argmax(dim=1))


def _activation(logits: torch.Tensor, multilabel: bool) -> torch.Tensor:
    import torch

    return torch.sigmoid(logits) if multilabel else torch.softmax(logits, dim=1)


def _draw() -> None:
    """A DataLoader iterator's base seed: one int64 from torch's default generator."""
    import torch

    torch.empty((), dtype=torch.int64).random_()


def predict(
    net: torch.nn.Module, x: npt.NDArray[np.float32], batch: int, multilabel: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode logits and activations (softmax or sigmoid), in batches of ``batch`` rows."""
    import torch

    net.eval()
    with torch.inference_mode():
        parts = [_logits(net, torch.from_numpy(x[i : i + batch])) for i in range(0, len(x), batch)]
        logits = torch.cat(parts)
    return logits, _activation(logits, multilabel)


Scorer = Callable[[npt.NDArray[np.float32]], tuple[float, Setting | None]]


@dataclass(frozen=True)
class Trained:
    """One trained point on one data split: its checkpoint and validation value."""

    point: GridPoint
    state: dict[str, Any]
    validation: float  # the monitored value at the checkpoint, as heareval logs it
    score: float  # the task's first validation score there (float64; the loss when monitored)
    epoch: int
    setting: Setting | None


def _better(a: float, b: float, maximize: bool) -> bool:
    return a > b if maximize else a < b


def train_point(
    point: GridPoint, train: Rows, valid: Rows, multilabel: bool, monitor: Monitor
) -> Trained:
    """One point trained as pytorch-lightning 1.9.5 runs heareval's model (module docstring)."""
    import torch

    net = build_network(train.x.shape[1], train.y.shape[1], point)
    torch.rand(SUMMARY_ROWS, train.x.shape[1])  # torchinfo.summary's input
    optim = getattr(torch.optim, point.optim)(net.parameters(), lr=point.lr)
    x, y = torch.from_numpy(train.x), torch.from_numpy(train.y)
    best: Trained | None = None
    es_best = -math.inf if monitor.maximize else math.inf
    wait = 0
    for epoch in range(point.max_epochs):
        _draw()
        net.train()
        for i in range(0, len(x), point.batch_size):
            loss = _loss(_logits(net, x[i : i + point.batch_size]), y[i : i + point.batch_size],
                         multilabel)  # fmt: skip
            optim.zero_grad()
            loss.backward()
            optim.step()
        if (epoch + 1) % point.check_val_every_n_epoch:
            continue
        _draw()
        logits, probs = predict(net, valid.x, point.batch_size, multilabel)
        value, score, setting = monitor(logits, probs, valid)
        ckpt = value if not math.isnan(value) else (-math.inf if monitor.maximize else math.inf)
        if best is None or _better(value, best.validation, monitor.maximize):
            state = copy.deepcopy(net.state_dict())
            best = Trained(point, state, ckpt, score, epoch, setting)
        if not math.isfinite(value):
            break
        if _better(value, es_best, monitor.maximize):
            es_best, wait = value, 0
        else:
            wait += 1
            if wait >= point.patience:
                break
    if best is None:
        raise UserError(
            f"no validation ran: max_epochs {point.max_epochs} < check_val_every_n_epoch "
            f"{point.check_val_every_n_epoch}",
            key="evaluation_params.task_specific_param_grid",
        )
    return best


# --- validation values ---------------------------------------------------------------------

#: Scores heareval's score classes return as numpy float64 (on the locked stack: ``d_prime``,
#: ``np.mean``); pytorch-lightning's ``self.log`` keeps that dtype, and turns the others
#: (Python floats) into float32 tensors.
FLOAT64_LOGGED: Final = frozenset({"d_prime"})


def logged(name: str, value: float) -> float:
    """A score as heareval logs it, and so compares it: float64 or rounded to float32.

    >>> logged("top1_acc", 0.1), logged("d_prime", 0.1)
    (0.10000000149011612, 0.1)
    """
    return value if name in FLOAT64_LOGGED else float(np.float32(value))


@dataclass(frozen=True)
class Monitor:
    """What validation monitors: the task's first score (or the loss), and the direction."""

    task: HearTask
    maximize: bool
    use_score: bool
    multilabel: bool

    def __call__(
        self, logits: torch.Tensor, probs: torch.Tensor, valid: Rows
    ) -> tuple[float, float, Setting | None]:
        """(the value compared, float32; the float64 value; the event setting chosen)."""
        import torch

        if not self.use_score:
            loss = _loss(logits, torch.from_numpy(valid.y), self.multilabel)
            value = float(loss.item())
            return value, value, self.single_setting()
        p = probs.numpy()
        if self.task.metadata.embedding_type == "event":
            value, setting = best_setting(self.task, p, valid)
        else:
            name = self.task.metadata.evaluation[0]
            value, setting = _scene_score(name, p, valid.y), None
        return logged(self.task.metadata.evaluation[0], value), value, setting

    def single_setting(self) -> Setting | None:
        if self.task.metadata.embedding_type != "event":
            return None
        settings = postprocessing_settings(_pp_grid(self.task))
        if len(settings) != 1:
            raise UserError(
                "with use_scoring_for_early_stopping false heareval needs a one-setting "
                f"event_postprocessing_grid, got {len(settings)} settings",
                source=self.task.path,
                key="evaluation_params.event_postprocessing_grid",
            )
        return settings[0]


def _scene_score(name: str, probs: Any, y: Any) -> float:
    return SCENE_SCORES[name](probs, y)


def _pp_grid(task: HearTask) -> Any:
    return task.metadata.evaluation_params.get("event_postprocessing_grid")


def _event_value(name: str, task: HearTask, probs: Any, rows: Rows, setting: Setting) -> float:
    events = events_by_file(probs, rows.files, rows.stamps, task.vocabulary, setting)
    return _event_score(name, events, task, rows.splits)


def best_setting(task: HearTask, probs: Any, rows: Rows) -> tuple[float, Setting]:
    """heareval's choice: ``max`` of (first score with NaN as 0, setting), i.e. the highest
    score, ties to the larger setting (its ``sort(reverse=True)``, also for error rates)."""
    name = task.metadata.evaluation[0]
    tried = []
    for setting in postprocessing_settings(_pp_grid(task)):
        value = _event_value(name, task, probs, rows, setting)
        tried.append((0.0 if math.isnan(value) else value, setting, value))
    _, setting, value = max(tried, key=lambda t: (t[0], t[1]))
    return value, setting


# --- a task --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MlpFold:
    """One data split's checkpoint on its validation and test rows."""

    trained: Trained
    valid_probs: npt.NDArray[np.float32]
    test_probs: npt.NDArray[np.float32]
    valid: Rows
    test: Rows


@dataclass(frozen=True)
class MlpTask:
    """The task's folds (keyed by the test split(s) joined with ``|``), the chosen point and
    every sampled point's validation value (in sampled order)."""

    folds: dict[str, MlpFold]
    point: GridPoint
    sampled: list[tuple[GridPoint, float]]


def _fold(
    point: GridPoint,
    rows: Callable[[Sequence[str]], Rows],
    split: Mapping[str, Sequence[str]],
    monitor: Monitor,
) -> MlpFold:
    valid, test = rows(split["valid"]), rows(split["test"])
    trained = train_point(point, rows(split["train"]), valid, monitor.multilabel, monitor)
    return MlpFold(trained, np.empty(0, np.float32), np.empty(0, np.float32), valid, test)


def _test(fold: MlpFold, multilabel: bool, nfeatures: int, nlabels: int) -> MlpFold:
    point = fold.trained.point
    net = build_network_no_draws(nfeatures, nlabels, point)
    net.load_state_dict(fold.trained.state)
    _, pv = predict(net, fold.valid.x, point.batch_size, multilabel)
    _, pt = predict(net, fold.test.x, point.batch_size, multilabel)
    return MlpFold(fold.trained, pv.numpy(), pt.numpy(), fold.valid, fold.test)


def build_network_no_draws(nfeatures: int, nlabels: int, point: GridPoint) -> torch.nn.Module:
    """The network's shape for loading a checkpoint, on a throwaway generator."""
    import torch

    with torch.random.fork_rng(devices=[]):
        return build_network(nfeatures, nlabels, point)


def mlp_task(
    task: HearTask,
    emb: Mapping[str, Mapping[str, Any]],
    stamps: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    grid: str = "default",
    points: int = GRID_POINTS,
) -> MlpTask:
    """``hear-mlp-v1`` on a task's embeddings (split -> file -> array; ``stamps`` for event
    tasks): the module docstring's steps 1-5."""
    meta = task.metadata
    multilabel = meta.prediction_type == "multilabel"
    use_score = meta.use_scoring_for_early_stopping
    maximize = scores.HEAR_SCORE_DIRECTIONS[meta.evaluation[0]] if use_score else False
    monitor = Monitor(task, maximize, use_score, multilabel)
    cache: dict[tuple[str, ...], Rows] = {}

    def rows(splits: Sequence[str]) -> Rows:
        key = tuple(splits)
        if key not in cache:
            cache[key] = task_rows(task, emb, stamps, key)
            counts = cache[key].y.sum(axis=1)
            if not multilabel and np.any(counts != 1):  # heareval asserts one label a row
                raise UserError(
                    f"is a multiclass task, but {int(np.sum(counts != 1))} rows of "
                    f"{'|'.join(key)} have no label or several (hear-mlp-v1 needs exactly one)",
                    source=task.path / METADATA_FILE,
                    key="prediction_type",
                )
        return cache[key]

    splits = data_splits(meta)
    candidates = grid_points(task, grid)[:points]
    with _seeded():
        first = [_fold(p, rows, splits[0], monitor) for p in candidates]
        ranked = sorted(first, key=lambda f: f.trained.validation, reverse=maximize)
        chosen = ranked[0]
        folds = [chosen] + [_fold(chosen.trained.point, rows, s, monitor) for s in splits[1:]]
        dims = (chosen.valid.x.shape[1], chosen.valid.y.shape[1])
        tested = [_test(f, multilabel, *dims) for f in folds]
    keys = ["|".join(s["test"]) for s in splits]
    return MlpTask(
        dict(zip(keys, tested, strict=True)),
        chosen.trained.point,
        [(f.trained.point, f.trained.validation) for f in first],
    )


# --- a hear cell ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MlpCell:
    """What a ``hear`` cell records of the predictor: per test split the test scores and the
    validation value, the twin's test scores, event settings, and the chosen hyperparameters
    (with each split's checkpoint epoch)."""

    folds: dict[str, tuple[dict[str, float], float]]
    twins: dict[str, dict[str, float]]
    settings: dict[str, Setting] | None
    hparams: dict[str, Any]
    epochs: dict[str, int]


def _event_fold_scores(task: HearTask, fold: MlpFold, twin: bool) -> dict[str, float]:
    setting = fold.trained.setting
    assert setting is not None  # event tasks always choose (or are given) one
    rows = fold.test
    events = events_by_file(fold.test_probs, rows.files, rows.stamps, task.vocabulary, setting)
    score = _twin_score if twin else _event_score
    return {n: score(n, events, task, rows.splits) for n in task.metadata.evaluation}


def mlp_cell(
    task: HearTask,
    emb: Mapping[str, Mapping[str, Any]],
    stamps: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    grid: str = "default",
    points: int = GRID_POINTS,
) -> MlpCell:
    """:func:`mlp_task` scored as a ``hear`` cell scores: the kit's scores
    (:mod:`audiorepro.metrics.hear`) and the twin's over the same predictions."""
    fit = mlp_task(task, emb, stamps, grid=grid, points=points)
    names = task.metadata.evaluation
    folds: dict[str, tuple[dict[str, float], float]] = {}
    twins: dict[str, dict[str, float]] = {}
    for key, fold in fit.folds.items():
        if task.metadata.embedding_type == "event":
            folds[key] = (_event_fold_scores(task, fold, False), fold.trained.score)
            twins[key] = _event_fold_scores(task, fold, True)
            continue
        pred = FoldPrediction(
            np.asarray(fold.valid_probs, dtype=np.float64),
            np.asarray(fold.valid.y, dtype=np.float64),
            np.asarray(fold.test_probs, dtype=np.float64),
            np.asarray(fold.test.y, dtype=np.float64),
        )
        folds[key] = (fold_scores(names, pred)[0], fold.trained.score)
        twins[key] = fold_scores(names, pred, TWIN_SCORES)[0]
    settings = None
    if task.metadata.embedding_type == "event":
        settings = {k: f.trained.setting for k, f in fit.folds.items() if f.trained.setting}
    hparams = {"predictor": MLP, "grid": grid, "grid_points": points, **fit.point.hparams()}
    epochs = {k: f.trained.epoch for k, f in fit.folds.items()}
    return MlpCell(folds, twins, settings, hparams, epochs)
