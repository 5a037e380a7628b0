"""llama-bench: parse every output form it has had, find the binary, and run it.

Parsing is pure (``str -> list[BenchResult]``) and accepts what real users paste:

- JSON arrays (``-o json``) in three schemas: upstream 2023 (cuda/opencl/metal booleans, no
  n_depth), upstream 2025 (backends, n_ubatch, n_depth, samples_ns/samples_ts) and the
  ik_llama.cpp fork (mla_attn, fused_moe, a ready-made "test" field);
- JSONL (``-o jsonl``), with non-JSON stderr banner lines mixed in;
- Markdown tables (``-o md``, the default), with any extra columns, a stray ``||`` at a row's
  end, "pp 512" as well as "pp512" test names, backend lists such as "CUDA,BLAS" and the
  trailing ``build: 8cf427ff (5163)`` line;
- CSV (``-o csv``), every value quoted, old and new headers.

llama-bench runs through the one bounded runner, :func:`tunehost.host.proc.run_bounded` (:func:`_spawn`: a
deadline that kills its process group, caps per stream and per line); tunehost always asks it for JSONL, which it
flushes after every test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunehost.bounds import MAX_TOKENS_PER_S, number, require_token_count, require_tokens_per_s
from tunehost.errors import TunehostError
from tunehost.facts.llama_exit import exit_status, explain_exit
from tunehost.printable import one_line

BENCH_BINARY = "llama-bench"
# Fields that become BenchResult attributes; everything else goes to BenchResult.flags.
_CORE_FIELDS = frozenset({
    "model_type", "model_size", "model_n_params", "backends", "build_commit", "build_number",
    "n_threads", "n_gpu_layers", "n_prompt", "n_gen", "n_depth", "test", "avg_ts", "stddev_ts",
    "samples_ts",
})
# Per-backend booleans of the 2023 schema and the ik_llama.cpp fork, in llama-bench's own
# precedence order (its old get_backend() returned the first one set).
_LEGACY_BACKEND_FLAGS = (
    ("cuda", "CUDA"), ("vulkan", "Vulkan"), ("kompute", "Kompute"), ("opencl", "OpenCL"),
    ("metal", "Metal"), ("sycl", "SYCL"), ("rpc", "RPC"), ("gpu_blas", "GPU BLAS"), ("blas", "BLAS"),
)
# Markdown column titles llama-bench abbreviates, mapped back to the JSON field names.
_MARKDOWN_COLUMNS = {
    "model": "model_type", "size": "model_size", "params": "model_n_params", "backend": "backends",
    "threads": "n_threads", "ngl": "n_gpu_layers", "sm": "split_mode", "nkvo": "no_kv_offload",
    "fa": "flash_attn", "mla": "mla_attn", "fmoe": "fused_moe", "amb": "attn_max_batch",
    "rtr": "run_time_repack", "lm": "load_mode", "embd": "embeddings", "nopo": "no_op_offload",
    "noh": "no_host", "rpk": "repack", "dev": "devices", "ts": "tensor_split",
    "ot": "tensor_buft_overrides", "fitt": "fit_target", "fitc": "fit_min_ctx", "mmap": "use_mmap",
}
# CSV holds only strings; these fields are numbers or booleans in the JSON output.
# flash_attn was a boolean until 2025 and is -1/0/1 (auto/off/on) since; 0 == False either way.
_INT_FIELDS = frozenset({
    "flash_attn",
    "build_number", "n_batch", "n_ubatch", "n_threads", "poll", "model_size", "model_n_params",
    "n_gpu_layers", "main_gpu", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
    "no_op_offload", "n_cpu_moe", "fit_target", "fit_min_ctx", "mla_attn", "attn_max_batch",
})
_FLOAT_FIELDS = frozenset({"avg_ts", "stddev_ts"})
_BOOL_FIELDS = frozenset({
    "cuda", "vulkan", "kompute", "opencl", "metal", "sycl", "gpu_blas", "blas", "f16_kv",
    "mul_mat_q", "no_kv_offload", "cpu_strict", "use_mmap", "embeddings", "no_host", "repack",
    "fused_moe",
})
_TEST_NAME = re.compile(
    r"^(?:pp\s*(?P<pp>\d{1,12}))?(?:\s*\+\s*)?(?:tg\s*(?P<tg>\d{1,12}))?(?:\s*@\s*d\s*(?P<depth>\d{1,12}))?$"
)
_BUILD_LINE = re.compile(r"^build:\s*(?P<commit>\S+)\s*\((?P<number>\d+)\)\s*$")
_THROUGHPUT_CELL = re.compile(r"^(?P<avg>[-+\d.eE]+|nan|inf)\s*(?:±\s*(?P<stddev>[-+\d.eE]+|nan|inf))?$")
# Files tunehost reads as llama-bench output or saved results: a real sweep is a few hundred KB (a Markdown row is
# ~130 bytes, so this is ~100,000 rows); anything larger is not what the user meant to give.
MAX_INPUT_BYTES = 16 * 1024 * 1024
MAX_OUTPUT_LINE = 1024 * 1024  # one line of llama-bench output (a JSONL record is ~1 KB)
GGUF_MAGIC = b"GGUF"
_SIZE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
_COUNT_UNITS = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


@dataclass(frozen=True)
class BenchResult:
    """One llama-bench test (one row / one JSON object), whichever format it came from.

    Throughputs are tokens per second. ``samples_ts`` is empty where the format does not
    carry samples (Markdown, CSV). Sizes parsed from a Markdown table ("3.56 GiB", "6.74 B")
    are rounded as printed. ``flags`` holds every other field, under its JSON field name.
    """

    test: str
    n_prompt: int
    n_gen: int
    n_depth: int
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...] = ()
    model_type: str | None = None
    model_size: int | None = None
    n_params: int | None = None
    backend: str | None = None
    build_commit: str | None = None
    build_number: int | None = None
    n_threads: int | None = None
    n_gpu_layers: int | None = None
    flags: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def kind(self) -> str:
        """"pp" (prompt processing), "tg" (token generation) or "pp+tg"."""
        if self.n_gen == 0:
            return "pp"
        return "tg" if self.n_prompt == 0 else "pp+tg"


# ---------------------------------------------------------------- reading input


def read_input(path: str | os.PathLike[str], what: str, *, strict: bool = False) -> str:
    """The text of a file a user gave (--import, --compare): one clear TunehostError for a directory, a file too
    large to be llama-bench output, a model file, binary data or (strict) text that is not UTF-8."""
    from tunehost.inputs import read_input_file

    data = read_input_file(path, what, limit=MAX_INPUT_BYTES)
    if len(data) > MAX_INPUT_BYTES:
        raise TunehostError(f"{path} is larger than {MAX_INPUT_BYTES // 2**20} MiB: too large to be {what}")
    if data.startswith(GGUF_MAGIC):
        raise TunehostError(f"{path} is a GGUF model file, not {what}")
    if b"\0" in data:
        raise TunehostError(f"{path} is a binary file, not {what}")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise TunehostError(f"{path} is not UTF-8 text (byte {exc.start + 1}), not {what}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number llama-bench or tunehost writes")


def load_json(text: str, where: str) -> Any:
    """json.loads without NaN/Infinity and with one clear line for nesting too deep to be real output."""
    return _decode_json(lambda: json.loads(text, parse_constant=_no_constant), where)[0]


def _decode_json(decode: Callable[[], Any], where: str) -> tuple[Any, ...]:
    try:
        result = decode()
    except RecursionError:
        raise TunehostError(f"{where} is nested too deeply to be real llama-bench output or a saved result") from None
    except json.JSONDecodeError as error:
        raise TunehostError(f"{where} is truncated or malformed JSON: {error.msg} at line {error.lineno}") from None
    except ValueError as error:  # NaN / Infinity
        raise TunehostError(f"{where}: {error}") from None
    return result if isinstance(result, tuple) else (result,)


def _throughput(value: Any, where: str, what: str = "t/s") -> float:
    """A tokens/s figure: a finite number above 0 (llama-bench reporting NaN, inf or a negative rate is broken)."""
    try:
        return require_tokens_per_s(value)
    except ValueError as exc:
        raise TunehostError(f"llama-bench {where} reports {what} {exc}") from None


def _tokens(value: int, where: str, what: str) -> int:
    """A token count from llama-bench: 0 .. MAX_TOKENS (a negative count is not a result)."""
    try:
        return require_token_count(value)
    except ValueError as exc:
        raise TunehostError(f"llama-bench {where} reports {what} {exc}") from None


def _spread(value: Any, where: str) -> float:
    if value is None:
        return 0.0
    spread = number(value, 0.0, MAX_TOKENS_PER_S)
    if spread is None:
        raise TunehostError(f"llama-bench {where} reports a stddev of {str(value)[:40]}: not a finite number "
                            f"from 0 to {MAX_TOKENS_PER_S:g}")
    return spread


# ---------------------------------------------------------------- parsing


def detect_format(text: str) -> str:
    """Name the output form of ``text``: "json", "jsonl", "markdown" or "csv".

    The first line that opens one of the forms decides; banner lines before it are ignored.
    """
    lines = [line.strip() for line in text.splitlines()]
    for index, line in enumerate(lines):
        if line.startswith("["):
            return "json"
        if line.startswith("{"):
            return "jsonl"
        if line.startswith("|") and index + 1 < len(lines) and _is_separator_row(lines[index + 1]):
            return "markdown"
        if _looks_like_csv_header(line):
            return "csv"
    if not text.strip():
        raise TunehostError("llama-bench output is empty")
    raise TunehostError(
        "llama-bench output not recognised (expected JSON, JSONL, CSV or a Markdown table); "
        f"starts with {_excerpt(text)}"
    )


def parse_output(text: str) -> list[BenchResult]:
    """Parse llama-bench output in any form it prints; never returns an empty list.

    Raises TunehostError with a one-line reason for empty, truncated or unrecognised text.
    """
    parsers = {"json": parse_json, "jsonl": parse_jsonl, "markdown": parse_markdown, "csv": parse_csv}
    return parsers[detect_format(text)](text)


def parse_json(text: str) -> list[BenchResult]:
    """Parse ``llama-bench -o json`` (a JSON array), skipping banner lines before it."""
    start = _first_line_starting(text, "[")
    if start is None:
        raise TunehostError(f"no JSON array in llama-bench output; starts with {_excerpt(text)}")
    records, _end = _decode_json(lambda: json.JSONDecoder(parse_constant=_no_constant).raw_decode(text, start),
                                 "llama-bench JSON")
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise TunehostError("llama-bench JSON is not an array of objects")
    return _nonempty([_result_from_record(record, f"JSON object {n}") for n, record in enumerate(records, 1)])


def parse_jsonl(text: str) -> list[BenchResult]:
    """Parse ``llama-bench -o jsonl``: one JSON object per line; other lines (stderr banners) are skipped."""
    results = []
    for line_no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        record = load_json(stripped, f"llama-bench JSONL line {line_no}")
        if not isinstance(record, dict):
            raise TunehostError(f"llama-bench JSONL line {line_no} is not a JSON object")
        results.append(_result_from_record(record, f"JSONL line {line_no}"))
    return _nonempty(results)


def parse_csv(text: str) -> list[BenchResult]:
    """Parse ``llama-bench -o csv``: a header line, then one quoted row per test."""
    lines = text.splitlines()
    header_at = next((i for i, line in enumerate(lines) if _looks_like_csv_header(line.strip())), None)
    if header_at is None:
        raise TunehostError(f"no llama-bench CSV header (build_commit,...,avg_ts,...); starts with {_excerpt(text)}")
    rows = list(csv.reader(io.StringIO("\n".join(line for line in lines[header_at:] if line.strip()))))
    header, body = rows[0], rows[1:]
    results = []
    for number, row in enumerate(body, header_at + 2):
        if len(row) != len(header):
            raise TunehostError(
                f"llama-bench CSV line {number} has {len(row)} values for {len(header)} columns (truncated?)"
            )
        record = {name: _typed_csv_value(name, value) for name, value in zip(header, row)}
        results.append(_result_from_record(record, f"CSV line {number}"))
    return _nonempty(results)


def parse_markdown(text: str) -> list[BenchResult]:
    """Parse ``llama-bench -o md`` tables; banner lines are skipped, ``build:`` lines apply to the rows above them."""
    results: list[BenchResult] = []
    columns: list[str] | None = None
    awaiting_build: list[int] = []  # indexes of rows not yet given a build line
    lines = text.splitlines()
    for number, raw_line in enumerate(lines, 1):
        line = raw_line.strip()
        if build := _BUILD_LINE.match(line):
            for index in awaiting_build:
                results[index] = _with_build(results[index], build["commit"], int(build["number"]))
            awaiting_build = []
            continue
        if not line.startswith("|"):
            continue
        cells = _markdown_cells(line)
        if _is_separator_row(line):
            continue
        if number < len(lines) and _is_separator_row(lines[number].strip()):
            columns = [_MARKDOWN_COLUMNS.get(cell, cell) for cell in cells]
            if "test" not in columns or "t/s" not in columns:
                raise TunehostError(f"llama-bench table header on line {number} lacks the test and t/s columns")
            continue
        if columns is None:
            raise TunehostError(f"llama-bench table row on line {number} comes before any header")
        if len(cells) != len(columns):
            raise TunehostError(
                f"llama-bench table line {number} has {len(cells)} cells for {len(columns)} columns (truncated?)"
            )
        results.append(_result_from_markdown_row(dict(zip(columns, cells)), number))
        awaiting_build.append(len(results) - 1)
    if columns is None:
        raise TunehostError(f"no llama-bench Markdown table found; starts with {_excerpt(text)}")
    return _nonempty(results)


def _result_from_record(record: Mapping[str, Any], where: str) -> BenchResult:
    """Build a BenchResult from one JSON/JSONL/CSV record of any schema."""
    avg_ts = record.get("avg_ts")
    if not isinstance(avg_ts, (int, float)) or isinstance(avg_ts, bool):
        raise TunehostError(f"llama-bench {where} has no numeric avg_ts")
    avg_ts = _throughput(avg_ts, where, "avg_ts")
    n_prompt = _int_or_none(record.get("n_prompt"))
    n_gen = _int_or_none(record.get("n_gen"))
    n_depth = _int_or_none(record.get("n_depth")) or 0
    if n_prompt is None or n_gen is None:
        if "test" not in record:
            raise TunehostError(f"llama-bench {where} says neither n_prompt/n_gen nor test")
        n_prompt, n_gen, n_depth = _parse_test_name(str(record["test"]), where)
    n_prompt, n_gen = _tokens(n_prompt, where, "n_prompt"), _tokens(n_gen, where, "n_gen")
    n_depth = _tokens(n_depth, where, "n_depth")
    samples = record.get("samples_ts") or ()
    if not isinstance(samples, (list, tuple)) or not all(isinstance(s, (int, float)) for s in samples):
        raise TunehostError(f"llama-bench {where} has a malformed samples_ts")
    samples = [_throughput(sample, where, "a samples_ts value") for sample in samples]
    return BenchResult(
        test=format_test_name(n_prompt, n_gen, n_depth),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        avg_ts=avg_ts,
        stddev_ts=_spread(record.get("stddev_ts"), where),
        samples_ts=tuple(samples),
        model_type=_str_or_none(record.get("model_type")),
        model_size=_int_or_none(record.get("model_size")),
        n_params=_int_or_none(record.get("model_n_params")),
        backend=_str_or_none(record.get("backends")) or _legacy_backend(record),
        build_commit=_str_or_none(record.get("build_commit")),
        build_number=_int_or_none(record.get("build_number")),
        n_threads=_int_or_none(record.get("n_threads")),
        n_gpu_layers=_int_or_none(record.get("n_gpu_layers")),
        flags={key: value for key, value in record.items() if key not in _CORE_FIELDS and key != "samples_ns"},
    )


def _result_from_markdown_row(row: Mapping[str, str], line_number: int) -> BenchResult:
    where = f"table line {line_number}"
    n_prompt, n_gen, n_depth = _parse_test_name(row["test"], where)
    throughput = _THROUGHPUT_CELL.match(row["t/s"])
    if throughput is None:
        raise TunehostError(f"llama-bench {where} has an unreadable t/s cell {row['t/s']!r}")
    return BenchResult(
        test=format_test_name(n_prompt, n_gen, n_depth),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        avg_ts=_throughput(_number(throughput["avg"]), where),
        stddev_ts=_spread(_number(throughput["stddev"]) if throughput["stddev"] else None, where),
        model_type=row.get("model_type") or None,
        model_size=_scaled(row.get("model_size"), _SIZE_UNITS),
        n_params=_scaled(row.get("model_n_params"), _COUNT_UNITS),
        backend=row.get("backends") or None,
        n_threads=_int_or_none(row.get("n_threads")),
        n_gpu_layers=_int_or_none(row.get("n_gpu_layers")),
        flags={key: _scalar(value) for key, value in row.items() if key not in _CORE_FIELDS and key != "t/s"},
    )


def format_test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """llama-bench's own test label: "pp512", "tg128", "pp512+tg128", "tg128 @ d4096"."""
    if n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    return f"{name} @ d{n_depth}" if n_depth else name


