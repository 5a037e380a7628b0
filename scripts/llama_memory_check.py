#!/usr/bin/env python3
"""Check tunehost's KV-cache and recurrent-state arithmetic against llama.cpp itself.

    TUNEHOST_LLAMA_BIN_DIR=... python scripts/llama_memory_check.py            # capture, then compare
    python scripts/llama_memory_check.py --compare-only                          # compare the stored figures
    python scripts/llama_memory_check.py --only qwen3-coder-next --write-models /tmp/m --quant Q4_K  # for advise

For every model shape in tests/advise/data/llama_memory_table.json (metadata rebuilt from each model's published
config), this writes a GGUF with that metadata and the tensor table llama.cpp expects, and an empty data region (a
sparse file: a 60 GB model takes no disk), then runs the real `llama-fit-params -v` on the CPU for each case
(context, KV types, slots, flash attention, --swa-full). llama-fit-params loads the model and creates the context
with no_alloc (common/fit.cpp common_get_device_memory_data_impl), so nothing is read or allocated, and the load log
prints what llama.cpp would allocate:

    llama_kv_cache: size = 1088.00 MiB ( 65536 cells,  12 layers,  1/1 seqs), K (q8_0): 544.00 MiB, V (q8_0): ...
    llama_memory_recurrent: size = 75.38 MiB (1 cells, 48 layers, 1 seqs 0 rs_seq), R (f32): 3.38 MiB, S ...
    llama_context:        CPU compute buffer size =   300.75 MiB

The tensor table is found by asking llama.cpp: a GGUF without a tensor the architecture needs fails to load with
"missing tensor 'NAME'", one with a wrong shape with "tensor 'NAME' has wrong shape; expected A, got B"; a tensor
found for one layer is added to every layer of the same kind (KV / recurrent / FFN / NextN / dense-lead).

The figures are written back into the table ("llama_cpp" of each case); tests/advise/test_llama_memory_table.py
checks tunehost against them (within 5 %) without llama.cpp.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gguf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunehost.advise.memory import MiB, ServerSettings, compute_buffer_bytes, kv_layout  # noqa: E402
from tunehost.model import read_model  # noqa: E402

TABLE = ROOT / "tests" / "advise" / "data" / "llama_memory_table.json"
TOLERANCE = 0.05
RUN_TIMEOUT_S = 120
MAX_DISCOVERY_RUNS = 400
_DEFAULT_KEYS = {  # every architecture reads some of these; extra keys are ignored by llama.cpp
    "attention.layer_norm_rms_epsilon": 1e-6,
    "attention.layer_norm_epsilon": 1e-5,
    "rope.freq_base": 10000.0,
}
_F32_MARKS = ("norm", "ssm_a", "ssm_d", "ssm_conv1d", "ssm_dt", "bias", "sinks", "exp_probs_b", "shortconv.conv")

_MISSING = re.compile(r"(?:missing tensor '([^']+)'|tensor '([^']+)' not found)")
_WRONG = re.compile(r"tensor '([^']+)' has wrong shape; expected ([0-9, ]+), got")
_KEY = re.compile(r"key not found in model: (\S+)")
_KV = re.compile(r"llama_kv_cache: size = +([0-9.]+) MiB")
_RS = re.compile(r"llama_memory_recurrent: size = +([0-9.]+) MiB")
_COMPUTE = re.compile(r"(\S+) compute buffer size = +([0-9.]+) MiB")
_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")


# --quant: matrices as this type where their rows are whole blocks (else Q8_0, else F16), for a realistic file size
QUANT_TYPES = {"Q4_K": (gguf.GGMLQuantizationType.Q4_K, 256, 144), "Q8_0": (gguf.GGMLQuantizationType.Q8_0, 32, 34)}


def _tensor_type(name: str, ne: tuple[int, ...], quant: str | None) -> tuple[gguf.GGMLQuantizationType, int]:
    """(type, bytes) of one sparse tensor."""
    elements = int(np.prod(ne))
    if len(ne) == 1 or any(mark in name for mark in _F32_MARKS):
        return gguf.GGMLQuantizationType.F32, 4 * elements
    for kind in ((quant,) if quant else ()) + ("Q8_0",) * bool(quant):
        qtype, block, size = QUANT_TYPES[kind]
        if ne[0] % block == 0:
            return qtype, elements // block * size
    return gguf.GGMLQuantizationType.F16, 2 * elements


def write_gguf(path: Path, arch: str, metadata: dict, tensors: dict[str, tuple[int, ...]] | None = None,
               quant: str | None = None) -> Path:
    """A GGUF with `metadata` (keys without the "<arch>." prefix unless they contain "general."/"tokenizer.") and
    tensor infos for `tensors` (name -> ne, GGUF order), data region left sparse; matrices F16, or `quant`."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_string("tokenizer.ggml.model", "none")
    for key, value in {**_DEFAULT_KEYS, **metadata}.items():
        full = key if key.startswith(("general.", "tokenizer.")) else f"{arch}.{key}"
        if isinstance(value, bool):
            writer.add_bool(full, value)
        elif isinstance(value, int):
            writer.add_uint32(full, value)
        elif isinstance(value, float):
            writer.add_float32(full, value)
        elif isinstance(value, str):
            writer.add_string(full, value)
        elif isinstance(value, list):
            kind = gguf.GGUFValueType.BOOL if value and isinstance(value[0], bool) else None
            if kind is None:
                kind = gguf.GGUFValueType.FLOAT32 if value and isinstance(value[0], float) else gguf.GGUFValueType.INT32
            writer.add_key_value(full, value, gguf.GGUFValueType.ARRAY, sub_type=kind)
        else:
            raise ValueError(f"{key}: unsupported metadata value {value!r}")
    total = 0
    for name, ne in (tensors or {}).items():
        qtype, nbytes = _tensor_type(name, ne, quant)
        writer.add_tensor_info(name, tuple(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=qtype)
        total += gguf.GGUFWriter.ggml_pad(nbytes, writer.data_alignment)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    size = path.stat().st_size
    with path.open("r+b") as fh:  # the data region: a hole, no disk used
        fh.truncate(gguf.GGUFWriter.ggml_pad(size, writer.data_alignment) + total)
    return path


def case_args(case: dict) -> list[str]:
    """llama-fit-params options for one case (names checked in common/arg.cpp)."""
    args = ["-c", str(case["ctx"]), "-ctk", case.get("ctk", "f16"), "-ctv", case.get("ctv", case.get("ctk", "f16")),
            "-np", str(case.get("np", 1)), "-fa", "on" if case.get("fa", True) else "off",
            "-b", str(case.get("batch", 2048)), "-ub", str(case.get("ubatch", 512))]
    if case.get("kvu"):
        args.append("-kvu")
    if case.get("swa_full"):
        args.append("--swa-full")
    return args


def settings_for(case: dict) -> ServerSettings:
    """The same case as tunehost's ServerSettings."""
    return ServerSettings(n_ctx=case["ctx"], n_parallel=case.get("np", 1), kv_unified=bool(case.get("kvu")),
                          type_k=case.get("ctk", "f16"), type_v=case.get("ctv", case.get("ctk", "f16")),
                          n_batch=case.get("batch", 2048), n_ubatch=case.get("ubatch", 512),
                          swa_full=bool(case.get("swa_full")), flash_attn=case.get("fa", True))


def run_fit(binary: Path, model: Path, args: list[str], mode: str = "errors") -> tuple[int, str]:
    """llama-fit-params in one of three modes:

    errors   the fit itself (fails on a CPU-only build after loading), llama.cpp's error lines only
    print    --fit-print on: load, create the context, print the memory estimate, exit 0
    verbose  --fit-print on -v: the same with the whole load log (KV, recurrent state, compute buffers)
    """
    extra = {"errors": [], "print": ["-fitp", "on"], "verbose": ["-fitp", "on", "-v"]}[mode]
    proc = subprocess.run([str(binary), "-m", str(model), "-t", "1", *extra, *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _sized(binary: Path, path: Path, args: list[str], tries: int = 4, need: tuple[bool, bool] = (False, False)
           ) -> tuple[int, str] | None:
    """A verbose run whose log shows the KV cache and/or recurrent state being sized (`need`: which must show; a
    crash in the graph reserve that follows can cut the log short: asked again), or None."""
    for _ in range(tries):
        rc, out = run_fit(binary, path, args, "verbose")
        kv, rs = bool(_KV.search(out)), bool(_RS.search(out))
        if (kv or rs) and (kv or not need[0]) and (rs or not need[1]):
            return rc, out
        if "failed to load model" in out or "not found" in out or "wrong shape" in out:
            return None
    return None


COMPLAINT_TRIES = 15  # llama-fit-params runs that may lose their log before one counts as "no complaint"


def _complaint(binary: Path, path: Path, args: list[str]) -> tuple[str, re.Match | None]:
    """What llama.cpp says is wrong with the file. Its log is written by a thread (common/log.cpp's worker) that a
    failing exit can cut short, so an answer without a recognised line is asked again, each time a little later: on
    a loaded machine five quick tries all came back empty (a full test run's gpu_proof test, twice)."""
    out = ""
    for attempt in range(COMPLAINT_TRIES):
        if attempt:
            time.sleep(min(0.05 * attempt, 0.5))
        _, out = run_fit(binary, path, args)
        for kind, pattern in (("wrong", _WRONG), ("missing", _MISSING), ("key", _KEY)):
            if m := pattern.search(out):
                return kind, m
    return out, None


def _kind(model_meta: dict, il: int, facts) -> tuple:
    lead = int(model_meta.get("leading_dense_block_count", 0))
    ff = model_meta.get("feed_forward_length")
    ff_il = ff[il] if isinstance(ff, list) else ff
    recr = bool(facts.recurrent_layers) and facts.recurrent_layers[il]
    return (facts.has_kv(il), recr, bool(ff_il), il < lead, il >= facts.block_count - facts.nextn_layers)


def discover(binary: Path, entry: dict, workdir: Path, log) -> tuple[Path, dict[str, tuple[int, ...]]]:
    """The tensor table llama.cpp wants for this shape, found by loading and reading its complaints."""
    arch, meta = entry["arch"], entry["metadata"]
    path = workdir / f"{entry['name']}.gguf"
    tensors: dict[str, tuple[int, ...]] = {}
    facts = read_model(write_gguf(path, arch, meta))
    kinds = [_kind(meta, il, facts) for il in range(facts.block_count)]
    probe = entry["cases"][0]
    for suffix in entry.get("seed_per_layer", ()):  # e.g. attn_norm: without blk.0's, glm4moe loads as MTP-only
        for il in range(facts.block_count):
            tensors[f"blk.{il}.{suffix}"] = (facts.embedding_length,)
    # tensors llama.cpp loads as optional but its graph uses, on the recurrent layers only (Qwen3-Next/3.5's Gated
    # DeltaNet: attn_qkv, attn_gate; Nemotron-H's and Granite-4.0-H's Mamba-2 layers: ssm_conv1d.bias, which
    # mamba-base.cpp adds unconditionally): never asked for, so without a seed the file loads and the graph
    # dereferences NULL; llama.cpp's "wrong shape" complaint then gives each its real shape
    for suffix in entry.get("seed_recurrent", ()):
        for il in range(facts.block_count):
            if facts.recurrent_layers and facts.recurrent_layers[il]:
                tensors[f"blk.{il}.{suffix}"] = (facts.embedding_length,)
    for _ in range(MAX_DISCOVERY_RUNS):
        write_gguf(path, arch, meta, tensors)
        args = case_args({**probe, "ctx": 512})
        if _sized(binary, path, args, tries=2) is not None:  # loaded and sized its memory
            return path, tensors
        kind, m = _complaint(binary, path, args)
        if m is None:
            raise RuntimeError(f"{entry['name']}: llama-fit-params failed:\n{_errors(kind)}")
        if kind == "wrong":
            name, ne = m.group(1), tuple(int(x) for x in m.group(2).split(","))
            for other in _same_kind(name, kinds):
                if tensors.get(other) is not None:
                    tensors[other] = ne
            tensors[name] = ne
        elif kind == "missing":
            name = m.group(1) or m.group(2)
            known = _known_shape(name, tensors)
            for other in _same_kind(name, kinds):
                tensors.setdefault(other, known)
            tensors[name] = known
        else:
            raise RuntimeError(f"{entry['name']}: llama.cpp needs key {m.group(1)}")
    raise RuntimeError(f"{entry['name']}: no loadable tensor table after {MAX_DISCOVERY_RUNS} runs")


def _errors(out: str) -> str:
    """llama.cpp's error lines (" E "), or the output's end."""
    lines = [line for line in out.splitlines() if " E " in line]
    return "\n".join(lines[-8:]) or out[-2000:]


def _same_kind(name: str, kinds: list[tuple]) -> list[str]:
    m = _LAYER.match(name)
    if not m:
        return [name]
    il, rest = int(m.group(1)), m.group(2)
    if il >= len(kinds):
        return [name]
    return [f"blk.{j}.{rest}" for j, k in enumerate(kinds) if k == kinds[il]]


def _known_shape(name: str, tensors: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    m = _LAYER.match(name)
    if m:
        for other, ne in tensors.items():
            mo = _LAYER.match(other)
            if mo and mo.group(2) == m.group(2):
                return ne
    return (1,)


def measure(binary: Path, path: Path, case: dict) -> dict:
    facts = read_model(path)
    need = (any(facts.has_kv(il) for il in range(facts.block_count)), facts.has_recurrent)
    sized = _sized(binary, path, case_args(case), tries=8, need=need)
    if sized is None:
        raise RuntimeError(f"{path.name} {case}: llama-fit-params did not size its memory")
    rc, out = sized
    kv = sum(float(x) for x in _KV.findall(out))
    rs = sum(float(x) for x in _RS.findall(out))
    # the compute buffer needs the graph reserve, which crashes on some placeholder tensors (then: None)
    compute = sum(float(size) for _, size in _COMPUTE.findall(out)) if rc == 0 else None
    return {"kv_mib": round(kv, 2), "state_mib": round(rs, 2),
            "compute_mib": round(compute, 2) if compute is not None else None}


def tunehost_figures(path: Path, case: dict) -> dict:
    facts = read_model(path)
    layout = kv_layout(facts, settings_for(case))
    return {"kv_mib": layout.kv_total / MiB, "state_mib": layout.state_total / MiB,
            "compute_mib": compute_buffer_bytes(facts, settings_for(case)) / MiB}


def within(ours: float, theirs: float, tolerance: float = TOLERANCE) -> bool:
    """Within `tolerance` of llama.cpp's figure; two figures under 0.01 MiB (its print precision) agree."""
    if theirs < 0.01:
        return ours < 0.01 + tolerance
    return abs(ours - theirs) <= tolerance * theirs + 0.005


def write_models(binary: Path, table: list[dict], only: set[str], out_dir: Path, quant: str | None, log) -> None:
    """Sparse GGUFs of the table's shapes, with the tensor table llama.cpp wants, into `out_dir` (for advise)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tunehost-llama-memory-") as tmp:
        for entry in table:
            if only and entry["name"] not in only:
                continue
            _, tensors = discover(binary, entry, Path(tmp), log)
            path = write_gguf(out_dir / f"{entry['name']}.gguf", entry["arch"], entry["metadata"], tensors, quant)
            log(f"{path}: {len(tensors)} tensors, {read_model(path).weights.total / 2**30:.1f} GiB of weights")


def capture(binary: Path, table: list[dict], only: set[str], log) -> None:
    with tempfile.TemporaryDirectory(prefix="tunehost-llama-memory-") as tmp:
        for entry in table:
            if only and entry["name"] not in only:
                continue
            log(f"{entry['name']}: finding the tensor table ...")
            path, tensors = discover(binary, entry, Path(tmp), log)
            log(f"{entry['name']}: {len(tensors)} tensors, {path.stat().st_size / 2**30:.1f} GiB (sparse)")
            for case in entry["cases"]:
                case["llama_cpp"] = measure(binary, path, case)
            path.unlink()


def report(table: list[dict], tmp: Path) -> int:
    bad = 0
    print(f"{'model':28} {'arch':15} {'ctx':>7} {'np':>3} {'type':5} {'KV tunehost':>12} {'KV llama.cpp':>12} "
          f"{'state th':>9} {'state lc':>9} {'ok':3} {'compute th/lc':>15}")
    for entry in table:
        path = write_gguf(tmp / f"{entry['name']}.gguf", entry["arch"], entry["metadata"])
        for case in entry["cases"]:
            theirs = case.get("llama_cpp")
            if not theirs:
                continue
            ours = tunehost_figures(path, case)
            ok = within(ours["kv_mib"], theirs["kv_mib"]) and within(ours["state_mib"], theirs["state_mib"])
            bad += not ok
            slots = f"{case.get('np', 1)}{'u' if case.get('kvu') else ''}"
            kind = case.get("ctk", "f16") + ("" if case.get("fa", True) else "/nofa") + (
                "/swafull" if case.get("swa_full") else "")
            print(f"{entry['name']:28} {entry['arch']:15} {case['ctx']:>7} {slots:>3} {kind:5} "
                  f"{ours['kv_mib']:>10.2f}Mi {theirs['kv_mib']:>10.2f}Mi {ours['state_mib']:>9.2f} "
                  f"{theirs['state_mib']:>9.2f} {'yes' if ok else 'NO':3} "
                  f"{ours['compute_mib']:>7.0f}/{theirs['compute_mib'] or float('nan'):<7.0f}")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-only", action="store_true", help="do not run llama.cpp; compare stored figures")
    parser.add_argument("--only", action="append", default=[], help="capture only this model (repeatable)")
    parser.add_argument("--bin-dir", default=os.environ.get("TUNEHOST_LLAMA_BIN_DIR"))
    parser.add_argument("--write-models", metavar="DIR", help="only write the sparse GGUFs (for advise) into DIR")
    parser.add_argument("--quant", choices=sorted(QUANT_TYPES), help="with --write-models: matrices of this type")
    args = parser.parse_args(argv)
    fit = Path(args.bin_dir or ".") / "llama-fit-params"
    if args.bin_dir and not args.compare_only and not (fit.is_file() and os.access(fit, os.X_OK)):
        # the directory given (or TUNEHOST_LLAMA_BIN_DIR) is the build to measure: never another one
        parser.error(f"--bin-dir/TUNEHOST_LLAMA_BIN_DIR {args.bin_dir!r} has no executable llama-fit-params")
    table = json.loads(TABLE.read_text())
    if args.write_models:
        if not args.bin_dir:
            parser.error("--bin-dir or TUNEHOST_LLAMA_BIN_DIR is needed to run llama-fit-params")
        write_models(Path(args.bin_dir) / "llama-fit-params", table, set(args.only), Path(args.write_models),
                     args.quant, lambda text: print(text, file=sys.stderr))
        return 0
    if not args.compare_only:
        if not args.bin_dir:
            parser.error("--bin-dir or TUNEHOST_LLAMA_BIN_DIR is needed to run llama-fit-params")
        binary = Path(args.bin_dir) / "llama-fit-params"
        capture(binary, table, set(args.only), lambda text: print(text, file=sys.stderr))
        TABLE.write_text(json.dumps(table, indent=1) + "\n")
    with tempfile.TemporaryDirectory(prefix="tunehost-llama-memory-") as tmp:
        bad = report(table, Path(tmp))
    print(f"{bad} case(s) outside ±{TOLERANCE:.0%}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
