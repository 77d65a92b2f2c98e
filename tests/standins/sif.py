"""Test-only stand-ins for ``apptainer`` and ``srun``: docs/hpc.md's HPC lines, run as written.

No apptainer binary and no Slurm cluster exist where the tests run, and a podman build of the
image takes far too long for every test run (``tox -e container`` does that, in CI). So the
page's own command lines run with these stand-ins first on PATH (``tests/standins/apptainer``
and ``tests/standins/srun`` call this module):

- ``apptainer run|exec|test [OPTIONS] IMAGE [ARGS]`` parses exactly the options docs/hpc.md and
  the Slurm executor use (``--nv``, ``--containall``, ``--cleanenv``, ``--bind SRC:DST[:ro]``,
  ``--env K=V``) and refuses anything else in one line (exit 255, as apptainer does). The
  "image" is a small JSON file (:func:`write_image`) naming the Python environment that holds
  audiorepro; the container is a new mount namespace (``unshare -m``, as root) whose root is a
  fresh tmpfs holding only the host's ``/usr``, ``/etc``, ``/var``, ``/opt`` and the image's
  folders, all read-only, ``/dev``, ``/proc``, ``/sys``, a fresh ``/tmp`` and a fresh
  ``HOME`` (what ``--containall`` gives), the binds with their modes, and then the root itself
  remounted read-only: a SIF's root is read-only, and only the binds are writable. The
  environment is cleaned (``env -i``) to what apptainer keeps with ``--cleanenv``: ``HOME``,
  ``TERM``, ``LANG``, the image's ``%environment`` from ``apptainer.def`` (read with
  ``tools/apptainer_def.py``), ``--env`` values and ``APPTAINERENV_*`` variables, and
  ``APPTAINER_CONTAINER``/``APPTAINER_NAME``, which apptainer sets. ``run`` runs
  ``apptainer.def``'s ``%runscript``, ``test`` its ``%test``. ``--nv`` is accepted and brings
  nothing (no GPU here). ``build``, ``sign``, ``verify`` and the rest need the real apptainer:
  refused, saying so.
- ``srun [OPTIONS] COMMAND...`` accepts the options the line of docs/hpc.md uses (``--account``,
  ``--partition``, ``--gpus``, ``--time``, with ``=`` or a separate value), refuses others,
  and runs the command on this machine, as a one-task step would on a node.
"""

from __future__ import annotations

import json
import os
import shlex
import site
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import apptainer_def  # noqa: E402

IMAGE_KIND = "audiorepro.test-standin-sif/1"
#: The host folders the emulated image holds (read-only), besides its own Python folders.
SYSTEM = ("usr", "etc", "var", "opt")
KERNEL = ("dev", "proc", "sys")
SRUN_OPTIONS = ("--account", "--partition", "--gpus", "--time")


class Refused(Exception):
    """An option or use the stand-in does not emulate: one line, exit 255."""


def write_image(path: Path) -> Path:
    """Write the stand-in "SIF": the Python environment and source folder holding audiorepro.

    The folders are those of the running interpreter (a virtualenv, its base installation)
    and of the imported ``audiorepro`` package; the container sees them read-only at the same
    paths, and nothing else of the host but its system folders.
    """
    import audiorepro

    src = Path(audiorepro.__file__).resolve().parents[1]
    folders = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), src}
    # An installed package (tox's wheel) is found through site-packages already; putting
    # site-packages on PYTHONPATH would put it before the standard library, and the `typing`
    # backport that resemblyzer requires would then shadow the standard library's typing.
    installed = src in {Path(p).resolve() for p in site.getsitepackages()}
    image = {
        "kind": IMAGE_KIND,
        "bin": str(Path(sys.prefix) / "bin"),
        "folders": sorted(str(f) for f in folders),
        "pythonpath": "" if installed else str(src),
    }
    path.write_text(json.dumps(image, indent=1, sort_keys=True) + "\n")
    return path


