"""thp — the transparent huge pages mode."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.memory import THP_ENABLED, ThpFacts

SET_ALWAYS = f"echo always | sudo tee {THP_ENABLED}"


class ThpCheck(Check):
    id = "thp"
    title = "Transparent huge pages"
    judges = "transparent huge pages mode (always is best for llama.cpp, especially with --no-mmap)"

    def run(self, facts):
        thp = facts.get(ThpFacts)
        if thp.enabled is None:
            yield self.skip(f"cannot read {THP_ENABLED} (kernel without THP, or not exposed here)")
            return
        fix = Fix("Set THP to always (tunehost apply --profile throughput does this and can roll it back).",
                  (SET_ALWAYS,))
        why = ("llama.cpp's weight and KV buffers are large anonymous allocations; huge pages cut TLB misses, "
               "worth a few percent of token generation, more with --no-mmap.")
        if thp.enabled == "always":
            yield self.ok("THP is always", thp.evidence)
        elif thp.enabled == "madvise":
            yield self.info("THP is madvise: only buffers that ask for huge pages get them", thp.evidence,
                            fix=fix, detail=why)
        elif thp.enabled == "never":
            yield self.warn("THP is never: llama.cpp's buffers get no huge pages", thp.evidence, fix=fix, detail=why)
        else:
            yield self.skip(f"unrecognised THP mode {thp.enabled!r}", thp.evidence)
