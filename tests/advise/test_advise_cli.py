"""`tunehost advise` end to end: real GGUFs (tiny, and a sparse file with Qwen3-30B-A3B's real tensor table),
the composite snapshots, the live CI host, every output format, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest

from .conftest import dense_tensors, write_gguf

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
Q4K, Q6K, F32 = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K, gguf.GGMLQuantizationType.F32


def _nbytes(shape: tuple[int, ...], t: gguf.GGMLQuantizationType) -> int:
    block, size = gguf.GGML_QUANT_SIZES[t]
    return int(np.prod(shape)) // block * size


def sparse_qwen3_30b(path: Path) -> Path:
    """A GGUF with Qwen3-30B-A3B's metadata and full tensor table (Q4_K, 17.3 GiB), as a sparse file: no data."""
    e, h, kv, hd, ne, ff, v, n_layer = 2048, 32, 4, 128, 128, 768, 151936, 48
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_name("Qwen3-30B-A3B")
    w.add_block_count(n_layer)
    w.add_context_length(40960)
    w.add_embedding_length(e)
    w.add_feed_forward_length(6144)
    w.add_head_count(h)
    w.add_head_count_kv(kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_expert_count(ne)
    w.add_expert_used_count(8)
    w.add_expert_feed_forward_length(ff)
    w.add_vocab_size(v)
    tensors = [("token_embd.weight", (e, v), Q4K)]
    for i in range(n_layer):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", (e,), F32), (p + "attn_q.weight", (e, h * hd), Q4K),
                    (p + "attn_k.weight", (e, kv * hd), Q4K), (p + "attn_v.weight", (e, kv * hd), Q6K),
                    (p + "attn_output.weight", (h * hd, e), Q4K), (p + "attn_q_norm.weight", (hd,), F32),
                    (p + "attn_k_norm.weight", (hd,), F32), (p + "ffn_norm.weight", (e,), F32),
                    (p + "ffn_gate_inp.weight", (e, ne), F32), (p + "ffn_gate_exps.weight", (e, ff, ne), Q4K),
                    (p + "ffn_up_exps.weight", (e, ff, ne), Q4K), (p + "ffn_down_exps.weight", (ff, e, ne), Q4K)]
    tensors += [("output_norm.weight", (e,), F32), ("output.weight", (e, v), Q6K)]
    data = 0
    for name, shape, t in tensors:
        nb = _nbytes(shape, t)
        if t == F32:
            w.add_tensor_info(name, list(reversed(shape)), np.dtype(np.float32), nb, raw_dtype=t)
        else:  # GGUFWriter takes the byte shape of raw quantized data
            block, size = gguf.GGML_QUANT_SIZES[t]
            w.add_tensor_info(name, [*reversed(shape[1:]), shape[0] // block * size], np.dtype(np.uint8), nb,
                              raw_dtype=t)
        data += nb + (-nb % 32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    size = os.path.getsize(path)
    os.truncate(path, size + (-size % 32) + data)
    return path


@pytest.fixture(scope="module")
def qwen30b(tmp_path_factory) -> Path:
    return sparse_qwen3_30b(tmp_path_factory.mktemp("models") / "Qwen3-30B-A3B-Q4_K.gguf")


@pytest.fixture
def tiny(tmp_path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)


def _json(result) -> dict:
    assert result.exit_code in (0, 2), result.output
    return json.loads(result.stdout)


def _flags(data: dict) -> dict:
    return {f["name"]: f["value"] for f in data["flags"]}


# snapshot -> (path, -t, taskset, -ngl, --n-cpu-moe) for the Qwen3-30B-A3B file (17.3 GiB), default context
SNAPSHOT_TABLE = {
    "desktop-12700f-rtx3060": ("moe", "8", "0,2,4,6,8,10,12,14", "99", "24"),
    "desktop-9950x3d-rtx5090": ("gpu", "16", "0-15", "99", None),
    "strix-halo-395": ("unified", "16", "0-15", "99", None),
    "server-epyc9654-2s": ("cpu", "192", "0-191", None, None),
}


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOT_TABLE))
def test_qwen30b_on_each_snapshot(cli, qwen30b, snapshot) -> None:
    path, threads, cpus, ngl, ncmoe = SNAPSHOT_TABLE[snapshot]
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / snapshot), "--format", "json"))
    flags = _flags(data)
    assert data["path"] == path and data["fits"]
    assert flags["-t"] == threads and data["cpu_affinity"] == cpus
    assert flags.get("-ngl") == ngl and flags.get("--n-cpu-moe") == ncmoe
    assert flags["-ctk"] == "q8_0" and data["placement_source"] == "estimate"
    # no measure.json: RAM at the DIMMs' peak (an upper bound), and the band derates it; the ceiling says so
    ceiling = data["ceiling"]
    assert path == "gpu" or ceiling["tokens_per_s"] is None or "the DIMMs' peak" in ceiling["ram_basis"]
    assert path == "gpu" or ceiling["ram_measured_gbps"] is None or ceiling["ram_basis"]


