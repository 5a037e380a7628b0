"""The nvml sampler with pynvml mocked at its import boundary (this machine has no GPU), and the guarantee that a
snapshot run never imports pynvml."""

import json
import subprocess
import sys
import types
from types import SimpleNamespace

import pytest

from tunehost.facts import HostFacts
from tunehost.facts.gpu import GpuFacts
from tunehost.host import open_host
from tunehost.host.nvml import sample_nvml
from tunehost.host.samples import SAMPLERS

from tests.conftest import DATA

MIB = 1 << 20


class NVMLError(Exception):
    pass


def fake_pynvml(**overrides):
    """A stand-in module with pynvml's names: one RTX 3060 with Xorg and a llama-server."""

    def unsupported(*_a):
        raise NVMLError("Not Supported")

    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError
    mod.NVML_TEMPERATURE_GPU = 0
    mod.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    calls = {"init": 0, "shutdown": 0}
    mod.calls = calls
    mod.nvmlInit = lambda: calls.__setitem__("init", calls["init"] + 1)
    mod.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    mod.nvmlSystemGetDriverVersion = lambda: "550.120"
    mod.nvmlSystemGetCudaDriverVersion = lambda: 12040
    mod.nvmlDeviceGetCount = lambda: 1
    mod.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA GeForce RTX 3060"
    mod.nvmlDeviceGetUUID = lambda h: "GPU-5f0c1a2e"
    mod.nvmlDeviceGetPciInfo = lambda h: SimpleNamespace(busId=b"00000000:01:00.0")
    mod.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=12288 * MIB, used=5000 * MIB, free=7288 * MIB)
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: (8, 6)
    mod.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 4
    mod.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 3
    mod.nvmlDeviceGetGpuMaxPcieLinkGeneration = lambda h: 4
    mod.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 8
    mod.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    mod.nvmlDeviceGetTemperature = lambda h, s: 71
    mod.nvmlDeviceGetTemperatureThreshold = lambda h, t: 98
    mod.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4 | 0x40
    mod.nvmlDeviceGetPerformanceState = lambda h: 2
    mod.nvmlDeviceGetPowerUsage = lambda h: 168500
    mod.nvmlDeviceGetEnforcedPowerLimit = lambda h: 170000
    mod.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 170000
    mod.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=97)
    mod.nvmlDeviceGetDisplayActive = lambda h: 1
    mod.nvmlDeviceGetDisplayMode = lambda h: 1
    mod.nvmlDeviceGetMigMode = unsupported
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: [SimpleNamespace(pid=4242, usedGpuMemory=4400 * MIB)]
    mod.nvmlDeviceGetGraphicsRunningProcesses = lambda h: [SimpleNamespace(pid=1342, usedGpuMemory=412 * MIB),
                                                           SimpleNamespace(pid=4242, usedGpuMemory=None)]
    for name, value in overrides.items():
        setattr(mod, name, value)
    return mod


@pytest.fixture
def with_pynvml(monkeypatch):
    def install(mod):
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod
    return install


def test_nvml_sampler_is_registered_and_runs_the_nvml_reader(monkeypatch):
    from tunehost.host import nvml

    monkeypatch.setattr(nvml, "sample_nvml", lambda host: {"read by": host})
    assert SAMPLERS["nvml"]("the host") == {"read by": "the host"}


def test_pynvml_import_failure_is_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    out = sample_nvml(None)
    assert out["gpus"] == [] and "cannot be imported" in out["error"]


def test_nvml_init_error_is_unknown(with_pynvml):
    def no_driver():
        raise NVMLError("Driver Not Loaded")
    with_pynvml(fake_pynvml(nvmlInit=no_driver))
    out = sample_nvml(None)
    assert out["gpus"] == [] and "NVML init failed" in out["error"] and "Driver Not Loaded" in out["error"]


