"""`--format ollama`: an ollama.service drop-in (environment, CPU affinity) and one Modelfile per model carrying
the same plan, as one text; `--write DIR` writes them as files with a README.txt."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from tunehost.formats.quoting import modelfile_path, systemd_quote
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.advise.artifacts import Artifact
    from tunehost.formats import Subject
    from tunehost.launch import LaunchConfig

# Names and defaults checked in ollama/ollama fb30760 (2026-08-21): envconfig/config.go (OLLAMA_FLASH_ATTENTION
# BoolWithDefault, OLLAMA_KV_CACHE_TYPE "" = f16, OLLAMA_NUM_PARALLEL 1, OLLAMA_MAX_LOADED_MODELS 0 = automatic),
# api/types.go Runner (num_ctx, num_gpu -1 = automatic, num_thread 0 = automatic, use_mmap), llm/llama_server.go
# (-c num_ctx x num_parallel, -np num_parallel, -ngl only when num_gpu > 0 or == 0, --load-mode none for use_mmap
# false, one KV type for K and V).
OLLAMA_DROPIN = "/etc/systemd/system/ollama.service.d/tunehost.conf"
OLLAMA_DROPIN_FILE = "tunehost.conf"


def render_ollama(p: "LaunchConfig") -> str:
    """An ollama.service drop-in (environment, CPU affinity) and a Modelfile per model carrying the same plan, as
    one text: each file under a `# ---- NAME (then: ...) ----` line; `--write DIR` writes them as files."""
    dropin, modelfiles, notes = ollama_files(p)
    lines = [f"# ---- {OLLAMA_DROPIN} (then: systemctl daemon-reload && systemctl restart ollama) ----",
             dropin.rstrip("\n")]
    for slug, text in modelfiles:
        lines += ["", f"# ---- Modelfile.{slug} (then: ollama create {slug} -f Modelfile.{slug}) ----",
                  text.rstrip("\n")]
    if notes:
        lines.append("")
        lines += [f"# note: {one_line(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def ollama_files(p: "LaunchConfig") -> tuple[str, list[tuple[str, str]], list[str]]:
    """The ollama.service drop-in, one (name, Modelfile) per model (the name an Ollama model name, unique, safe as
    a file-name part: tunehost.advise.artifacts.model_slug) and what Ollama cannot carry."""
    from tunehost.advise.artifacts import unique_slugs
    from tunehost.cpulist import format_cpu_list

    configs = p.model_configs()
    first = configs[0]
    notes: list[str] = []
    env: list[tuple[str, str]] = []
    fa = first.value("-fa") if first.flag("-fa") else None
    if first.flag("-fa"):
        env.append(("OLLAMA_FLASH_ATTENTION", "0" if fa == "off" else "1"))
    ctk, ctv = first.value("-ctk"), first.value("-ctv")
    if ctk:
        env.append(("OLLAMA_KV_CACHE_TYPE", ctk))
        if ctv and ctv != ctk:
            notes.append(f"Ollama sets one KV type for K and V: {ctk} (the plan has V {ctv})")
    env.append(("OLLAMA_NUM_PARALLEL", first.value("-np") or "1"))
    models_max = p.value("--models-max") if p.models else "1"
    if models_max == "0":  # llama-server: 0 = unlimited; Ollama: 0 = its own automatic choice
        models_max = str(len(p.models))
    env.append(("OLLAMA_MAX_LOADED_MODELS", models_max or "1"))
    for e in p.env:
        env.append((e.name, e.value or ""))
    dropin = ["# written by tunehost advise --format ollama", "[Service]"]
    for name, value in env:
        dropin.append(f"Environment={systemd_quote(f'{name}={value}')}")
    pins = p.pin_cpus or first.pin_cpus
    if pins:
        dropin.append(f"CPUAffinity={format_cpu_list(pins)}")
    slugs = unique_slugs([m.name if p.models and m.name else Path(m.model).name.replace(".gguf", "")
                          for m in configs])
    modelfiles: list[tuple[str, str]] = []
    for m, name in zip(configs, slugs):
        lines = [f"FROM {modelfile_path(m.model)}"]
        c, np_ = m.value("-c"), m.value("-np") or "1"
        if c:
            per_slot = int(c) // max(1, int(np_))
            lines.append(f"PARAMETER num_ctx {per_slot}")  # Ollama passes -c num_ctx x OLLAMA_NUM_PARALLEL
        if m.flag("--n-cpu-moe") or any(f.name == "-ot" for f in m.flags):
            notes.append(f"{name}: Ollama has no --n-cpu-moe / -ot; num_gpu is left unset so llama-server's own "
                         "fit (on by default) places the experts")
        elif m.value("-ngl") is not None:
            lines.append(f"PARAMETER num_gpu {m.value('-ngl')}")
        if m.value("-t"):
            lines.append(f"PARAMETER num_thread {m.value('-t')}")
        if m.flag("--no-mmap") or m.value("--load-mode") in ("none", "mlock"):
            lines.append("PARAMETER use_mmap false")
        if m.flag("--mlock") or m.value("--load-mode") in ("mlock", "mmap+mlock"):
            notes.append(f"{name}: Ollama has no mlock option; the weights may be paged out under memory pressure")
        if m.flag("-mm") or m.flag("-md"):
            notes.append(f"{name}: the vision projector / draft model are not carried into the Modelfile")
        if m.flag("--spec-type") or m.flag("--spec-default"):
            notes.append(f"{name}: Ollama has no speculative decoding option; the --spec-type of the plan is not "
                         "carried")
        modelfiles.append((name, "\n".join(lines) + "\n"))
    return "\n".join(dropin) + "\n", modelfiles, list(dict.fromkeys(notes))


def readme_ollama(directory: Path, slugs: list[str]) -> str:
    """README.txt beside the written Ollama files: the drop-in, then one `ollama create` per Modelfile."""
    here = os.path.abspath(directory.expanduser())
    q = shlex.quote
    lines = ["Written by tunehost advise --format ollama --write: what each file is and where it goes.", "",
             f"{OLLAMA_DROPIN_FILE}  a drop-in for ollama.service (environment, CPU affinity); as root:",
             f"  install -D -m 644 {q(os.path.join(here, OLLAMA_DROPIN_FILE))} {OLLAMA_DROPIN}",
             "  systemctl daemon-reload && systemctl restart ollama", ""]
    for slug in slugs:
        lines += [f"Modelfile.{slug}  the model {slug}:",
                  f"  ollama create {slug} -f {q(os.path.join(here, f'Modelfile.{slug}'))}"]
    lines += ["", "README.txt  this file", ""]
    return "\n".join(lines)


def render(subject: "Subject") -> str:
    return render_ollama(subject.launch)


def files(subject: "Subject", directory: Path) -> list["Artifact"]:
    """--write DIR: the drop-in, one Modelfile per model, README.txt."""
    from tunehost.advise.artifacts import Artifact

    dropin, modelfiles, _notes = ollama_files(subject.launch)
    artifacts = [Artifact(OLLAMA_DROPIN_FILE, dropin)]
    artifacts += [Artifact(f"Modelfile.{slug}", text) for slug, text in modelfiles]
    artifacts.append(Artifact("README.txt", readme_ollama(directory, [slug for slug, _ in modelfiles])))
    return artifacts
