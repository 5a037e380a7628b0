"""llama-server --help parsing, flag adaptation to older/newer builds, and llama-fit-params output."""

from __future__ import annotations

from pathlib import Path

from tunehost.advise.flags import (EXPERT_TENSORS, adapt, expert_override, fit_supported, parse_fit_params,
                                   parse_help, read_caps)
from tunehost.launch import Flag
from tunehost.host import open_host
from tunehost.model import ROUTED_EXPERT_RE

DATA = Path(__file__).parent / "data"
SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
# real output of the b11312 CPU build (llama-fit-params shares llama-server's common options)
B11312 = (DATA / "llama-fit-params-help-b11312.txt").read_text()


def test_parse_real_b11312_help() -> None:
    caps = parse_help(B11312)
    assert caps.has("-fa", "--flash-attn") and caps.values("-fa") == ("on", "off", "auto")
    assert caps.has("--n-cpu-moe") and caps.has("-ncmoe") and caps.has("-ot")
    assert caps.values("-ctk")[:4] == ("f32", "f16", "bf16", "q8_0")
    assert fit_supported(caps)
    # this build replaced --mlock/--no-mmap with --load-mode
    assert caps.has("--load-mode") and not caps.has("--mlock") and not caps.has("--no-mmap")


def test_load_mode_replaces_mlock_and_no_mmap() -> None:
    flags = (Flag("--no-mmap", None, "r"), Flag("--mlock", None, "l"), Flag("-t", "8", "t"))
    out, notes = adapt(flags, parse_help(B11312))
    assert [(f.name, f.value) for f in out] == [("-t", "8"), ("--load-mode", "mlock")]
    assert any("--load-mode" in n for n in notes)
    only_no_mmap, _ = adapt((Flag("--no-mmap", None, "r"),), parse_help(B11312))
    assert [(f.name, f.value) for f in only_no_mmap] == [("--load-mode", "none")]


def test_old_switch_style_flash_attention() -> None:
    caps = parse_help("-fa,   --flash-attn                     enable Flash Attention (default: disabled)\n")
    out, notes = adapt((Flag("-fa", "on", "why"),), caps)
    assert [(f.name, f.value) for f in out] == [("-fa", None)] and notes


def test_missing_n_cpu_moe_falls_back_to_ot_keeping_shared_experts() -> None:
    caps = parse_help("--override-tensor, -ot <tensor name pattern>=<buffer type>,...\n"
                      "                                        override tensor buffer type\n")
    out, notes = adapt((Flag("--n-cpu-moe", "3", "why"),), caps)
    assert out[0].name == "-ot" and out[0].value == rf"blk\.(0|1|2)\.{EXPERT_TENSORS}=CPU"
    assert notes
    import re

    pattern = out[0].value.rsplit("=", 1)[0]
    assert re.search(pattern, "blk.1.ffn_up_exps.weight")
    assert not re.search(pattern, "blk.1.ffn_up_shexp.weight")  # the shared expert stays on the GPU
    assert not re.search(pattern, "blk.1.ffn_gate_inp.weight")
    assert not re.search(pattern, "blk.3.ffn_up_exps.weight")
    assert ROUTED_EXPERT_RE.search("blk.1.ffn_gate_up_exps.weight") and re.search(pattern, "blk.1.ffn_gate_up_exps")


def test_unknown_flags_are_dropped_with_a_note() -> None:
    out, notes = adapt((Flag("--spec-type", "draft-mtp", "m"), Flag("-t", "4", "t")), parse_help("-t N  threads\n"))
    assert [f.name for f in out] == ["-t"] and "--spec-type" in notes[0]


def test_mtp_spelling_follows_the_build() -> None:
    caps = parse_help("--spec-type [none|mtp|ngram-cache]   type of speculative decoding\n")
    out, notes = adapt((Flag("--spec-type", "draft-mtp", "m"),), caps)
    assert out[0].value == "mtp" and notes


def test_no_caps_changes_nothing() -> None:
    flags = (Flag("-fa", "on", "x"),)
    assert adapt(flags, None) == (flags, ())


def test_expert_override_one_layer() -> None:
    assert expert_override([0]) == rf"blk\.0\.{EXPERT_TENSORS}=CPU"


def test_parse_fit_params_output() -> None:
    # tools/fit-params/fit-params.cpp: printf("-c %u -ngl %d"), then " -ts a,b", then ' -ot "pattern=BUFT,..."'
    out = ('-c 32768 -ngl 49 -ot "blk\\.0\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU,'
           'blk\\.1\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"\n')
    probe = parse_fit_params(out)
    assert (probe.n_ctx, probe.gpu_layers, probe.cpu_expert_layers) == (32768, 49, (0, 1))
    assert parse_fit_params("-c 4096 -ngl -1\n").gpu_layers == -1  # real output on a CPU-only host (b11312)
    assert parse_fit_params("-c 4096 -ngl 20 -ts 3,1\n").tensor_split == "3,1"
    assert parse_fit_params("garbage") is None
    odd = parse_fit_params('-c 4096 -ngl 30 -ot "blk\\.5\\.attn_q\\.weight=CPU"')
    assert odd.cpu_expert_layers is None and odd.overrides


def test_read_caps_from_snapshots() -> None:
    caps = read_caps(open_host(SNAPSHOTS / "desktop-12700f-rtx3060"), "/usr/local/bin/llama-server")
    assert caps is not None and caps.has("--n-cpu-moe") and caps.has("--mlock") and not fit_supported(caps)
    old = read_caps(open_host(SNAPSHOTS / "server-epyc9654-2s"), "/usr/local/bin/llama-server")
    assert old is not None and "-fa" not in old.takes_value and not old.has("--n-cpu-moe")
    assert read_caps(open_host(SNAPSHOTS / "laptop-5800u-apu"), "/usr/local/bin/llama-server") is None
    assert read_caps(open_host(SNAPSHOTS / "laptop-5800u-apu"), None) is None
