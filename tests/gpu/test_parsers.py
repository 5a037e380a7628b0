"""nvidia-smi (text and XML) and lm-sensors parsers, on the real corpus files and on garbage.

Corpus files: tests/data/corpus/nvidia-smi/*.txt (telegraf testdata XML, T-K-233 README text dumps),
tests/data/corpus/thermal/*.txt (linuxhw/Sensors hw-probe dumps, one user paste). See SOURCES.md.
"""

import pytest

from tunehost.facts.gpu import link_gen, parse_pp_dpm_pcie
from tunehost.parsers.nvidia_smi import (
    decode_clock_reasons, normalise_bus_id, parse_nvidia_smi_text, parse_nvidia_smi_xml, process_base_name,
)
from tunehost.parsers.sensors import parse_sensors

from tests.conftest import DATA, corpus

SNAP = DATA / "snapshots"


def xml(name):
    return parse_nvidia_smi_xml(corpus(f"nvidia-smi/{name}"))


def test_xml_old_driver_throttle_reasons_and_no_host_max():
    [g] = xml("a10g-x8-of-x16-gen1-idle-p8-q-x.txt").gpus
    assert g.pcie.gen_current == 1 and g.pcie.gen_max == 4 and g.pcie.gen_host_max is None
    assert g.pcie.width_current == 8 and g.pcie.width_max == 16
    assert g.clock_reasons == ("gpu_idle",) and g.pstate == "P8"
    assert g.pci_bus_id == "0000:00:1e.0"
    assert [(p.pid, p.name, p.used_mib) for p in g.processes] == [(725, "Xorg", 22)]


def test_xml_host_max_na_reads_as_unknown():
    [g] = xml("rtx3090-x16-gen1-of-4-idle-p8-q-x.txt").gpus
    assert g.pcie.gen_device_max == 4 and g.pcie.gen_host_max is None
    assert g.power_limit_w == 200.0 and g.power_default_limit_w == 350.0


def test_xml_driver_595_clocks_event_reasons_display_attached_and_average_power():
    report = xml("rtx3080-x16-gen4-loaded-p2-q-x.txt")
    [g] = report.gpus
    assert report.driver_version == "595.58.03" and report.cuda_version == "13.2"
    assert g.clock_reasons == () and g.display_attached is True and g.display_active is False
    assert g.power_draw_w == 139.62 and g.power_limit_w == 320.0
    assert g.memory_free_mib == 660 and g.processes == ()


def test_xml_mig_enabled_a100_lists_slices():
    [g] = xml("a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt").gpus
    assert g.mig_enabled is True
    assert [m.memory_total_mib for m in g.mig_devices] == [19968] * 4
    assert g.processes == ()  # <processes /> self-closing


