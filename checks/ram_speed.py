"""ram-speed — configured memory speed vs the modules' rated speed (XMP/EXPO off), and populated channels.

Token generation on the CPU streams every active weight from RAM once per token, so it runs at RAM bandwidth:
data rate x populated channels x 8 bytes. A kit at its JEDEC fallback (XMP/EXPO off), a single DIMM in a
dual-channel board or empty server channels cost tokens/s in direct proportion, worst for MoE models whose
experts live in RAM (`-ot exps=CPU`, `--n-cpu-moe`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunehost.check import Check, Fix
from tunehost.facts.chassis import machine_of
from tunehost.facts.memory_layout import Layout, layout, rating_of
from tunehost.facts.ram import RamFacts
from tunehost.facts.memory_parts import JEDEC_BASE, JEDEC_MAX, is_standard_grade, platform_memory_limit

WHY = ("llama.cpp token generation on the CPU reads every active weight from RAM once per token, so tokens/s scale "
       "with RAM bandwidth (MT/s x channels x 8 bytes); MoE models with their experts in RAM (-ot exps=CPU, "
       "--n-cpu-moe) lose almost exactly the bandwidth lost here.")
FIRMWARE = "sudo systemctl reboot --firmware-setup"
VERIFY = "sudo dmidecode -t memory | grep -i 'configured memory speed'"


def _pct(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole else 0


def _size(mb: int) -> str:
    """"16 GB", "1.5 GB", "512 MB"."""
    return f"{mb} MB" if mb < 1024 else f"{mb / 1024:g} GB" if mb % 512 == 0 else f"{mb / 1024:.1f} GB"


def _gbs(value: float | None) -> str:
    return f"~{value:.0f} GB/s peak" if value else ""


@dataclass(frozen=True)
class _Speed:
    """One judgement of the configured speed: the facts, the layout and what follows from them."""

    ram: RamFacts
    lay: Layout
    eff: int  # the configured MT/s
    cap: tuple[int, str] | None  # (MT/s, why) the memory cannot exceed here (RamSpeedCheck._cap)
    notes: str  # the platform's quirks, appended to every message
    evidence: dict

    @property
    def rated(self) -> int:
        return self.lay.rated or 0

    @property
    def slowest(self):
        """The module whose rating sets the speed (the layout's ratings decide)."""
        lay = self.lay
        return min((m for m in lay.modules if rating_of(m, lay.platform)), key=lambda m: rating_of(m, lay.platform) or 0)

    @property
    def loss(self) -> int:
        """Percent of the rated bandwidth lost."""
        return 100 - _pct(self.eff, self.rated)

    @property
    def head(self) -> str:
        """"DDR4 runs at 2133 MT/s, rated 3200 by its part number X (33 % less bandwidth: ...)"."""
        lay, eff, rated = self.lay, self.eff, self.rated
        source = f"part number {self.slowest.part_rating.part}" if self.slowest.part_rating else "Speed field"
        peak_now, peak_rated = lay.peak_gbs(eff), lay.peak_gbs(rated)
        lost = (f" ({self.loss} % less bandwidth: {_gbs(peak_now)} instead of ~{peak_rated:.0f})"
                if peak_now and peak_rated else f" ({self.loss} % less bandwidth)")
        return (f"{lay.mem_type} runs at {eff} MT/s, {'slowest module ' if lay.mixed else ''}rated {rated} by its "
                f"{source}{lost}")


class RamSpeedCheck(Check):
    id = "ram-speed"
    title = "RAM speed and channels"
    judges = "configured memory speed vs the modules' rated speed (XMP/EXPO off), populated channels"

    def run(self, facts):
        ram = facts.get(RamFacts)
        if ram.memory is None or not ram.modules:
            yield self.skip(ram.unavailable or "no installed memory modules found", ram.evidence)
            return
        machine = machine_of(facts)
        if machine.kind is not None:  # the modules a guest or a container sees are the hypervisor's or the host's
            where = "the physical host" if len(machine.layers) > 1 else "the host itself"
            yield self.skip(f"{machine.decides} the memory speed and channels: judge them on {where}", ram.evidence)
            return
        lay = layout(ram)
        evidence = dict(ram.evidence)
        yield self._speed(ram, lay, evidence)
        yield from self._channels(ram, lay, evidence)

    # -- speed vs rating ------------------------------------------------------------------------------------------
    def _speed(self, ram: RamFacts, lay: Layout, evidence: dict):
        eff = lay.effective
        if eff is None:
            return self._unconfigured(ram, lay, evidence)
        c = _Speed(ram, lay, eff, self._cap(ram, lay), self._quirk_notes(lay), evidence)
        if lay.rated is None or lay.unknown is not None:
            return self._unrated(c)
        if eff >= lay.rated * 0.995:  # 2666 vs 2667: firmware rounding of the same grade
            return self._at_rating(c)
        below = {"soldered": self._soldered_below, "server": self._server_speed, "mobile": self._mobile_below}
        return below.get(lay.platform, self._desktop_below)(c)

    def _unconfigured(self, ram: RamFacts, lay: Layout, evidence: dict):
        """No configured speed. Where nothing can run memory above its JEDEC rating or the CPU's maximum (no XMP:
        notebooks, all-in-ones, mini PCs, soldered memory, RDIMMs at one per channel), the modules run at
        min(rating, maximum): judge from those two and say what was not read; otherwise skip with what is missing."""
        unread = "the firmware does not report the configured memory speed (Configured Memory Speed: Unknown)"
        t = lay.mem_type
        if lay.platform == "desktop":
            return self.skip(f"{unread}: cannot judge it (a desktop may run its modules below their XMP/EXPO rating, "
                             "which only the configured speed would show)", evidence)
        cap = self._cap(ram, lay) or self._only_type_cap(ram, lay)
        rated, top = self._ratings_within(lay, cap)
        missing = []
        if rated is None or lay.unknown is not None:
            speeds = sorted({m.device.speed_mts for m in lay.modules if m.device.speed_mts})
            missing.append("the modules' rating (" + (f"Speed {', '.join(map(str, speeds))} is not a {t} grade"
                                                     if speeds else "no Speed field, part number not decoded") + ")")
        if cap is None:
            missing.append("the platform's maximum (" + (
                "CPU not reported" if not ram.cpu_model else
                f"{ram.cpu_model}: not in tunehost's table, or a chipset memory controller" if lay.cpu is None else
                f"{lay.cpu.family} lists no {t} speed") + ")")
        if missing:
            return self.skip(f"{unread}, nor {' nor '.join(missing)}: cannot judge the speed", evidence)
        assert rated is not None and cap is not None
        dpc = lay.dimms_per_channel
        if lay.platform == "server" and dpc and dpc >= 2:
            return self.skip(f"{unread}; {dpc} RDIMMs per channel: the platform lowers the speed for that population "
                             f"by its own table (at most {cap[0]} MT/s, modules rated {rated}): only the configured "
                             "speed would tell", evidence)
        ev = dict(evidence)
        ev["judged from"] = (f"modules rated {rated}" + (f"-{top}" if top and top != rated else "")
                             + f" MT/s; {cap[1]}; configured speed not reported")
        if (top or rated) > cap[0] * 1.02:
            return self.info(
                f"{t} modules rated {top or rated} MT/s, but {cap[1]}: CPU-limited, not a setting (the configured "
                f"speed is not reported; judged from the rating and the CPU's maximum)", ev,
                fix=Fix(f"Nothing to change: this CPU does not run memory above {cap[0]} MT/s."), detail=WHY)
        if top is not None and top > rated:
            return self.info(
                f"Mixed modules rated {rated} and {top} MT/s: the slowest sets the speed ({rated} MT/s, within the "
                f"CPU's maximum {cap[0]}; the configured speed is not reported)", ev,
                fix=Fix(f"Nothing is misconfigured. A matched pair at {min(top or rated, cap[0])} MT/s would be "
                        "faster."), detail=WHY)
        return self.ok(f"{t} modules rated {rated} MT/s, within what this platform runs ({cap[1]}): nothing is lost "
                       "to a setting here (no XMP/EXPO on this platform; the configured speed is not reported, judged "
                       "from the rating and the CPU's maximum)", ev)

    @staticmethod
    def _ratings_within(lay: Layout, cap: tuple[int, str] | None) -> tuple[int | None, int | None]:
        """(slowest, fastest) rating. A low `Speed` read as a clock (DDR3 800 -> 1600: the AM3 firmware quirk) is
        taken as the data rate again when the doubled value is above what the CPU runs and the raw value is a grade
        it does run (an Atom D425's DDR3-800)."""
        ratings = []
        for m in lay.modules:
            rating = rating_of(m, lay.platform)
            raw = m.device.speed_mts
            if rating and cap and raw and is_standard_grade(raw) and rating >= 2 * raw * 0.99 \
                    and rating > cap[0] * 1.02 and raw <= cap[0] * 1.02:
                rating = raw
            if rating:
                ratings.append(rating)
        return (min(ratings), max(ratings)) if ratings else (lay.rated, lay.rated_max)

    @staticmethod
    def _only_type_cap(ram: RamFacts, lay: Layout) -> tuple[int, str] | None:
        """The CPU's maximum when the firmware names no memory type ("Other") and the CPU supports only one."""
        cpu = lay.cpu
        if cpu is None or lay.gen is not None or len({t for t, _ in cpu.speeds}) != 1:
            return None
        limit = cpu.max_for(None)
        return (limit[0], f"the CPU ({ram.cpu_model}) supports at most {limit[1]}") if limit else None

    def _unrated(self, c: "_Speed"):
        """The modules' rating is not known: judge from the controller's cap and JEDEC, else skip with the reason."""
        lay, eff, t, cap, notes, evidence = c.lay, c.eff, c.lay.mem_type, c.cap, c.notes, c.evidence
        unknown = lay.unknown
        if cap is not None and eff >= cap[0] * 0.98:
            return self.ok(f"{t} at {eff} MT/s, the fastest this memory controller runs it ({cap[1]}); the modules' "
                           f"own rating is not reported{notes}", evidence)
        if unknown is not None and lay.gen and eff > JEDEC_MAX[lay.gen]:
            where = f", {self._channel_words(lay)}" if self._channel_words(lay) else ""
            return self.ok(f"{t} at {eff} MT/s, above every JEDEC speed: XMP/EXPO is on (the exact rating is not in "
                           f"the part number){where}{notes}", evidence)
        if unknown is not None:
            return self.skip(f"{t} runs at {eff} MT/s, but the modules' rating is unknown: "
                             f"{unknown.rating_unknown}. If the label "
                             f"on the modules says more than {eff} MT/s, enable XMP/EXPO in the firmware setup",
                             evidence)
        parts = sorted({m.device.part_number or "not reported" for m in lay.modules})
        return self.skip(f"{t} runs at {eff} MT/s, but the modules' rating is unknown (part number "
                         f"{', '.join(parts)} not decoded, Speed not reported)", evidence)

    def _at_rating(self, c: "_Speed"):
        lay, eff, t, cap, notes, evidence = c.lay, c.eff, c.lay.mem_type, c.cap, c.notes, c.evidence
        dpc = lay.dimms_per_channel
        if lay.platform == "server" and cap is not None and eff < cap[0] * 0.98 and dpc and dpc >= 2:
            return self.info(
                f"{t} at {eff} MT/s with {dpc} DIMMs per channel: the platform lowers the speed for that "
                f"population ({cap[1]} with one DIMM per channel){notes}", evidence,
                fix=Fix(f"Nothing is misconfigured. Fewer, larger RDIMMs (one per channel) would run at up to "
                        f"{cap[0]} MT/s."), detail=WHY)
        if lay.mixed:
            slowest = c.slowest
            rates = sorted({m.rating for m in lay.modules if m.rating})
            held = f" ({slowest.name}, {slowest.device.part_number or 'part not reported'}, holds the others back)"
            return self.info(
                f"Mixed modules rated {' and '.join(map(str, rates))} MT/s: all run at {eff} MT/s because the "
                f"slowest module sets the speed{held}{notes}", evidence,
                fix=Fix(f"Nothing is misconfigured. To run at {lay.rated_max} MT/s, replace the slower module(s) "
                        f"with ones matching the faster one (ideally one matched kit)."),
                detail=WHY)
        how = ""
        if lay.profile and lay.gen and eff > JEDEC_BASE.get(lay.gen, eff):
            how = " (XMP/EXPO on)"
        channels = self._channel_words(lay)
        where = f", {channels}" if channels else ""
        peak_now = lay.peak_gbs(eff)
        bw = f": {_gbs(peak_now)}" if peak_now else ""
        return self.ok(f"{t} at {eff} MT/s, the modules' rated speed{how}{where}{bw}{notes}", evidence)

    def _soldered_below(self, c: "_Speed"):
        return self.info(
            f"Soldered {c.head}: the platform firmware chose this speed; soldered memory has no XMP/EXPO and is "
            f"not user-tunable{c.notes}", c.evidence,
            fix=Fix("Nothing to change in the OS or the firmware setup: the speed of soldered memory is fixed by "
                    "the vendor (a firmware update rarely raises it). Count on this bandwidth when sizing models."),
            detail=WHY)

    def _mobile_below(self, c: "_Speed"):
        lay, limit, head, notes, evidence = c.lay, c.cap, c.head, c.notes, c.evidence
        if limit and c.eff >= limit[0] * 0.98:
            return self.info(
                f"{head}: CPU-limited, not a setting — {limit[1]}{notes}", evidence,
                fix=Fix(f"Nothing to change: this CPU does not run memory above {limit[0]} MT/s."), detail=WHY)
        return self.warn(
            f"{head}: the firmware runs the SODIMMs below their rating; most laptops and mini PCs offer no "
            f"XMP/EXPO to change it ({lay.platform_why.replace('(', '').replace(')', '')}){notes}", evidence,
            fix=Fix("Check the firmware setup for a memory-speed option and install firmware updates (some raise "
                    "memory speed); otherwise this is the platform's limit. Mixed or odd-sized SODIMMs can also "
                    "pull the speed down: use a matched pair.", (FIRMWARE, "sudo fwupdmgr get-updates")),
            detail=WHY)

    def _desktop_below(self, c: "_Speed"):
        lay, eff, rated, head, notes, evidence, loss = c.lay, c.eff, c.rated, c.head, c.notes, c.evidence, c.loss
        limit = platform_memory_limit(c.ram.cpu_model, c.ram.product, lay.mem_type)
        below_jedec = ""
        if lay.gen and eff < JEDEC_BASE[lay.gen]:
            below_jedec = f", below even the JEDEC base {lay.gen}-{JEDEC_BASE[lay.gen]}"
        one_channel = self._one_channel_many(lay)
        if lay.gen == "DDR5" and lay.two_per_channel and not one_channel \
                and lay.populated_channels == lay.total_channels:
            n = len(lay.modules)
            return self.warn(
                f"{head}: {n} DIMMs (2 per channel) — DDR5 with 2 DIMMs per channel falls back to a low speed "
                f"(AM5: 3600 MT/s), and XMP/EXPO is not applied{notes}", evidence,
                fix=Fix(f"Either run 2 DIMMs (one per channel, the slots the board manual marks first, usually A2/B2) "
                        f"to reach {rated} MT/s, or keep {n} DIMMs for capacity and enable XMP/EXPO in the firmware "
                        f"with the speed lowered to 5200-5600 MT/s (test stability with a memory test).",
                        (FIRMWARE,)),
                detail=WHY + " Capacity matters too: keep 4 DIMMs if the model only fits that way.")
        if limit and eff >= limit[0] * 0.98 and rated > eff:
            return self.info(
                f"{head}: CPU/platform-limited, not XMP/EXPO off — {limit[1]}{notes}", evidence,
                fix=Fix(f"Nothing to change in the firmware: this memory controller (or chipset) does not run memory "
                        f"above {limit[0]} MT/s. Only another CPU or board would use the modules' {rated} MT/s."),
                detail=WHY)
        official = lay.cpu.max_for(lay.mem_type) if lay.cpu is not None else None
        if official and official[0] * 0.98 <= eff <= official[0] * 1.005 and lay.profile and loss <= 12 \
                and eff > JEDEC_BASE.get(lay.gen or "", eff):
            return self.info(
                f"{head}: at the CPU's official maximum ({official[1]}, {lay.cpu.family}); the kit's "
                f"{rated} MT/s is an overclock of the memory controller that not every CPU holds{notes}", evidence,
                fix=Fix(f"Optional: try the full {rated} MT/s XMP/EXPO profile in the firmware setup and run a memory "
                        f"test; keep {eff} MT/s if it is not stable.", (FIRMWARE,)),
                detail=WHY)
        if lay.gen and eff <= JEDEC_MAX[lay.gen]:
            return self._at_jedec(c, below_jedec, one_channel)
        if loss <= 20:
            return self._reduced_profile("XMP/EXPO is applied", head, loss, rated, notes, evidence)
        return self.warn(
            f"{head}: XMP/EXPO seems applied but well below the kit's rating{notes}", evidence,
            fix=Fix(f"Load the kit's XMP/EXPO profile ({rated} MT/s) in the firmware setup, or the next lower speed "
                    f"that is stable.", (FIRMWARE,)),
            detail=WHY)

    def _at_jedec(self, c: "_Speed", below_jedec: str, one_channel: str | None):
        """A desktop kit at or under a JEDEC speed, below its rating: XMP/EXPO off (or a manual setting)."""
        lay, rated, head, notes, evidence, loss = c.lay, c.rated, c.head, c.notes, c.evidence, c.loss
        if lay.profile and c.eff > JEDEC_BASE[lay.gen] and loss <= 12:
            return self._reduced_profile("above the JEDEC base speed, so a profile or a manual speed is applied",
                                         head, loss, rated, notes, evidence)
        if lay.profile:
            extra = f"; {one_channel}" if one_channel else ""
            return self.fail(
                f"XMP/EXPO is off: {head}{below_jedec}{extra}{notes}", evidence,
                fix=Fix(f"Enable the XMP (Intel) / EXPO (AMD) profile in the firmware setup ('XMP Profile 1', "
                        f"'EXPO I', 'DOCP' on ASUS); the command reboots into it. Then `{VERIFY}` should show "
                        f"{rated} MT/s.", (FIRMWARE,)),
                detail=WHY)
        return self.warn(
            f"{head}{below_jedec}: below the modules' JEDEC rating (the CPU's supported speed, the board, or a "
            f"manual setting in the firmware){notes}", evidence,
            fix=Fix(f"Check the memory frequency in the firmware setup (Auto or {rated}) and the CPU's supported "
                    f"memory speed.", (FIRMWARE,)),
            detail=WHY)

    def _reduced_profile(self, how: str, head: str, loss: int, rated: int, notes: str, evidence: dict):
        """A desktop kit a few percent below its XMP/EXPO rating: real lost bandwidth (issue 20 (e)), not info."""
        return self.warn(
            f"{head}: {how}, but below the kit's XMP/EXPO rating — {loss} % of the bandwidth is lost (a reduced "
            f"profile, or a manual setting){notes}", evidence,
            fix=Fix(f"Load the full {rated} MT/s XMP/EXPO profile in the firmware setup; many CPUs cannot run the "
                    f"fastest kits, so keep the lower speed only if a memory test fails at {rated}.", (FIRMWARE,)),
            detail=WHY)

    @staticmethod
    def _cap(ram: RamFacts, lay: Layout) -> tuple[int, str] | None:
        """(MT/s, why) the memory cannot exceed here: the CPU's maximum for this memory type where nothing runs
        memory faster (notebooks, mini PCs, soldered memory, servers), or what platform_memory_limit says on a
        desktop (a CPU without memory overclocking, or a chipset without it)."""
        if lay.platform == "desktop":
            return platform_memory_limit(ram.cpu_model, ram.product, lay.mem_type)
        limit = lay.cpu.max_for(lay.mem_type) if lay.cpu is not None else None
        return (limit[0], f"the CPU ({ram.cpu_model}) supports at most {limit[1]}") if limit else None

    def _server_speed(self, c: "_Speed"):
        ram, lay, head, eff, rated, cap, notes, evidence = c.ram, c.lay, c.head, c.eff, c.rated, c.cap, c.notes, c.evidence
        dpc = lay.dimms_per_channel
        if cap is not None and eff >= min(rated, cap[0]) * 0.98:
            return self.info(
                f"{head}: CPU/platform-limited, not a misconfiguration — {cap[1]}{notes}", evidence,
                fix=Fix(f"Nothing to change: registered memory runs at what the CPU allows. Only a CPU with a faster "
                        f"memory controller would use the modules' {rated} MT/s."),
                detail=WHY)
        if dpc and dpc >= 2 or cap is None:
            cause = (f"{dpc} DIMMs per channel: server platforms lower the speed as channels fill" if dpc and dpc >= 2
                     else "server platforms set the speed from the CPU's supported maximum and the DIMMs per channel"
                     + (f" (CPU: {ram.cpu_model})" if ram.cpu_model else ""))
            return self.info(
                f"{head}: population/platform-limited, not a misconfiguration — {cause}{notes}", evidence,
                fix=Fix(f"Nothing to change in the OS: fewer DIMMs per channel (larger RDIMMs) or a CPU with a faster "
                        f"memory controller would use the modules' {rated} MT/s."),
                detail=WHY)
        return self.warn(
            f"{head}, below both the modules' rating and the CPU's maximum ({cap[1]}) with one DIMM per channel: the "
            f"firmware caps the memory frequency (a power-saving system profile or a manual setting){notes}", evidence,
            fix=Fix(f"In the server's firmware setup set the memory frequency to maximum performance (Dell: System "
                    f"Profile 'Performance'; HPE: Workload Profile; Supermicro/ASRock Rack: Memory Frequency 'Auto' or "
                    f"{min(rated, cap[0])}), then `{VERIFY}` should show {min(rated, cap[0])} MT/s.", (FIRMWARE,)),
            detail=WHY)

    # -- channels ---------------------------------------------------------------------------------------------------
    def _channels(self, ram: RamFacts, lay: Layout, evidence: dict):
        if lay.platform == "soldered":
            return
        ev = dict(evidence)
        ev[f"{ram.source} (Locator, Bank Locator)"] = "; ".join(
            f"{m.name}: {m.device.size_mb // 1024 if m.device.size_mb else '?'} GB"
            + (" soldered" if m.soldered else "") for m in lay.modules)
        if lay.cpu is not None:
            ev["CPU memory controller"] = lay.cpu.describe
        if lay.platform == "server":
            yield from self._server_channels(lay, ev)
            return
        if lay.cpu_channels == 1:
            return  # a one-channel memory controller (Atom, Alder Lake-N, Stoney Ridge): nothing to populate
        finding = self._population(lay, ev)
        if finding is None:
            finding = self._asymmetric(lay, ev)
        if finding is not None:
            yield finding

    def _population(self, lay: Layout, ev: dict):
        """Channels left empty on a desktop, notebook or mini PC, with the fix that fits the chassis."""
        severe = self.fail if lay.platform == "desktop" else self.warn
        soldered = [m for m in lay.modules if m.soldered]
        socketed = [m for m in lay.modules if not m.soldered]
        if lay.platform == "desktop":
            add = "Add a second identical module ({part}; kits are sold in pairs) in the other channel's recommended " \
                  "slot (see the board manual, usually A2 + B2)."
        elif soldered:
            add = ("Fill the empty SO-DIMM slot with a module of the same size and speed as the soldered memory "
                   f"({soldered[0].device.size_mb // 1024 if soldered[0].device.size_mb else '?'} GB, "
                   f"{soldered[0].effective_mts or '?'} MT/s).")
        else:
            add = ("Add a second SO-DIMM of the same size and speed ({part}) in the empty slot (the service manual "
                   "shows where; in some notebooks it sits under the keyboard).")
        if lay.channels is None or lay.populated is None:
            if len(lay.modules) == 1 and lay.slot_count >= 2:
                m = lay.modules[0]
                return severe(
                    f"Only 1 of {lay.slot_count} memory slots is populated ({m.name}): almost certainly single "
                    f"channel, half the memory bandwidth", ev,
                    fix=Fix(add.format(part=m.device.part_number or "same part")), detail=WHY)
            return None
        if lay.slot_count <= 1:
            return None  # the firmware lists one memory device in all: no slot to fill (one soldered bank, a NUC)
        one_channel = self._one_channel_many(lay)
        used = lay.populated_channels or 0
        total = lay.cpu_channels or lay.total_channels or 0
        if total >= 2 and used == 1 and len(socketed) <= 1 and len(lay.modules) == 1:
            m = lay.modules[0]
            return severe(
                f"Single channel: one {lay.mem_type} module ({m.name}) where the CPU has {total} channels — "
                f"{'half' if total == 2 else f'1/{total} of'} the memory bandwidth", ev,
                fix=Fix(add.format(part=m.device.part_number or "same part")), detail=WHY)
        if one_channel and total >= 2:
            if lay.platform != "desktop":
                return self.warn(
                    f"{one_channel[0].upper()}{one_channel[1:]} although the CPU has {total}: single-channel "
                    f"bandwidth (half)", ev,
                    fix=Fix("Move one module to the other channel's slot if the machine has one (see the service "
                            "manual); otherwise this is how the board is wired."), detail=WHY)
            return self.fail(
                f"{one_channel[0].upper()}{one_channel[1:]}: single-channel bandwidth (half) and the slower "
                f"2-DIMMs-per-channel speed", ev,
                fix=Fix("Power off and move one module to the other channel: use the slots the board manual "
                        "recommends for 2 DIMMs (usually A2 + B2), then enable XMP/EXPO."),
                detail=WHY)
        if total > used >= 1 and not one_channel:
            return self.warn(
                f"{used} of {total} memory channels populated: ~{100 - _pct(used, total)} % less peak bandwidth", ev,
                fix=Fix("Spread the modules so that every channel has one (see the board manual)."),
                detail=WHY)
        return None

    def _asymmetric(self, lay: Layout, ev: dict):
        """Channels of unequal capacity (8 GB + 16 GB, soldered 8 GB + a 16 GB SO-DIMM): only the smaller size is
        interleaved across channels (Intel flex mode, AMD likewise); the rest is read from one channel."""
        sizes = lay.channel_sizes()
        if not sizes or len(sizes) < 2 or min(sizes) <= 0:
            return None
        total = sum(sizes)
        single = total - min(sizes) * len(sizes)
        if single * 2 < total:
            return None  # most of the memory is interleaved: a model there still gets the full bandwidth
        gb = " + ".join(_size(x) for x in sizes)
        soldered = any(m.soldered for m in lay.modules)
        if soldered:
            fix = "Use a SO-DIMM of the same size as the soldered memory so that both channels hold the same capacity."
        elif lay.platform == "desktop":
            fix = "Use modules of the same size in every channel (ideally one matched kit)."
        else:
            fix = "Replace the smaller SO-DIMM with one of the larger one's size (a matched pair)."
        return self.warn(
            f"Unequal channels ({gb}): {_size(single)} of {_size(total)} ({_pct(single, total)} %) sit on one "
            f"channel only and are read at single-channel speed — a model in that part of memory runs at about half "
            f"the bandwidth", ev, fix=Fix(fix), detail=WHY)

    def _server_channels(self, lay: Layout, ev: dict):
        """One finding for every socket whose CPU channels are not all populated (6 of 12 DIMMs, one socket empty)."""
        per_channel = lay.cpu_channels
        lines, lost, full = [], 0.0, 0
        if lay.populated is not None and len(lay.populated) == 1 and lay.sockets > 1 and per_channel:
            # channel names without a socket ("ChannelA" .. "ChannelH" on two 4-channel CPUs): count them together
            used = len(next(iter(lay.populated.values())))
            sockets = {"all": (used, [])}
            per_channel *= lay.sockets
        elif lay.populated is not None and (lay.per_socket is None or len(lay.per_socket) <= len(lay.populated)):
            sockets = {k: (len(c), sorted(set(lay.channels[k]) - set(c)) if lay.channels else [])
                       for k, c in lay.populated.items()}
        elif lay.per_socket is not None:
            sockets = {k: (min(n, per_channel or n), []) for k, n in lay.per_socket.items()}
        else:
            n = len(lay.modules) // max(lay.sockets, 1)
            sockets = {str(i): (min(n, per_channel or n), []) for i in range(lay.sockets)} if per_channel else {}
        for k in sorted(sockets):
            used, empty = sockets[k]
            have = per_channel or (used + len(empty))
            full += have
            lost += max(have - used, 0)
            if used < have:
                where = f"socket {k}: " if len(sockets) > 1 else ""
                names = f" (channel{'s' if len(empty) > 1 else ''} {', '.join(empty)} empty)" \
                    if empty and len(empty) == have - used else ""
                lines.append(f"{where}{used} of {have} memory channels populated{names}" if used
                             else f"{where}no memory")
        if not lines:
            return
        yield self.warn(
            f"Memory channels left empty — {'; '.join(lines)}: ~{round(100 * lost / full)} % less peak bandwidth than "
            f"one DIMM in every channel", ev,
            fix=Fix(f"Install one identical RDIMM in every channel of every socket ({per_channel or 'all'} per CPU, in "
                    f"the board manual's population order, e.g. A1, B1, C1, ...), one DIMM per channel before any "
                    f"second DIMM."),
            detail=WHY + " On a multi-socket machine a socket without memory also makes its cores read across the "
                         "inter-socket link.")

    # -- wording helpers ------------------------------------------------------------------------------------------
    @staticmethod
    def _one_channel_many(lay: Layout) -> str | None:
        """"all 2 DIMMs are on one channel (P0 CHANNEL B)" when several modules share the only populated channel."""
        if lay.populated is None or lay.total_channels is None:
            return None
        if lay.total_channels >= 2 and lay.populated_channels == 1 and len(lay.modules) >= 2:
            bank = lay.modules[0].device.bank_locator or lay.modules[0].device.locator or "?"
            both = "both DIMMs" if len(lay.modules) == 2 else f"all {len(lay.modules)} DIMMs"
            return f"{both} sit on one channel ({bank})"
        return None

    @staticmethod
    def _channel_words(lay: Layout) -> str:
        if lay.platform == "soldered":
            widths = [m.device.data_width for m in lay.modules]
            return f"{sum(widths)}-bit bus" if widths and all(widths) else ""  # type: ignore[arg-type]
        used = lay.populated_channels
        if not used:
            return f"{len(lay.modules)} modules"
        if lay.populated and len(lay.populated) > 1:
            per = {len(c) for c in lay.populated.values()}
            if len(per) == 1:
                return f"{per.pop()} channels per socket x {len(lay.populated)} sockets"
        total = lay.total_channels or used
        if lay.cpu_channels:  # the CPU's channels, not the slot names' (an Alder Lake-N lists a second controller)
            total = max(used, lay.cpu_channels * lay.sockets)
        if total > used:
            return f"{used} of {total} channels"
        names = {1: "single channel", 2: "dual channel", 4: "quad channel"}
        return names.get(used, f"{used} channels")

    @staticmethod
    def _quirk_notes(lay: Layout) -> str:
        notes = []
        if any(m.half_rate for m in lay.modules):
            m = next(m for m in lay.modules if m.half_rate)
            if m.device.speed_mts and m.rating and m.device.speed_mts * 2 <= m.rating * 1.02:
                notes.append(f"firmware reports Speed {m.device.speed_mts} and Configured {m.device.configured_mts}: "
                             f"older AMD firmware puts the memory clock (MHz) in both, a units quirk — the real rate "
                             f"is {m.effective_mts} MT/s")
            else:
                notes.append(f"firmware reports Configured {m.device.configured_mts} MT/s, exactly half of Speed "
                             f"{m.device.speed_mts}: older AMD AGESA puts the memory clock (MHz) there, a units "
                             f"quirk — the real rate is {m.effective_mts} MT/s")
        if any(m.speed_field_bogus for m in lay.modules):
            m = next(m for m in lay.modules if m.speed_field_bogus)
            notes.append(f"the Speed field's {m.device.speed_mts} MT/s is bogus firmware data and was ignored")
        return "".join(f" ({n})" for n in notes)
