"""resizable-bar — each discrete GPU's VRAM aperture (the PCI BAR the CPU maps VRAM through) against its VRAM.

With Resizable BAR off a card exposes a 256 MiB window (or a few GiB) instead of all of its VRAM. llama.cpp's Vulkan
backend puts device buffers in memory that is both device-local and host-visible when the driver offers it
(ggml-vulkan-buffers.cpp, ggml_vk_create_buffer_device): with a small BAR that heap is the small window, and token
generation collapses (ggml-org/llama.cpp#27097: RX 7900 XTX, tg128 13.9 -> 36.9 t/s once host-visible VRAM is not
used; #24066: ReBAR off ~25-75 t/s, on ~110-140 t/s). CUDA copies through DMA and does not depend on BAR1's size.
"""

from __future__ import annotations

from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.gpu import GpuFacts
from tunehost.facts.gpu_bar import LEGACY_BAR_MIB, GpuAperture, nvidia_rebar_capable, read_apertures, size_text
from tunehost.facts.llama import LlamaBuildFacts
from tunehost.parsers.llama_version import VULKAN

# the variable ggml-vulkan reads (ggml-vulkan.cpp: getenv("GGML_VK_DISABLE_HOST_VISIBLE_VIDMEM"); any value): device
# buffers are then device-local only, never the small host-visible window
VK_ENV = "GGML_VK_DISABLE_HOST_VISIBLE_VIDMEM"
FIRMWARE = "sudo systemctl reboot --firmware-setup"
FIRMWARE_FIX = ("In the firmware setup enable 'Above 4G Decoding' and 'Re-Size BAR Support' (Resizable BAR; AMD: "
                "Smart Access Memory), with CSM off (UEFI boot); some boards and cards need a firmware/vBIOS update "
                "first.")
WHY = ("llama.cpp's Vulkan backend prefers VRAM the CPU can map (device-local and host-visible); with a small BAR that "
       "is a 256 MiB window, and token generation drops 2-3x (ggml-org/llama.cpp#27097, #24066). CUDA and ROCm copy "
       "through DMA and are not slowed by the BAR size.")


def _verify(bus_id: str | None) -> str:
    where = f" -s {bus_id[5:] if bus_id and bus_id.startswith('0000:') else bus_id}" if bus_id else ""
    return f"sudo lspci -vv{where} | grep -A3 'Resizable BAR'"


def _vulkan_in_use(facts) -> bool | None:
    """Whether an installed llama.cpp build uses Vulkan; None when no build was found (or the facts are absent)."""
    try:
        builds = facts.get(LlamaBuildFacts)
    except Exception:  # a test without build facts, a broken search: judge by the card alone
        return None
    backends = {b for binary in builds.binaries for b in binary.backends}
    return VULKAN in backends if backends else None


class ResizableBarCheck(Check):
    id = "resizable-bar"
    title = "GPU BAR size (Resizable BAR)"
    judges = "each discrete GPU's VRAM aperture (PCI BAR / NVIDIA BAR1) against its VRAM: Resizable BAR off"

    def run(self, facts) -> Iterable[Finding]:
        gpus = facts.get(GpuFacts)
        discrete = gpus.discrete
        if not discrete:
            why = "no discrete GPU found" if not gpus.gpus else "only integrated GPUs: they map system memory, no BAR"
            yield self.skip(why + (f" ({gpus.nvidia_error})" if gpus.nvidia_error and not gpus.gpus else ""))
            return
        if facts.host is None:
            yield self.skip("no host to read the PCI BARs from")
            return
        vulkan = _vulkan_in_use(facts)
        for aperture in read_apertures(facts.host, gpus):
            yield self._judge(aperture, vulkan)

    def _judge(self, a: GpuAperture, vulkan: bool | None) -> Finding:
        g, ev = a.gpu, dict(a.evidence)
        aperture, vram = a.aperture_mib, a.vram_mib
        if aperture is None:
            return self.skip(f"{g.label}: BAR size not readable (no /sys/bus/pci/devices/{g.pci_bus_id or '?'}/"
                             "resource with a prefetchable memory BAR, and no BAR1 from the NVIDIA driver)", ev)
        largest = a.largest_mib
        if vram is None and largest is not None and aperture >= largest and aperture > LEGACY_BAR_MIB:
            return self.ok(f"{g.label}: the BAR is at the card's largest size, {size_text(aperture)} (Resizable BAR "
                           "on; VRAM size not reported)", ev)
        if vram is None and not (largest is not None and largest > aperture):
            return self.skip(f"{g.label}: VRAM size not reported, the {size_text(aperture)} BAR cannot be judged "
                             "against it", ev)
        if a.maps_all:
            return self.ok(f"{g.label}: the {size_text(aperture)} BAR maps all {size_text(vram)} of VRAM "
                           "(Resizable BAR on)", ev)
        can_grow = largest is not None and largest > aperture
        capable = can_grow or (nvidia_rebar_capable(g.name, g.compute_capability) if g.vendor == "nvidia"
                               else (False if largest is not None else None))
        share = (f"{size_text(aperture)} of {size_text(vram)} VRAM" if vram is not None
                 else f"a {size_text(aperture)} window of its VRAM (VRAM size not reported)")
        workaround = (f"Until then, for llama.cpp's Vulkan backend set {VK_ENV}=1 in the server's environment "
                      "(device buffers stay in device-local VRAM instead of the small window).")
        vk_cmd = f"export {VK_ENV}=1   # Vulkan backend only"
        only_vulkan = g.vendor == "nvidia" and vulkan is not True
        note = " (only llama.cpp's Vulkan backend is affected; CUDA is not)" if g.vendor == "nvidia" else ""
        if capable is False:
            what = (f"the card offers no larger BAR (its Resizable BAR capability lists at most {size_text(largest)})"
                    if largest is not None else "this GPU generation has no Resizable BAR")
            return self.info(f"{g.label}: the CPU maps {share}; {what}: nothing to enable{note}", ev,
                             fix=Fix(f"Nothing to change in the firmware. With llama.cpp's Vulkan backend set "
                                     f"{VK_ENV}=1 so device buffers stay in device-local VRAM, or use CUDA/ROCm.",
                                     (vk_cmd,)),
                             detail=WHY)
        offer = f"; the card offers up to {size_text(largest)}" if can_grow else ""
        small = aperture <= LEGACY_BAR_MIB
        head = (f"{g.label}: Resizable BAR is off — the CPU maps only {share}{offer}" if small else
                f"{g.label}: the BAR maps only {share}{offer} (Resizable BAR limited: a 32-bit window or a "
                "firmware cap)")
        if capable is None:
            head += " (whether the card supports Resizable BAR is not reported: kernel 6.1+ lists it in sysfs)"
        fix = Fix(f"{FIRMWARE_FIX} Then check that the BAR covers the VRAM. {workaround}",
                  (FIRMWARE, _verify(g.pci_bus_id), vk_cmd))
        if only_vulkan:
            return self.info(head + note, ev, fix=fix, detail=WHY)
        uses = " and the installed llama.cpp uses Vulkan" if vulkan else ""
        return self.warn(f"{head}{uses}: Vulkan token generation runs 2-3x slower", ev, fix=fix, detail=WHY)
