"""swap — swappiness, swap in use and swap activity, zram, memory headroom."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.bounds import share
from tunehost.facts.memory import MEMINFO, SWAPPINESS, SWAPPINESS_RANGE, SWAPS, SwapFacts

GiB_KB = 1024 * 1024
SWAPPINESS_MAX = 10  # above this the kernel readily swaps out idle anonymous memory (--no-mmap weights, KV cache)
HEADROOM_WARN = 0.30  # MemAvailable below 30 % of RAM: little room left for a model and its KV cache
LARGE_SWAP_KB = GiB_KB  # disk swap in use beyond 1 GiB ...
LARGE_SWAP_SHARE = 0.25  # ... and a quarter of swap (or a tenth of RAM) is "large"
SET_SWAPPINESS = (f"sudo sysctl -w vm.swappiness={SWAPPINESS_MAX}",
                  f"echo 'vm.swappiness = {SWAPPINESS_MAX}' | sudo tee /etc/sysctl.d/90-tunehost-swappiness.conf")
MLOCK = ("run llama-server/llama-cli with --mlock so the weights stay in RAM (raise the memlock limit first: "
         "`ulimit -l unlimited` in that shell, or LimitMEMLOCK=infinity in its systemd unit)")
PAGING = ("A model whose pages are swapped out (or, with the default mmap, evicted and re-read from disk) is read "
          "from storage on every token: generation drops from tokens per second to seconds per token.")


def gib(kb: int | None) -> str:
    return "?" if kb is None else f"{kb / GiB_KB:.1f} GiB"


class SwapCheck(Check):
    id = "swap"
    title = "Swap and memory headroom"
    judges = "swappiness, swap in use and swap-in/out activity, zram, MemAvailable headroom"

    def run(self, facts):
        swap = facts.get(SwapFacts)
        mem = swap.mem
        if not mem.values and swap.areas is None:
            yield self.skip(f"cannot read {MEMINFO} or {SWAPS}")
            return
        total = swap.total_kb
        has_swap = bool(total) or bool(swap.areas)
        yield self._usage(swap, has_swap)
        if has_swap:
            yield self._activity(swap)
            yield self._swappiness(swap)
        yield self._headroom(swap)

    def _tight(self, swap: SwapFacts) -> bool:
        mem = swap.mem
        return bool(mem.total_kb and mem.available_kb is not None
                    and mem.available_kb < mem.total_kb * HEADROOM_WARN)

    def _usage(self, swap: SwapFacts, has_swap: bool):
        evidence = {k: v for k, v in swap.evidence.items() if k != SWAPPINESS}
        if not has_swap:
            return self.ok("no swap configured: nothing can page out a loaded model", evidence)
        used, total, disk_used = swap.used_kb or 0, swap.total_kb or 0, swap.disk_used_kb or 0
        zram_note = ""
        if swap.zram:
            dev = swap.zram[0]
            ratio = (f", {dev.orig_data_size / dev.mem_used_total:.1f}x compressed" if dev.orig_data_size and
                     dev.mem_used_total else "")
            zram_note = (f"; {', '.join(z.name for z in swap.zram)} is zram ({dev.algorithm or 'compressed'}"
                         f"{ratio}): compressed RAM, far cheaper to swap in than disk")
            evidence.update({f"/sys/block/{z.name}/comp_algorithm": z.algorithm for z in swap.zram if z.algorithm})
        mem_total = swap.mem.total_kb
        large = disk_used >= LARGE_SWAP_KB and (disk_used >= total * LARGE_SWAP_SHARE
                                                or (mem_total is not None and disk_used >= mem_total * 0.10))
        summary = (f"{gib(used)} of {gib(total)} swap in use" if used else f"{gib(total)} of swap, none in use"
                   ) + zram_note
        if large:
            available = swap.mem.available_kb
            commands = ("sudo swapoff -a && sudo swapon -a",) if available and available > used * 1.2 else ()
            return self.warn(summary + (": memory pressure" if self._tight(swap) else ""), evidence,
                             fix=Fix("Free memory (close what holds it), then pull swapped pages back into RAM"
                                     + (" (there is room: MemAvailable exceeds what is swapped)" if commands else "")
                                     + f"; {MLOCK}.", commands), detail=PAGING)
        if swap.zram_only and used:
            return self.info(summary, evidence)
        if used:
            return self.ok(summary + " (pages swapped out at some point; harmless until they are needed)", evidence)
        return self.ok(summary, evidence)

    def _activity(self, swap: SwapFacts):
        if swap.vmstat_delta is None:
            return self.skip(f"swap activity unknown: {swap.sample_reason}")
        delta = swap.vmstat_delta
        window = f"{swap.interval_s:g} s" if swap.interval_s else "the sample window"
        evidence = {f"/proc/vmstat {k} (delta over {window})": v for k, v in sorted(delta.items())}
        swapin, swapout = delta.get("pswpin", 0), delta.get("pswpout", 0)
        fix = Fix(f"Stop swapping: free memory or use a smaller model/quantisation or context; {MLOCK}; "
                  f"lower vm.swappiness.", SET_SWAPPINESS)
        if swapin > 0:
            if swap.zram_only:
                return self.warn(f"{swapin} pages swapped in from zram during {window}: memory pressure "
                                 "(compressed RAM, so slower rather than stalled)", evidence, fix=fix, detail=PAGING)
            return self.fail(f"{swapin} pages swapped in during {window}: memory is being paged back from disk",
                             evidence, fix=fix, detail=PAGING)
        if swapout > 0:
            if swap.zram_only:
                return self.info(f"{swapout} pages swapped out to zram during {window}", evidence)
            return self.warn(f"{swapout} pages swapped out during {window}: the kernel is pushing memory to disk",
                             evidence, fix=fix, detail=PAGING)
        return self.ok(f"no swap-in/out during {window}", evidence)

    def _swappiness(self, swap: SwapFacts):
        if swap.swappiness is None:
            raw = swap.evidence.get(SWAPPINESS)
            if raw is not None:
                low, high = SWAPPINESS_RANGE
                return self.skip(f"{SWAPPINESS} holds {raw[:24]!r}, not a swappiness the kernel allows ({low}-{high})",
                                 {SWAPPINESS: raw})
            return self.skip(f"cannot read {SWAPPINESS}")
        value = swap.swappiness
        evidence = {SWAPPINESS: value}
        if value <= SWAPPINESS_MAX:
            return self.ok(f"vm.swappiness {value}", evidence)
        if swap.zram_only:
            return self.info(f"vm.swappiness {value} with zram-only swap (high values are the norm for zram: "
                             "it trades CPU for RAM)", evidence)
        fix = Fix(f"Lower swappiness to {SWAPPINESS_MAX} so idle model pages stay in RAM (persisted in "
                  "/etc/sysctl.d).", SET_SWAPPINESS)
        detail = ("With --no-mmap or --mlock-less servers idling between requests, the kernel swaps out untouched "
                  "weights/KV cache at this swappiness; the next request then pages them back in.")
        if self._tight(swap):
            return self.warn(f"vm.swappiness {value} while RAM is tight: idle model pages will be swapped out",
                             evidence, fix=fix, detail=detail)
        return self.info(f"vm.swappiness {value}: idle model pages may be swapped out under pressure", evidence,
                         fix=fix, detail=detail)

    def _headroom(self, swap: SwapFacts):
        mem = swap.mem
        total, available = mem.total_kb, mem.available_kb
        evidence = {k: v for k, v in mem.evidence.items() if "MemTotal" in k or "MemAvailable" in k}
        if not total or available is None:
            return self.skip(f"cannot read MemTotal/MemAvailable from {MEMINFO}", evidence)
        available_share = share(available, total)
        if available_share is None:
            return self.skip(f"{MEMINFO} says MemAvailable {available} kB of MemTotal {total} kB: the two cannot "
                             "both be true", evidence)
        summary = f"{gib(available)} of {gib(total)} RAM available ({available_share:.0%})"
        if available_share < HEADROOM_WARN:
            return self.warn(summary + ": a model plus its KV cache that does not fit in this will page", evidence,
                             fix=Fix("Close memory-hungry programs (see headless/cpu-hogs) or pick a model that "
                                     f"fits; {MLOCK}.", ()), detail=PAGING)
        return self.ok(summary + ": the model and KV cache kept in RAM must fit in this", evidence)
