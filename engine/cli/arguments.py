"""What the command groups share: the error guard (one sentence and a non-zero exit, never a
traceback; set PAIGRID_DEBUG=1 to see one), the command group that words usage errors as one
sentence too, option parsers and help texts."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import warnings
from enum import StrEnum
from pathlib import Path

import typer
from typer.core import TyperGroup

try:  # typer 0.2x carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # older typer runs on click
    from click import exceptions as click_exceptions

from paigrid.errors import PaigridError, quoted, tidy
from paigrid.inputs.options import OldSpelling, option_help, read_scalar
from paigrid.inputs.spec import DEFAULT_MODEL

EXIT_ERROR = 2
_EXITS = (typer.Exit, typer.Abort, getattr(click_exceptions, "Exit", typer.Exit))
EXIT_INTERRUPTED = 130
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a program stopped by a closed pipe

#: help of every --model option
MODEL_HELP = (
    f"Compute model: pai-v1 (the PAI additive model) or pai-v2 (operator-class roofline); default: {DEFAULT_MODEL}."
)


def fail(sentence: str, code: int = EXIT_ERROR):
    """Print ``paigrid: error: SENTENCE`` on stderr (tidied: ``paigrid.errors.tidy``) and exit
    with ``code``."""
    typer.echo(f"paigrid: error: {tidy(sentence)}", err=True)
    raise typer.Exit(code)


#: set by the ``paigrid`` command (``paigrid.cli.main``): this process is the command's own, so
#: it may end with ``os._exit`` (never in a test runner or a library user's process)
HARD_EXIT_ALLOWED = False


def hard_exit(sentence: str, code: int = EXIT_ERROR):
    """Print the sentence and end the process at once, skipping the interpreter's clean-up: after
    HDF5 failed to write a file (a full disk), closing it at exit can crash the process."""
    typer.echo(f"paigrid: error: {sentence}", err=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def closed_pipe() -> typer.Exit:
    """Stdout's reader went away (``paigrid query ... | head -1``): stop quietly.  Stdout is
    pointed at /dev/null so that the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return typer.Exit(EXIT_CLOSED_PIPE)


class ClosedStream:
    """Stands for a standard stream the command was started without (``paigrid ... >&-``): any
    write is one sentence (a command that prints nothing, a sweep, runs as usual)."""

    def __init__(self, name: str, silent: bool = False):
        self.name = name
        self.silent = silent

    def write(self, text: str) -> int:
        if not text or self.silent:
            return len(text)
        raise PaigridError(
            f"{self.name} is closed, so the results cannot be printed; give the command "
            f"a {self.name} (or redirect it to a file)."
        )

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(9, "Bad file descriptor")

    @property
    def encoding(self) -> str:
        return "utf-8"


def guard_closed_streams() -> None:
    """A command started with stdin, stdout or stderr closed: the descriptor is pointed at
    /dev/null, so that no file the command opens takes its number (and then receives what is
    printed), and a closed stdout or stderr becomes a ``ClosedStream``, whose first write is one
    sentence instead of an AttributeError on None."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            pass
        if name == "stdout":
            sys.stdout = ClosedStream("stdout")
        elif name == "stderr":
            sys.stderr = ClosedStream("stderr", silent=True)  # nowhere to say anything: silent, as Unix tools are


def os_error_sentence(exc: OSError) -> str:
    """An operating-system error as a sentence naming the file, without the exception's class."""
    from paigrid.files import os_reason

    reason = os_reason(exc)
    return f"{exc.filename}: {reason}." if exc.filename else f"{reason[:1].lower()}{reason[1:]}."


def _show_notes(show):
    """A ``warnings.showwarning`` that prints an old spelling's sentence as ``paigrid: note: ...``
    on stderr (no file, line or class name) and leaves every other warning to ``show``."""

    def show_note(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, OldSpelling):
            typer.echo(f"paigrid: note: {tidy(str(message))}", err=True)
        else:
            show(message, category, filename, lineno, file, line)

    return show_note


