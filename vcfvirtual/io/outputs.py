"""Outputs written whole or not at all: temporaries, atomic replacement, the files a
killed run leaves, and refusing to replace anything vcfvirtual did not write.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from vcfvirtual_codec.bcf import bgzf

from .. import _json, interrupts
from ..errors import OutputExistsError, OutputWriteError
from .parts import is_part_name

logger = logging.getLogger(__name__)
CACHE_SUFFIX = ".vcz.cache.bcf"
# The columns layout's cache is no BCF: its default name says what it is.
COLUMNS_CACHE_SUFFIX = ".vcz.cache.columns"
COLUMNS_CACHE_MAGIC = b"VVCOLS1\n"
REFS_SUFFIX = ".vcz.json"


# Names of what a run writes before it is complete, all next to the output they
# become or belong to and all ending in the writer's pid, so that a later run can tell a
# dead writer's leftovers (remove_stale_temporaries) from a live one's:
#   .<name>.tmp-<pid>            the output itself, renamed into place when complete
#   .<name>.tmp-<purpose>-<pid>  a run's working files for the output (the partitions'
#                                records "parts", a converted VCF "vcf<i>")
#   .<name>.old-<pid>            an output set aside while its successor is renamed in
TEMPORARY = "tmp"
SET_ASIDE = "old"


def temporary_name(path: Path, purpose: str = "") -> Path:
    """The name ``path`` is written under until it is complete, or, with ``purpose``, a
    working file of the run writing ``path`` (removed by the same stale-run cleanup).

    Parameters
    ----------
    path : Path
        The output's final name.
    purpose : str
        Empty for the output itself; else a word naming the working file (no ``-``).

    Returns
    -------
    Path
        ``.<name>.tmp-<pid>`` or ``.<name>.tmp-<purpose>-<pid>`` in ``path``'s folder.
    """
    path = Path(path)
    tag = f"{TEMPORARY}-{purpose}" if purpose else TEMPORARY
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


def _set_aside_name(path: Path) -> Path:
    """Where an output being replaced waits until its successor is in place."""
    return path.with_name(f".{path.name}.{SET_ASIDE}-{os.getpid()}")


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Clean up after runs writing ``path`` that were killed (their pid is gone).

    A run that is still going (another process indexing to the same name) keeps its
    files; only a dead writer's are touched. Its temporaries are deleted. An output it
    had set aside to replace (``.<name>.old-<pid>``) is put back when nothing stands
    under the final name (it was killed between the two renames), and only deleted when
    its successor is in place: the only copy is never deleted. Returns what was removed."""
    path = Path(path)
    removed = []
    for old in path.parent.glob(f".{path.name}.{SET_ASIDE}-*"):
        if not _dead_writer(old):
            continue
        if not os.path.lexists(path):
            with contextlib.suppress(FileNotFoundError):
                os.rename(old, path)
                logger.warning("restored %s, set aside by an index run that was killed", path)
                continue
        _delete(old)
        removed.append(old)
    for tmp in path.parent.glob(f".{path.name}.{TEMPORARY}-*"):
        if _dead_writer(tmp):
            _delete(tmp)
            removed.append(tmp)
    return removed


def _dead_writer(name: Path) -> bool:
    pid = name.name.rsplit("-", 1)[-1]
    return pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid))


def _delete(path: Path) -> None:
    """Delete what this tool wrote under a temporary name: a file, or a directory of
    references (Parquet, Icechunk) that it created whole."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def replace_output(tmp: Path, path: Path) -> None:
    """Put the finished ``tmp`` under the name ``path`` so that a kill at any instant
    leaves the old output or the new one there (or, at worst, the old one set aside as
    ``.<name>.old-<pid>``, which the next run puts back).

    A file replacing a file is one rename. A directory (Parquet, Icechunk) cannot replace
    anything in one rename: the old one is renamed aside, the new one renamed in, and only
    then is the old one deleted. Callers have checked that what stands at ``path`` is an
    output of this tool (:func:`refuse_foreign_output`)."""
    replace_outputs([(tmp, path)])


def replace_outputs(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Put several finished temporaries under their names together, each ``(tmp, path)``
    as :func:`replace_output` puts one: a cache, then the references that name it.

    Placed one by one, a run interrupted between them (SIGTERM while the old cache was
    being deleted) left the new cache under the old references, which no longer read: the
    references' fingerprint, or Icechunk's modification time, refuses it. So the signals
    wait (:func:`vcfvirtual.interrupts.deferred`) until every one is in place; what stood
    under each name is set aside until then (every output but the last: a file there is
    replaced in one rename) and deleted only once all are in; an error part-way puts back
    what was placed, in reverse. A kill -9 can still fall between two renames, a window
    of microseconds rather than a whole deletion."""
    interrupts.raise_pending()  # an interrupted run replaces nothing, even if Python swallowed the signal's raise
    placed: list[tuple[Path, Path, Path | None]] = []
    with interrupts.deferred():
        try:
            for i, (tmp, path) in enumerate(pairs):
                tmp, path = Path(tmp), Path(path)
                placed.append((tmp, path, _swap_in(tmp, path, last=i == len(pairs) - 1)))
        except BaseException:
            for tmp, path, old in reversed(placed):
                os.rename(path, tmp)
                if old is not None:
                    os.rename(old, path)
            raise
        for _, _, old in placed:
            if old is not None:
                _delete(old)


