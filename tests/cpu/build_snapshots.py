"""Writes the cpu group's files into the composite snapshots (tests/data/snapshots/<name>/).

    .venv/bin/python -m tests.cpu.build_snapshots      # regenerate after changing this file

What is written, and where it comes from:
- fs/sys/devices/system/cpu/**: online, cpuN/cpufreq/* (scaling_driver, scaling_governor, scaling_available_governors,
  energy_performance_preference + available, cpuinfo_max/min_freq, scaling_max/min_freq, base_frequency on Intel),
  cpuN/topology/{core_id,physical_package_id,die_id,thread_siblings_list}, cpuN/cache/index3/{id,shared_cpu_list,size},
  intel_pstate/* or amd_pstate/status, cpufreq/boost. Formats and value patterns follow the real corpus dumps
  (cpufreq/intel-i7-1370p-...-sysfs.txt: intel_pstate files and per-class base/max frequencies;
  topology/intel-i7-1370p-...: P-core core_ids stepping by 4, E-cores by 1; cpufreq/xeon-e5-2680-...: acpi-cpufreq
  governor lists). Frequencies are each CPU model's published base/boost clocks.
- fs/sys/devices/cpu_core/cpus, fs/sys/devices/cpu_atom/cpus: the i7-12700F only (Intel hybrid PMUs).
- fs/proc/cpuinfo: one block per CPU, the kernel's field layout.
- fs/proc/meminfo: the corpus EliteBook meminfo layout (tests/cpu/fixtures.meminfo_text) with each machine's sizes.
- fs/proc/swaps, fs/proc/sys/vm/swappiness, fs/proc/vmstat, fs/sys/block/zram0/* (the 5800U laptop's zram).
- samples/activity.json: only "interval_s" and "vmstat_delta" (merged; the cpu-hogs keys are kept).
"""

from __future__ import annotations

import json
from pathlib import Path

from tunehost.cpulist import format_cpu_list

from tests.cpu.fixtures import meminfo_text

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
CPU = "/sys/devices/system/cpu"

INTEL_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr "
               "sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good "
               "nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx "
               "est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes "
               "xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb ssbd ibrs ibpb stibp ibrs_enhanced "
               "tpr_shadow flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed "
               "adx smap clflushopt clwb intel_pt sha_ni xsaveopt xsavec xgetbv1 xsaves split_lock_detect avx_vnni "
               "dtherm ida arat pln pts hwp hwp_notify hwp_act_window hwp_epp hwp_pkg_req hfi vnmi umip pku ospke "
               "waitpkg gfni vaes vpclmulqdq rdpid movdiri movdir64b fsrm md_clear serialize pconfig arch_lbr ibt "
               "flush_l1d arch_capabilities")
ZEN3_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
              "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid "
              "aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c "
              "rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit "
              "wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba "
              "ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap "
              "clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total "
              "cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd cppc arat npt lbrv svm_lock nrip_save tsc_scale "
              "vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif v_spec_ctrl "
              "umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca fsrm")
ZEN45_FLAGS = (ZEN3_FLAGS + " avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi "
               "avx512_vbmi2 gfni avx512_vnni avx512_bitalg avx512_vpopcntdq movdiri movdir64b avx_vnni")


def cpuinfo(cpus: list[dict], vendor: str, family: int, model: int, name: str, mhz: float, cache_kb: int,
            flags: str, bogomips: float) -> str:
    blocks = []
    for c in cpus:
        lines = [("processor", c["cpu"]), ("vendor_id", vendor), ("cpu family", family), ("model", model),
                 ("model name", name), ("stepping", 2), ("microcode", "0xb404023" if vendor == "AuthenticAMD"
                                                         else "0x35"),
                 ("cpu MHz", f"{mhz:.3f}"), ("cache size", f"{cache_kb} KB"), ("physical id", c["package"]),
                 ("siblings", c["siblings_in_package"]), ("core id", c["core_id"]),
                 ("cpu cores", c["cores_in_package"]), ("apicid", c["apicid"]), ("initial apicid", c["apicid"]),
                 ("fpu", "yes"), ("fpu_exception", "yes"), ("cpuid level", 16 if vendor == "AuthenticAMD" else 32),
                 ("wp", "yes"), ("flags", flags), ("bugs", "sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass"
                                                    if vendor == "AuthenticAMD" else
                                                    "spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb"),
                 ("bogomips", f"{bogomips:.2f}")]
        if vendor == "AuthenticAMD":
            lines.append(("TLB size", "3584 4K pages"))
        lines += [("clflush size", 64), ("cache_alignment", 64),
                  ("address sizes", "48 bits physical, 48 bits virtual" if vendor == "AuthenticAMD"
                   else "46 bits physical, 48 bits virtual"),
                  ("power management", "ts ttp tm hwpstate cpb eff_freq_ro [13] [14]" if vendor == "AuthenticAMD"
                   else "")]
        blocks.append("\n".join(f"{k}\t: {v}".rstrip() if k != "processor" else f"processor\t: {v}"
                                for k, v in lines))
    return "\n\n".join(blocks) + "\n\n"