def guarded(command):
    """Turn a PaigridError (and any unexpected error) into one sentence on stderr and a non-zero
    exit: 2 for bad input, 130 for an interruption, 141 (quietly) for a closed stdout pipe.
    numpy's RuntimeWarnings (NaN arithmetic of invalid configurations) are not shown."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                warnings.filterwarnings("ignore", "No artists with labels found", UserWarning)  # empty figure panels
                warnings.simplefilter("once", OldSpelling)
                warnings.showwarning = _show_notes(warnings.showwarning)
                return command(*args, **kwargs)
        except PaigridError as exc:
            if getattr(exc, "exit_hard", False) and HARD_EXIT_ALLOWED:
                hard_exit(str(exc))
            # an interrupted sweep says what it saved in its sentence, and still exits as interrupted
            fail(str(exc), EXIT_INTERRUPTED if getattr(exc, "interrupted", False) else EXIT_ERROR)
        except _EXITS:
            raise
        except KeyboardInterrupt:
            fail("interrupted.", EXIT_INTERRUPTED)
        except BrokenPipeError:
            raise closed_pipe() from None
        except MemoryError:
            fail("out of memory: the input asks for more than this machine has; make it smaller.")
        except OSError as exc:
            if os.environ.get("PAIGRID_DEBUG"):
                raise
            fail(os_error_sentence(exc))
        except Exception as exc:  # an unexpected failure still gets one sentence, not a traceback
            if os.environ.get("PAIGRID_DEBUG"):
                raise
            typer.echo(
                f"paigrid: unexpected error: {exc.__class__.__name__}: {tidy(str(exc))} "
                "(set PAIGRID_DEBUG=1 to see the traceback).",
                err=True,
            )
            raise typer.Exit(EXIT_ERROR + 1) from None

    return wrapper


class OneSentenceGroup(TyperGroup):
    """The root command group: a usage error (a missing option, a value of the wrong type, an
    unknown command) is one line ``paigrid: error: ...; see paigrid COMMAND --help.`` with exit
    code 2, instead of click's framed block.  Used for ``paigrid`` and in tests alike, since
    both call ``main``."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        bound_numbers(self)
        try:
            code = super().main(
                args=args, prog_name=prog_name or "paigrid", complete_var=complete_var, standalone_mode=False, **extra
            )
        except _NO_ARGS_IS_HELP as exc:
            typer.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
            code = exc.exit_code
        except click_exceptions.UsageError as exc:
            where = " ".join(["paigrid", *(exc.ctx.command_path.split(" ")[1:] if exc.ctx else [])])
            typer.echo(f"paigrid: error: {tidy(usage_sentence(exc.format_message()))}; see {where} --help.", err=True)
            code = exc.exit_code
        except click_exceptions.ClickException as exc:
            typer.echo(f"paigrid: error: {tidy(usage_sentence(exc.format_message()))}.", err=True)
            code = exc.exit_code
        except (typer.Abort, getattr(click_exceptions, "Abort", typer.Abort)):
            typer.echo("paigrid: error: interrupted.", err=True)
            code = EXIT_INTERRUPTED
        except BrokenPipeError:
            code = closed_pipe().exit_code
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


#: the largest magnitude of a whole-number option (int64: what numpy and HDF5 store)
INT64_MAX = 2**63 - 1


def number_problem(value) -> str | None:
    """Why an option's converted ``value`` cannot reach a model: a whole number beyond int64 (it
    would reach numpy and HDF5 as an object), or inf or nan; None when it can."""
    import math

    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > INT64_MAX:
            return f"{quoted_short(item)} is beyond the largest whole number paigrid stores ({INT64_MAX})"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{quoted_short(item)} is not a finite number"
    return None


def quoted_short(value) -> str:
    """A value as a usage error quotes it (short and printable)."""
    from paigrid.errors import printable, shorten

    return printable(shorten(str(value)))


def _bounded(process):
    def process_value(ctx, value):
        result = process(ctx, value)
        problem = number_problem(result)
        if problem:
            raise click_exceptions.BadParameter(problem, ctx=ctx)
        return result

    return process_value