def _swap_in(tmp: Path, path: Path, *, last: bool) -> Path | None:
    """``tmp`` renamed to ``path``; what stood there set aside under
    :func:`_set_aside_name`, whose name is returned (None: nothing stood there, or, the
    ``last`` of its pairs, a file that one rename replaced)."""
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return None
    if last and not tmp.is_dir() and path.is_file() and not path.is_symlink():
        os.replace(tmp, path)
        return None
    old = _set_aside_name(path)
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)  # this run stops here: the old output stays, as it was
        raise
    return old


class PendingOutput:
    """An output written under its temporary name ``tmp`` that becomes ``path``: put in
    place with the outputs that name it (:meth:`place`), or alone when the block of
    :func:`pending_output` that made it ends."""

    def __init__(self, tmp: Path, path: Path) -> None:
        self.tmp, self.path = tmp, path
        self.placed = False

    def place(self, *others: tuple[Path, Path]) -> None:
        """Put it in place together with ``others`` ((temporary, name) pairs placed after
        it: the references naming it), as :func:`replace_outputs` does."""
        replace_outputs([(self.tmp, self.path), *others])
        self.placed = True


@contextlib.contextmanager
def pending_output(path: Path, *, force: bool) -> Iterator[PendingOutput]:
    """:func:`atomic_output`'s temporary as a :class:`PendingOutput`, which the block may
    place together with other outputs; what it has not placed is placed when it ends,
    and the temporary is deleted if it fails."""
    path = Path(path)
    if os.path.lexists(path) and not force:
        raise OutputExistsError(path, "output already exists", hint="pass force=True to overwrite it")
    pending = PendingOutput(temporary_name(path), path)
    try:
        yield pending
        if not pending.placed:
            pending.place()
    except BaseException:
        _delete(pending.tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: Path, *, force: bool) -> Iterator[Path]:
    """A temporary path that becomes ``path`` only if the block completes.

    For outputs written by name (the cache, a references directory): the block writes
    the temporary, flushing a file to disk itself (:func:`output_file`).

    Parameters
    ----------
    path : Path
        The output's final name.
    force : bool
        Replace what stands at ``path``; callers have checked it is an output of this
        tool (:func:`refuse_foreign_output`).

    Yields
    ------
    Path
        The temporary name to write (see :func:`temporary_name`).

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    with pending_output(path, force=force) as pending:
        yield pending.tmp


@contextlib.contextmanager
def atomic_file(
    path: Path, what: str, option: str, mode: str = "wb", opener: Callable[..., IO[Any]] | None = None
) -> Iterator[IO[Any]]:
    """``path`` opened for writing under its temporary name; flushed to disk and renamed
    into place when the block completes, deleted if it fails.

    Parameters
    ----------
    path : Path
        The output's final name; what stands there is replaced (callers decide whether
        it may be, see :func:`refuse_foreign_output`).
    what, option : str
        The output and the argument that moves it, for error messages.
    mode : str
        ``"wb"`` or ``"w"`` (UTF-8 text).
    opener : callable, optional
        Opens the file (the caller module's ``open``, which tests replace); ``open``.

    Yields
    ------
    file object
        Open on :func:`temporary_name` of ``path``.

    Raises
    ------
    OutputWriteError
        The temporary could not be written (full disk, read-only folder).
    """
    with atomic_output(path, force=True) as tmp, output_file(tmp, what, option, mode, opener) as f:
        yield f


# --------------------------------------------------------------- whose outputs

REFS, CACHE = "references", "cache"


def refuse_foreign_output(path: Path, kind: str, *, force: bool, option: str) -> None:
    """Refuse to replace ``path`` unless it is an output this tool wrote.

    Only what vcfvirtual recognises as its own, by content, is ever replaced (and only
    with ``force``): references whose group attributes carry the ``vcfvirtual`` key
    (Kerchunk JSON, a Kerchunk Parquet directory, an Icechunk repository), or a cache
    that is a BCF (raw or BGZF). Anything else (a folder of the user's, another file, a
    symbolic link, which this tool never makes) is refused with or without ``force``:
    a directory is never deleted because it was named as an output."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_symlink():
        raise OutputExistsError(
            path,
            "is a symbolic link, not a vcfvirtual output; it and what it points to are left alone",
            hint=f"remove the link or give another {option}",
        )
    ours = is_vcfvirtual_references(path) if kind == REFS else is_vcfvirtual_cache(path)
    if not ours:
        what = "a directory" if path.is_dir() else "a file"
        hint = (
            f"name a file inside it, e.g. {path / 'cohort.vcz.json'}"
            if path.is_dir() and kind == REFS
            else f"give another {option}, or move it away"
        )
        raise OutputExistsError(
            path,
            f"is {what} that is not a vcfvirtual {kind} output; it is not replaced, even with force=True",
            hint=hint,
        )
    if not force:
        raise OutputExistsError(path, "output already exists", hint="pass force=True to overwrite it")


def is_vcfvirtual_references(path: Path) -> bool:
    """Kerchunk JSON, Kerchunk Parquet or Icechunk references that vcfvirtual wrote."""

    path = Path(path)
    try:
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                # Not JSON at all (a BCF, a VCF named by mistake): decided without reading it whole.
                if f.read(64).lstrip()[:1] != "{":
                    return False
                f.seek(0)
                attrs = _json.loads(f.read())["refs"][".zattrs"]
        elif (path / ".zmetadata").is_file():
            with open(path / ".zmetadata", encoding="utf-8") as f:
                attrs = _json.loads(f.read())["metadata"][".zattrs"]
        elif (path / "repo").exists():
            return _is_vcfvirtual_icechunk(path)
        else:
            return False
        if isinstance(attrs, (str, bytes)):
            attrs = _json.loads(attrs)
        return isinstance(attrs, dict) and "vcfvirtual" in attrs
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return False


def _is_vcfvirtual_icechunk(path: Path) -> bool:
    try:
        import icechunk
        import zarr

        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(os.fspath(path)))
        group = zarr.open_group(repo.readonly_session("main").store, mode="r", zarr_format=3)
        return "vcfvirtual" in group.attrs
    except Exception:  # noqa: BLE001  not installed, not a repository, no main branch, no group: not ours
        return False


