"""A strict reader of Apptainer definition files, and their emulation as a Containerfile.

No apptainer binary is reachable where audiorepro is developed and tested, so ``apptainer.def``
is checked in two steps: :func:`parse` reads it strictly (known header keys and bootstrap
agents, known sections, no section twice, labels as ``KEY VALUE``), failing with the line
number, where spython accepts misspelled sections and headers silently; :func:`containerfile`
then translates it into a Containerfile that podman builds on the image the definition
bootstraps from, laying out ``/.singularity.d`` as apptainer does (environment script,
runscript, test script, help), so that ``%runscript`` and ``%test`` can be run. That is an
emulation, not an apptainer build: it does not check apptainer's own image conversion, its
mounts, ``--nv`` or SIF signing.

Stdlib only: ``tools/container.py`` runs it without installing the package.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

#: Header keywords of Apptainer's definition-file format (user guide, "Definition Files").
HEADER_KEYS = {
    "Bootstrap",
    "From",
    "Stage",
    "Registry",
    "Namespace",
    "IncludeCmd",
    "MirrorURL",
    "OSVersion",
    "Include",
    "Fingerprints",
    "Library",
    "Confurl",
    "Updateurl",
    "Product",
    "User",
    "Regcode",
    "Setopt",
}
BOOTSTRAP_AGENTS = {
    "docker",
    "docker-archive",
    "docker-daemon",
    "oci",
    "oci-archive",
    "library",
    "localimage",
    "shub",
    "debootstrap",
    "yum",
    "zypper",
    "arch",
    "busybox",
    "scratch",
}
SECTIONS = {
    "setup",
    "files",
    "environment",
    "post",
    "runscript",
    "startscript",
    "test",
    "labels",
    "help",
    "arguments",
}
APP_SECTIONS = {"appinstall", "apprun", "appfiles", "appenv", "applabels", "apphelp", "apptest"}
#: What the emulation translates; anything else is refused rather than silently skipped.
EMULATED = {"files", "environment", "post", "runscript", "test", "labels", "help"}

_HEADER = re.compile(r"^([A-Za-z]+)\s*:\s*(.*)$")
_SECTION = re.compile(r"^%([A-Za-z]+)\b\s*(.*)$")


class DefinitionError(ValueError):
    """A definition file that apptainer would reject or that means something else than it says."""


@dataclass
class Definition:
    """A parsed definition file: header values and section bodies (dedented)."""

    path: str
    header: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        out = {}
        for line in self.sections.get("labels", "").splitlines():
            key, _, value = line.strip().partition(" ")
            out[key] = value.strip()
        return out


def _dedent(lines: list[str]) -> str:
    body = [ln.rstrip() for ln in lines]
    while body and not body[-1]:
        body.pop()
    while body and not body[0]:
        body.pop(0)
    indents = [len(ln) - len(ln.lstrip()) for ln in body if ln.strip()]
    cut = min(indents, default=0)
    return "\n".join(ln[cut:] for ln in body)


def parse(text: str, path: str = "apptainer.def") -> Definition:
    """Read a definition file strictly; a problem raises :class:`DefinitionError` (with line)."""
    definition = Definition(path)
    current: str | None = None
    bodies: dict[str, list[str]] = {}

    def fail(lineno: int, msg: str) -> DefinitionError:
        return DefinitionError(f"{path}:{lineno}: {msg}")

    for lineno, line in enumerate(text.splitlines(), 1):
        section = _SECTION.match(line)
        if section:
            name, args = section.group(1), section.group(2).strip()
            if name in APP_SECTIONS:
                raise fail(lineno, f"%{name} (SCIF apps) is not used by audiorepro")
            if name not in SECTIONS:
                known = ", ".join(f"%{s}" for s in sorted(SECTIONS))
                raise fail(lineno, f"unknown section %{name} (known: {known})")
            if name in bodies:
                raise fail(lineno, f"section %{name} appears twice")
            if args:
                raise fail(lineno, f"%{name} takes no arguments here, got {args!r}")
            current = name
            bodies[name] = []
            continue
        if current is not None:
            bodies[current].append(line)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        header = _HEADER.match(stripped)
        if header is None:
            raise fail(lineno, f"expected a header line `Key: value`, got {stripped!r}")
        key, value = header.group(1), header.group(2).strip()
        if key not in HEADER_KEYS:
            known = ", ".join(sorted(HEADER_KEYS))
            raise fail(lineno, f"unknown header key {key!r} (known: {known})")
        if key in definition.header:
            raise fail(lineno, f"header key {key!r} appears twice")
        if not value:
            raise fail(lineno, f"header key {key!r} has no value")
        if not definition.header and key != "Bootstrap":
            raise fail(lineno, f"the first header key must be Bootstrap, got {key!r}")
        definition.header[key] = value
    bootstrap = definition.header.get("Bootstrap")
    if bootstrap is None:
        raise DefinitionError(f"{path}: no `Bootstrap:` header")
    if bootstrap not in BOOTSTRAP_AGENTS:
        raise DefinitionError(
            f"{path}: unknown bootstrap agent {bootstrap!r} "
            f"(known: {', '.join(sorted(BOOTSTRAP_AGENTS))})"
        )
    if bootstrap.startswith(("docker", "oci")) and "From" not in definition.header:
        raise DefinitionError(f"{path}: Bootstrap {bootstrap} needs a `From:` header")
    definition.sections = {name: _dedent(lines) for name, lines in bodies.items()}
    for lineno_label in definition.sections.get("labels", "").splitlines():
        if lineno_label.strip() and " " not in lineno_label.strip():
            raise DefinitionError(f"{path}: %labels line {lineno_label!r} has no value")
    return definition


def load(path: Path) -> Definition:
    return parse(path.read_text(), str(path))


def containerfile(definition: Definition, base: str, context: Path) -> Path:
    """Write a Containerfile (and the scripts it copies) into ``context`` that emulates
    building ``definition`` on the image ``base``; returns the Containerfile's path.

    As apptainer does: ``%environment`` becomes ``/.singularity.d/env/90-environment.sh``,
    ``%runscript`` ``/.singularity.d/runscript`` and ``%test`` ``/.singularity.d/test`` (both
    ``#!/bin/sh``), ``%help`` ``/.singularity.d/runscript.help``, ``%labels`` image labels,
    ``%post`` runs as root in the image, ``%files`` copies ``SRC [DST]`` pairs from the
    definition's folder.
    """
    unsupported = sorted(set(definition.sections) - EMULATED)
    if unsupported:
        raise DefinitionError(
            f"{definition.path}: the emulation does not translate "
            + ", ".join(f"%{s}" for s in unsupported)
        )
    context.mkdir(parents=True, exist_ok=True)
    lines = [f"FROM {base}", "USER root"]
    for key, value in sorted(definition.labels.items()):
        lines.append(f"LABEL {key}={json_quote(value)}")
    lines.append("RUN mkdir -p /.singularity.d/env")
    scripts = {
        "90-environment.sh": ("/.singularity.d/env/90-environment.sh", "environment", ""),
        "runscript": ("/.singularity.d/runscript", "runscript", "#!/bin/sh\n"),
        "test": ("/.singularity.d/test", "test", "#!/bin/sh\n"),
        "runscript.help": ("/.singularity.d/runscript.help", "help", ""),
    }
    for name, (target, section, prefix) in scripts.items():
        if section in definition.sections:
            (context / name).write_text(prefix + definition.sections[section] + "\n")
            lines.append(f"COPY {name} {target}")
    for n, pair in enumerate(definition.sections.get("files", "").splitlines()):
        parts = shlex.split(pair, comments=True)
        if not parts:
            continue
        src = Path(definition.path).parent / parts[0]
        staged = f"files-{n}"
        (context / staged).write_bytes(src.read_bytes())
        lines.append(f"COPY {staged} {parts[-1] if len(parts) > 1 else parts[0]}")
    lines.append(
        "RUN chmod 0755 /.singularity.d/runscript /.singularity.d/test 2>/dev/null || true"
    )
    if "post" in definition.sections:
        (context / "post.sh").write_text("#!/bin/sh\nset -e\n" + definition.sections["post"] + "\n")
        lines += ["COPY post.sh /.singularity.d/post.sh", "RUN /bin/sh /.singularity.d/post.sh"]
    path = context / "Containerfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def json_quote(value: str) -> str:
    """A double-quoted Containerfile value."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: How ``apptainer run``/``test`` start a container's scripts: source the environment, exec.
ACTION = '. /.singularity.d/env/90-environment.sh 2>/dev/null; exec "$0" "$@"'
