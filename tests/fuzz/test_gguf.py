"""The GGUF reader and what advise and bench compute from it take any file: GGUFs written by gguf.GGUFWriter with
hostile metadata (0, negative, 2^40 and 2^64-1 layers, NaN, strings and arrays where numbers belong), byte mutations
of a small valid GGUF, and files that are not GGUF at all. Each read ends in ModelFacts (and a plan) or in one
TunehostError line, "not a usable GGUF: <field> = <value>" for absurd values: never a traceback, never a hang."""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import Any

import gguf
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.advise.conftest import dense_tensors, moe_tensors, write_gguf
from tests.conftest import SNAPSHOTS
from tests.fuzz.profiles import time_limit
from tunehost.errors import TunehostError
from tunehost.model import read_model

T = gguf.GGUFValueType
ARCH = "llama"
SHAPE_KEYS = ["block_count", "embedding_length", "attention.head_count", "attention.head_count_kv",
              "attention.key_length", "attention.value_length", "context_length", "vocab_size",
              "feed_forward_length", "expert_count", "expert_used_count", "expert_shared_count",
              "expert_feed_forward_length", "attention.sliding_window", "attention.sliding_window_pattern"]
GLOBAL_KEYS = ["general.file_type", "split.count", "split.no", "general.alignment", "general.name",
               "general.architecture"]
EDGE_INTS = [0, 1, -1, 2, 7, 4096, 4097, 2**31 - 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1, 2**64 - 1, -(2**63)]
TYPE_RANGE = {T.UINT8: (0, 255), T.INT8: (-128, 127), T.UINT16: (0, 65535), T.INT16: (-32768, 32767),
              T.UINT32: (0, 2**32 - 1), T.INT32: (-(2**31), 2**31 - 1), T.UINT64: (0, 2**64 - 1),
              T.INT64: (-(2**63), 2**63 - 1)}


def _fits(vtype: Any, value: int) -> bool:
    low, high = TYPE_RANGE[vtype]
    return low <= value <= high


@st.composite
def hostile_value(draw) -> tuple[Any, Any, Any]:
    """(value, GGUF type, array item type or None), always encodable by GGUFWriter."""
    kind = draw(st.sampled_from(["int", "float", "bool", "string", "array"]))
    if kind == "int":
        vtype = draw(st.sampled_from(list(TYPE_RANGE)))
        value = draw(st.sampled_from(EDGE_INTS) | st.integers(-(2**63), 2**64 - 1)).__int__()
        low, high = TYPE_RANGE[vtype]
        return min(max(value, low), high), vtype, None
    if kind == "float":
        return draw(st.floats(width=32) | st.sampled_from([float("nan"), float("inf"), 3.5, 1e30])), T.FLOAT32, None
    if kind == "bool":
        return draw(st.booleans()), T.BOOL, None
    if kind == "string":
        return draw(st.text(max_size=20) | st.sampled_from(["\x1b[2J", "llama\n[Service]", "nan"])), T.STRING, None
    item = draw(st.sampled_from([T.UINT32, T.INT32, T.FLOAT32, T.BOOL]))
    values = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 7, 4096]), max_size=8))
    if item == T.FLOAT32:
        values = [float(v) for v in values] + draw(st.lists(st.sampled_from([float("nan"), -1.0]), max_size=2))
    elif item == T.BOOL:
        values = [bool(v) for v in values]
    elif item == T.INT32:
        values = values + draw(st.lists(st.sampled_from([-1, -(2**31)]), max_size=2))
    return values, T.ARRAY, item


def _write(path: Path, n_layer: int, moe: bool, overrides: dict[str, tuple[Any, Any, Any]]) -> Path:
    tensors = moe_tensors(n_layer) if moe else dense_tensors(n_layer)

    def extra(writer: gguf.GGUFWriter) -> None:
        for key, (value, vtype, item) in overrides.items():
            full = key if key.startswith(("general.", "split.")) else f"{ARCH}.{key}"
            writer.kv_data[0].pop(full, None)  # replace what write_gguf set, instead of a duplicate key
            writer.add_key_value(full, value, vtype, sub_type=item)

    return write_gguf(path, ARCH, tensors, n_layer=n_layer, moe=moe, extra=extra)


