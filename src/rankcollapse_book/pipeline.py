"""The book pipeline: execute the chapters, then build the HTML.

    rankcollapse-book run [CHAPTER ...] [--profile ci] [--device auto] [--seed 0]
    rankcollapse-book build
    rankcollapse-book all   [--profile ...]        # run, then build

(`python -m rankcollapse_book` is the same command.)

A chapter is `notebooks/NN_name.py` (jupytext py:percent). `run` converts it in memory to a
notebook, executes it with papermill (parameters `profile`, resolved `device`, `seed` injected
after the cell tagged `parameters`; working directory = the repository root) and writes
`book/chapters/NN_name.ipynb`. A chapter is skipped when its cache key (chapter source, the
science package with its C loops and stand-in data, the tooling that runs inside a chapter,
parameters, pins) matches the record in `.cache/chapters/NN_name.json`. The first failing
chapter stops the run; its partly executed notebook stays in `book/chapters/` for
inspection and no cache record is written for it. `build` is `site.build`: it runs
`jupyter-book build . -W -n --keep-going --config _build/_config.yml` from the repository
root, with `_config.yml` plus a page footer naming the book's version and the commit the
book is built from (`site.build_config`). Where chapters and records live: `project`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import papermill
from jupyter_client.kernelspec import KernelSpecManager
from traitlets.config import Config

from rankcollapse.devices import DEVICES, resolve_device
from rankcollapse.files import (atomic_write_text, digest_files, module_sources, package_files,
                                sha256_file)
from rankcollapse.profiles import PROFILES, get_profile
from rankcollapse.training_plan import seed_argument
from rankcollapse_book.chapter import FIGURE_DIR, caption_note, fill_execution_time, find_root
from rankcollapse_book.figures_page import FORMATS, collect
from rankcollapse_book.project import BookError, Project, read_record
from rankcollapse_book.site import build

KERNEL = "python3"
ANSI_COLOR = re.compile(r"\x1b\[[0-9;]*m")
# CurveZMQ keys for the kernel's sockets (ipykernel warns on every start without them).
KERNEL_CONFIG = Config({"KernelManager": {"transport_encryption": "auto"}})


class ChapterFailed(RuntimeError):
    """A chapter raised while executing; the message names the source file and the cell."""


@dataclass(frozen=True)
class Outcome:
    """What happened to one chapter in a run."""

    name: str
    status: str  # "ok", "cached", "FAILED" or "skipped"
    seconds: float
    note: str  # one line for the progress and the summary
    error: str = ""  # for a failure: chapter file, cell and exception


def cache_key(project: Project, name: str, parameters: dict) -> str:
    """sha256 over the chapter source, every file of the science package that can change a
    number (`files.package_files`: modules, the C loops, package data such as the stand-in
    datasets), the tooling modules a chapter runs (the header, figure export: found from
    `chapter`'s imports; not the pipeline, the Figures page or the site check), the
    parameters and the pins."""
    digest = hashlib.sha256(project.source(name).read_bytes())
    src = project.root / "src"
    science = package_files(src / "rankcollapse") + package_files(project.standins)
    in_kernel = module_sources("rankcollapse_book.chapter", src / "rankcollapse_book")
    digest.update(digest_files(science + in_kernel, project.root).encode())
    digest.update(json.dumps(parameters, sort_keys=True).encode())
    pins = project.root / "pyproject.toml"
    digest.update(pins.read_bytes() if pins.is_file() else b"")
    return digest.hexdigest()


def read_source(project: Project, name: str) -> str:
    """The text of chapter `name`'s source; ChapterFailed naming the file when it is not
    UTF-8 (jupytext and papermill read nothing else)."""
    source = project.source(name)
    try:
        return source.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ChapterFailed(f"chapter {name}: {source.relative_to(project.root)} is not UTF-8 "
                            f"text (byte 0x{error.object[error.start]:02x} at offset "
                            f"{error.start}); save it as UTF-8") from None


def check_kernel() -> None:
    """Refuse to run when the `python3` kernel would start another interpreter than this one.

    jupyter_client replaces a kernelspec's bare `python`/`python3`/`python3.X` by
    `sys.executable`; a kernelspec with an absolute path elsewhere would use other packages.
    """
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    bare = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}
    if spec.argv[0] not in bare and Path(spec.argv[0]) != Path(sys.executable):
        raise SystemExit(f"kernel {KERNEL!r} ({spec.resource_dir}) runs {spec.argv[0]}, not "
                         f"{sys.executable}; see `jupyter kernelspec list`")


def execute(project: Project, name: str, parameters: dict) -> float:
    """Execute chapter `name` into `book/chapters/`; return its wall time in seconds."""
    notebook = jupytext.reads(read_source(project, name), fmt="py")
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3",
                                       "language": "python"}
    project.chapters.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        papermill.execute_notebook(notebook, str(project.output(name)), parameters=parameters,
                                   kernel_name=KERNEL, cwd=str(project.root),
                                   progress_bar=False, config=KERNEL_CONFIG)
    except papermill.PapermillExecutionError as error:
        raise ChapterFailed(describe_failure(project, name, error)) from None
    except Exception as error:  # the kernel died, timed out or could not start
        raise ChapterFailed(f"chapter {name} ({project.source(name).relative_to(project.root)}) "
                            f"did not run to its end: {type(error).__name__}: {error}") from None
    seconds = time.perf_counter() - start
    finalize(project.output(name), seconds, parameters)
    return seconds


def finalize(path: Path, seconds: float, parameters: dict) -> None:
    """Write the measured time into the header box, add the provenance line to every figure
    caption, and hide the parameter cells from the rendered page (the header box states the
    values; the notebook keeps them)."""
    nb = nbformat.read(path, as_version=4)
    fill_execution_time(nb, seconds)
    note = caption_note(parameters)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if {"parameters", "injected-parameters"} & set(tags) and "remove-cell" not in tags:
            tags.append("remove-cell")
        figure = cell.metadata.get("mystnb", {}).get("figure", {})
        if "caption" in figure:
            figure["caption"] += note
    nbformat.write(nb, path)


def describe_failure(project: Project, name: str, error: papermill.PapermillExecutionError) -> str:
    """Name the chapter file and line, the failing cell (index, first lines) and the error."""
    source = project.source(name)
    text = read_source(project, name)
    offset = text.find(error.source) if error.source.strip() else -1
    traceback = ANSI_COLOR.sub("", "\n".join(error.traceback))
    in_cell = re.search(r"Cell In\[\d+\], line (\d+)", traceback)
    where = "line unknown"
    if offset >= 0:
        line = text.count("\n", 0, offset) + (int(in_cell[1]) if in_cell else 1)
        where = f"line {line}: {text.splitlines()[line - 1].strip()}"
    first_lines = "\n".join("    " + line for line in error.source.splitlines()[:3])
    return (f"chapter {name} failed at {source.relative_to(project.root)}, {where}\n"
            f"in cell {error.cell_index} of {project.output(name)}, which begins:\n"
            f"{first_lines}\n{error.ename}: {error.evalue}")


def run_chapter(project: Project, name: str, parameters: dict) -> Outcome:
    """Execute `name` unless its cache record matches (the key, and the sha256 of the executed
    notebook: a truncated or edited notebook is executed again); write the record after
    success."""
    key = cache_key(project, name, parameters)
    record = read_record(project, name)
    output = project.output(name)
    if record and record["key"] == key and output.is_file() \
            and sha256_file(output) == record["notebook_sha256"] \
            and not missing_exports(project, name):
        return Outcome(name, "cached", 0.0,
                       f"cached (executed in {record['seconds']:.1f} s earlier)")
    project.record(name).unlink(missing_ok=True)  # a failure below must not leave a stale hit
    seconds = execute(project, name, parameters)
    atomic_write_text(project.record(name), json.dumps(
        {"key": key, "seconds": seconds, "parameters": parameters,
         "notebook_sha256": sha256_file(output)}, indent=1))
    return Outcome(name, "ok", seconds, f"executed in {seconds:.1f} s")


def missing_exports(project: Project, name: str) -> list[str]:
    """Figure export files of chapter `name` that should exist and do not."""
    figures = collect(project.chapters, [f"book/chapters/{name}"])
    return [f"{f.name}.{fmt}" for f in figures for fmt in FORMATS
            if not (project.root / FIGURE_DIR / f"{f.name}.{fmt}").is_file()]


def run(project: Project, names: list[str], parameters: dict) -> list[Outcome]:
    """Run chapters in order, printing progress; stop at the first failure."""
    check_kernel()
    outcomes: list[Outcome] = []
    for i, name in enumerate(names, 1):
        tag = f"[{i}/{len(names)}] {name}"
        print(f"{tag} ...", flush=True)
        start = time.perf_counter()
        try:
            outcome = run_chapter(project, name, parameters)
        except ChapterFailed as error:
            seconds = time.perf_counter() - start
            outcome = Outcome(name, "FAILED", seconds, f"FAILED after {seconds:.1f} s", str(error))
        print(f"{tag} {outcome.note}", flush=True)
        outcomes.append(outcome)
        if outcome.status == "FAILED":
            return outcomes + [Outcome(rest, "skipped", 0.0, "not run: an earlier chapter failed")
                               for rest in names[i:]]
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    """A plain-text table: chapter, status, time, executed or cached."""
    width = max([len("chapter"), *(len(o.name) for o in outcomes)])
    lines = [f"{'chapter':<{width}}  {'status':<7}  {'time':>8}  note"]
    lines += [f"{o.name:<{width}}  {o.status:<7}  {o.seconds:>6.1f} s  {o.note}" for o in outcomes]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """Command line: `run`, `build` and `all`, with the options of a run."""
    def profile(name: str) -> str:
        try:
            return get_profile(name).name
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    def device(name: str) -> str:
        try:
            return resolve_device(name).type
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("chapters", nargs="*", help="chapter names, e.g. 01_rank_collapse "
                         "(default: all)")
    options.add_argument("--profile", type=profile, default="ci",
                         help=f"one of {', '.join(PROFILES)} (default ci)")
    options.add_argument("--device", type=device, default="auto",
                         help=f"one of {', '.join(DEVICES)} (default auto: cuda if available)")
    options.add_argument("--seed", type=seed_argument, default=0,
                         help="random seed in [0, 2**32) (default 0)")
    cli = argparse.ArgumentParser(prog="rankcollapse-book", description=__doc__.split("\n")[0])
    commands = cli.add_subparsers(dest="command", required=True)
    commands.add_parser("run", parents=[options], help="execute chapters")
    commands.add_parser("build", help="build the HTML book from the executed chapters")
    commands.add_parser("all", parents=[options], help="run, then build")
    return cli


def main(argv: list[str] | None = None, project: Project | None = None) -> int:
    """Entry point; returns (and as a script exits with) the status: 0 ok, 1 failed (with one
    line saying why when a file cannot be written or read, a cache folder that is not
    writable, say, or is not valid, `_toc.yml` say), 2 refused."""
    cli = parser()
    args = cli.parse_args(argv)
    try:
        return _main(cli, args, project)
    except (OSError, BookError) as error:
        print(f"rankcollapse-book: {error}", file=sys.stderr)
        return 1


def _main(cli: argparse.ArgumentParser, args: argparse.Namespace,
          project: Project | None) -> int:
    root = find_root(Path.cwd())
    if project is None and root is None:
        raise SystemExit(f"no _toc.yml in {Path.cwd()} or above; run this inside the book's "
                         "repository")
    project = project or Project(root)
    if args.command in ("run", "all"):
        valid = project.chapter_names()
        if not valid:
            cli.error(f"no chapter sources (NN_name.py) in {project.notebooks}: nothing to run")
        names = [n.removesuffix(".py") for n in args.chapters] or valid
        unknown = [n for n in names if n not in valid]
        if unknown:
            cli.error(f"unknown chapter {', '.join(unknown)}; valid chapters: {', '.join(valid)}")
        parameters = {"profile": args.profile, "device": args.device, "seed": args.seed}
        outcomes = run(project, names, parameters)
        print("\n" + summary(outcomes), flush=True)
        failed = [o for o in outcomes if o.status == "FAILED"]
        if failed:
            print("\n" + failed[0].error, file=sys.stderr)
            return 1
    if args.command in ("build", "all"):
        return build(project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
