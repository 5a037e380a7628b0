"""thermals: CPU and GPU temperatures and throttle counters, on real `sensors`/nvidia-smi captures."""

import json

from tunehost.check import Severity as S
from tunehost.checks.thermals import ThermalsCheck
from tunehost.facts.gpu import GpuFacts
from tunehost.facts.thermal import ThermalFacts
from tunehost.host import open_host

from tests.conftest import DATA, corpus
from tests.gpu.test_checks import nvsmi, run, sensors, sev
from tests.gpu.test_drm import r9700


def test_ryzen_3700x_tctl_82c_is_hot(make_snapshot):
    [f] = run(ThermalsCheck(), sensors(make_snapshot, "sensors-k10temp-tctl-82c-tccd1-ryzen7-3700x-msi-b550-hot.txt"))
    assert f.severity is S.WARN and "82.8" in f.summary
    assert any("Tccd1" in k for k in f.evidence)


def test_gigabyte_b650_no_k10temp_bogus_acpitz_is_not_the_cpu(make_snapshot):
    snap = sensors(make_snapshot, "sensors-gigabyte-b650-am5-no-k10temp-bogus-acpitz-kernel6.0.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.SKIP and "bogus" in f.summary and "16.8" in f.summary and "modprobe k10temp" in f.summary
    facts = ThermalFacts.gather(open_host(snap))
    assert [r.chip for r in facts.bogus] == ["acpitz"] and not facts.cpu


def test_ryzen_5900x_old_k10temp_tctl_tdie_without_tccd(make_snapshot):
    [f] = run(ThermalsCheck(), sensors(make_snapshot, "sensors-k10temp-tctl-tdie-ryzen9-5900x-msi-b550-kernel5.10.txt"))
    assert f.severity is S.OK and "33.9" in f.summary


def test_amd_laptop_tctl_98c_is_at_the_thermal_limit(make_snapshot):
    snap = sensors(make_snapshot, "sensors-amd-laptop-k10temp-tctl-98c-acpitz-98c-unresolved-repo.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.FAIL and "98.2" in f.summary and f.fix.commands


def test_raptor_lake_8p16e_idle_is_healthy(make_snapshot):
    snap = sensors(make_snapshot, "sensors-coretemp-msi-z790-ms7d91-raptor-lake-8p16e-idle.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.OK and "Package id 0 39.0" in f.summary
    assert len(ThermalFacts.gather(open_host(snap)).cpu) == 25


def test_throttle_counters_since_boot_are_info_with_the_recheck(make_snapshot):
    fs = {f"/sys/devices/system/cpu/cpu{c}/thermal_throttle/{k}_throttle_count": v
          for c in range(4) for k, v in (("core", "0\n" if c else "17\n"), ("package", "3\n"))}
    fs["/sys/class/hwmon/hwmon0/name"] = "coretemp\n"
    fs["/sys/class/hwmon/hwmon0/temp1_input"] = "45000\n"
    fs["/sys/class/hwmon/hwmon0/temp1_label"] = "Package id 0\n"
    found = run(ThermalsCheck(), make_snapshot(fs=fs))
    assert sev(found) == [S.OK, S.INFO] and "since boot" in found[1].summary
    assert "thermal_throttle" in found[1].fix.commands[0]


def test_sw_power_cap_at_idle_p8_is_not_flagged(make_snapshot):
    # RTX 2080 sample: SW Power Cap Active at P8
    found = run(ThermalsCheck(), nvsmi(make_snapshot, "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"))
    assert sev(found)[-1] is S.OK


def test_hw_thermal_slowdown_is_a_fail(make_snapshot):
    text = corpus("nvidia-smi/rtx3080-x16-gen4-loaded-p2-q-x.txt").replace(
        "<clocks_event_reason_hw_thermal_slowdown>Not Active", "<clocks_event_reason_hw_thermal_slowdown>Active")
    found = run(ThermalsCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert found[-1].severity is S.FAIL and "HW thermal slowdown" in found[-1].summary


def test_lowered_power_limit_rtx3090_is_info(make_snapshot):
    found = run(ThermalsCheck(), nvsmi(make_snapshot, "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt"))
    assert found[-1].severity is S.INFO and "-pl 350" in found[-1].fix.commands[0]


def test_hot_idle_gpu_is_a_warning(make_snapshot):
    text = corpus("nvidia-smi/rtx3090-x16-gen1-of-4-idle-p8-q-x.txt").replace("<gpu_temp>37 C", "<gpu_temp>78 C")
    found = run(ThermalsCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert found[-1].severity is S.WARN and "idle" in found[-1].summary


def test_no_thermal_data_is_skip(make_snapshot):
    [f] = run(ThermalsCheck(), make_snapshot())
    assert f.severity is S.SKIP


def test_vgpu_guest_reporting_zero_celsius_and_no_thresholds_is_no_reading_never_ok(make_snapshot):
    # the desktop-12700f-rtx3060 NVML sample as a vGPU guest reports it: 0 °C, no slowdown threshold, N/A power
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    nvml["gpus"][0].update(temperature_c=0, temperature_slowdown_c=None, power_draw_w=None, power_limit_w=None,
                           power_default_limit_w=None, clocks_event_reasons_active=[])
    found = [f for f in run(ThermalsCheck(), make_snapshot(samples={"nvml": nvml})) if "RTX 3060" in f.summary]
    assert sev(found) == [S.SKIP] and "no temperature reading" in found[0].summary and "placeholder" in found[0].summary


def test_r9700_idle_junction_far_below_its_crit_is_ok(make_snapshot):
    from tunehost.checks.thermals import ThermalsCheck

    gpu = GpuFacts.gather(open_host(r9700(make_snapshot, 37000))).gpus[0]
    assert (gpu.hotspot_c, gpu.hotspot_crit_c, gpu.temperature_c) == (37.0, 110.0, 37.0)
    found = [f for f in run(ThermalsCheck(), r9700(make_snapshot, 37000)) if "0x7551" in f.summary]
    assert [f.severity for f in found] == [S.OK] and "limit 110.0 °C" in " ".join(found[0].evidence.values())


def test_junction_at_its_crit_is_throttling(make_snapshot):
    from tunehost.checks.thermals import ThermalsCheck

    # built: the same card with the junction at 108 °C (2 °C under its 110 °C crit)
    found = [f for f in run(ThermalsCheck(), r9700(make_snapshot, 108000)) if "0x7551" in f.summary]
    assert [f.severity for f in found] == [S.FAIL] and "junction 108.0 °C at its limit 110.0 °C" in found[0].summary


def test_nvidia_gpu_in_use_but_in_p3_is_info(make_snapshot):
    # ggml-org/llama.cpp#17880, `nvidia-smi -l 1` during partial offload: RTX 3060, 60 C, P3, 33 W / 170 W, 39 %;
    # written as the nvml sample doctor reads (samples/nvml.json)
    row = {"index": 0, "name": "NVIDIA GeForce RTX 3060", "pci_bus_id": "00000000:01:00.0", "temperature_c": 60,
           "temperature_slowdown_c": 98, "pstate": "P3", "utilization_pct": 39, "power_draw_w": 33.0,
           "power_limit_w": 170.0, "power_default_limit_w": 170.0, "clocks_event_reasons_active": [],
           "memory_total_mib": 12288, "memory_used_mib": 11888}
    snap = make_snapshot(samples={"nvml": {"error": None, "gpus": [row]}})
    [f] = [x for x in run(ThermalsCheck(), snap) if "RTX 3060" in x.summary]
    assert f.severity is S.INFO and "in use (39 %, 33 W of 170 W) but in P3" in f.summary
    assert "tunehost bench" in f.summary and "nvidia-smi -pm 1" in " ".join(f.fix.commands)
    idle = make_snapshot(samples={"nvml": {"error": None, "gpus": [{**row, "pstate": "P8", "utilization_pct": 2}]}})
    [f] = [x for x in run(ThermalsCheck(), idle) if "RTX 3060" in x.summary]
    assert f.severity is S.OK
    busy = make_snapshot(samples={"nvml": {"error": None, "gpus": [{**row, "pstate": "P2", "utilization_pct": 97}]}})
    [f] = [x for x in run(ThermalsCheck(), busy) if "RTX 3060" in x.summary]
    assert f.severity is S.OK and "P2" in f.summary
