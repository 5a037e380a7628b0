"""scripts/gpu_proof against a fake GPU (issue 34): a fake nvidia-smi on PATH (corpus dumps) and a fake pynvml on
PYTHONPATH (tests/bench/data/fake_gpu/), no CUDA toolkit. The script must capture nvidia-smi and tunehost's view
together, say that it could not build (nvcc missing) and why the later steps did not run, and leave one output
directory with everything listed in its manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS

FAKE = Path(__file__).parent / "data" / "fake_gpu"


def fake_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "OUT", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(FAKE), str(Path(sys.executable).parent), "/usr/sbin", "/usr/bin", "/sbin",
                                   "/bin"])
    env["PYTHONPATH"] = str(FAKE)  # the fake pynvml for tunehost's NVML readers
    env["TUNEHOST_STATE_DIR"] = str(tmp_path / "state")
    env["GPU_PROOF_CUDA_HOME"] = str(tmp_path / "no-cuda")  # a CUDA toolkit in /usr/local/cuda is not seen
    return env


def test_gpu_proof_on_a_fake_gpu_without_nvcc_captures_everything_it_can(tmp_path):
    env = fake_env(tmp_path)
    began = time.monotonic()
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_proof"), "--quick", "--deadline", "300",
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=420)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "out"
    steps = {s["step"]: s for s in json.loads((out / "steps.json").read_text())}
    # nvidia-smi and tunehost at the same moment, each from the fake card
    assert steps["nvidia-smi-q"]["status"] == "ok" and "RTX 4090" in (out / "nvidia-smi-q.txt").read_text()
    assert "<nvidia_smi_log>" in (out / "nvidia-smi-q-x.xml").read_text()
    assert "8.6" in (out / "nvidia-smi-query.csv").read_text()
    assert steps["doctor"]["status"] == "ok" and steps["doctor"]["rc"] in (0, 2)  # 2: "not ready" is an answer
    doctor = json.loads((out / "doctor.json").read_text())
    assert doctor["findings"]
    assert (out / "snapshot" / "manifest.json").is_file() and steps["snapshot"]["status"] == "ok"
    nvml = json.loads((out / "snapshot" / "samples" / "nvml.json").read_text())
    assert nvml["gpus"][0]["name"] == "NVIDIA GeForce RTX 3080" and nvml["gpus"][0]["compute_capability"] == "8.6"
    # no CUDA toolkit: not built, said so, and the steps that need the build say why they did not run
    assert steps["build"]["status"] == "skipped" and "nvcc (the CUDA toolkit)" in steps["build"]["why"]
    assert steps["bench"]["status"] == "skipped" and steps["advise"]["status"] == "skipped"
    assert steps["model-tiny"]["status"] == "ok"
    env_json = json.loads((out / "env.json").read_text())
    assert env_json["tools"]["nvidia-smi"].startswith(str(FAKE)) and env_json["tools"]["nvcc"] is None
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema"] == "tunehost-gpu-proof/1"
    assert {"env.json", "steps.json", "nvidia-smi-q.txt", "nvidia-smi-q-x.xml", "doctor.json", "README.txt",
            "snapshot/manifest.json"} <= set(manifest["files"])
    assert all((out / f).is_file() for f in manifest["files"])
    assert manifest["seconds"] < 300 and took < 420
    # run from the checkout, `python -m tunehost` would import the checkout's tunehost/ (no checks inside) over the
    # installed one: on the first real H200 doctor judged nothing. Every step runs in the work directory.
    repo = SCRIPTS.parent.resolve()
    ran = [s for s in steps.values() if "cwd" in s]
    assert ran and all(not Path(s["cwd"]).resolve().is_relative_to(repo) for s in ran)


def test_under_the_device_tool_everything_comes_back_as_one_tarball(tmp_path):
    """$OUT set and no --out: the device tool brings back 8 files at most, 2 folders down; a snapshot alone is a
    hundred files 6 folders deep. --no-build: the captures only."""
    env = dict(fake_env(tmp_path), OUT=str(tmp_path / "device-out"))
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_proof"), "--quick", "--no-build", "--deadline", "120",
                           "--work", str(tmp_path / "work")], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    back = tmp_path / "device-out"
    assert sorted(p.name for p in back.iterdir()) == ["gpu-proof.tar.gz", "manifest.json", "steps.json"]
    steps = {s["step"]: s for s in json.loads((back / "steps.json").read_text())}
    assert steps["build"] == {"step": "build", "status": "skipped", "why": "--no-build: the captures only"}
    assert steps["bench"]["status"] == "skipped" and steps["advise"]["status"] == "skipped"
    with tarfile.open(back / "gpu-proof.tar.gz") as archive:
        names = archive.getnames()
        doctor = json.load(archive.extractfile("gpu-proof/doctor.json"))
    assert steps["doctor"]["status"] == "ok" and doctor["findings"]
    manifest = json.loads((back / "manifest.json").read_text())
    assert {f"gpu-proof/{f}" for f in manifest["files"]} <= set(names)
    assert "gpu-proof/snapshot/manifest.json" in names


def test_gpu_proof_without_nvidia_smi_still_writes_the_manifest(tmp_path):
    env = fake_env(tmp_path)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_proof"), "--quick", "--deadline", "60",
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = {s["step"]: s for s in json.loads((tmp_path / "out" / "steps.json").read_text())}
    assert steps["nvidia-smi"]["status"] == "skipped" and "no NVIDIA driver" in steps["nvidia-smi"]["why"]
    assert "nvidia-smi (the NVIDIA driver)" in steps["build"]["why"]
    assert (tmp_path / "out" / "manifest.json").is_file()


def load_gpu_proof():
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("tunehost_scripts_gpu_proof", str(SCRIPTS / "gpu_proof"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_step_that_raises_is_recorded_and_the_run_goes_on(tmp_path):
    gp = load_gpu_proof()
    run = gp.Proof(tmp_path, tmp_path / "work", 30.0, quick=True)

    def broken():
        raise OSError("disk full")

    assert gp.guarded(run, "build", broken) is None
    slow = run.run("sleepy", [sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=1)
    steps = json.loads((tmp_path / "steps.json").read_text())
    assert steps[0] == {"step": "build", "status": "failed", "why": "OSError: disk full"}
    assert slow["status"] == "timed out" and slow["seconds"] < 10


def test_a_llama_cpp_source_directory_is_packed_as_the_sdist_build_llama_cpp_unpacks(tmp_path):
    proof = load_gpu_proof()
    src = tmp_path / "llama.cpp"
    for rel in ("CMakeLists.txt", "tools/llama-bench/CMakeLists.txt", "models/ggml-vocab.gguf", "docs/x.md",
                "ggml/src/ggml.c"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("x")
    packed, note = proof.llama_source(src, tmp_path / "work")
    assert note.startswith("packed from") and packed.name == proof.SDIST
    with tarfile.open(packed) as archive:
        names = set(archive.getnames())
    prefix = f"llama_cpp_python-{proof.LLAMA_VERSION}/vendor/llama.cpp"
    assert f"{prefix}/tools/llama-bench/CMakeLists.txt" in names and f"{prefix}/ggml/src/ggml.c" in names
    assert not any("/models/" in n or "/docs/" in n for n in names)


@pytest.mark.integration
def test_gpu_proof_with_built_binaries_runs_advise_fit_and_the_bench_with_gpu_energy(tmp_path, llama_bench):
    """The steps after the build, with binaries built before (--bin-dir: here the CPU build, the fake GPU beside
    it): the real shape is written and fitted by the real llama-fit-params, advise answers on it, and the short
    bench watches the fake GPU through NVML, whose energy counter enters the joules per token."""
    env = fake_env(tmp_path)
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_proof"), "--quick", "--deadline", "400",
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
                           "--bin-dir", str(llama_bench.parent),
                           "--bench-budget", "8"], env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "out"
    steps = {s["step"]: s for s in json.loads((out / "steps.json").read_text())}
    assert steps["build"]["status"] == "skipped" and "--bin-dir" in steps["build"]["why"]
    for name in ("model-tiny", "model-real-shape", "advise", "fit", "bench"):
        err = out / steps[name].get("stderr", f"{name}.err")  # a failed step says why in its own stderr file
        assert steps[name]["status"] == "ok", (name, steps[name], err.read_text()[-2000:] if err.is_file() else "")
    advice = json.loads((out / "advise.json").read_text())
    assert advice["fits"] is True and advice["model"]  # advise's JSON document on the 8B shape
    versus = json.loads((out / "advise-vs-fit.json").read_text())
    # llama-fit-params got advise's context and KV settings, and kept that context
    assert "-c" in versus["same_settings"] and versus["llama_fit_params"]["-c"] == versus["advise"]["-c"]
    assert versus["llama_fit_params"]["-ngl"] is not None and versus["advise"]["-ngl"] is not None
    bench = json.loads((out / "bench.json").read_text())
    assert bench["watch"]["gpu"]["samples"] >= 1  # the fake card, watched through NVML
    # each counted run read the fake counter once at each end (it grows 200 J a read): 200 J of GPU energy, and
    # -n 32 x 3 repetitions generated 96 tokens; whether the rounds were quiet enough for the figure is the
    # host's business (a busy one leaves them out, and says so)
    counted = [i for i in bench["invocations"] if i["counted"]]
    assert counted and all(i["energy"]["gpu_j"] == 200.0 and i["tokens"] == 96 for i in counted)
    assert all("GPU energy counter (NVIDIA GPU 0)" in i["energy"]["parts"] for i in counted)
    energy = bench["energy"]["baseline"]
    assert energy["joules_per_token"] == pytest.approx(200.0 / 96, rel=1e-3) or "disturbed" in energy["why_none"]
