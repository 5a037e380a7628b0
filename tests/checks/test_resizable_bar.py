"""resizable-bar on real captures: the nvidia-smi corpus (BAR1 totals, tests/data/corpus/SOURCES.md), the RTX 6000 Ada
lspci sample (tests/data/corpus/pcie), and lspci excerpts from public reports (tests/data/gpu/bar, sources in
tests/data/README.md). An lspci excerpt becomes the sysfs files the kernel writes for that device: each "Region N:
Memory at ADDR (64-bit, prefetchable) [size=S]" a line of `resource` (start, end, flags), each Resizable BAR line
"BAR N: current size: X, supported: ..." a `resourceN_resize` bitmap (bit 0 = 1 MB)."""

from __future__ import annotations

import re

import pytest

from tunehost.check import Severity as S
from tunehost.checks.resizable_bar import VK_ENV, ResizableBarCheck
from tunehost.facts.gpu_bar import nvidia_rebar_capable
from tunehost.parsers.pci_bar import parse_resize, parse_resource, vram_aperture

from tests.conftest import DATA, corpus
from tests.gpu.test_checks import nvsmi, run

BAR_DATA = DATA / "gpu" / "bar"
DEV = "/sys/bus/pci/devices/0000:03:00.0"
UNITS = {"M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}
MEM, PREFETCH, MEM64 = 0x200, 0x2000, 0x100000


def _bytes(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([MG]B?)", text).groups()
    return int(number) * UNITS[unit]


def sysfs_from_lspci(text: str, vendor: str, device: str, vram_bytes: int | None = None) -> dict[str, str]:
    """The sysfs files of one GPU function from an lspci -vv excerpt (see the module docstring)."""
    lines = ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 6
    for m in re.finditer(r"Region (\d): Memory at ([0-9a-f]+) \((64|32)-bit, (non-)?prefetchable\) \[size=(\w+)\]",
                         text):
        start, size = int(m[2], 16), _bytes(m[5])
        flags = MEM | (MEM64 if m[3] == "64" else 0) | (0 if m[4] else PREFETCH)
        lines[int(m[1])] = f"0x{start:016x} 0x{start + size - 1:016x} 0x{flags:016x}"
    fs = {}
    for m in re.finditer(r"BAR (\d): current size: (\w+), supported: ([\w ]+)", text):
        index, sizes = int(m[1]), [_bytes(s) >> 20 for s in m[3].split()]
        fs[f"{DEV}/resource{index}_resize"] = f"{sum(1 << (s.bit_length() - 1) for s in sizes):016x}\n"
        if lines[index].startswith("0x0000000000000000 0x0000000000000000"):  # no Region line in the excerpt
            start = 0x6000000000 + index * 0x1000000000
            lines[index] = f"0x{start:016x} 0x{start + _bytes(m[2]) - 1:016x} 0x{MEM | MEM64 | PREFETCH:016x}"
    fs[f"{DEV}/resource"] = "\n".join(lines + ["0x0000000000000000 0x0000000000000000 0x0000000000000000"]) + "\n"
    fs.update({f"{DEV}/class": "0x030000\n", f"{DEV}/vendor": f"{vendor}\n", f"{DEV}/device": f"{device}\n",
               "/sys/class/drm/card1/device/vendor": f"{vendor}\n", "/sys/class/drm/card1/device/device": f"{device}\n",
               "/sys/class/drm/card1/device/uevent": "PCI_SLOT_NAME=0000:03:00.0\n"})
    if vram_bytes is not None:
        fs["/sys/class/drm/card1/device/mem_info_vram_total"] = f"{vram_bytes}\n"
    return fs


def one(make_snapshot, **kwargs):
    findings = run(ResizableBarCheck(), make_snapshot(**kwargs))
    assert len(findings) == 1, findings
    return findings[0]


# --- the parsers ---------------------------------------------------------------------------------------------------


def test_parse_resource_of_the_rtx6000ada_sample():
    fs = sysfs_from_lspci(corpus("pcie/lspci-vvv-rtx6000ada-gen4x16-idle-2.5gt-downgraded-wrx90.txt"), "0x10de",
                          "0x26b1")
    bars = parse_resource(fs[f"{DEV}/resource"])
    assert [(b.index, b.size_mib, b.prefetchable, b.is_64bit) for b in bars] == [
        (0, 16, False, False), (1, 65536, True, True), (3, 32, True, True)]
    assert vram_aperture(bars).index == 1
    assert parse_resize(fs[f"{DEV}/resource1_resize"])[-1] == 65536


@pytest.mark.parametrize("text", [None, "", "garbage\n", "0x1 0x2\n", "0xzz 0x0 0x0\n", "0x" + "f" * 40 + " 0x0 0x0"])
def test_parse_resource_garbage_is_empty(text):
    assert parse_resource(text) == ()


def test_parse_resize_kernel_doc_example_and_garbage():
    assert parse_resize("00000000000001c0\n") == (64, 128, 256)   # Documentation/ABI/testing/sysfs-bus-pci
    assert parse_resize("not hex") == () and parse_resize(None) == () and parse_resize("0" * 40) == ()


# --- NVIDIA: BAR1 from nvidia-smi -q / -q -x -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rtx3090-x16-gen1-of-4-idle-p8-q-x.txt", "a10g-x8-of-x16-gen1-idle-p8-q-x.txt",
                                  "rtx3080-x16-gen4-loaded-p2-q-x.txt", "a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt"])