def test_a_snapshot_with_a_measurement_gives_the_ram_ceiling_without_measuring(cli, qwen30b, tmp_path,
                                                                               monkeypatch) -> None:
    import shutil

    from tunehost.probes import bandwidth

    monkeypatch.setattr(bandwidth, "measure_read_bandwidth", lambda *a, **k: pytest.fail("a snapshot was measured"))
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS / "server-epyc9654-2s", snap, symlinks=True)
    (snap / "samples" / "measure.json").write_text(json.dumps({"format": 1, "memory_read_gbps": 410.0,
                                                               "memory_read_threads": 192}))
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "json"))
    assert data["path"] == "cpu" and data["ceiling"]["tokens_per_s"] > 0
    assert json.dumps(data["ceiling"]).count("410") >= 1


def test_12700f_memlock_64k_keeps_mlock_out_and_says_how(cli, qwen30b) -> None:
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"),
                     "--format", "json"))
    assert "--mlock" not in _flags(data) and "--no-mmap" in _flags(data)
    assert data["mlock_blocked_by_limit"] and "LimitMEMLOCK=infinity" in data["mlock_fix"]


def test_old_build_gets_switch_style_fa(cli, qwen30b) -> None:
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "server-epyc9654-2s"),
                     "--format", "json"))
    assert _flags(data)["-fa"] is None and _flags(data)["--numa"] == "distribute"
    assert any("-fa" in n for n in data["notes"])


def test_modern_build_offers_fit_as_alternative(cli, qwen30b) -> None:
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-9950x3d-rtx5090"),
                     "--format", "json"))
    alt = data["alternatives"][0]["flags"]
    assert [f["name"] for f in alt] == ["--fit", "--fit-target", "--fit-ctx"]
    assert [e["name"] for e in data["env"]] == ["GGML_CUDA_GRAPH_OPT"]


def test_human_output_explains_budget_and_flags(cli, qwen30b) -> None:
    r = cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"))
    assert r.exit_code == 0, r.output
    for text in ("KV cache", "headroom", "free", "taskset -c 0,2,4,6,8,10,12,14", "--n-cpu-moe 24", "-t 8",
                 "ulimit -l unlimited"):
        assert text in r.stdout


def test_shell_format(cli, qwen30b) -> None:
    r = cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"),
            "--format", "shell")
    assert r.exit_code == 0
    assert r.stdout.startswith("taskset -c 0,2,4,6,8,10,12,14 /usr/local/bin/llama-server \\\n")
    assert "  --n-cpu-moe 24 \\\n" in r.stdout and r.stdout.rstrip().endswith("--host 127.0.0.1")


def test_systemd_unit_verifies(cli, qwen30b, tmp_path) -> None:
    server = shutil.which("true") or "/bin/true"
    r = cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"),
            "--llama-server", server, "--format", "systemd")
    assert r.exit_code == 0, r.output
    unit = r.stdout
    assert "CPUAffinity=0,2,4,6,8,10,12,14" in unit and "LimitMEMLOCK=infinity" in unit and "Nice=" not in unit
    assert "DynamicUser=yes" in unit and "SupplementaryGroups=video render" in unit
    assert f"ExecStart={server} -m " in unit and "--mlock" in unit  # the unit lifts the memlock limit itself
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    path = tmp_path / "llama-server.service"
    path.write_text(unit)
    done = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_systemd_escapes_the_ot_regex(tmp_path) -> None:
    from tunehost.formats.quoting import systemd_quote as _systemd_quote

    assert _systemd_quote(r"blk\.(0|1)\.ffn=CPU") == r'"blk\\.(0|1)\\.ffn=CPU"'
    assert _systemd_quote("100%") == '"100%%"'
    assert _systemd_quote("-t") == "-t"


def test_live_ci_host_no_gpu(cli, tiny) -> None:
    data = _json(cli("advise", "--model", str(tiny), "--format", "json"))
    flags = _flags(data)
    assert data["path"] == "cpu" and "-ngl" not in flags
    assert int(flags["-t"]) >= 1 and data["cpu_affinity"]
    # the live bandwidth probe ran, or the host was busy and advise says so (never a silent busy measurement)
    assert (data["ceiling"]["tokens_per_s"] or 0) > 0 or any("the host is busy" in w for w in data["warnings"])
    if any("the host is busy" in w for w in data["warnings"]):
        assert data["ceiling"]["ram_measured_gbps"] is None or data["ceiling"]["ram_basis"]
    assert data["snapshot"] is None


def test_live_no_probe(cli, tiny) -> None:
    data = _json(cli("advise", "--model", str(tiny), "--no-probe", "--format", "json"))
    assert data["ceiling"]["tokens_per_s"] is None


def test_ctx_beyond_training_warns(cli, tiny) -> None:
    data = _json(cli("advise", "--model", str(tiny), "--ctx", "8192", "--no-probe", "--format", "json"))
    assert any("larger than the context" in w for w in data["warnings"])


