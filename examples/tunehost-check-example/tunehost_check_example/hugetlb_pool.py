"""hugetlb-pool — RAM reserved as static huge pages (vm.nr_hugepages) that llama.cpp cannot use.

The kernel takes a static huge page pool out of ordinary memory when `vm.nr_hugepages` (or `hugepages=` on the
kernel command line) is set, often for VMs or DPDK and then forgotten. Only programs that map hugetlbfs or use
MAP_HUGETLB can use it; llama.cpp maps a model with ordinary pages (and can use transparent huge pages, a different
thing), so an unused pool is RAM the model cannot have.
"""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.memory import parse_meminfo

MEMINFO = "/proc/meminfo"
GiB_KB = 1024 * 1024
UNUSED_WARN_KB = GiB_KB  # an unused pool of 1 GiB or more is worth giving back ...
UNUSED_WARN_SHARE = 0.05  # ... when it is also 5 % of RAM or more (or RAM is unknown)
GIVE_BACK = Fix("Unless a VM or DPDK needs the pool, give the memory back, and remove what reserves it at boot "
                "(vm.nr_hugepages in /etc/sysctl.conf or /etc/sysctl.d/, hugepages= on the kernel command line).",
                ("sudo sysctl -w vm.nr_hugepages=0",))


def gib(kb: int) -> str:
    return f"{kb / GiB_KB:.1f} GiB"


class HugetlbPoolCheck(Check):
    id = "hugetlb-pool"
    title = "Static huge page pool"
    judges = "RAM reserved as static huge pages (vm.nr_hugepages) that llama.cpp cannot use"

    def run(self, facts):
        # Read through the host layer, never open(): the same code then judges the live host and a snapshot.
        text = facts.host.files.read(MEMINFO)
        if text is None:
            yield self.skip(f"cannot read {MEMINFO}")
            return
        info = parse_meminfo(text)  # garbage lines are dropped, so a damaged file gives missing keys, not a crash
        pages, free, page_kb = info.get("HugePages_Total"), info.get("HugePages_Free"), info.get("Hugepagesize")
        evidence = {f"{MEMINFO} {key}": info[key] for key in
                    ("MemTotal", "HugePages_Total", "HugePages_Free", "Hugepagesize", "Hugetlb") if key in info}
        if pages is None or page_kb is None:
            yield self.skip(f"{MEMINFO} has no HugePages_Total or Hugepagesize (no hugetlbfs in this kernel)",
                            evidence)
            return
        # Hugetlb (Linux 4.19+) also counts pools of other page sizes (e.g. 1 GiB pages)
        reserved_kb = max(info.get("Hugetlb", 0), pages * page_kb)
        if reserved_kb == 0:
            yield self.ok("no RAM is reserved as static huge pages", evidence)
            return
        unused_kb = min(free or 0, pages) * page_kb  # free pages of the default size: a lower bound
        total_kb = info.get("MemTotal")
        share = f" ({reserved_kb / total_kb:.0%} of RAM)" if total_kb else ""
        big = unused_kb >= UNUSED_WARN_KB and (not total_kb or unused_kb >= total_kb * UNUSED_WARN_SHARE)
        if big:
            yield self.warn(f"{gib(reserved_kb)}{share} is reserved as static huge pages and {gib(unused_kb)} of it "
                            f"is unused ({free} of {pages} {page_kb} kB pages free): llama.cpp cannot use it",
                            evidence, fix=GIVE_BACK,
                            detail="llama.cpp maps models with ordinary pages, so the pool only shrinks the RAM "
                                   "left for the model and its KV cache.")
        else:
            yield self.info(f"{gib(reserved_kb)}{share} is reserved as static huge pages, {gib(unused_kb)} unused",
                            evidence)
