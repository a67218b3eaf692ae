"""Structs stored by position (``__interlock_fields__``) and read under old names
(``__interlock_aliases__``)."""

from __future__ import annotations

import zlib
from typing import Any

import msgspec
import pytest
from msgspec.msgpack import Ext

from interlock import CheckpointCorrupt
from interlock.serde import Codec

_OBJECT, _RECORD = 5, 7  # the container codes of `interlock.serde._types`


class Note(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    __interlock_name__ = "t.Note"
    __interlock_aliases__ = ("tests.LongNoteName",)
    __interlock_fields__ = ("text", "tags", "author", "pinned")

    # Declared in another order than the wire order: the declared order decides.
    author: str | None = None
    text: str
    tags: tuple[str, ...] = ()
    pinned: bool = False


class Plain(msgspec.Struct, frozen=True):
    __interlock_name__ = "t.Plain"

    a: int
    b: int = 0


def body(data: bytes) -> Any:
    """The msgpack body of an encoding, parsed without the codec's rebuilding."""
    return msgspec.msgpack.decode(data[8:], ext_hook=lambda code, payload: Ext(code, payload))


def encoding(value: Any) -> bytes:
    """An encoding as a codec frames it (header, checksum) of msgpack-ready ``value``."""
    payload = msgspec.msgpack.encode(value)
    return b"ILK\x01" + zlib.crc32(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(
    "note",
    [
        Note(text="hi"),
        Note(text="hi", pinned=True),  # defaults before the last value are written
        Note(text="hi", tags=("a", "b"), author="ann"),
        Note(text="", tags=(), author=None, pinned=False),
    ],
)
def test_a_positional_struct_round_trips(note: Note) -> None:
    codec = Codec(types=[Note])
    assert codec.decode(codec.encode(note)) == note
    assert codec.decode(codec.encode({"notes": [note, note]})) == {"notes": [note, note]}


def test_values_are_stored_by_position_in_the_declared_order_without_trailing_defaults() -> None:
    codec = Codec(types=[Note])
    assert body(codec.encode(Note(text="hi"))) == [Ext(_RECORD, b""), "t.Note", "hi"]
    assert body(codec.encode(Note(text="hi", author="ann"))) == [
        Ext(_RECORD, b""),
        "t.Note",
        "hi",
        [Ext(1, b"")],  # the empty tuple, written because a later field is not its default
        "ann",
    ]


def test_the_named_form_under_an_old_name_still_reads() -> None:
    codec = Codec(types=[Note])
    old = encoding(
        [Ext(_OBJECT, b""), "tests.LongNoteName", "text", "hi", "author", "ann", "pinned", True]
    )
    assert codec.decode(old) == Note(text="hi", author="ann", pinned=True)
    # Written back, it takes the current name and form.
    assert body(codec.encode(codec.decode(old)))[:2] == [Ext(_RECORD, b""), "t.Note"]


def test_a_record_with_fewer_values_reads_the_rest_as_defaults() -> None:
    codec = Codec(types=[Note])
    assert codec.decode(encoding([Ext(_RECORD, b""), "t.Note", "hi"])) == Note(text="hi")


def test_a_record_with_more_values_than_fields_is_refused() -> None:
    codec = Codec(types=[Note])
    data = encoding([Ext(_RECORD, b""), "t.Note", "hi", [Ext(1, b"")], None, False, "extra"])
    with pytest.raises(CheckpointCorrupt, match="5 values but its class has 4 fields"):
        codec.decode(data)


def test_a_record_of_a_class_without_an_order_is_refused() -> None:
    codec = Codec(types=[Plain])
    with pytest.raises(CheckpointCorrupt, match="declares no __interlock_fields__"):
        codec.decode(encoding([Ext(_RECORD, b""), "t.Plain", 1, 2]))
    assert codec.decode(codec.encode(Plain(1, 2))) == Plain(1, 2)


def test_an_order_that_misses_a_field_is_refused_at_registration() -> None:
    class Bad(msgspec.Struct):
        __interlock_fields__ = ("a",)

        a: int
        b: int = 0

    with pytest.raises(TypeError, match=r"missing: b\).*add a new field at its end"):
        Codec(types=[Bad])


def test_an_alias_taken_by_another_class_is_refused() -> None:
    class Other(msgspec.Struct):
        __interlock_name__ = "tests.LongNoteName"

        x: int

    codec = Codec(types=[Other])
    with pytest.raises(ValueError, match=r"alias 'tests\.LongNoteName'"):
        codec.register(Note)


def test_a_copy_of_the_codec_reads_the_aliases() -> None:
    twin = Codec(types=[Note]).copy()
    old = encoding([Ext(_OBJECT, b""), "tests.LongNoteName", "text", "hi"])
    assert twin.decode(old) == Note(text="hi")
