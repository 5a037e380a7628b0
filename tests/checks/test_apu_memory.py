"""apu-memory on real Strix Halo captures from public reports (sources in tests/data/README.md, "apu-memory"): the
sysfs values, kernel command lines and dmesg GTT sizes as published, written as the files amdgpu and ttm expose;
MemTotal is the installed RAM less the published carve-out (the reports give the RAM, not /proc/meminfo)."""

from __future__ import annotations

from tunehost.check import Severity as S
from tunehost.checks.apu_memory import ApuMemoryCheck, target_gib
from tunehost.facts.apu_memory import PAGES_PER_GIB, parse_cmdline_options

from tests.conftest import DATA
from tests.gpu.test_checks import run

CARD = "/sys/class/drm/card1/device"
GIB, MIB = 1 << 30, 1 << 20


def apu_fs(*, vram: int | None, gtt: int | None, mem_total_kib: int | None, cmdline: str = "",
           pages_limit: str | None = None, gtt_used: int | None = None) -> dict[str, str]:
    fs = {f"{CARD}/vendor": "0x1002\n", f"{CARD}/device": "0x1586\n", f"{CARD}/uevent": "PCI_SLOT_NAME=0000:c6:00.0\n"}
    for name, value in (("mem_info_vram_total", vram), ("mem_info_gtt_total", gtt), ("mem_info_gtt_used", gtt_used)):
        if value is not None:
            fs[f"{CARD}/{name}"] = f"{value}\n"
    if mem_total_kib is not None:
        fs["/proc/meminfo"] = f"MemTotal:       {mem_total_kib} kB\nMemFree:        1000000 kB\n"
    if cmdline:
        fs["/proc/cmdline"] = cmdline + "\n"
    if pages_limit is not None:
        fs["/sys/module/ttm/parameters/pages_limit"] = pages_limit + "\n"
    return fs


def judge(make_snapshot, **kwargs):
    return run(ApuMemoryCheck(), make_snapshot(fs=apu_fs(**kwargs)))


# noamsto/nix-amd-ai#42: ROG Flow Z13, Ryzen AI MAX+ 395, 128 GB, kernel 7.1, BIOS UMA at its minimum
NIX_CMDLINE = ("BOOT_IMAGE=/boot/kernel iommu.passthrough=0 ttm.pages_limit=25165824 "
               "ttm.page_pool_size=25165824")


def test_nix_amd_ai_halo_96g_gtt_through_ttm_pages_limit_is_ok(make_snapshot):
    [f] = judge(make_snapshot, vram=4294967296, gtt=103079215104, mem_total_kib=124 * GIB // 1024,
                cmdline=NIX_CMDLINE, pages_limit="25165824")
    assert f.severity is S.OK and "96 GiB of 124 GiB RAM through GTT" in f.summary
    assert "ttm.pages_limit=25165824" in f.evidence["/proc/cmdline (memory options)"]