def _parse_test_name(name: str, where: str) -> tuple[int, int, int]:
    """(n_prompt, n_gen, n_depth) from "pp512", "pp 512" (2023), "tg128 @ d4096", "pp512+tg128"."""
    match = _TEST_NAME.match(name.strip())
    if match is None or (match["pp"] is None and match["tg"] is None):
        raise TunehostError(f"llama-bench {where} has an unknown test name {name!r}")
    return tuple(_tokens(int(match[k] or 0), where, k) for k in ("pp", "tg", "depth"))  # type: ignore[return-value]


def _legacy_backend(record: Mapping[str, Any]) -> str | None:
    """The backend named by the 2023 / ik_llama.cpp per-backend booleans ("CPU" when none is set)."""
    present = [key for key, _ in _LEGACY_BACKEND_FLAGS if key in record]
    if not present:
        return None
    for key, name in _LEGACY_BACKEND_FLAGS:
        if _truthy(record.get(key)):
            return name
    return "CPU"


def _with_build(result: BenchResult, commit: str, number: int) -> BenchResult:
    return replace(result, build_commit=commit, build_number=number)


def _markdown_cells(line: str) -> list[str]:
    # strip("|") also drops the stray "||" that ends some real rows.
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _is_separator_row(line: str) -> bool:
    return line.startswith("|") and bool(re.fullmatch(r"[|\s:\-]+", line)) and "-" in line


