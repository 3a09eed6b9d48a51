"""How an error raptorx_py raises reaches a person: one line, the full traceback in a log.

An error raised in a Spark Python worker (the data source's planning or reading) crosses the
JVM as text and comes back to the driver wrapped in a pyspark exception whose message holds
the worker's whole traceback; pyspark 4 also parses that text into the exception's own
traceback, so an uncaught error printed every worker frame twice (59-99 lines, the cause
chain included) with our error's class and message on one line near the end.

Two parts make it one line:

- ``short_worker_errors`` wraps the source's entry points. In a Spark worker it appends the
  full traceback (causes included) to ``error_log_path()`` and re-raises the error with no
  traceback and no cause, so pyspark sends the JVM only ``<our class>: <message>`` and a
  note naming the log. Outside a worker (tests calling the methods directly) it changes
  nothing.
- ``install_excepthook`` (done by ``register``) prints an uncaught exception that carries one
  of our errors, directly or in a pyspark exception's message, as that error's class and
  message on the last line, after one line naming where the call was made and the log that
  holds the full traceback. Any other exception goes to the previous hook untouched.
  Interactive shells that do not use ``sys.excepthook`` (IPython, Jupyter) still show
  pyspark's exception, which the first part keeps short.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import os
import re
import sys
import traceback
from pathlib import Path

from raptorx_py.errors import RaptorxError

#: ``raptorx_py.errors.NoSuchObjectError: database 'x' does not exist ...`` inside a
#: pyspark exception's message (the worker's formatted exception).
_OUR_ERROR_LINE = re.compile(r"^(raptorx_py\.errors\.\w+): (.*\S)")
#: The JVM's exceptions that are one of our errors, by the error they stand for: Spark's
#: reader failing on a file that changed after planning, once batches of it were handed on
#: (``SplitServingReader.scala``), fails the task with the first, inside Spark's "Job aborted
#: due to stage failure" text.
_JVM_ERRORS = {"raptorx.cache.FileChangedException": "raptorx_py.errors.FileChangedError"}
_JVM_ERROR_TEXT = re.compile(r"(raptorx\.cache\.FileChangedException): (.*\S)")


def error_log_path() -> Path:
    """``~/.raptorx/logs/errors.log``: where full tracebacks are appended."""
    return Path(os.path.expanduser("~")) / ".raptorx" / "logs" / "errors.log"


def log_error(exc: BaseException, where: str) -> Path | None:
    """Append ``exc``'s full traceback (causes included) to the error log; its path, or None
    when the log cannot be written (the error itself is what matters then)."""
    path = error_log_path()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = _dt.datetime.now().isoformat(timespec="seconds")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"--- {stamp} pid {os.getpid()} {where}\n{text}\n")
    except OSError:
        return None
    return path


def in_spark_worker() -> bool:
    """Whether this process is a Python worker that Spark's JVM started (it sets these)."""
    return (
        "PYTHON_WORKER_FACTORY_SECRET" in os.environ
        or "PYTHON_WORKER_FACTORY_SOCK_DIR" in os.environ
    )


def _shorten(exc: RaptorxError, where: str) -> RaptorxError:
    path = log_error(exc, where)
    if path is not None:
        exc.add_note(f"(full traceback in {path})")
    exc.__cause__ = None
    exc.__suppress_context__ = True
    return exc.with_traceback(None)


def short_worker_errors(func):
    """Decorate a data source entry point (function or generator) so that, in a Spark worker,
    a ``RaptorxError`` leaving it is logged in full and re-raised as one line (see the module
    docstring). Other exceptions pass unchanged: they are not ours to summarize."""
    where = func.__qualname__
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def generator(*args, **kwargs):
            try:
                yield from func(*args, **kwargs)
            except RaptorxError as e:
                if not in_spark_worker():
                    raise
                raise _shorten(e, where) from None

        return generator

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except RaptorxError as e:
            if not in_spark_worker():
                raise
            raise _shorten(e, where) from None

    return wrapper


def concise_message(exc: BaseException) -> str | None:
    """``<module>.<class>: <message>`` of the raptorx_py error ``exc`` is or carries (in a
    pyspark exception's text, the last such line, with the indented lines that continue its
    message; a JVM exception that stands for one of ours, ``_JVM_ERRORS``, as that error),
    or None when it carries none."""
    if isinstance(exc, RaptorxError):
        return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
    if not type(exc).__module__.startswith(("pyspark", "py4j")):
        return None
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a pyspark exception whose JVM is gone
        return None
    messages: list[list[str]] = []
    collecting = False
    for line in text.splitlines():
        match = _OUR_ERROR_LINE.match(line)
        jvm = None if match else _JVM_ERROR_TEXT.search(line)
        if jvm:
            messages.append([f"{_JVM_ERRORS[jvm.group(1)]}: {jvm.group(2)}"])
            collecting = False
        elif match:
            messages.append([match.group(0)])
            collecting = True
        elif collecting and line.startswith("  "):
            # An error of several problems (``ConfigErrors``): one indented line each.
            messages[-1].append(line.rstrip())
        else:
            collecting = False
    return "\n".join(messages[-1]) if messages else None


def _call_site(tb) -> str | None:
    """The innermost frame outside pyspark, py4j and raptorx_py: the caller's line."""
    site = None
    for frame, lineno in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if not any(f"{os.sep}{pkg}{os.sep}" in name for pkg in ("pyspark", "py4j", "raptorx_py")):
            site = f"{name}:{lineno}"
    return site


_installed = False


def install_excepthook() -> None:
    """Print uncaught errors that carry one of ours as one line (module docstring).
    Idempotent; chains to the hook installed before it."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        message = concise_message(exc) if exc is not None else None
        if message is None:
            return previous(exc_type, exc, tb)
        path = log_error(exc.with_traceback(tb), "uncaught on the driver")
        site = _call_site(tb)
        where = f" at {site}" if site else ""
        log = f"; full traceback in {path}" if path else ""
        # Spark's console progress bar may have left the cursor mid-line ("\r[Stage 0: ...").
        start = "\r\x1b[K" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"{start}raptorx: the call{where} failed{log}\n{message}\n")
        sys.stderr.flush()

    sys.excepthook = hook