def test_ds4_halo_96g_carve_out_with_15860m_gtt_warns(make_snapshot):
    # antirez/ds4#475: "amdgpu 0000:bd:00.0:  15860M of GTT memory ready." with the GPU forced to 96 GB (BIOS UMA)
    fs = apu_fs(vram=96 * GIB, gtt=15860 * MIB, mem_total_kib=31 * GIB // 1024)
    fs["/proc/sys/kernel/osrelease"] = "6.14.0-1014-oem\n"   # the kernel of ROCm/legacy-rocm-build#5595
    [f] = run(ApuMemoryCheck(), make_snapshot(fs=fs))
    assert f.severity is S.WARN and "15.5 GiB of 31 GiB RAM through GTT" in f.summary
    assert "kernel 6.14.0: before 6.16.9 ROCm sees GTT only" in f.summary
    assert "96 GiB carve-out is more than GTT" in f.summary and "half of RAM" in f.summary
    assert f.fix.commands[0].startswith('sudo grubby --update-kernel=ALL --args="ttm.pages_limit=')
    assert "Undo:" in f.fix.text and "--remove-args" in f.fix.text and "UMA frame buffer" in f.fix.text


def test_default_half_of_ram_on_the_strix_halo_composite_is_info(make_snapshot):
    # tests/data/snapshots/strix-halo-395: 512 MiB carve-out, 62.7 GiB GTT of 124.5 GiB (the default TTM limit)
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    [f] = list(ApuMemoryCheck().run(HostFacts(open_host(DATA / "snapshots" / "strix-halo-395"))))
    assert f.severity is S.INFO and "the kernel's default TTM limit: half of RAM" in f.summary
    gib = target_gib(130506900 // 1024 + 512)   # MemTotal + the carve-out
    assert f'ttm.pages_limit={gib * PAGES_PER_GIB}' in f.fix.commands[0] and gib == 109


def test_rocm_5595_misspelled_gtt_size_is_ignored_by_the_kernel(make_snapshot):
    # ROCm/legacy-rocm-build#5595: "amdgpu.gtt_size=122880" -> dmesg "amdgpu: unknown parameter 'gtt_size' ignored"
    cmdline = ("BOOT_IMAGE=/boot/vmlinuz-6.14.0-1014-oem root=UUID=d55f0c3f-88f5-4c65-a93a-285c1a30361c ro quiet "
               "splash amdgpu.gtt_size=122880 vt.handoff=7")
    findings = judge(make_snapshot, vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024, cmdline=cmdline)
    assert [f.severity for f in findings] == [S.WARN, S.INFO]
    assert "amdgpu.gtt_size=122880" in findings[0].summary and "the name is amdgpu.gttsize" in findings[0].summary


def test_gttsize_and_pages_limit_together_warns(make_snapshot):
    findings = judge(make_snapshot, vram=512 * MIB, gtt=96 * GIB, mem_total_kib=124 * GIB // 1024,
                     cmdline="amdgpu.gttsize=98304 ttm.pages_limit=25165824", pages_limit="25165824")
    assert [f.severity for f in findings] == [S.WARN, S.OK] and "deprecated" in findings[0].summary


def test_command_line_limit_overridden_later_is_info(make_snapshot):
    findings = judge(make_snapshot, vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024,
                     cmdline="ttm.pages_limit=25165824", pages_limit="16252928")
    assert findings[0].severity is S.INFO and "overrides it" in findings[0].summary


def test_gtt_full_with_a_loaded_model_warns(make_snapshot):
    [f] = judge(make_snapshot, vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024, gtt_used=60 * GIB)
    assert f.severity is S.WARN and "GTT is full" in f.summary and "60 GiB of 62 GiB" in f.summary


def test_gtt_leaving_no_room_for_the_os_warns(make_snapshot):
    [f] = judge(make_snapshot, vram=512 * MIB, gtt=122 * GIB, mem_total_kib=124 * GIB // 1024)
    assert f.severity is S.WARN and "leaving 2 GiB for the OS" in f.summary


def test_missing_and_garbage_are_skip(make_snapshot):
    [f] = judge(make_snapshot, vram=512 * MIB, gtt=None, mem_total_kib=124 * GIB // 1024)
    assert f.severity is S.SKIP and "GTT size not reported" in f.summary
    [f] = judge(make_snapshot, vram=512 * MIB, gtt=62 * GIB, mem_total_kib=None)
    assert f.severity is S.SKIP and "MemTotal" in f.summary
    fs = apu_fs(vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024, pages_limit="\x1b[2Jgarbage")
    [f] = run(ApuMemoryCheck(), make_snapshot(fs=fs))
    assert f.severity is S.INFO and "default TTM limit" in f.summary   # a garbage limit is no limit read


def test_no_apu_is_skip(make_snapshot):
    [f] = run(ApuMemoryCheck(), make_snapshot())
    assert f.severity is S.SKIP and "no AMD APU" in f.summary


def test_parse_cmdline_options_keeps_only_memory_options():
    assert parse_cmdline_options("quiet ttm.pages_limit=1 x=2 amdgpu.gttsize=-1 amdgpu.gtt_size=5 ttm.pages_limit=3") \
        == {"ttm.pages_limit": "3", "amdgpu.gttsize": "-1", "amdgpu.gtt_size": "5"}
    assert parse_cmdline_options(None) == {} and parse_cmdline_options("ttm.pages_limit=$(reboot)") == {}


def test_an_igpu_beside_a_discrete_gpu_is_not_judged():
    # tests/data/snapshots/desktop-9950x3d-rtx5090: Granite Ridge's 2-CU iGPU beside an RTX 5090
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    [f] = list(ApuMemoryCheck().run(HostFacts(open_host(DATA / "snapshots" / "desktop-9950x3d-rtx5090"))))
    assert f.severity is S.SKIP and "RTX 5090" in f.summary


def test_garbage_in_the_ttm_parameter_never_reaches_the_evidence_raw(make_snapshot):
    fs = apu_fs(vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024, pages_limit="\x1b[2J\x1b]0;owned\x07")
    [f] = run(ApuMemoryCheck(), make_snapshot(fs=fs))
    assert "\x1b" not in str(f.evidence) and "\x07" not in str(f.evidence)


def test_the_process_holding_gtt_is_named(make_snapshot):
    # the model the user runs: llama-server's fdinfo on the APU (amdgpu's drm-memory-gtt, kernel 6.x format)
    fs = apu_fs(vram=512 * MIB, gtt=62 * GIB, mem_total_kib=124 * GIB // 1024, gtt_used=60 * GIB)
    fs["/proc/812/comm"] = "llama-server\n"
    fs["/proc/812/fdinfo/7"] = ("pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:c6:00.0\n"
                                "drm-client-id:\t12\ndrm-memory-vram:\t0 KiB\ndrm-memory-gtt:\t61865984 KiB\n"
                                "drm-memory-cpu:\t0 KiB\n")
    [f] = run(ApuMemoryCheck(), make_snapshot(fs=fs, manifest={"format": 1, "uid": 0}))
    assert f.severity is S.WARN and "(llama-server (pid 812) 59 GiB)" in f.summary
    assert f.evidence["GTT held by (/proc/<pid>/fdinfo)"] == "llama-server (pid 812) 59 GiB"


def test_kernel_version_parse():
    from tunehost.facts.apu_memory import kernel_version

    assert kernel_version("6.14.0-1014-oem") == (6, 14, 0) and kernel_version("7.1") == (7, 1, 0)
    assert kernel_version(None) is None and kernel_version("garbage") is None
