"""The ``audiorepro`` group and entry point, light enough for ``--help`` and ``--version``.

People call audiorepro in loops (a ``trec-eval`` per run file, a ``verify`` per folder in CI),
and start-up is paid every time. So the group knows its commands by name and by the module
that defines them (:data:`COMMANDS`), and imports a command's module only when that command
runs or its own ``--help`` is asked for; ``audiorepro --help`` prints the summaries kept here
(tests/test_cli_startup.py checks that each equals its command's help, and that ``--help``
imports neither numba, scipy, torch nor the report renderer).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import click

from audiorepro import __version__
from audiorepro.cli.guard import GuardedCommand
from audiorepro.core.errors import EXIT_BAD_INPUT, EXIT_OK, WRITE_ERRNOS, UserError
from audiorepro.core.progress import quiet_library_bars


class CommandEntry(NamedTuple):
    """Where a command is defined and the first paragraph of its help (its summary)."""

    module: str
    summary: str


#: Every command: its name, the module whose import registers it on :data:`cli`, and its
#: summary (the first paragraph of its help, as ``audiorepro --help`` shortens it).
COMMANDS: dict[str, CommandEntry] = {
    "diff": CommandEntry(
        "audiorepro.cli.diff",
        "Compare two runs (output folders of reproduce, or their bundle.json.gz): every "
        "number equal or moved, the cause of each move from the runs' records, and a verdict.",
    ),
    "evaluate": CommandEntry(
        "audiorepro.cli.evaluate",
        "Evaluate MODEL (hf:ORG/NAME@COMMIT with its 40-hex hub commit, laion:PATH, a "
        "registry name or a local folder) on DATASETs (clotho-eval, audiocaps-test, esc50 as "
        "`fetch --data DATA` prepared them, or a prepared folder): the same output folder as "
        "a study (report, tables, bundle, manifest), and the study file it ran in "
        "OUT/cache/evaluate/, to rerun and verify.",
    ),
    "explain": CommandEntry(
        "audiorepro.cli.metrics",
        "Each metric of DUMP under every profile side by side, and why each differs.",
    ),
    "extract": CommandEntry(
        "audiorepro.cli.extraction",
        "Embed every clip and caption with one model and write the dump format (.npz).",
    ),
    "extract-part": CommandEntry(
        "audiorepro.cli.slurm",
        "One array task of `reproduce --executor slurm` (and of `slurm-template` scripts): a "
        "shard of a cell's extraction, written atomically with a SHA-256 record.",
    ),
    "fetch": CommandEntry(
        "audiorepro.cli.install",
        "Download checkpoints (at their pinned hub commit) and datasets, and check every "
        "file's hash before reporting success; the only command that downloads.",
    ),
    "hear": CommandEntry(
        "audiorepro.cli.hear",
        "MODEL (hear:MODULE[:WEIGHTS], py:MODULE:FACTORY or a registry entry) over HEAR "
        "tasks: embeddings by the module's own get_scene_embeddings (get_timestamp_embeddings "
        "for event tasks; a py: encoder's embed_audio and embed_frames) through the "
        "extraction cache, the predictor on heareval's splits, heareval's scores "
        "(docs/hear.md). With --executor slurm, each task's embeddings are an array task; a "
        "failed task is named (exit 1) and a rerun submits only what is missing.",
    ),
    "hear-table": CommandEntry(
        "audiorepro.cli.hear_table",
        "One table across encoders from HEAR runs (output folders of `audiorepro hear` or of "
        "hear studies): encoders x tasks, each number linked to its run (folder, bundle "
        "SHA-256) with the module's weights' SHA-256 and embedding size (docs/hear.md).",
    ),
    "identity": CommandEntry(
        "audiorepro.cli.identity",
        "Are two checkpoints the same? Weights tensor by tensor, then fixture embeddings.",
    ),
    "linear-probe": CommandEntry(
        "audiorepro.cli.linear_probe",
        "The linear-v1 probe (docs/linear-probe.md) on DUMP's audio_embeds, leaving one fold "
        "of LABELS out at a time: accuracy per fold and their mean.",
    ),
    "list": CommandEntry(
        "audiorepro.cli.listing",
        "List the registered checkpoints, datasets, profiles or studies (WHAT; all four "
        "without it), with their pins and whether they are here (and the command that fetches "
        "what is not).",
    ),
    "lock": CommandEntry(
        "audiorepro.cli.lock",
        "Write the lock file STUDY names (its `lock` key): every saved file the probe study "
        "reads (its runs' measurement and config files, the tree's study.json, the gates' job "
        "records) with its SHA-256. Later `reproduce` and `verify --golden` refuse the study "
        "(exit 2) when any of them changed (`verify STUDY` does not check it). Exit 0 when "
        "written; 2 for bad input.",
    ),
    "merge": CommandEntry(
        "audiorepro.cli.extraction",
        "Join the parts of one sharded extraction (extract --shard i/n) into one dump.",
    ),
    "metrics": CommandEntry(
        "audiorepro.cli.metrics",
        "Every retrieval metric of DUMP, both directions, with tie bounds (canonical), or "
        "under a peer's own definitions and names (--profile).",
    ),
    "parity": CommandEntry(
        "audiorepro.cli.metrics",
        "Check the fast harness against the independent reference on each DUMP.",
    ),
    "probe-metrics": CommandEntry(
        "audiorepro.cli.metrics",
        "Every probe metric that PREDICTIONS (.npz) supports: regression, classification, events.",
    ),
    "reproduce": CommandEntry(
        "audiorepro.cli.study",
        "Regenerate every table, the report, the bundle and the manifest of a study.",
    ),
    "selfcheck": CommandEntry(
        "audiorepro.cli.install",
        "Check this installation: golden values, harness vs reference, tiny-model identity, "
        "and the installed packages against the lock. Under a minute on a CPU, offline.",
    ),
    "sign": CommandEntry(
        "audiorepro.cli.sign",
        "Sign the output folder OUT of `reproduce`: write OUT/attestation.intoto.json, an "
        "in-toto statement of every file of the run with its SHA-256 and the run's record, in "
        "a DSSE envelope signed with KEY. The folder must match its manifest.json. `verify "
        "OUT --key PUBLIC_KEY` checks it. Exit 0 when written; 2 for bad input.",
    ),
    "slurm-template": CommandEntry(
        "audiorepro.cli.slurm",
        "Print an sbatch array script that extracts what STUDY still needs, for users who "
        "submit by hand; then `reproduce STUDY --out OUT --executor slurm` merges and "
        "reports.",
    ),
    "tiny-models": CommandEntry(
        "audiorepro.cli.install",
        "Write one random tiny CLAP model in both formats, a local hub cache and "
        "DIR/registry.toml.",
    ),
    "trec-eval": CommandEntry(
        "audiorepro.cli.trec",
        "Evaluate a TREC RUN file (``-``: standard input) against QRELS, printing trec_eval's "
        "lines. -D's debugging output is not printed (its QID filter is honoured).",
    ),
    "verify": CommandEntry(
        "audiorepro.cli.study",
        "Check published values: one line per value, PASS, FAIL or NOT VERIFIED.",
    ),
}


def summary_of(command: click.Command) -> str:
    """The first paragraph of a command's help, as click shortens it for a group's help."""
    text = command.help or ""
    return text.split("\n\n")[0].strip()


class LazyGroup(click.Group):
    """A group that imports a command's module on first use (see :data:`COMMANDS`); every
    command keeps its output files apart from its inputs (:mod:`audiorepro.cli.guard`)."""

    command_class = GuardedCommand

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if cmd_name not in self.commands and entry is not None:
            importlib.import_module(entry.module)  # registers the command on this group
        return self.commands.get(cmd_name)

    def load_all(self) -> None:
        """Import every command's module (for tools that walk every command)."""
        for entry in COMMANDS.values():
            importlib.import_module(entry.module)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            entry = COMMANDS.get(name)
            command = self.commands.get(name)
            if entry is not None:
                text = click.Command(name, help=entry.summary).get_short_help_str(limit)
            elif command is not None and not command.hidden:
                text = command.get_short_help_str(limit)
            else:
                continue
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="audiorepro")
def cli() -> None:
    """Re-derive published audio-embedding benchmark numbers and prove they still hold."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the CLI and turns user errors into one line and exit code 2."""
    quiet_library_bars()  # a log file gets stage lines, not libraries' carriage returns
    try:
        cli.main(args=argv, prog_name="audiorepro", standalone_mode=False)
    except UserError as exc:
        click.echo(f"audiorepro: error: {exc}", err=True)
        return EXIT_BAD_INPUT
    except click.exceptions.Abort:
        click.echo("audiorepro: aborted", err=True)
        return EXIT_BAD_INPUT
    except click.UsageError as exc:
        # One line, like every other user error, with where to look for the right usage.
        where = exc.ctx.command_path if exc.ctx is not None else "audiorepro"
        click.echo(f"audiorepro: error: {exc.format_message()} (see '{where} --help')", err=True)
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        click.echo(f"audiorepro: error: {exc.format_message()}", err=True)
        return EXIT_BAD_INPUT
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_BAD_INPUT
    except OSError as exc:
        # The last resort for a file system that refuses (full, quota, size limit, read-only,
        # permission) where no writer said which output it was: still one line naming the
        # path, never a traceback. Every other OSError is a bug and keeps its traceback.
        if exc.errno not in WRITE_ERRNOS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(
            f"audiorepro: error: {where}cannot be accessed: {WRITE_ERRNOS[exc.errno]}", err=True
        )
        return EXIT_BAD_INPUT
    return EXIT_OK