@functools.cache
def _host_view() -> Any:
    from tunehost.advise.host_view import HostView
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    return HostView.from_facts(HostFacts(open_host(SNAPSHOTS / "ci-vm")))


def _read_and_plan(path: Path, target: str) -> None:
    """read_model, then what advise and bench compute from it; a TunehostError must be one printable line."""
    from tunehost.advise.bandwidth import bytes_per_token
    from tunehost.advise.plan import AdviseOptions, plan

    with time_limit(target):
        try:
            model = read_model(path)
            bytes_per_token(model)
            plan(model, _host_view(), AdviseOptions(model_path=str(path)))
        except TunehostError as exc:
            message = str(exc)
            assert message and "\n" not in message and "\x1b" not in message, message


@given(st.integers(1, 3), st.booleans(),
       st.dictionaries(st.sampled_from(SHAPE_KEYS + GLOBAL_KEYS), hostile_value(), max_size=4))
def test_hostile_metadata(tmp_path: Path, n_layer: int, moe: bool, overrides: dict) -> None:
    try:
        path = _write(tmp_path / "model.gguf", n_layer, moe, overrides)
    except (ValueError, OverflowError, TypeError, struct.error):  # GGUFWriter refused the value: nothing to read
        return
    _read_and_plan(path, "gguf metadata")


@pytest.mark.parametrize("block_count", [0, -1, 2**40, 2**63 - 1])
def test_block_count_is_one_clear_line(tmp_path: Path, block_count: int) -> None:
    vtype = T.INT64 if block_count < 0 or block_count >= 2**32 else T.UINT32
    path = _write(tmp_path / "model.gguf", 1, False, {"block_count": (block_count, vtype, None)})
    with pytest.raises(TunehostError, match=rf"not a usable GGUF: llama.block_count = {block_count}$"):
        read_model(path)


@functools.cache
def _valid_gguf_bytes() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = write_gguf(Path(tmp) / "tiny.gguf", ARCH, dense_tensors(1), n_layer=1)
        return path.read_bytes()


@st.composite
def mutated_gguf(draw) -> bytes:
    data = bytearray(_valid_gguf_bytes())
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "u64", "u32", "cut", "append"]))
        if not data:
            op = "append"
        at = draw(st.integers(0, max(0, min(len(data), 2048) - 1)))  # metadata and tensor table are at the start
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op in ("u64", "u32"):
            size = 8 if op == "u64" else 4
            value = draw(st.sampled_from([0, 1, 2**size * 8 - 1, 2**31, 4096, 2**40 % 2**(size * 8)])
                         | st.integers(0, 2**(size * 8) - 1))
            data[at:at + size] = value.to_bytes(size, "little")
        elif op == "cut":
            del data[draw(st.integers(0, len(data))):]
        else:
            data += draw(st.binary(max_size=64))
    return bytes(data)


@given(mutated_gguf())
def test_mutated_gguf_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "mutated.gguf"
    path.write_bytes(data)
    _read_and_plan(path, "gguf bytes")


@pytest.mark.parametrize("content", ["empty", "text", "magic-only", "truncated", "directory", "wrong-version"])
def test_not_a_gguf_is_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "model.gguf"
    if content == "directory":
        path.mkdir()
    else:
        path.write_bytes({"empty": b"", "text": b"hello, not a model\n", "magic-only": b"GGUF",
                          "truncated": _valid_gguf_bytes()[:100],
                          "wrong-version": b"GGUF" + (99).to_bytes(4, "little") + bytes(16)}[content])
    with pytest.raises(TunehostError) as caught:
        read_model(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_unknown_tensor_type_names_the_tensor(tmp_path: Path) -> None:
    data = bytearray(_valid_gguf_bytes())
    name = b"token_embd.weight"
    at = data.index(name) + len(name)
    n_dims = int.from_bytes(data[at:at + 4], "little")
    type_at = at + 4 + 8 * n_dims
    data[type_at:type_at + 4] = (250).to_bytes(4, "little")
    path = tmp_path / "bad-type.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(TunehostError, match=r"not a usable GGUF: tensor token_embd.weight type = 250$"):
        read_model(path)