def _read_image(path: str) -> dict[str, object]:
    try:
        image = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        raise Refused(f"could not open image {path}: not a stand-in SIF") from None
    if not isinstance(image, dict) or image.get("kind") != IMAGE_KIND:
        raise Refused(f"could not open image {path}: not a stand-in SIF")
    return image


def _parse_bind(spec: str) -> tuple[str, str, bool]:
    fields = spec.split(":")
    if len(fields) == 1:
        fields.append(fields[0])
    if len(fields) == 3 and fields[2] in ("ro", "rw"):
        return fields[0], fields[1], fields[2] == "ro"
    if len(fields) == 2:
        return fields[0], fields[1], False
    raise Refused(f"--bind {spec}: expected SRC[:DST[:ro|rw]]")


def parse_apptainer(argv: list[str]) -> dict[str, object]:
    """The invocation: action, binds, env, image, arguments (only what docs/hpc.md uses)."""
    if not argv:
        raise Refused("no command given")
    action, rest = argv[0], argv[1:]
    if action not in ("run", "exec", "test"):
        raise Refused(f"'{action}' needs the real apptainer (the stand-in runs run/exec/test)")
    flags: set[str] = set()
    binds: list[tuple[str, str, bool]] = []
    env: dict[str, str] = {}
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        name, eq, value = opt.partition("=")
        if name in ("--nv", "--containall", "--cleanenv") and not eq:
            flags.add(name)
        elif name in ("--bind", "-B", "--env"):
            if not eq:
                if not rest:
                    raise Refused(f"{name} needs a value")
                value = rest.pop(0)
            if name == "--env":
                key, sep, val = value.partition("=")
                if not sep or not key:
                    raise Refused(f"--env {value}: expected KEY=VALUE")
                env[key] = val
            else:
                binds += [_parse_bind(b) for b in value.split(",")]
        else:
            raise Refused(f"unknown option {opt} (the stand-in emulates only docs/hpc.md's)")
    if not rest:
        raise Refused("no image given")
    if not ({"--containall", "--cleanenv"} & flags):
        # Without them apptainer shares the host's HOME, /tmp and environment: not emulated.
        raise Refused("the stand-in emulates --containall/--cleanenv runs only")
    return {"action": action, "flags": flags, "binds": binds, "env": env, "image": rest[0],
            "args": rest[1:]}  # fmt: skip


def _environment(call: dict[str, object], image: dict[str, object], home: str) -> dict[str, str]:
    """What the contained process sees: apptainer's --cleanenv set, the image's, the user's."""
    definition = apptainer_def.parse((ROOT / "apptainer.def").read_text())
    keep = {k: os.environ[k] for k in ("TERM", "LANG") if k in os.environ}
    env = {**keep, "HOME": home, "PATH": f"{image['bin']}:/usr/local/bin:/usr/bin:/bin"}
    if image["pythonpath"]:
        env["PYTHONPATH"] = str(image["pythonpath"])
    script = definition.sections.get("environment", "")
    exported = subprocess.run(
        ["env", "-i", "sh", "-c", f"{script}\nenv -0"], capture_output=True, check=True
    ).stdout
    for item in exported.split(b"\0"):
        key, sep, value = item.decode().partition("=")
        if sep and key not in ("PWD", "SHLVL", "_"):
            env[key] = value
    sif = str(Path(str(call["image"])).resolve())
    env |= {"APPTAINER_CONTAINER": sif, "APPTAINER_NAME": Path(sif).name}
    for key, value in os.environ.items():
        if key.startswith("APPTAINERENV_"):
            env[key.removeprefix("APPTAINERENV_")] = value
    env |= dict(call["env"])  # type: ignore[arg-type]
    return env


