"""`tunehost tune`: the fastest llama.cpp configuration on this box, found by a race of paired measurements.

:mod:`tunehost.tune.race` is the race (pure: llama-bench and the journal are injected); :mod:`tunehost.tune.space`
turns advise's plan into the knobs it searches. docs/tune.md explains both.
"""