def _looks_like_csv_header(line: str) -> bool:
    names = line.split(",")
    return len(names) > 3 and "avg_ts" in names and ("n_prompt" in names or "test" in names)


def _typed_csv_value(name: str, value: str) -> Any:
    if name in _INT_FIELDS:
        return _int_or_none(value) if value != "" else None
    if name in _FLOAT_FIELDS:
        try:
            return float(value)
        except ValueError:
            return None
    if name in _BOOL_FIELDS:
        return _truthy(value)
    return value


def _scaled(cell: str | None, units: Mapping[str, int]) -> int | None:
    """ "3.56 GiB" -> bytes, "6.74 B" -> parameters (as rounded in the table)."""
    if not cell:
        return None
    parts = cell.split()
    if len(parts) != 2 or parts[1] not in units:
        return None
    try:
        return round(float(parts[0]) * units[parts[1]])
    except ValueError:
        return None


def _number(cell: str) -> float | str:
    """A t/s cell's number, or the cell itself when it is no number (the caller says what is wrong)."""
    try:
        return float(cell)
    except ValueError:
        return cell


def _scalar(cell: str) -> Any:
    for convert in (int, float):
        try:
            return convert(cell)
        except ValueError:
            pass
    return cell


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "none")
    return bool(value)


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        try:
            number = float(str(value).strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None


def _str_or_none(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _first_line_starting(text: str, prefix: str) -> int | None:
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(prefix):
            return offset + (len(line) - len(line.lstrip()))
        offset += len(line)
    return None


def _nonempty(results: list[BenchResult]) -> list[BenchResult]:
    if not results:
        raise TunehostError("llama-bench output holds no test results")
    return results


def _excerpt(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return repr(first[:60] + ("…" if len(first) > 60 else ""))


# ---------------------------------------------------------------- finding and running


def find_llama_bench(
    explicit: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Path:
    """Locate llama-bench: ``explicit`` (a binary or a directory: itself, ``build/bin``, ``bin``), else the first of
    tunehost's search (``$TUNEHOST_LLAMA_BIN_DIR``, ``$LLAMA_CPP_DIR``, ``PATH``, the build cache) — the same order
    `tunehost doctor`'s llama-build check reports. Raises TunehostError naming where it looked, or, when
    ``$TUNEHOST_LLAMA_BIN_DIR`` is set, saying it is not a directory or has no llama-bench (no other build is used).
    """
    from tunehost.host.samples import llama_bin_dir_problem, llama_program_candidates, llama_search_dirs

    if explicit is not None:
        if not str(explicit).strip():  # Path("") is ".": the current directory's llama-bench, which nobody named
            raise TunehostError("--llama-bench: an empty path names no llama-bench")
        location = Path(explicit).expanduser()
        places = [location] if location.is_file() else [location, location / "build" / "bin", location / "bin"]
        for place in places:
            candidate = place if place.is_file() else place / BENCH_BINARY
            if candidate.is_file() and os.access(candidate, os.X_OK):
                # absolute: Path("./llama-bench") prints as "llama-bench", which exec would look up on PATH
                return Path(os.path.abspath(candidate))
        raise TunehostError(f"no executable llama-bench at {one_line(explicit, 200)}")
    problem = llama_bin_dir_problem(environ, BENCH_BINARY)
    if problem:  # the user's chosen build is not there: an error, never a silent fallback to another build
        raise TunehostError(problem)
    found = llama_program_candidates(BENCH_BINARY, environ)
    if found:
        return Path(found[0][0])
    env = dict(os.environ if environ is None else environ)
    searched = llama_search_dirs(env)
    looked = [d["dir"] for d in searched] + ["PATH"]
    configured = [f"{name} is set ({env[name]}) but has no llama-bench"
                  for name in ("LLAMA_CPP_DIR",) if env.get(name)]
    if configured:  # do not ask for a setting the user has made: say where it points
        raise TunehostError(f"llama-bench not found: {'; '.join(configured)} (looked in {', '.join(looked)}); "
                            "point it at a llama.cpp build, pass --llama-bench PATH, or build one with "
                            "scripts/build_llama_cpp.py")
    raise TunehostError(
        f"llama-bench not found (looked in {', '.join(looked)}); pass its path, set LLAMA_CPP_DIR, "
        "or build one with scripts/build_llama_cpp.py"
    )


def parse_help_options(help_text: str) -> frozenset[str]:
    """The option names (``-p``, ``--n-prompt``, ...) a ``llama-bench --help`` text lists."""
    options: set[str] = set()
    for line in help_text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("-"):
            continue
        # The option names come first, separated by ", ", before the metavar / description.
        for token in re.split(r",\s*|\s+", stripped):
            if re.fullmatch(r"--?[A-Za-z][\w-]*", token):
                options.add(token)
            elif token and not token.startswith("-"):
                break
    return frozenset(options)


def supported_options(binary: str | os.PathLike[str], *, timeout: float = 30.0) -> frozenset[str]:
    """The options this llama-bench build accepts, read from its ``--help``."""
    outcome = _spawn([str(binary), "--help"], timeout=timeout)
    options = parse_help_options(outcome.stdout + "\n" + outcome.stderr)
    if not options and outcome.returncode < 0:
        raise TunehostError(_crash_line(outcome.returncode, None))
    if not options:
        raise TunehostError(f"{binary} --help lists no options; is it llama-bench? {_tail_line(outcome.stderr)}")
    return options


def unsupported_options(arguments: Iterable[str], supported: frozenset[str]) -> list[str]:
    """The options in ``arguments`` (``-x`` / ``--xyz``, not negative numbers) missing from ``supported``."""
    return [
        argument for argument in arguments
        if re.fullmatch(r"--?[A-Za-z][\w-]*", argument) and argument not in supported
    ]


def run_llama_bench(
    binary: str | os.PathLike[str],
    arguments: Sequence[str],
    *,
    timeout: float,
    on_progress: Callable[[str], None] | None = None,
    cpu_flags: Iterable[str] | None = None,
) -> list[BenchResult]:
    """Run ``binary`` with ``arguments`` plus ``-o jsonl`` and return its parsed results.

    ``arguments`` is an argument list (never a shell string) and must not choose the output
    format. Each stderr line is passed to ``on_progress`` as it arrives, in the calling
    thread (add ``--progress`` to the arguments for per-test progress lines). Raises TunehostError on a timeout, a
    non-zero exit (bad flag, missing model, out of memory: the message quotes the tool's
    last stderr lines) or unparseable output. A death by a signal is explained (tunehost.facts.llama_exit) for
    ``cpu_flags`` (default: this machine's, from /proc/cpuinfo).
    """
    if any(argument in ("-o", "--output") for argument in arguments):
        raise ValueError("run_llama_bench chooses the output format itself; drop -o/--output")
    argv = [str(binary), *arguments, "-o", "jsonl"]
    outcome = _spawn(argv, timeout=timeout, on_stderr_line=on_progress)
    if outcome.timed_out:
        raise TunehostError(f"llama-bench did not finish within {timeout:g} s; last output: {_tail_line(outcome.stderr)}")
    if outcome.returncode < 0:
        raise TunehostError(_crash_line(outcome.returncode, cpu_flags, _tail_line(outcome.stderr, 3)))
    if outcome.returncode != 0:
        raise TunehostError(f"llama-bench failed ({exit_status(outcome.returncode)}): {_tail_line(outcome.stderr, 3)}")
    return parse_jsonl(outcome.stdout)


@dataclass(frozen=True)
class _Outcome:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def _spawn(argv: Sequence[str], *, timeout: float, on_stderr_line: Callable[[str], None] | None = None) -> _Outcome:
    """Run argv through `tunehost.host.proc.run_bounded`: no shell, stderr lines streamed to the callback, the last
    200 kept; at the deadline the whole process group is killed (SIGTERM, then SIGKILL), so no llama-bench thread
    outlives it, and output past MAX_INPUT_BYTES (or a line past MAX_OUTPUT_LINE) ends the run as too large.
    """
    from tunehost.host.proc import run_bounded

    def on_line(stream: str, line: str) -> None:
        if stream == "stderr" and on_stderr_line is not None:
            on_stderr_line(line)

    result = run_bounded(argv, timeout_s=timeout, max_stdout=MAX_INPUT_BYTES, max_stderr=MAX_INPUT_BYTES,
                         max_line=MAX_OUTPUT_LINE, on_line=on_line)
    if result.not_run is not None:
        raise TunehostError(result.not_run)
    if result.too_large is not None:
        raise TunehostError(f"{argv[0]}: output too large ({result.too_large}); it was stopped")
    tail = "\n".join(result.stderr.splitlines()[-200:])
    return _Outcome(result.rc, result.stdout, tail, result.timed_out)


def _crash_line(returncode: int, cpu_flags: Iterable[str] | None, tail: str = "") -> str:
    """llama-bench's death by a signal, explained for this CPU, with its last output lines."""
    from tunehost.host.cpuinfo import live_cpu_flags

    flags = live_cpu_flags() if cpu_flags is None else cpu_flags
    why = explain_exit(BENCH_BINARY, returncode, flags) or f"llama-bench failed ({exit_status(returncode)})"
    return why + (f" Last output: {tail}" if tail and tail != "no error output" else "")


def _tail_line(stderr: str, count: int = 1) -> str:
    """The last ``count`` non-empty stderr lines, joined into one line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " | ".join(lines[-count:]) if lines else "no error output"