def machine(*, packages: int, cores_per_package: int, smt: bool, l3_cores: int, l3_kb: list[int],
            core_id_of=lambda pkg, i: i) -> list[dict]:
    """Logical CPUs the way Linux enumerates x86: first threads of every core of every package, then siblings."""
    n_cores = packages * cores_per_package
    threads = 2 if smt else 1
    cpus = []
    for t in range(threads):
        for pkg in range(packages):
            for i in range(cores_per_package):
                core_index = pkg * cores_per_package + i
                cpu = t * n_cores + core_index
                siblings = [s * n_cores + core_index for s in range(threads)]
                l3_index = i // l3_cores
                l3_first = pkg * cores_per_package + l3_index * l3_cores
                l3_cpus = [s * n_cores + l3_first + k for s in range(threads) for k in range(l3_cores)]
                cpus.append({"cpu": cpu, "package": pkg, "core_id": core_id_of(pkg, i), "siblings": siblings,
                             "l3_id": pkg * (cores_per_package // l3_cores) + l3_index, "l3_cpus": l3_cpus,
                             "l3_kb": l3_kb[l3_index % len(l3_kb)], "apicid": (core_index * 2 + t) if smt else core_index,
                             "siblings_in_package": cores_per_package * threads,
                             "cores_in_package": cores_per_package})
    return sorted(cpus, key=lambda c: c["cpu"])


def topology_files(cpus: list[dict]) -> dict[str, str]:
    """Like `tunehost snapshot` stores them: siblings/core_id of each core's first thread; L3, package and die of
    each L3 group's first CPU."""
    files = {f"{CPU}/online": format_cpu_list(c["cpu"] for c in cpus) + "\n", f"{CPU}/isolated": "\n"}
    for c in cpus:
        base = f"{CPU}/cpu{c['cpu']}"
        if c["cpu"] == min(c["siblings"]):
            files[f"{base}/topology/core_id"] = f"{c['core_id']}\n"
            files[f"{base}/topology/thread_siblings_list"] = format_cpu_list(c["siblings"]) + "\n"
        if c["cpu"] == min(c["l3_cpus"]):
            files[f"{base}/topology/physical_package_id"] = f"{c['package']}\n"
            files[f"{base}/topology/die_id"] = f"{c['package']}\n"
            files[f"{base}/cache/index3/id"] = f"{c['l3_id']}\n"
            files[f"{base}/cache/index3/shared_cpu_list"] = format_cpu_list(c["l3_cpus"]) + "\n"
            files[f"{base}/cache/index3/size"] = f"{c['l3_kb']}K\n"
    return files


def cpufreq_files(cpus: list[dict], *, driver: str, governors: str, governor, epp=None, epp_available=None,
                  max_khz, min_khz: int, base_khz=None) -> dict[str, str]:
    """governor/epp/max_khz/base_khz: a value, or a function of the CPU dict."""
    value = lambda v, c: v(c) if callable(v) else v  # noqa: E731
    files = {}
    for c in cpus:
        base = f"{CPU}/cpu{c['cpu']}/cpufreq"
        files[f"{base}/scaling_driver"] = driver + "\n"
        files[f"{base}/scaling_available_governors"] = governors + "\n"
        files[f"{base}/scaling_governor"] = value(governor, c) + "\n"
        top = value(max_khz, c)
        files[f"{base}/cpuinfo_max_freq"] = f"{top}\n"
        files[f"{base}/cpuinfo_min_freq"] = f"{min_khz}\n"
        files[f"{base}/scaling_max_freq"] = f"{top}\n"
        files[f"{base}/scaling_min_freq"] = f"{min_khz}\n"
        if epp is not None:
            files[f"{base}/energy_performance_preference"] = value(epp, c) + "\n"
            files[f"{base}/energy_performance_available_preferences"] = epp_available + " \n"
        if base_khz is not None:
            files[f"{base}/base_frequency"] = f"{value(base_khz, c)}\n"
    return files


EPP_CHOICES = "default performance balance_performance balance_power power"
VMSTAT_TEMPLATE = ("nr_free_pages {free}\nnr_zone_inactive_anon 412395\nnr_zone_active_anon 1309218\n"
                   "nr_zone_inactive_file 1642310\nnr_zone_active_file 1203941\nnr_mlock 6\nnr_anon_pages 1695227\n"
                   "nr_mapped 310442\nnr_file_pages 2961223\nnr_dirty 215\nnr_writeback 0\nnr_shmem 118273\n"
                   "nr_anon_transparent_hugepages 412\npgpgin {pgpgin}\npgpgout 51248120\npswpin {pswpin}\n"
                   "pswpout {pswpout}\npgalloc_normal 981230442\npgfree 1012394551\npgfault 781239012\n"
                   "pgmajfault {pgmajfault}\npgsteal_kswapd 1203441\npgscan_kswapd 1401223\n"
                   "thp_fault_alloc 20134\nthp_fault_fallback 312\nthp_collapse_alloc 4411\nthp_split_pmd 1201\n")


def vmstat(free: int, pswpin: int, pswpout: int, pgmajfault: int) -> str:
    return VMSTAT_TEMPLATE.format(free=free, pgpgin=pgmajfault * 37, pswpin=pswpin, pswpout=pswpout,
                                  pgmajfault=pgmajfault)


def swaps(*areas: tuple[str, str, int, int, int]) -> str:
    lines = ["Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"]
    for name, kind, size, used, prio in areas:
        lines.append(f"{name.ljust(40)}{kind}\t{size}\t\t{used}\t\t{prio}")
    return "\n".join(lines) + "\n"


def desktop_12700f() -> tuple[dict[str, str], dict]:
    # i7-12700F: 8 P-cores with HT (CPUs 0-15, core_ids 0,4,...,28) + 4 E-cores (CPUs 16-19, core_ids 32-35), 25 MB L3
    cpus = []
    for i in range(8):
        for t in range(2):
            cpus.append({"cpu": 2 * i + t, "package": 0, "core_id": 4 * i, "siblings": [2 * i, 2 * i + 1],
                         "l3_id": 0, "l3_cpus": list(range(20)), "l3_kb": 25600, "apicid": 8 * i + t,
                         "siblings_in_package": 20, "cores_in_package": 12})
    for i in range(4):
        cpus.append({"cpu": 16 + i, "package": 0, "core_id": 32 + i, "siblings": [16 + i], "l3_id": 0,
                     "l3_cpus": list(range(20)), "l3_kb": 25600, "apicid": 64 + 2 * i, "siblings_in_package": 20,
                     "cores_in_package": 12})
    p = lambda c: c["cpu"] < 16  # noqa: E731
    fs = topology_files(cpus)
    fs.update(cpufreq_files(cpus, driver="intel_pstate", governors="performance powersave", governor="powersave",
                            epp=lambda c: "balance_performance" if p(c) else "balance_power",
                            epp_available=EPP_CHOICES, max_khz=lambda c: 4900000 if p(c) else 3600000,
                            min_khz=800000, base_khz=lambda c: 2100000 if p(c) else 1600000))
    fs.update({f"{CPU}/intel_pstate/status": "active\n", f"{CPU}/intel_pstate/no_turbo": "0\n",
               f"{CPU}/intel_pstate/max_perf_pct": "100\n", f"{CPU}/intel_pstate/min_perf_pct": "16\n",
               f"{CPU}/intel_pstate/hwp_dynamic_boost": "0\n", f"{CPU}/intel_pstate/num_pstates": "41\n",
               f"{CPU}/intel_pstate/turbo_pct": "59\n",
               "/sys/devices/cpu_core/cpus": "0-15\n", "/sys/devices/cpu_atom/cpus": "16-19\n"})
    fs["/proc/cpuinfo"] = cpuinfo(cpus, "GenuineIntel", 6, 151, "12th Gen Intel(R) Core(TM) i7-12700F", 4600.0,
                                  25600, INTEL_FLAGS, 4224.00)
    fs["/proc/meminfo"] = meminfo_text({"MemTotal": 32581876, "MemFree": 21034112, "MemAvailable": 26870344,
                                        "Cached": 5810204, "SwapCached": 1024, "SwapTotal": 8388604,
                                        "SwapFree": 8126460})
    fs["/proc/swaps"] = swaps(("/swap.img", "file", 8388604, 262144, -2))
    fs["/proc/sys/vm/swappiness"] = "60\n"
    fs["/proc/vmstat"] = vmstat(5258528, 20411, 88120, 412230)
    return fs, {"interval_s": 0.501, "vmstat_delta": {"pswpin": 0, "pswpout": 0, "pgmajfault": 0}}


def desktop_9950x3d() -> tuple[dict[str, str], dict]:
    # Ryzen 9 9950X3D: 2 CCDs x 8 cores, SMT; CCD0 (cores 0-7) carries the 3D V-Cache: 96 MB L3 vs 32 MB
    cpus = machine(packages=1, cores_per_package=16, smt=True, l3_cores=8, l3_kb=[98304, 32768])
    fs = topology_files(cpus)
    fs.update(cpufreq_files(cpus, driver="amd-pstate-epp", governors="performance powersave", governor="performance",
                            epp="performance", epp_available="default performance balance_performance "
                                                             "balance_power power",
                            max_khz=5756000, min_khz=603000))
    fs.update({f"{CPU}/amd_pstate/status": "active\n", f"{CPU}/amd_pstate/prefcore": "enabled\n",
               f"{CPU}/cpufreq/boost": "1\n"})
    fs["/proc/cpuinfo"] = cpuinfo(cpus, "AuthenticAMD", 26, 68, "AMD Ryzen 9 9950X3D 16-Core Processor", 5420.0,
                                  1024, ZEN45_FLAGS, 8600.32)
    fs["/proc/meminfo"] = meminfo_text({"MemTotal": 64924184, "MemFree": 52871340, "MemAvailable": 58810212,
                                        "Cached": 5120440, "SwapCached": 0, "SwapTotal": 8388604,
                                        "SwapFree": 8388604})
    fs["/proc/swaps"] = swaps(("/swapfile", "file", 8388604, 0, -2))
    fs["/proc/sys/vm/swappiness"] = "10\n"
    fs["/proc/vmstat"] = vmstat(13217835, 0, 0, 98112)
    return fs, {"interval_s": 0.5, "vmstat_delta": {"pswpin": 0, "pswpout": 0, "pgmajfault": 0}}


def laptop_5800u() -> tuple[dict[str, str], dict]:
    # Ryzen 7 5800U: 8 cores, SMT, one 16 MB L3; amd-pstate active, powersave + balance_power (on battery)
    cpus = machine(packages=1, cores_per_package=8, smt=True, l3_cores=8, l3_kb=[16384])
    fs = topology_files(cpus)
    fs.update(cpufreq_files(cpus, driver="amd-pstate-epp", governors="performance powersave", governor="powersave",
                            epp="balance_power", epp_available="default performance balance_performance "
                                                               "balance_power power",
                            max_khz=4507000, min_khz=400000))
    fs.update({f"{CPU}/amd_pstate/status": "active\n", f"{CPU}/cpufreq/boost": "1\n"})
    fs["/proc/cpuinfo"] = cpuinfo(cpus, "AuthenticAMD", 25, 80, "AMD Ryzen 7 5800U with Radeon Graphics", 1397.0,
                                  512, ZEN3_FLAGS, 3793.04)
    # 16 GB with 2 GB carved out for the iGPU; Fedora-style zram0 swap (zstd, 8 GiB)
    fs["/proc/meminfo"] = meminfo_text({"MemTotal": 14671088, "MemFree": 1840232, "MemAvailable": 5391224,
                                        "Cached": 3911224, "SwapCached": 61440, "SwapTotal": 8388604,
                                        "SwapFree": 7211740})
    fs["/proc/swaps"] = swaps(("/dev/zram0", "partition", 8388604, 1176864, 100))
    fs["/proc/sys/vm/swappiness"] = "60\n"
    fs["/proc/vmstat"] = vmstat(460058, 1841220, 2517390, 1201337)
    fs["/sys/block/zram0/disksize"] = "8589934592\n"
    fs["/sys/block/zram0/comp_algorithm"] = "lzo lzo-rle lz4 lz4hc 842 [zstd]\n"
    fs["/sys/block/zram0/mm_stat"] = ("1205108736 301277184 318767104        0 341835776    21310     1024"
                                      "        0        0\n")
    return fs, {"interval_s": 0.502, "vmstat_delta": {"pswpin": 18, "pswpout": 64, "pgmajfault": 31}}


def strix_halo_395() -> tuple[dict[str, str], dict]:
    # Ryzen AI Max+ 395: 2 CCDs x 8 Zen 5 cores (32 MB L3 each), SMT; tuned accelerator-performance
    cpus = machine(packages=1, cores_per_package=16, smt=True, l3_cores=8, l3_kb=[32768])
    fs = topology_files(cpus)
    fs.update(cpufreq_files(cpus, driver="amd-pstate-epp", governors="performance powersave", governor="performance",
                            epp="performance", epp_available="default performance balance_performance "
                                                             "balance_power power",
                            max_khz=5187000, min_khz=625000))
    fs.update({f"{CPU}/amd_pstate/status": "active\n", f"{CPU}/cpufreq/boost": "1\n"})
    fs["/proc/cpuinfo"] = cpuinfo(cpus, "AuthenticAMD", 26, 112, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S", 5100.0,
                                  1024, ZEN45_FLAGS, 5988.92)
    # 128 GB unified, 512 MB VRAM carve-out (the GPU takes GTT from system RAM); no swap
    fs["/proc/meminfo"] = meminfo_text({"MemTotal": 130506900, "MemFree": 121004488, "MemAvailable": 124903312,
                                        "Cached": 4012236, "SwapCached": 0, "SwapTotal": 0, "SwapFree": 0})
    fs["/proc/swaps"] = swaps()
    fs["/proc/sys/vm/swappiness"] = "60\n"
    fs["/proc/vmstat"] = vmstat(30251122, 0, 0, 220190)
    return fs, {"interval_s": 0.5, "vmstat_delta": {"pswpin": 0, "pswpout": 0, "pgmajfault": 2}}


def server_epyc9654_2s() -> tuple[dict[str, str], dict]:
    # 2x EPYC 9654: 96 cores per socket in 12 CCDs of 8 (32 MB L3 each), SMT: 384 CPUs; acpi-cpufreq performance
    cpus = machine(packages=2, cores_per_package=96, smt=True, l3_cores=8, l3_kb=[32768])
    fs = topology_files(cpus)
    fs.update(cpufreq_files(cpus, driver="acpi-cpufreq",
                            governors="conservative ondemand userspace powersave performance schedutil",
                            governor="performance", max_khz=2400000, min_khz=1500000))
    fs[f"{CPU}/cpufreq/boost"] = "1\n"
    fs["/proc/cpuinfo"] = cpuinfo(cpus, "AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", 2400.0, 1024,
                                  ZEN45_FLAGS, 4792.61)
    fs["/proc/meminfo"] = meminfo_text({"MemTotal": 1584864228, "MemFree": 1551235100, "MemAvailable": 1560114240,
                                        "Cached": 6112400, "SwapCached": 0, "SwapTotal": 0, "SwapFree": 0})
    fs["/proc/swaps"] = swaps()
    fs["/proc/sys/vm/swappiness"] = "60\n"
    fs["/proc/vmstat"] = vmstat(387801275, 0, 0, 51234)
    return fs, {"interval_s": 0.5, "vmstat_delta": {"pswpin": 0, "pswpout": 0, "pgmajfault": 0}}


BUILDERS = {
    "desktop-12700f-rtx3060": desktop_12700f,
    "desktop-9950x3d-rtx5090": desktop_9950x3d,
    "laptop-5800u-apu": laptop_5800u,
    "strix-halo-395": strix_halo_395,
    "server-epyc9654-2s": server_epyc9654_2s,
}


def write(name: str) -> None:
    root = SNAPSHOTS / name
    fs, activity = BUILDERS[name]()
    for path, content in fs.items():
        target = root / "fs" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    sample = root / "samples" / "activity.json"
    sample.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(sample.read_text()) if sample.is_file() else {}
    data.update(activity)  # only our keys: the cpu-hogs engineer's keys stay
    sample.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    for snapshot in BUILDERS:
        write(snapshot)
        print("wrote", snapshot)