def test_text_new_driver_host_max_device_max_and_relative_tlimit_temps():
    [g] = parse_nvidia_smi_text(corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")).gpus
    assert (g.pcie.gen_current, g.pcie.gen_max, g.pcie.gen_device_max, g.pcie.gen_host_max) == (1, 3, 4, 3)
    assert g.temperature_c == 40.0
    assert g.temperature_slowdown_c is None  # "GPU Slowdown T.Limit Temp: -2 C" is relative, never a temperature
    assert g.display_active is True
    assert [p.name for p in g.processes] == ["Xorg", "gnome-shell", "code", "chrome"]


def test_text_process_names_keep_only_the_executable():
    [g] = parse_nvidia_smi_text(corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")).gpus
    assert all("--" not in (p.name or "") for p in g.processes)  # no command lines (crash-reporter ids, user dirs)


@pytest.mark.parametrize("snapshot", ["desktop-12700f-rtx3060", "desktop-9950x3d-rtx5090"])
def test_text_and_xml_of_the_same_gpu_agree(snapshot):
    from_xml = parse_nvidia_smi_xml((SNAP / snapshot / "cmd" / "nvidia-smi_-q_-x").read_text()).gpus[0]
    from_text = parse_nvidia_smi_text((SNAP / snapshot / "cmd" / "nvidia-smi_-q").read_text()).gpus[0]
    for field in ("name", "uuid", "pci_bus_id", "device_id", "memory_total_mib", "memory_used_mib",
                  "memory_free_mib", "temperature_c", "pstate", "display_active", "clock_reasons", "power_limit_w"):
        assert getattr(from_xml, field) == getattr(from_text, field), field
    assert (from_xml.pcie.gen_current, from_xml.pcie.gen_max, from_xml.pcie.width_current, from_xml.pcie.width_max) \
        == (from_text.pcie.gen_current, from_text.pcie.gen_max, from_text.pcie.width_current,
            from_text.pcie.width_max)
    assert [(p.pid, p.name, p.used_mib) for p in from_xml.processes or ()] == \
        [(p.pid, p.name, p.used_mib) for p in from_text.processes or ()]


def test_text_header_gives_driver_and_cuda():
    report = parse_nvidia_smi_text((SNAP / "desktop-12700f-rtx3060" / "cmd" / "nvidia-smi_-q").read_text())
    assert report.driver_version == "550.120" and report.cuda_version == "12.4"


@pytest.mark.parametrize("text", ["", "   ", "garbage", "<nvidia_smi_log><gpu>", "<?xml version='1.0'?><html/>",
                                  "\x00\x01\x02", "<nvidia_smi_log><gpu id='zz'><pci><pci_gpu_link_info>"
                                  "<pcie_gen><max_link_gen>x</max_link_gen></pcie_gen></pci_gpu_link_info></pci>"
                                  "</gpu></nvidia_smi_log>"])
def test_garbage_xml_never_raises(text):
    report = parse_nvidia_smi_xml(text)
    assert report.error or all(g.pcie is None or g.pcie.gen_max is None for g in report.gpus)


@pytest.mark.parametrize("text", ["", "garbage", "NVIDIA-SMI has failed because it couldn't communicate with the "
                                  "NVIDIA driver.", "GPU 00000000:01:00.0\n    PCI\n        GPU Link Info\n"
                                  "            PCIe Generation\n                Max : banana\n", ":::\n  : :\n"])
def test_garbage_text_never_raises(text):
    report = parse_nvidia_smi_text(text)
    assert report.error or report.gpus[0].pcie.gen_max is None


def test_clock_reason_bitmask():
    assert decode_clock_reasons(0x1) == ("gpu_idle",)
    assert decode_clock_reasons(0x4 | 0x40) == ("sw_power_cap", "hw_thermal_slowdown")
    assert decode_clock_reasons(None) == ()


@pytest.mark.parametrize("raw, bus", [("00000000:01:00.0", "0000:01:00.0"), ("00000000:00:1E.0", "0000:00:1e.0"),
                                      ("0000:c5:00.0", "0000:c5:00.0"), ("garbage", None), ("", None)])
def test_bus_id(raw, bus):
    assert normalise_bus_id(raw) == bus


def test_process_base_name():
    assert process_base_name("/usr/lib/xorg/Xorg") == "Xorg"
    assert process_base_name("/opt/google/chrome/chrome --type=gpu-process --x") == "chrome"
    assert process_base_name("N/A") is None


@pytest.mark.parametrize("raw, gen", [("8 GT/s", 3), ("8.0 GT/s PCIe", 3), ("2.5 GT/s PCIe", 1), ("16GT/s", 4),
                                      ("32.0 GT/s PCIe", 5), ("Unknown", None), ("Unknown speed", None), (None, None),
                                      ("garbage", None)])
def test_sysfs_link_speed_both_kernel_formats(raw, gen):
    assert link_gen(raw) == gen


def test_amdgpu_pp_dpm_pcie():
    assert parse_pp_dpm_pcie("0: 2.5GT/s, x8 \n1: 16.0GT/s, x16 *\n") == ((1, 8, False), (4, 16, True))
    assert parse_pp_dpm_pcie("garbage") == ()


# --- sensors -----------------------------------------------------------------------------------------------------

def chips(name):
    return {c.driver: c for c in parse_sensors(corpus(f"thermal/{name}"))}


def test_sensors_hwprobe_degree_as_space_c():
    c = chips("sensors-coretemp-msi-z790-ms7d91-raptor-lake-8p16e-idle.txt")
    pkg = c["coretemp"].readings[0]
    assert (pkg.label, pkg.value_c, pkg.high_c, pkg.crit_c) == ("Package id 0", 39.0, 80.0, 100.0)
    assert len(c["coretemp"].readings) == 25  # package + 8 P-cores + 16 E-cores


def test_sensors_real_degree_sign_and_colon_in_chip_name():
    parsed = parse_sensors(corpus("thermal/sensors-amd-laptop-k10temp-tctl-98c-acpitz-98c-unresolved-repo.txt"))
    by = {c.driver: c for c in parsed}
    assert by["k10temp"].readings[0].value_c == 98.2
    assert "ucsi_source_psy_USBC000:002" in by  # a chip name with a colon is still a chip header
    assert by["nvme"].readings[0].crit_c == 87.8  # limit on a continuation line


def test_sensors_placeholder_limits_ignored():
    c = chips("sensors-coretemp-msi-z790-ms7d91-raptor-lake-8p16e-idle.txt")
    sensor1 = c["nvme"].readings[1]
    assert sensor1.high_c is None  # "high = +65261.8 C" is a placeholder


def test_sensors_na_reading_kept_as_unknown():
    c = chips("sensors-k10temp-tctl-tdie-ryzen9-5900x-msi-b550-kernel5.10.txt")
    assert c["iwlwifi_1"].readings[0].value_c is None
    assert [r.label for r in c["k10temp"].readings] == ["Tctl", "Tdie"]


def test_sensors_skips_voltages_fans_power():
    c = chips("sensors-gigabyte-b650-am5-no-k10temp-bogus-acpitz-kernel6.0.txt")
    assert all(r.label.startswith("temp") for r in c["it8628"].readings)
    assert [r.label for r in c["amdgpu"].readings] == ["edge"]


@pytest.mark.parametrize("text", [None, "", "garbage", "\x00\xff", "a:\n  b: c\n", "chip\nAdapter: x\nt: +", "x\n (crit"])
def test_sensors_garbage(text):
    parse_sensors(text)