def bound_numbers(group) -> None:
    """Give every option of ``group``'s commands a check that refuses whole numbers beyond int64
    and real numbers that are inf or nan (``number_problem``); once per command tree."""
    if getattr(group, "_numbers_bound", False):
        return
    group._numbers_bound = True
    stack = [group]
    while stack:
        command = stack.pop()
        stack.extend(getattr(command, "commands", {}).values())
        for param in getattr(command, "params", []):
            param.process_value = _bounded(param.process_value)
            _defer_coercion(param)
        if hasattr(command, "get_help_option"):
            command.get_help_option = _deferred_help(command.get_help_option)


def _deferred_help(get_help_option):
    """``get_help_option`` whose option (made at the first parse) defers its coercion too."""

    def deferred(ctx):
        option = get_help_option(ctx)
        if option is not None:
            _defer_coercion(option)
        return option

    return deferred


def _defer_coercion(param) -> None:
    """Spare a command pydantic on its happy path: typer 0.29 (``typer._coercion``) checks every
    option value with a pydantic validator, whose import costs about 0.08 s of a 0.3 s command
    on the 2-core box.  The deferred coercion answers the plain cases itself, with the value
    typer's validator would give (an ASCII ``str``; an ``int`` or ``float`` of plain digits
    within its bounds; a path of ASCII text, or a choice, through typer's own ``coerce_cli_path``
    and ``coerce_cli_choice``; a list of such items), and hands any other value to typer's
    validator, built then, so that every refusal is typer's own sentence.  ``None`` and a bare
    string for a list stay typer's (``RuntimeParam.coerce``); a typer without these internals is
    left as it is."""
    deferred = _deferred_class()
    if deferred is None or getattr(param, "_runtime_param", False) is not None:
        return
    descriptor = getattr(param, "type_descriptor", None)
    try:
        if descriptor is not None and descriptor.file_annotation is None:
            param._runtime_param = deferred(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
    except (AttributeError, TypeError):  # another typer's internals: its own coercion serves
        return


_PLAIN_INT = re.compile(r"0|[1-9][0-9]{0,17}")
_PLAIN_FLOAT = re.compile(r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?([eE][+-]?[0-9]{1,2})?")


def _plain_number(annotation, info, value):
    """``value`` as the ``int`` or ``float`` typer's validator makes of it, or None to ask it."""
    import math

    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        pattern = _PLAIN_INT if annotation is int else _PLAIN_FLOAT
        value = annotation(value) if pattern.fullmatch(value) else None
    if annotation is int and not isinstance(value, int):
        return None
    if annotation is float and not (isinstance(value, float) and math.isfinite(value)):
        return None
    if getattr(info, "clamp", False):
        return None
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def _plain_value(annotation, info, value, param, ctx):
    """What typer's validator makes of a plain ``value``, or ``_ASK`` where it must be asked."""
    from enum import Enum
    from typing import get_args, get_origin

    from typer._param_types import coerce_cli_choice, coerce_cli_path, lenient_issubclass, routes_to_path

    if getattr(info, "parser", None) is not None:
        return _ASK
    if get_origin(annotation) is list:  # typer's list validator: each item as its own annotation
        (item_annotation,) = get_args(annotation)
        items = value if isinstance(value, (list, tuple)) else [value]
        plain = [_plain_value(item_annotation, info, item, param, ctx) for item in items]
        return _ASK if any(item is _ASK for item in plain) else plain
    if annotation is str:
        return value if isinstance(value, str) and value.isascii() else _ASK
    if annotation is int or annotation is float:
        number = _plain_number(annotation, info, value)
        return _ASK if number is None else number
    if lenient_issubclass(annotation, Enum):
        return coerce_cli_choice(value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx)
    if annotation is not bool and routes_to_path(annotation, info):
        path_type = info.path_type
        if path_type is None and lenient_issubclass(annotation, Path):
            path_type = annotation
        if lenient_issubclass(path_type, Path) and not isinstance(value, path_type):
            if not (isinstance(value, str) and value and value.isascii() and "\0" not in value):
                return _ASK
            value = path_type(value)  # what typer's pydantic path validator makes of the text
        return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)
    return _ASK


_ASK = object()


@functools.cache
def _deferred_class():
    """A typer ``RuntimeParam`` that answers plain values (``_plain_value``) and builds typer's
    own (``build_runtime_param``) for the rest; None for a typer without them."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return None

    class Deferred(RuntimeParam):
        def _coerce_value(self, value, param, ctx):
            try:
                plain = _plain_value(self.annotation, self.parameter_info, value, param, ctx)
            except Exception:  # typer's validator words the refusal
                plain = _ASK
            if plain is not _ASK:
                return plain
            built = build_runtime_param(param.type_descriptor)
            param._runtime_param = built
            return built._coerce_value(value, param=param, ctx=ctx)

    return Deferred


def available_memory() -> int:
    """Memory available to a new allocation [bytes] (MemAvailable of /proc/meminfo, else the
    physical memory; 0 when unknown)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


_NO_ARGS_IS_HELP = getattr(click_exceptions, "NoArgsIsHelpError", ())


def usage_sentence(message: str) -> str:
    """click's message as the middle of one sentence: one line, lower-case start, no final stop."""
    import re

    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    text = re.sub(r"\.\s+Did you mean (.*?)\?$", r" (did you mean \1?)", text).rstrip(".")
    text = re.sub(r": value error, ", ": ", text, flags=re.IGNORECASE)
    head, sep, tail = text.partition("': ")
    if sep and tail[:1].isupper() and tail[1:2].islower():
        text = f"{head}{sep}{tail[:1].lower()}{tail[1:]}"
    return text[:1].lower() + text[1:]


class Compression(StrEnum):
    lz4 = "lz4"
    zstd = "zstd"
    gzip = "gzip"
    none = "none"


class By(StrEnum):
    time = "time"
    cost = "cost"
    energy = "energy"


def parse_option_items(items: list[str] | None) -> dict:
    """``KEY=VALUE`` option overrides, values read as TOML scalars (true, 0.5, inf, "tree") or bare
    words (``options.read_scalar``: the same for both families)."""
    values = {}
    for item in items or []:
        key, text = option_item(item)
        values[key] = read_scalar(text)
    return values


def option_item(item: str, flag: str = "--option") -> tuple[str, str]:
    """``KEY=VALUE`` split and stripped; one sentence for an item without ``=`` or a key, and for
    one holding a line break (the text after it would be silently dropped by the TOML reading
    of the value)."""
    from paigrid.errors import quoted

    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise PaigridError(f"{flag} takes KEY=VALUE, not {quoted(item)}.")
    if any(c in item for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        raise PaigridError(f"{flag} {quoted(key.strip())}: the value holds a line break; give one line.")
    return key.strip(), text.strip()


def output_format(json_out: bool, csv_out: bool) -> str:
    if json_out and csv_out:
        raise PaigridError("choose one of --json and --csv.")
    return "json" if json_out else "csv" if csv_out else "table"


def workloads_arg(text: str):
    """A workloads argument: a CSV path, or comma-separated catalogue names."""
    names = [t.strip() for t in text.split(",")]
    if not any(names):  # before the path test: Path("") is the current folder
        raise PaigridError("--workloads is empty; give job names (comma-separated) or a CSV file.")
    if text.endswith(".csv") or Path(text).exists():
        return text
    if not all(names):
        raise PaigridError(f"--workloads {quoted(text)} names an empty job (two commas, or one at an end).")
    return names


CATALOGUE_HELP = (
    "Replace a built-in catalogue by a CSV of the same schema: KIND=PATH with KIND one of gpus, "
    "links, workloads, optimizers, precisions (repeatable)."
)


def parse_catalogue_items(items: list[str] | None) -> dict[str, str]:
    """``KIND=PATH`` catalogue replacements."""
    from paigrid.inputs.catalog import BUILTIN

    out = {}
    for item in items or []:
        kind, sep, path = item.partition("=")
        if not sep or kind.strip() not in BUILTIN:
            raise PaigridError(f"--catalogue takes KIND=PATH with KIND one of {', '.join(BUILTIN)}, not {item!r}.")
        out[kind.strip()] = path.strip()
    return out


#: help of the data-parallel commands' --option (every option of ``options.DP_OPTIONS``)
OPTION_HELP = option_help("dp")
#: help of the LLM commands' --option (every option of ``options.LLM_OPTIONS``)
LLM_OPTION_HELP = option_help("llm")
