"""memory-bandwidth — the read bandwidth doctor measured vs the peak the installed memory allows.

Token generation on the CPU is bound by how fast RAM can be read. The settings can all look right (XMP on, both
channels in dmidecode) while the memory still delivers half: a channel that trained down, a DIMM the firmware
disabled, a controller in a low-power state. The measurement is the truth; the configured and rated peaks say what
this very hardware should do.

What a healthy machine reaches with a simple read kernel (reference figures, see docs/checks.md):
- AIDA64-class read tests on dual-channel DDR4-3200 desktops reach ~46 of 51.2 GB/s (~90 %; Guru3D's G.Skill
  Trident Z Royal DDR4-3200 review), STREAM reaches 74-79 % of the wire rate (TI application report SPRAD45A);
  tunehost's numpy read kernel lands in between: 60-85 % on a healthy desktop.
- APUs with soldered LPDDR read at 40-60 % of the wire rate from the CPU cores: their bus is sized for the GPU.
So only a measurement far below the range is judged (desktop/laptop DIMMs below 45 %: warn, below 25 %: fail).
"""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.chassis import MachineFacts, machine_of
from tunehost.facts.measure import MeasureFacts
from tunehost.facts.memory_layout import DimmPeak, dimm_peak
from tunehost.facts.ram import RamFacts
from tunehost.probes.bandwidth import MEASURED_RAM_SHARE

WARN_SHARE = 0.45           # DIMMs: a healthy desktop reads 60-85 % of the wire rate with tunehost's kernel
FAIL_SHARE = 0.25
SOLDERED_WARN_SHARE = 0.25  # APUs read 40-60 % from the CPU side
ABOVE_PEAK = 1.05           # no read kernel beats the wire rate: above it, the DIMM data or the probe is wrong
PER_THREAD_GBPS = 15.0      # what one core can be counted on to pull; fewer threads cannot saturate the bus
REFERENCE_WEIGHTS_GB = 4.9  # an 8B model at Q4_K_M: the weights one token reads
NORMAL_RANGE = {"desktop": "60-85 %", "mobile": "60-85 %", "soldered": "40-60 %", "server": "50-80 % (all cores, "
                "memory spread over every NUMA node)"}

WHY = ("llama.cpp token generation on the CPU reads every active weight once per token: tokens/s can never exceed "
       "the RAM's bandwidth / bytes per token, and usually reach 50-80 % of the DIMMs' peak; of what this probe "
       f"reads, {MEASURED_RAM_SHARE[0] * 100:.0f}-{MEASURED_RAM_SHARE[1] * 100:.0f} % (llama.cpp's reads can beat the "
       "probe's, and a VM's bandwidth moves with its neighbours).")
MEASURE_AGAIN = "tunehost doctor --check memory-bandwidth --check ram-speed"


def pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def tg_note(gbps: float) -> str:
    """The token-generation ceiling a bandwidth implies, for a reference model."""
    return (f"caps CPU token generation at ~{gbps / REFERENCE_WEIGHTS_GB:.0f} t/s for an 8B model at Q4_K_M "
            f"({REFERENCE_WEIGHTS_GB} GB of weights per token), ~{gbps:.0f} t/s per GB of active weights")