def test_fake_device_is_read_whole(with_pynvml):
    mod = with_pynvml(fake_pynvml())
    out = sample_nvml(None)
    assert mod.calls == {"init": 1, "shutdown": 1}
    assert out["error"] is None and out["driver_version"] == "550.120" and out["cuda_version"] == "12.4"
    [g] = out["gpus"]
    assert g["name"] == "NVIDIA GeForce RTX 3060" and g["pci_bus_id"] == "00000000:01:00.0"
    assert (g["memory_total_mib"], g["memory_used_mib"], g["memory_free_mib"]) == (12288, 5000, 7288)
    assert g["compute_capability"] == "8.6" and g["pstate"] == "P2" and g["power_draw_w"] == 168.5
    assert g["pcie"] == {"gen_current": 4, "gen_max": 3, "gen_device_max": 4, "width_current": 8, "width_max": 16}
    assert g["clocks_event_reasons_active"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert g["mig_enabled"] is None  # Not Supported on GeForce
    assert g["processes"] == [{"pid": 1342, "used_mib": 412, "type": "G"},
                              {"pid": 4242, "used_mib": 4400, "type": "C+G"}]
    json.dumps(out)  # stored as samples/nvml.json


def _snapshot_with_nvml(root, sample: dict):
    """A minimal snapshot whose nvml sample is `sample` (docs/snapshot.md: samples/nvml.json)."""
    (root / "samples").mkdir(parents=True)
    (root / "fs").mkdir()
    (root / "manifest.json").write_text(json.dumps({"format": 1, "created": "2026-11-26T21:36:00Z"}))
    (root / "samples" / "nvml.json").write_text(json.dumps(sample))
    return root


def test_memory_info_v2_leaves_the_drivers_reservation_out_of_used_as_nvidia_smi_does(with_pynvml, tmp_path):
    """The first real H200 (tests/data/gpu-proof/h200-580.159.04/busy): nvidia-smi said Used 17523 MiB, Reserved 616;
    NVML's v1 call said used 18137 (the reservation counted as used). pynvml's signature: (handle, version=None)."""
    v2 = 0x02000028

    def memory(h, version=None):
        if version == v2:
            return SimpleNamespace(version=v2, total=143771 * MIB, reserved=616 * MIB, free=125632 * MIB,
                                   used=17523 * MIB)
        return SimpleNamespace(total=143771 * MIB, used=18139 * MIB, free=125632 * MIB)

    with_pynvml(fake_pynvml(nvmlMemory_v2=v2, nvmlDeviceGetMemoryInfo=memory))
    [g] = sample_nvml(None)["gpus"]
    assert (g["memory_used_mib"], g["memory_reserved_mib"], g["memory_free_mib"]) == (17523, 616, 125632)
    snap = open_host(_snapshot_with_nvml(tmp_path, {"error": None, "gpus": [g]}))
    [info] = [x for x in GpuFacts.gather(snap).gpus if x.vendor == "nvidia"]
    assert (info.memory_used_mib, info.memory_reserved_mib) == (17523, 616)  # as nvidia-smi -q parses them

    def v1_only(h, version=None):  # a driver without nvmlDeviceGetMemoryInfo_v2: pynvml raises, v1 answers
        if version is not None:
            raise NVMLError("Function Not Found")
        return SimpleNamespace(total=143771 * MIB, used=18139 * MIB, free=125632 * MIB)

    with_pynvml(fake_pynvml(nvmlMemory_v2=v2, nvmlDeviceGetMemoryInfo=v1_only))
    [g] = sample_nvml(None)["gpus"]
    assert (g["memory_used_mib"], g["memory_reserved_mib"]) == (18139, None)


def test_every_call_guarded_one_failing_call_leaves_one_unknown(with_pynvml):
    def boom(*_a):
        raise NVMLError("GPU is lost")
    with_pynvml(fake_pynvml(nvmlDeviceGetTemperature=boom, nvmlDeviceGetComputeRunningProcesses=boom,
                            nvmlDeviceGetGraphicsRunningProcesses=boom, nvmlDeviceGetCurrentClocksEventReasons=boom,
                            nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x1))
    [g] = sample_nvml(None)["gpus"]
    assert g["temperature_c"] is None and g["processes"] is None
    assert g["clocks_event_reasons_active"] == ["gpu_idle"]  # older driver: the throttle-reasons call answers
    assert g["name"] == "NVIDIA GeForce RTX 3060"


def test_old_library_without_newer_functions(with_pynvml):
    mod = fake_pynvml()
    for name in ("nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetMigMode", "nvmlSystemGetCudaDriverVersion"):
        delattr(mod, name)
    with_pynvml(mod)
    out = sample_nvml(None)
    assert out["cuda_version"] is None and out["gpus"][0]["pcie"]["gen_device_max"] is None


def test_device_count_failure(with_pynvml):
    def boom():
        raise NVMLError("Unknown Error")
    with_pynvml(fake_pynvml(nvmlDeviceGetCount=boom))
    out = sample_nvml(None)
    assert out["gpus"] == [] and out["error"]


@pytest.mark.live
def test_live_facts_from_fake_nvml_do_not_run_nvidia_smi(with_pynvml, monkeypatch):
    with_pynvml(fake_pynvml())
    host = open_host()
    ran = []
    monkeypatch.setattr(host.commands, "run", lambda argv, timeout=10.0: ran.append(tuple(argv)))
    monkeypatch.setitem(host._samples, "processes", [{"pid": 4242, "name": "llama-server"}, {"pid": 1342, "name": "Xorg"}])
    facts = GpuFacts.gather(host)
    assert facts.nvidia_source == "NVML"
    assert not [a for a in ran if a[0] == "nvidia-smi"]
    [g] = [g for g in facts.gpus if g.vendor == "nvidia"]
    assert g.pcie.gen_host_max == 3  # NVML max 3 < card max 4: the host limits it
    assert {p.name for p in g.processes} == {"llama-server", "Xorg"}


@pytest.mark.live
def test_live_without_nvml_falls_back_to_nvidia_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    host = open_host()
    ran = []
    monkeypatch.setattr(host.commands, "run", lambda argv, timeout=10.0: ran.append(tuple(argv)))
    facts = GpuFacts.gather(host)
    assert ("nvidia-smi", "-q", "-x") in ran and ("nvidia-smi", "-q") in ran
    assert facts.nvidia_source is None


def test_snapshot_run_never_imports_pynvml():
    code = ("import sys, json\n"
            "from typer.testing import CliRunner\n"
            "from tunehost.cli import app\n"
            f"r = CliRunner().invoke(app, ['doctor', '--snapshot', {str(DATA / 'snapshots/desktop-12700f-rtx3060')!r},"
            " '--json'])\n"
            "json.loads(r.stdout)\n"
            "print('pynvml' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_snapshot_nvml_json_replays_through_host_sample():
    host = open_host(DATA / "snapshots/desktop-9950x3d-rtx5090")
    facts = HostFacts(host).get(GpuFacts)
    assert facts.nvidia_source == "NVML" and facts.driver_version == "570.133.07"


def test_bar1_total_and_the_watchs_pstate_are_read(with_pynvml):
    # issue 34: resizable-bar reads BAR1 total from the sampler; bench's GPU watch reads the performance state
    from tunehost.host.nvml import NvmlSession

    mod = with_pynvml(fake_pynvml(nvmlDeviceGetBAR1MemoryInfo=lambda h: SimpleNamespace(bar1Total=256 * MIB,
                                                                                      bar1Used=5 * MIB),
                                  nvmlDeviceGetPerformanceState=lambda h: 3))
    [g] = sample_nvml(None)["gpus"]
    assert g["bar1_total_mib"] == 256 and g["pstate"] == "P3"
    session = NvmlSession.open()
    [row] = session.read()
    session.close()
    assert row["pstate"] == "P3" and mod.calls["shutdown"] >= 1
    mod.nvmlDeviceGetPerformanceState = lambda h: 32          # NVML_PSTATE_UNKNOWN
    del mod.nvmlDeviceGetBAR1MemoryInfo                        # an old library
    [g] = sample_nvml(None)["gpus"]
    assert g["bar1_total_mib"] is None and g["pstate"] is None