BCF_MAGIC = b"BCF\x02"


def is_vcfvirtual_cache(path: Path) -> bool:
    """A regular file holding a BCF, raw or BGZF, or a columns cache, or a folder of
    columns cache parts (:func:`is_parts_folder`): what a cache is."""
    import gzip
    import zlib

    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        return is_parts_folder(path)
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(18)
            if head.startswith(BCF_MAGIC):
                return True
            if head.startswith(COLUMNS_CACHE_MAGIC) and head[len(COLUMNS_CACHE_MAGIC) :].startswith(BCF_MAGIC):
                return True
            # A BGZF block: gzip with the "BC" extra subfield; inflated, a BCF starts it.
            if not (head.startswith(bgzf.GZIP_MAGIC) and head[12:14] == b"BC"):
                return False
            f.seek(0)
            with gzip.GzipFile(fileobj=f) as inflated:
                return inflated.read(len(BCF_MAGIC)) == BCF_MAGIC
    except (OSError, EOFError, zlib.error):
        return False


def is_parts_folder(path: Path) -> bool:
    """A cache made of parts: a folder holding at least one part and nothing else, each
    a regular file named ``part-NNNNNN`` that starts as a columns cache does. A folder
    holding anything more is the user's: never replaced, never deleted."""
    try:
        with os.scandir(path) as entries:
            found = list(entries)
    except OSError:
        return False
    return bool(found) and all(
        is_part_name(e.name) and e.is_file(follow_symlinks=False) and _starts_as_columns_cache(e.path) for e in found
    )


def _starts_as_columns_cache(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(len(COLUMNS_CACHE_MAGIC) + len(BCF_MAGIC))
    except OSError:
        return False
    return head == COLUMNS_CACHE_MAGIC + BCF_MAGIC


@contextlib.contextmanager
def output_file(
    tmp: Path, what: str, option: str, mode: str = "wb", opener: Callable[..., IO[Any]] | None = None
) -> Iterator[IO[Any]]:
    """``tmp`` opened for writing, flushed to disk on success; OS errors made one typed
    error. On an error the file is closed with its own errors dropped: closing flushes
    the buffer, which fails again on a full disk and would bury the first error under a
    second one (a traceback)."""
    try:
        # Text mode writes UTF-8 whatever the locale; binary mode takes no encoding.
        open_file = opener or open
        f = open_file(tmp, mode) if "b" in mode else open_file(tmp, mode, encoding="utf-8")
    except OSError as e:
        raise OutputWriteError(tmp, f"cannot write {what}: {e.strerror}", hint=write_hint(e, option)) from None
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
    except OSError as e:
        with contextlib.suppress(OSError):
            f.close()
        raise OutputWriteError(tmp, f"cannot write {what}: {e.strerror}", hint=write_hint(e, option)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            f.close()
        raise


def write_hint(e: OSError, option: str = "cache_path=") -> str:
    """What to do about a failed write; ``option`` is the argument that moves the output
    (the CLI names its flag instead)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"free disk space or write it elsewhere with {option}"
    return "check that the output directory is writable"