class MemoryBandwidthCheck(Check):
    id = "memory-bandwidth"
    title = "Measured memory bandwidth"
    judges = "measured read bandwidth vs the peak the configured DIMMs allow (and their rated peak)"

    def run(self, facts):
        measure = facts.get(MeasureFacts)
        gbps = measure.memory_read_gbps
        if gbps is None:
            yield self.skip(measure.why_missing("memory_read_gbps"))
            return
        threads = measure.memory_read_threads
        evidence: dict[str, object] = {"samples/measure.json memory_read_gbps": f"{gbps:g}"}
        if threads:
            evidence["samples/measure.json memory_read_threads"] = threads
        if measure.memory_read_samples:
            evidence["samples/measure.json memory_read_samples"] = ", ".join(f"{s:g}" for s in
                                                                            measure.memory_read_samples)
        if measure.memory_probe_bytes:
            evidence["probe size"] = f"{measure.memory_probe_bytes / 2**20:.0f} MiB"
        ram = facts.get(RamFacts)
        peak = dimm_peak(ram)
        if peak is None:
            why = ram.unavailable or "the memory modules do not say their speed and channels"
            yield self.info(f"measured {gbps:.1f} GB/s read bandwidth: {tg_note(gbps)}; no DIMM data to compare "
                            f"with: {why}", evidence, detail=WHY)
            return
        yield self._judge(gbps, threads, peak, evidence, machine_of(facts))

    def _judge(self, gbps: float, threads: int | None, peak: DimmPeak, evidence: dict,
               machine: MachineFacts = MachineFacts()):
        share = gbps / peak.configured_gbps
        evidence["peak as configured"] = f"{peak.configured_gbps:.1f} GB/s ({peak.basis})"
        if peak.rated_gbps:
            evidence["peak as rated"] = f"{peak.rated_gbps:.1f} GB/s ({peak.rated_mts} MT/s)"
        evidence["measured / configured peak"] = f"{pct(share)} (normal for {peak.platform}: "\
                                                 f"{NORMAL_RANGE.get(peak.platform, '60-85 %')})"
        three = f"measured {gbps:.1f} GB/s; your DIMMs as configured allow {peak.configured_gbps:.0f}"
        if peak.rated_gbps and peak.rated_gbps > peak.configured_gbps * 1.02:
            three += f"; rated {peak.rated_gbps:.0f} (see ram-speed)"
        elif peak.rated_gbps:
            three += f"; rated {peak.rated_gbps:.0f}"
        summary = f"{three} ({pct(share)} of the configured peak)"
        if share > ABOVE_PEAK:
            return self.info(f"{summary}: above the theoretical peak, so the DIMM data (speed or channels) or the "
                             "probe cannot be right; the figure is not judged", evidence, detail=WHY)
        if peak.platform == "server":
            return self.info(f"{summary}; a server needs every core and NUMA-spread memory to approach its peak, "
                             f"so this figure is not judged", evidence, detail=WHY)
        if threads and peak.configured_gbps / threads > PER_THREAD_GBPS * 2:
            return self.info(f"{summary}; {threads} probe thread(s) cannot saturate this memory, so the figure is "
                             "not judged", evidence, detail=WHY)
        warn_at = SOLDERED_WARN_SHARE if peak.platform == "soldered" else WARN_SHARE
        fail_at = FAIL_SHARE if peak.platform != "soldered" else None
        if share >= warn_at:
            return self.ok(summary, evidence)
        fix = Fix("Find what holds the memory back: a DIMM or channel the firmware disabled (check the populated "
                  "slots against the board manual and the firmware's memory page), memory training that fell back "
                  "after a failed boot, or another load on the machine during the measurement. Reseat the modules in "
                  "the slots the manual names for dual channel, clear the firmware settings, then measure again.",
                  ("sudo dmidecode -t memory | grep -E 'Locator|Speed|Size'", "sudo systemctl reboot --firmware-setup",
                   MEASURE_AGAIN))
        if machine.kind is not None:  # no firmware setup or DIMM slot to reach from a guest or a container
            fix = Fix(f"{machine.decides} the memory "
                      "this machine gets: measure again when the host is quiet, and ask its owner about the host's "
                      "memory population and other guests' load.", (MEASURE_AGAIN,))
        if fail_at is not None and share < fail_at:
            return self.fail(f"{summary}: far below the {NORMAL_RANGE[peak.platform]} a healthy "
                             f"{peak.platform} reaches", evidence, fix=fix, detail=WHY)
        return self.warn(f"{summary}: below the {NORMAL_RANGE.get(peak.platform, '60-85 %')} a healthy "
                         f"{peak.platform} reaches", evidence, fix=fix, detail=WHY)
