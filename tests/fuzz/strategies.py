"""Hostile inputs shared by the fuzz tests: random text, garbage bytes, hostile numbers, mutated real captures."""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Iterable

from hypothesis import strategies as st

from tests.conftest import CORPUS, DATA

# numbers that break naive parsers: signs, NaN/inf, overflow, a 5,000-digit integer, underscores, non-ASCII digits
HOSTILE_NUMBERS = ["-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e309", "1e-400", "99999999999999999999999",
                   "18446744073709551616", "-9223372036854775809", "9" * 5000, "0x1f", "1_000", "٣", "²", "4.2.1",
                   "+7", " 12 ", "1e3", "2147483648", "4294967296"]
HOSTILE_TEXT = ["\x1b[31mred\x1b[0m", "\x00", "\r\n", "\u2028", "\ufeff", "[", "]", ":", "=", "\t", "-", ",",
                "0-999999", "0-100000000", "a" * 300]


def hostile_token() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.sampled_from(HOSTILE_TEXT), st.text(max_size=12))


def files_in(*relative: str) -> list[str]:
    """The text of every file under tests/data/<relative> (real captures: corpus, udev data, ...)."""
    out = []
    for rel in relative:
        base = DATA / rel
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        out += [p.read_text(errors="replace") for p in paths if p.suffix != ".md"]
    return out


def corpus_texts(*dirs: str) -> list[str]:
    return files_in(*(str(Path("corpus") / d) for d in dirs))


@st.composite
def mutated(draw, texts: Iterable[str]) -> str:
    """A real capture with a few hostile edits: cut, spliced tokens, numbers swapped for hostile ones, lines
    duplicated or shuffled."""
    text = draw(st.sampled_from(list(texts)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "splice", "number", "lines", "drop"]))
        if op == "cut" and text:
            text = text[: draw(st.integers(0, len(text)))]
        elif op == "splice":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(hostile_token()) + text[at:]
        elif op == "number":
            digits = [i for i, ch in enumerate(text) if ch.isdigit()]
            if digits:
                at = draw(st.sampled_from(digits))
                end = at
                while end < len(text) and (text[end].isdigit() or text[end] == "."):
                    end += 1
                text = text[:at] + draw(st.sampled_from(HOSTILE_NUMBERS)) + text[end:]
        elif op == "lines":
            lines = text.splitlines()
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines.insert(draw(st.integers(0, len(lines))), lines[i])
                text = "\n".join(draw(st.permutations(lines)) if draw(st.booleans()) else lines)
        elif op == "drop":
            lines = text.splitlines()
            if lines:
                del lines[draw(st.integers(0, len(lines) - 1))]
                text = "\n".join(lines)
    return text


def hostile_text(texts: Iterable[str] = ()) -> st.SearchStrategy[str]:
    """Random text, hostile tokens joined by separators, or (when given) mutated real captures."""
    joined = st.lists(hostile_token(), max_size=12).flatmap(
        lambda parts: st.sampled_from(["\n", " ", ":", ",", "\t"]).map(lambda sep: sep.join(parts)))
    options = [st.text(max_size=400), joined, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))]
    texts = list(texts)
    if texts:
        options.append(mutated(texts))
    return st.one_of(*options)


def no_nan(value: Any, where: str = "result") -> None:
    """No NaN or infinity leaves a parser: walk dataclasses, mappings and sequences."""
    if isinstance(value, float):
        assert math.isfinite(value), f"{where} is {value}"
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            no_nan(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            no_nan(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, v in enumerate(value):
            no_nan(v, f"{where}[{i}]")


__all__ = ["CORPUS", "HOSTILE_NUMBERS", "corpus_texts", "files_in", "hostile_text", "mutated", "no_nan"]
