"""An exact, in-memory edit of the bundled ONNX model: its softmax NaN guards removed.

The int8 MiniLM export guards every attention softmax with ``Where(IsNaN(p), 0, p)``,
which zeroes the rows of a query that may attend to nothing. Our attention mask always
lets a query attend to ``[CLS]`` (every encoding starts with it), so no row is ever
NaN and the guard is the identity; yet at 256 tokens it is two passes over a
``batch x 12 x 256 x 256`` tensor per layer, single-threaded in onnxruntime, about a
fifth of a run's time. The vectors are the same bit for bit.

The edit works on the protobuf wire format directly (no ``onnx`` package): a model is
a message whose field 7 is the graph; a graph's field 1 repeats its nodes; a node's
fields 1 and 2 are its input and output names and field 4 its operator. Everything
else is copied byte for byte. The edited model only lives in memory: the file in the
installed package is never written.
"""

from __future__ import annotations

from dataclasses import dataclass

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_OUTPUT, _GRAPH_VALUE_INFO = 1, 12, 13
_VALUE_NAME = 1
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP = 1, 2, 4

Field = tuple[int, int, bytes]  # (number, wire type, raw value: the payload of a bytes field)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | 0x80 if value else low)
        if not value:
            return bytes(out)


def fields(data: bytes) -> list[Field]:
    """One message's top-level fields, in order; raises ValueError on a malformed one."""
    out: list[Field] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, end = _varint(data, at)
        elif wire == _BYTES:
            size, at = _varint(data, at)
            end = at + size
        elif wire == _FIXED64:
            end = at + 8
        elif wire == _FIXED32:
            end = at + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if end > len(data):
            raise ValueError("truncated protobuf message")
        out.append((number, wire, data[at:end]))
        at = end
    return out


def encode(message: list[Field]) -> bytes:
    """The wire bytes of ``message`` (the inverse of :func:`fields`)."""
    out = bytearray()
    for number, wire, value in message:
        out += _encode_varint(number << 3 | wire)
        if wire == _BYTES:
            out += _encode_varint(len(value))
        out += value
    return bytes(out)


@dataclass(frozen=True)
class _Node:
    index: int  # position among the graph's fields
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _node(index: int, raw: bytes) -> _Node:
    parts = fields(raw)

    def strings(number: int) -> tuple[str, ...]:
        return tuple(v.decode() for n, w, v in parts if n == number and w == _BYTES)

    return _Node(index, "".join(strings(_NODE_OP)), strings(_NODE_INPUT), strings(_NODE_OUTPUT))


def without_nan_guards(model: bytes) -> tuple[bytes, int]:
    """``model`` with each ``Where(IsNaN(s), c, s)`` over a ``Softmax`` output ``s``
    removed (its readers read ``s``); returns the bytes and how many guards went.
    A model without such guards comes back unchanged."""
    top = fields(model)
    at = next((i for i, (n, w, _) in enumerate(top) if n == _MODEL_GRAPH and w == _BYTES), None)
    if at is None:
        return model, 0
    graph = fields(top[at][2])
    nodes = [_node(i, v) for i, (n, w, v) in enumerate(graph) if n == _GRAPH_NODE and w == _BYTES]
    made_by = {out: node for node in nodes for out in node.outputs}
    outputs = {_name(v) for n, w, v in graph if n == _GRAPH_OUTPUT and w == _BYTES}
    dropped: set[int] = set()
    renamed: dict[str, str] = {}
    for node in nodes:
        if node.op != "Where" or len(node.inputs) != 3 or len(node.outputs) != 1:
            continue
        if node.outputs[0] in outputs:
            continue
        test = made_by.get(node.inputs[0])
        if test is None or test.op != "IsNaN" or test.inputs != (node.inputs[2],):
            continue
        source = made_by.get(node.inputs[2])
        if source is None or source.op != "Softmax":
            continue
        if sum(node.inputs[0] in other.inputs for other in nodes) != 1:
            continue  # the IsNaN result is read elsewhere too: keep both
        dropped.update((node.index, test.index))
        renamed[node.outputs[0]] = node.inputs[2]
    if not renamed:
        return model, 0
    edited: list[Field] = []
    for i, (number, wire, value) in enumerate(graph):
        if i in dropped:
            continue
        if number == _GRAPH_VALUE_INFO and wire == _BYTES and _name(value) in renamed:
            continue  # the shape of a value that is gone
        if number == _GRAPH_NODE and wire == _BYTES:
            parts = fields(value)
            if any(n == _NODE_INPUT and v.decode() in renamed for n, _, v in parts):
                value = encode([_renamed(part, renamed) for part in parts])
        edited.append((number, wire, value))
    top[at] = (_MODEL_GRAPH, _BYTES, encode(edited))
    return encode(top), len(renamed)


def _name(value_info: bytes) -> str:
    return next((v.decode() for n, w, v in fields(value_info) if n == _VALUE_NAME), "")


def _renamed(part: Field, renamed: dict[str, str]) -> Field:
    number, wire, value = part
    if number != _NODE_INPUT:
        return part
    name = value.decode()
    return number, wire, renamed.get(name, name).encode()