def test_nvidia_large_bar1_maps_all_vram(make_snapshot, name):
    f = run(ResizableBarCheck(), nvsmi(make_snapshot, name))
    assert [x.severity for x in f] == [S.OK] and "maps all" in f[0].summary and "Resizable BAR on" in f[0].summary


def test_rtx4090_256mib_bar1_is_rebar_off_info_for_cuda(make_snapshot):
    [f] = run(ResizableBarCheck(), nvsmi(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"))
    assert f.severity is S.INFO and "Resizable BAR is off" in f.summary and "256 MiB of 24564 MiB" in f.summary
    assert "CUDA is not" in f.summary and any(VK_ENV in c for c in f.fix.commands)
    assert "Above 4G Decoding" in f.fix.text


@pytest.mark.parametrize("name", ["rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt", "tesla-t4-x8-of-x16-gen3-p0-q-x.txt",
                                  "quadro-p2000-x8-of-x16-gen1-idle-p8-q-x.txt"])
def test_pre_ampere_nvidia_has_no_rebar_to_enable(make_snapshot, name):
    [f] = run(ResizableBarCheck(), nvsmi(make_snapshot, name))
    assert f.severity is S.INFO and "no Resizable BAR: nothing to enable" in f.summary
    assert "firmware-setup" not in " ".join(f.fix.commands)


def test_bar1_not_available_is_skip(make_snapshot):
    text = corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")
    text = re.sub(r"(BAR1 Memory Usage\n\s+Total\s+:) 256 MiB", r"\1 N/A", text)
    [f] = run(ResizableBarCheck(), make_snapshot(cmd={"nvidia-smi -q": text}))
    assert f.severity is S.SKIP and "BAR size not readable" in f.summary


def test_nvidia_generation_table():
    assert nvidia_rebar_capable("NVIDIA GeForce RTX 4090", None) is True
    assert nvidia_rebar_capable("NVIDIA GeForce RTX 2080", None) is False
    assert nvidia_rebar_capable("NVIDIA GeForce GTX 1080 Ti", None) is False
    assert nvidia_rebar_capable("Tesla T4", None) is False
    assert nvidia_rebar_capable("anything", "8.6") is True and nvidia_rebar_capable("anything", "7.5") is False
    assert nvidia_rebar_capable("Some Future Card", None) is None and nvidia_rebar_capable(None, "x") is None


# --- any vendor: sysfs resource and resourceN_resize -------------------------------------------------------------


def test_rtx6000ada_64g_bar_at_the_cards_largest_size_is_ok_without_vram(make_snapshot):
    fs = sysfs_from_lspci(corpus("pcie/lspci-vvv-rtx6000ada-gen4x16-idle-2.5gt-downgraded-wrx90.txt"), "0x10de",
                          "0x26b1")
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.OK and "64 GiB" in f.summary and "largest size" in f.summary


def test_arc_a750_1g_of_8g_behind_a_32bit_window_warns(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-arc-a750-1g-of-8g-32bit-window.txt").read_text(), "0x8086", "0x56a1",
                          8 << 30)
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.WARN and "1 GiB of 8 GiB" in f.summary and "offers up to 8 GiB" in f.summary
    assert "Vulkan token generation" in f.summary
    assert "sudo systemctl reboot --firmware-setup" in f.fix.commands and "lspci -vv -s 03:00.0" in f.fix.commands[1]
    assert f"{DEV}/resource2_resize" in f.evidence


def test_arc_a750_256m_on_a_raspberry_pi_warns(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-arc-a750-rpi5-256m.txt").read_text(), "0x8086", "0x56a1", 8 << 30)
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.WARN and "Resizable BAR is off" in f.summary and "256 MiB of 8 GiB" in f.summary
    assert "not reported" in f.summary   # no resize file: whether the card supports it is unknown


def test_arc_a750_256m_without_vram_size_is_skip(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-arc-a750-rpi5-256m.txt").read_text(), "0x8086", "0x56a1")
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.SKIP and "VRAM size not reported" in f.summary


def test_battlemage_32g_bar_maps_its_12g(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-battlemage-g21-32g.txt").read_text(), "0x8086", "0xe20b", 12 << 30)
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.OK and "32 GiB BAR maps all 12 GiB" in f.summary


def test_rx9060xt_8g_of_16g_at_the_cards_maximum_is_info(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-rx9060xt-16g-bar0-8g-card-max.txt").read_text(), "0x1002", "0x7590",
                          16 << 30)
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.INFO and "8 GiB of 16 GiB" in f.summary and "at most 8 GiB" in f.summary
    assert "nothing to enable" in f.summary and any(VK_ENV in c for c in f.fix.commands)


def test_garbage_resource_file_is_skip(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-battlemage-g21-32g.txt").read_text(), "0x8086", "0xe20b", 12 << 30)
    fs[f"{DEV}/resource"] = "\x1b[31mnot a resource file\n" * 3
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.SKIP and "BAR size not readable" in f.summary and "\x1b" not in str(f.evidence)


def test_no_discrete_gpu_is_skip(make_snapshot):
    [f] = run(ResizableBarCheck(), make_snapshot())
    assert f.severity is S.SKIP and "no discrete GPU" in f.summary


def test_rtx4090_small_bar1_warns_when_the_installed_llama_cpp_uses_vulkan(make_snapshot):
    from tunehost.facts import HostFacts
    from tunehost.facts.llama import LlamaBinary, LlamaBuildFacts
    from tunehost.host import open_host

    facts = HostFacts(open_host(nvsmi(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")))
    facts._facts[LlamaBuildFacts] = LlamaBuildFacts(binaries=(
        LlamaBinary("llama-server", "/opt/llama/llama-server", "PATH", backends=("Vulkan",)),))
    [f] = ResizableBarCheck().run(facts)
    assert f.severity is S.WARN and "the installed llama.cpp uses Vulkan" in f.summary


def test_garbage_resize_file_is_shown_escaped(make_snapshot):
    fs = sysfs_from_lspci((BAR_DATA / "lspci-arc-a750-1g-of-8g-32bit-window.txt").read_text(), "0x8086", "0x56a1",
                          8 << 30)
    fs[f"{DEV}/resource2_resize"] = "\x1b[31mff\n"
    f = one(make_snapshot, fs=fs)
    assert f.severity is S.WARN and "not reported" in f.summary and "\x1b" not in str(f.evidence)