def _mount_script(root: str, image: dict[str, object], binds: list[tuple[str, str, bool]],
                  home: str) -> list[str]:  # fmt: skip
    q = shlex.quote
    lines = ["set -eu", f"mount -t tmpfs -o mode=755 sifroot {q(root)}"]

    def ro_bind(src: str, dst: str, recursive: bool = False) -> None:
        target = q(root + dst)
        lines.append(f"mkdir -p {target}")
        lines.append(f"mount {'--rbind' if recursive else '--bind'} {q(src)} {target}")
        lines.append(f"mount -o remount,bind,ro {target}")

    for name in SYSTEM:
        if os.path.isdir(f"/{name}"):
            ro_bind(f"/{name}", f"/{name}", recursive=True)
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        if os.path.islink(f"/{name}"):
            lines.append(f"ln -s {q(os.readlink(f'/{name}'))} {q(root + '/' + name)}")
        elif os.path.isdir(f"/{name}"):
            ro_bind(f"/{name}", f"/{name}")
    for name in KERNEL:
        lines += [
            f"mkdir -p {q(root + '/' + name)}",
            f"mount --rbind /{name} {q(root + '/' + name)}",
        ]
    for fresh in ("/tmp", home):  # --containall: an empty /tmp and HOME of the container's own
        lines += [
            f"mkdir -p {q(root + fresh)}",
            f"mount -t tmpfs -o mode=1777 tmp {q(root + fresh)}",
        ]
    for folder in image["folders"]:  # type: ignore[attr-defined]
        ro_bind(folder, folder)
    for src, dst, read_only in binds:
        if not os.path.exists(src):
            raise Refused(f"mount source {src} doesn't exist")
        target = q(root + dst)
        lines += [f"mkdir -p {target}", f"mount --bind {q(src)} {target}"]
        if read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
    lines.append(f"mount -o remount,ro {q(root)}")  # the SIF's root: read-only
    return lines


def apptainer(argv: list[str]) -> int:
    call = parse_apptainer(argv)
    image = _read_image(str(call["image"]))
    definition = apptainer_def.parse((ROOT / "apptainer.def").read_text())
    home = os.environ.get("HOME", "/root")
    args = [str(a) for a in call["args"]]  # type: ignore[attr-defined]
    if call["action"] == "run":
        command = ["/bin/sh", "-c", definition.sections["runscript"], "runscript", *args]
    elif call["action"] == "test":
        command = ["/bin/sh", "-c", definition.sections["test"], "test"]
    else:
        if not args:
            raise Refused("exec needs a command")
        command = args
    env = _environment(call, image, home)
    root = tempfile.mkdtemp(prefix="standin-sif-")
    try:
        lines = _mount_script(root, image, call["binds"], home)  # type: ignore[arg-type]
        inner = ["env", "-i", *(f"{k}={v}" for k, v in sorted(env.items()))]
        inner += ["/bin/sh", "-c", 'cd "$HOME" && exec "$@"', "container", *command]
        lines.append(f"exec chroot {shlex.quote(root)} {shlex.join(inner)}")
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", "\n".join(lines)],
            check=False,
        )
        return proc.returncode
    finally:
        os.rmdir(root)  # the tmpfs lived in the namespace only: the folder is empty here


def srun(argv: list[str]) -> int:
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        name, eq, _ = rest.pop(0).partition("=")
        if name not in SRUN_OPTIONS:
            raise Refused(f"srun stand-in: unknown option {name}")
        if not eq:
            if not rest:
                raise Refused(f"srun stand-in: {name} needs a value")
            rest.pop(0)
    if not rest:
        raise Refused("srun stand-in: no command")
    return subprocess.run(rest, check=False).returncode


def main() -> int:
    which = Path(sys.argv[1]).name
    try:
        return apptainer(sys.argv[2:]) if which == "apptainer" else srun(sys.argv[2:])
    except Refused as exc:
        print(f"FATAL:   {exc}", file=sys.stderr)
        return 255


if __name__ == "__main__":
    sys.exit(main())
