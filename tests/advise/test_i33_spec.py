"""Speculative decoding as users run it (issue 33): an MTP companion GGUF (-md with NextN tensors), n-gram drafting
(--spec-default), --spec-draft-n-max by model size, f16 KV while drafting, and the draft's memory in the plan.

The GGUFs are real files (gguf.GGUFWriter) with llama.cpp's tensor names: `blk.N.nextn.eh_proj.weight` is what
common_speculative_types_from_gguf looks for."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunehost.advise.memory import MiB
from tunehost.advise.plan import AdviseOptions, is_mtp_companion, plan, spec_draft_n_max
from tunehost.errors import TunehostError
from tunehost.model import read_model

from .conftest import N_EMBD, N_HEAD, N_HEAD_KV, _f16, _f32, attention_tensors, dense_ffn, dense_tensors, write_gguf
from .test_plan import HOSTS, MODELS

N_LAYER = 4


def nextn_tensors(il: int) -> dict:
    """One NextN/MTP block as GLM/Qwen converters write it (src/llama-arch.cpp LLM_TENSOR_NEXTN_*)."""
    return {
        f"blk.{il}.nextn.eh_proj.weight": _f16(N_EMBD, 2 * N_EMBD),
        f"blk.{il}.nextn.enorm.weight": _f32(N_EMBD),
        f"blk.{il}.nextn.hnorm.weight": _f32(N_EMBD),
        f"blk.{il}.nextn.shared_head_norm.weight": _f32(N_EMBD),
    }


def companion_gguf(path, n_layer: int = N_LAYER):
    """An MTP companion: the last block only (attention, FFN and its nextn tensors), nextn_predict_layers = 1."""
    il = n_layer - 1
    tensors = attention_tensors(il) | dense_ffn(il) | nextn_tensors(il)
    return write_gguf(path, "llama", tensors, n_layer=n_layer, vocab_tokens=32, name="tiny-mtp",
                      extra=lambda w: w.add_uint32("llama.nextn_predict_layers", 1))


@pytest.fixture
def target(tmp_path):
    return read_model(write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(N_LAYER), n_layer=N_LAYER,
                                 vocab_tokens=32))


@pytest.fixture
def companion(tmp_path):
    return read_model(companion_gguf(tmp_path / "mtp-t.gguf"))


def test_a_companion_with_nextn_tensors_is_planned_as_draft_mtp_with_its_memory(target, companion):
    assert is_mtp_companion(companion) and not is_mtp_companion(target)
    p = plan(target, HOSTS["9950x3d-5090"], AdviseOptions("/t.gguf", ctx=4096, draft="/mtp-t.gguf",
                                                          draft_model=companion))
    assert p.value("-md") == "/mtp-t.gguf" and p.value("--spec-type") == "draft-mtp"
    assert p.value("-ngld") is not None and "-cd" not in [f.name for f in p.flags]
    assert "inferred" not in p.flag("--spec-type").reason and "infer it" in p.flag("--spec-type").reason
    assert p.kv_type == "f16" and p.value("-ctk") == "f16" and "acceptance" in p.flag("-ctk").reason
    row = next(r for r in p.budget.rows if r.label == "MTP draft")
    head_dim = N_EMBD // N_HEAD
    kv = 4096 * N_HEAD_KV * head_dim * 2 * 2  # one NextN block, K and V, f16, the main context's length
    assert row.gpu == companion.weights.total + kv and row.ram == 0
    assert row.gpu in (r.gpu for r in p.budget.rows) and p.budget.gpu_total >= row.gpu
    assert not any("vocabular" in w for w in p.warnings)
    assert any("--draft-ab" in n for n in p.notes)


def test_spec_mtp_with_a_draft_that_has_no_nextn_tensors_is_refused(target, tmp_path):
    plain = read_model(write_gguf(tmp_path / "d.gguf", "llama", dense_tensors(2), n_layer=2, vocab_tokens=32))
    with pytest.raises(TunehostError, match="not an MTP companion"):
        plan(target, HOSTS["9950x3d-5090"], AdviseOptions("/t.gguf", spec="mtp", draft="/d.gguf",
                                                          draft_model=plain))
    # the same file as an ordinary draft: draft-simple
    p = plan(target, HOSTS["9950x3d-5090"], AdviseOptions("/t.gguf", draft="/d.gguf", draft_model=plain))
    assert p.value("--spec-type") == "draft-simple" and any(r.label == "draft model" for r in p.budget.rows)


def test_ngram_drafting_needs_no_model_keeps_q8_0_kv_and_budgets_its_table():
    p = plan(MODELS["llama8b"](), HOSTS["9950x3d-5090"], AdviseOptions("/m.gguf", spec="ngram"))
    names = [f.name for f in p.flags]
    assert "-md" not in names and "--spec-draft-n-max" not in names
    assert p.value("--spec-type") == "ngram-mod" and "--spec-default" in p.flag("--spec-type").reason
    assert p.kv_type == "q8_0"  # nothing drafts from the KV: no reason to give up the smaller cache
    row = next(r for r in p.budget.rows if r.label == "n-gram table")
    assert (row.gpu, row.ram) == (0, 16 * MiB)
    from tunehost.advise.flags import adapt, parse_help

    old = parse_help("-md, --model-draft FNAME  draft\n--spec-type [none|draft-simple|draft-mtp]  t\n")
    flags, notes = adapt(p.flags, old)  # a build without ngram-mod drops it, never turns it into draft-mtp
    assert "--spec-type" not in [f.name for f in flags] and any("ngram-mod" in n for n in notes)
    with pytest.raises(TunehostError, match="leave out --draft"):
        plan(MODELS["llama8b"](), HOSTS["9950x3d-5090"],
             AdviseOptions("/m.gguf", spec="ngram", draft="/d.gguf", draft_model=MODELS["llama8b"]()))


def sized(m, n_params: int, *, nextn: bool = True):
    """The shape with a tensor table of `n_params` parameters (shape fixtures carry none), its MTP block named."""
    from tunehost.model import TensorInfo

    name = f"blk.{m.block_count - 1}.nextn.eh_proj.weight" if nextn else "token_embd.weight"
    return replace(m, tensors=(TensorInfo(name, "F16", (n_params,), n_params, 2 * n_params),))


@pytest.mark.parametrize("model,n_params,expected", [
    ("llama8b", 3_000_000_000, 2),    # small: a verify batch costs compute, not only a read
    ("llama8b", 8_030_000_000, 3),    # llama.cpp's default
    ("llama8b", 70_000_000_000, 4),   # large dense: verifying 5 tokens reads the weights once
    ("qwen30b", 120_000_000_000, 3),  # a MoE routes every verified token to other experts: no longer drafts
])
def test_spec_draft_n_max_follows_the_model_size(model, n_params, expected):
    p = plan(sized(MODELS[model](), n_params), HOSTS["9950x3d-5090"], AdviseOptions("/m.gguf", spec="mtp"))
    assert p.value("--spec-draft-n-max") == str(expected)
    assert "tokens drafted per step" in p.flag("--spec-draft-n-max").reason
    assert not any("no MTP" in w for w in p.warnings)


def test_spec_draft_n_max_draft_ratio_unknown_size_and_yours():
    big = sized(MODELS["llama8b"](), 70_000_000_000)
    small = sized(MODELS["llama8b"](), 3_000_000_000)
    draft = sized(MODELS["llama8b"](), 1_000_000_000, nextn=False)
    o = AdviseOptions("/m.gguf")
    assert spec_draft_n_max(big, replace(o, draft_model=draft), "draft", False) == 8  # 70x smaller
    assert spec_draft_n_max(small, replace(o, draft_model=draft), "draft", False) == 3  # 3x: barely pays
    assert spec_draft_n_max(MODELS["llama8b"](), o, "mtp", False) == 3  # no tensor table: llama.cpp's default
    assert spec_draft_n_max(big, replace(o, spec_draft_n_max=6), "mtp", False) == 6
    assert spec_draft_n_max(big, o, "ngram", False) is None
    p = plan(big, HOSTS["9950x3d-5090"], AdviseOptions("/m.gguf", draft="/d.gguf", draft_model=draft))
    assert p.value("--spec-draft-n-max") == "8" and "70x smaller" in p.flag("--spec-draft-n-max").reason


def test_mtp_recurrent_snapshots_follow_the_n_max_written():
    from .test_memory_layers import qwen3next

    m = qwen3next(architecture="qwen35moe", block_count=40)  # rolls back by snapshots (RS_ROLLBACK_ARCHS)
    p2 = plan(m, HOSTS["9950x3d-5090"], AdviseOptions("/m.gguf", ctx=4096, spec="mtp", spec_draft_n_max=2))
    p4 = plan(m, HOSTS["9950x3d-5090"], AdviseOptions("/m.gguf", ctx=4096, spec="mtp", spec_draft_n_max=4))
    kv2 = next(r for r in p2.budget.rows if r.label == "KV cache")
    kv4 = next(r for r in p4.budget.rows if r.label == "KV cache")
    per_snapshot = sum(m.recurrent.bytes_per_seq for r in m.recurrent_layers if r)
    assert kv4.gpu + kv4.ram - kv2.gpu - kv2.ram == 2 * per_snapshot  # common.h need_n_rs_seq = draft.n_max


def test_cli_ngram_and_companion_on_a_snapshot(cli, tmp_path):
    import json

    from .test_i21_router_ollama import SNAPSHOTS

    t = write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(N_LAYER), n_layer=N_LAYER, vocab_tokens=32)
    c = companion_gguf(tmp_path / "mtp-t.gguf")
    snap = str(SNAPSHOTS / "desktop-9950x3d-rtx5090")
    r = cli("advise", "--model", str(t), "--spec", "ngram", "--snapshot", snap, "--format", "json", "--no-probe")
    data = json.loads(r.output)
    argv = data["argv"]
    assert argv[argv.index("--spec-type") + 1] == "ngram-mod"
    r = cli("advise", "--model", str(t), "--draft", str(c), "--snapshot", snap, "--format", "json", "--no-probe")
    data = json.loads(r.output)
    argv = data["argv"]
    assert argv[argv.index("--spec-type") + 1] == "draft-mtp" and str(c) in argv
    assert any(row["label"] == "MTP draft" for row in data["budget"]["rows"])


def test_a_gemma4_assistant_companion_needs_the_spec_type_said(target, tmp_path):
    """Gemma 4's MTP assistant has nextn.pre_projection/post_projection, no blk.N.nextn.eh_proj: llama.cpp does not
    infer draft-mtp from it (common_speculative_types_from_gguf), so the plan must state it."""
    from .conftest import N_VOCAB

    tensors = attention_tensors(0) | dense_ffn(0) | {
        "token_embd.weight": _f16(N_VOCAB, N_EMBD), "output_norm.weight": _f32(N_EMBD),
        "nextn.pre_projection.weight": _f16(N_EMBD, 2 * N_EMBD), "nextn.post_projection.weight": _f16(N_EMBD, N_EMBD)}
    g4a = read_model(write_gguf(tmp_path / "g4a.gguf", "gemma4-assistant", tensors, n_layer=1, vocab_tokens=32,
                                extra=lambda w: w.add_uint32("gemma4-assistant.nextn_predict_layers", 1)))
    assert is_mtp_companion(g4a)
    p = plan(target, HOSTS["9950x3d-5090"], AdviseOptions("/t.gguf", ctx=4096, draft="/g4a.gguf", draft_model=g4a))
    assert p.value("--spec-type") == "draft-mtp" and "said explicitly" in p.flag("--spec-type").reason
    row = next(r for r in p.budget.rows if r.label == "MTP draft")
    assert row.gpu == g4a.weights.total + 4096 * N_HEAD_KV * (N_EMBD // N_HEAD) * 2 * 2