@pytest.mark.parametrize("args,message", [
    (["--ctx", "0"], "--ctx must be a positive"),
    (["--ctx", "-4"], "--ctx must be a positive"),
    (["--parallel", "0"], "--parallel must be at least 1"),
    (["--cpus", "0-999"], "does not exist"),
    (["--cpus", "a-b"], "invalid CPU list"),
    (["--spec", "eagle"], "--spec must be mtp, draft or ngram"),
    (["--format", "yaml"], "--format must be one of"),
])
def test_bad_arguments_are_one_line_errors(cli, tiny, args, message) -> None:
    r = cli("advise", "--model", str(tiny), "--no-probe", *args)
    assert r.exit_code == 1
    assert message in r.stderr and "Traceback" not in r.output


def test_not_a_gguf_and_truncated(cli, tmp_path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_text("this is not a model")
    r = cli("advise", "--model", str(bad), "--no-probe")
    assert r.exit_code == 1 and "not a GGUF file" in r.stderr
    good = write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(2), n_layer=2)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    r = cli("advise", "--model", str(cut), "--no-probe")
    assert r.exit_code == 1 and "truncated" in r.stderr


def test_does_not_fit_exits_2(cli, qwen30b) -> None:
    r = cli("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "laptop-5800u-apu"), "--format", "json")
    assert r.exit_code == 2
    assert not json.loads(r.stdout)["fits"]


FIT_PARAMS = "/usr/local/bin/llama-fit-params"


def snapshot_with_fit_params(tmp_path, model, output: str | None = None):
    """The 12700F+3060 snapshot with llama-fit-params on PATH; `output`: what it printed for the plan's arguments
    (None: nothing recorded, so the probe fails)."""
    from tunehost.ops.advise import fit_args as _fit_args
    from tunehost.host.commands import command_file_name

    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS / "desktop-12700f-rtx3060", snap, symlinks=True)
    which = json.loads((snap / "samples" / "which.json").read_text())
    which["llama-fit-params"] = FIT_PARAMS
    (snap / "samples" / "which.json").write_text(json.dumps(which))

    class _P:  # what _fit_args reads from the first plan
        ctx, parallel, kv_type = 32768, 1, "q8_0"

        @staticmethod
        def value(name):
            return {"-b": "2048", "-ub": "512"}.get(name)

    if output is not None:
        argv = [FIT_PARAMS, *_fit_args(str(model.resolve()), _P)]
        (snap / "cmd" / command_file_name(argv)).write_text(output)
    return snap


def test_llama_fit_params_placement_is_used_when_present(cli, qwen30b, tmp_path) -> None:
    experts = ",".join(rf"blk\.{i}\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU" for i in range(26))
    snap = snapshot_with_fit_params(tmp_path, qwen30b, f'-c 32768 -ngl 49 -ot "{experts}"\n')
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "json"))
    assert data["placement_source"] == "probe"
    assert _flags(data)["--n-cpu-moe"] == "26"


def test_llama_fit_params_tensor_split_is_kept(cli, qwen30b, tmp_path) -> None:
    # on a host with two GPUs llama-fit-params prints -ts: dropping it would change the placement it computed
    snap = snapshot_with_fit_params(tmp_path, qwen30b, "-c 32768 -ngl 49 -ts 24,25\n")
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "json"))
    assert data["placement_source"] == "probe" and _flags(data)["-ts"] == "24,25"
    assert any("-ts 24,25" in n for n in data["notes"])
    shell = cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "shell").stdout
    assert "-ts 24,25" in shell


def test_llama_fit_params_failure_falls_back_to_the_estimate(cli, qwen30b, tmp_path) -> None:
    snap = snapshot_with_fit_params(tmp_path, qwen30b)
    data = _json(cli("advise", "--model", str(qwen30b), "--snapshot", str(snap), "--format", "json"))
    assert data["placement_source"] == "estimate"
    assert any("tunehost's estimate" in n for n in data["notes"])


def test_the_plan_says_what_tg_becomes_when_the_context_fills(cli, qwen30b) -> None:
    """Qwen3-30B-A3B (48 layers, 4 K/V heads x 128, all full attention) on the RTX 3060 snapshot, -c 16384, q8_0 KV
    (544 bytes a 512-value row, a K and a V row a cell): at the end of the slot each token also reads 48 x 16384 x
    1088 bytes of KV cache, and the band the plan states for that moment sits below the one for an empty context."""
    from tunehost.advise.memory import ServerSettings, kv_read_per_layer
    from tunehost.model import read_model

    args = ("advise", "--model", str(qwen30b), "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"),
            "--ctx", "16384")
    data = _json(cli(*args, "--format", "json"))
    full, start = data["ceiling_full_context"], data["ceiling"]
    assert data["kv_type"] == "q8_0" and full["depth"] == 16384
    expected = sum(kv_read_per_layer(read_model(qwen30b), ServerSettings(type_k="q8_0", type_v="q8_0"), 16384))
    assert full["kv_bytes_per_token"] == expected == 48 * 16384 * 1088
    assert full["band"]["high_tokens_per_s"] < start["band"]["high_tokens_per_s"]
    assert full["band"]["low_tokens_per_s"] < start["band"]["low_tokens_per_s"]
    text = " ".join(cli(*args).stdout.split())
    assert "when a slot's context fills (16384 tokens deep, 0.86 GB of KV cache a token): expect" in text
