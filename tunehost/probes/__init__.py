"""Probes: measurements of the live machine under load (the memory-bandwidth probe, the clock load probe).

They sit between facts and the judges: a probe may read facts (which CPUs to pin to, whether the host is busy) and
records raw figures as the `measure` sample; host/ and facts/ never import a probe. A run that measures imports
tunehost.probes.sampler, which registers its sampler with the host layer.
"""
