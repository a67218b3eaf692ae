"""The codec: values to checksummed msgpack bytes and back, with a registry of user classes.

Layout of an encoding::

    offset 0   b"ILK"       magic
    offset 3   1            format version
    offset 4   crc32(body)  big-endian uint32; detects corruption, not tampering
    offset 8   body         msgpack; see `interlock.serde._types` for the tags

Encoding walks the value once (`_encode.Walker`), mapping each node by `type(v)` and copying
a container only when something inside it changes; plain subtrees are recognised at C speed and
handed to msgspec untouched. Decoding lets msgspec parse the body, then walks the result once
(`_decode.Rebuilder`), in place, to rebuild tagged containers and enforce the depth limit. Paths
for error messages are computed only after an error, by walking the value a second time.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from .._errors import CheckpointCorrupt, PayloadTooLarge, SerializationError
from .._lazy import lazy_module
from ._decode import Corrupt, Rebuilder
from ._encode import TooDeep, Unsupported, Walker
from ._types import (
    Entry,
    Tag,
    copy_tree,
    ext_hook,
    is_plain_tree,
    make_entry,
    type_name,
    wire_aliases,
    wire_name,
)

if TYPE_CHECKING:
    import zlib
else:  # imported by the first call that needs it, not by `import interlock`
    zlib = lazy_module("zlib", globals())

__all__ = ["DEFAULT_CODEC", "Codec"]

_MAGIC: Final = b"ILK"
_VERSION: Final = 1
_HEADER: Final = struct.Struct(">3sBI")
_PREFIX: Final = _MAGIC + bytes([_VERSION])
_CRC: Final = struct.Struct(">I")
_PREFIX_OF: Final = operator.itemgetter(slice(0, 4))
_CRC_OF: Final = operator.itemgetter(slice(4, 8))
_BODY_OF: Final = operator.itemgetter(slice(_HEADER.size, None))
_U32: Final = functools.partial(int.from_bytes, byteorder="big")
_OPENING_OF: Final = operator.itemgetter(_HEADER.size)
_ITEMS: Final = msgspec.msgpack.Decoder(list[msgspec.Raw])
"""Splits a msgpack array into its items' bytes, undecoded."""


class Codec:
    """Encodes checkpoint state and payloads to bytes and decodes them, safely.

    Plain data (None, bool, int, float, str, bytes, list, dict), tuple, set, frozenset,
    bytearray, datetime, date, time, timedelta, UUID and Decimal are always supported.
    Dataclasses, pydantic models, msgspec Structs and Enums must be registered: decoding only
    ever constructs registered classes, looked up in this codec's own registry, and never
    imports or evaluates anything.

    Args:
        types: Classes to register under their default names.
        max_bytes: The largest encoding `encode` produces and `decode` accepts.
        max_depth: The deepest nesting of containers (lists, dicts, tuples, sets, registered
            objects) allowed; a flat list has depth 1.
    """

    __slots__ = (
        "_by_cls",
        "_by_name",
        "_checking",
        "_decoder",
        "_encoder",
        "_max_bytes",
        "_max_depth",
        "_rebuilder",
        "_trusting",
    )

    def __init__(
        self,
        *,
        types: Iterable[type] = (),
        max_bytes: int = 64 * 1024 * 1024,
        max_depth: int = 100,
    ) -> None:
        if max_bytes < 1 or max_depth < 1:
            raise ValueError(
                f"max_bytes and max_depth must be positive (got {max_bytes} and {max_depth})"
            )
        self._max_bytes = max_bytes
        self._max_depth = max_depth
        self._by_cls: dict[type, Entry] = {}
        self._by_name: dict[str, Entry] = {}
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ext_hook=ext_hook)
        self._trusting = Walker(self._by_cls, max_depth, trust_ints=True)
        self._checking = Walker(self._by_cls, max_depth, trust_ints=False)
        self._rebuilder = Rebuilder(self._by_name, max_depth)
        for cls in types:
            self.register(cls)

    def __repr__(self) -> str:
        return (
            f"<Codec {len(self._by_cls)} registered types "
            f"max_bytes={self._max_bytes} max_depth={self._max_depth}>"
        )

    @property
    def max_bytes(self) -> int:
        """The largest encoding accepted."""
        return self._max_bytes

    @property
    def max_depth(self) -> int:
        """The deepest nesting of containers accepted."""
        return self._max_depth

    def register(self, cls: type, *, name: str | None = None) -> None:
        """Allow instances of `cls` in encoded values.

        Registering a class again under the same name does nothing, and so does registering
        a type that is always supported, such as ``datetime``.

        Args:
            cls: A dataclass, pydantic model, msgspec Struct or Enum class.
            name: The name written on the wire; defaults to the class's own
                ``__interlock_name__`` if it sets one, else ``module.QualName``. Give a stable
                name if the class may move to another module while checkpoints still exist.
                Names the class sets in ``__interlock_aliases__`` are read as this class too
                (the names it was stored under before), but never written.

        Raises:
            TypeError: `cls` is not a class of a kind that can be registered.
            ValueError: The name or the class is already registered for something else.
        """
        if not isinstance(cls, type):
            raise TypeError(f"register() takes a class, not {cls!r}")
        if self._checking.supports(cls) and cls not in self._by_cls:
            return  # always supported (list, datetime, UUID, ...): nothing to register
        name = wire_name(cls) if name is None else name
        if not isinstance(name, str) or not name:
            raise ValueError(f"a registered name must be a non-empty str, not {name!r}")
        known = self._by_name.get(name)
        if known is not None and known.cls is cls:
            return
        if known is not None:
            raise ValueError(
                f"cannot register {type_name(cls)} as {name!r}: that name is already taken by "
                f"{type_name(known.cls)}; register one of them with another name=..."
            )
        if cls in self._by_cls:
            raise ValueError(
                f"{type_name(cls)} is already registered as {self._by_cls[cls].name!r}; "
                "a class has one name"
            )
        aliases = wire_aliases(cls)
        for alias in aliases:
            taken = self._by_name.get(alias)
            if taken is not None and taken.cls is not cls:
                raise ValueError(
                    f"cannot register {type_name(cls)} with the alias {alias!r}: that name is "
                    f"already taken by {type_name(taken.cls)}"
                )
        entry = make_entry(cls, name)
        self._by_cls[cls] = entry
        self._by_name[name] = entry
        for alias in aliases:
            self._by_name.setdefault(alias, entry)
        self._trusting.add(entry)
        self._checking.add(entry)

    def is_registered(self, cls: type) -> bool:
        """Say whether the codec encodes instances of exactly `cls`, registered or built in."""
        return self._checking.supports(cls)

    def copy(self) -> Codec:
        """Return a codec with the same limits and an independent copy of the registry."""
        twin = Codec(max_bytes=self._max_bytes, max_depth=self._max_depth)
        for entry in self._by_cls.values():
            twin.register(entry.cls, name=entry.name)
        return twin

    def encode(self, value: object, *, path: str = "value") -> bytes:
        """Encode `value` to bytes that `decode` turns back into an equal value of the same types.

        Args:
            value: The value to encode.
            path: How to name `value` in error messages, e.g. ``state`` or ``interrupt.payload``.

        Raises:
            UnregisteredType: Somewhere in `value` is an instance of a class that is not
                supported or not registered; the message gives its path.
            PayloadTooLarge: The value nests deeper than max_depth (or is cyclic), or its
                encoding is larger than max_bytes.
            SerializationError: A str holds a lone surrogate, which UTF-8 cannot encode.
        """
        try:
            try:
                body = self._encoder.encode(self._trusting.walk(value))
            except OverflowError:
                # Some int does not fit in 64 bits: walk again, checking every int.
                body = self._encoder.encode(self._checking.walk(value))
        except (Unsupported, TooDeep, RecursionError):
            raise self._checking.explain(value, path) from None
        except UnicodeEncodeError as exc:
            raise SerializationError(
                f"{path}: a str cannot be encoded as UTF-8 ({exc.reason}); "
                "remove lone surrogates, e.g. with s.encode('utf-8', 'replace').decode()"
            ) from exc
        size = len(body) + _HEADER.size
        if size > self._max_bytes:
            raise PayloadTooLarge(
                f"{path}: the encoding is {size} bytes, over the limit of {self._max_bytes}; keep "
                "large blobs out of the state or raise the limit with Codec(max_bytes=...)"
            )
        return _HEADER.pack(_MAGIC, _VERSION, zlib.crc32(body)) + body

    def prepare(self, value: object, depth: int = 0) -> Any:
        """Return `value` as `encode` would write it when found `depth` levels deep.

        For a caller that builds a larger value around parts it knows to be plain (dicts with
        str keys, lists, str, int, bool, None) and hands the whole to `encode_prepared`: only
        the parts it does not know are walked. ``depth`` is where the part sits in the whole,
        so that the nesting limit is the one `encode` would apply.

        Raises:
            ValueError: The part holds something `encode` would refuse or walk again (a type
                that is not registered, nesting over the limit); call `encode` on the whole
                instead, which raises the error that names it, or handles it.
        """
        try:
            return self._trusting.any(value, depth)
        except (Unsupported, TooDeep, RecursionError):
            raise ValueError("not encodable as prepared; call encode") from None

    def prepare_tree(self, value: Any, depth: int = 0) -> Any:
        """`prepare` for a part that is most likely a plain JSON tree (an answer schema).

        One C-level census of the whole tree first (`is_plain_tree`): a schema of a few dozen
        small dicts is otherwise walked dict by dict in Python. Anything else is prepared as
        `prepare` does.

        Raises:
            ValueError: As `prepare`.
        """
        kind = type(value)
        if (kind is dict or kind is list) and is_plain_tree(value, self._max_depth - depth):
            return value
        return self.prepare(value, depth)

    def encode_prepared(self, value: Any, *, path: str = "value") -> bytes:
        """Encode a value whose every part is plain or came from `prepare`.

        Raises:
            OverflowError: An int does not fit in 64 bits; call `encode` instead.
            UnicodeEncodeError: A str holds a lone surrogate; `encode` explains it.
            PayloadTooLarge: The encoding is larger than max_bytes.
        """
        body = self._encoder.encode(value)
        if len(body) + _HEADER.size > self._max_bytes:
            raise PayloadTooLarge(
                f"{path}: the encoding is {len(body) + _HEADER.size} bytes, over the limit "
                f"of {self._max_bytes}; keep large blobs out of the state or raise the limit "
                "with Codec(max_bytes=...)"
            )
        return _HEADER.pack(_MAGIC, _VERSION, zlib.crc32(body)) + body

    def decode(self, data: bytes | memoryview, *, checked: bool = False) -> Any:
        """Decode bytes made by `encode`.

        ``checked``: the caller has already checked these very bytes against a checksum
        stored with them (a store's row digest covers them), so their own CRC-32 is not
        computed again; the header and the limits are still checked, and a damaged body that
        slipped through is still refused as malformed, never decoded into anything else.

        Raises:
            CheckpointCorrupt: The data is damaged, was not made by a codec, is over the limits,
                or names a class this codec has not registered. Nothing else is ever raised.
        """
        body = self._body(data, checked)
        try:
            return self._rebuilder.rebuild(self._decoder.decode(body))
        except Corrupt as exc:
            raise CheckpointCorrupt(f"the data is malformed: {exc}") from exc
        except RecursionError as exc:
            raise CheckpointCorrupt("the data nests too deeply to decode") from exc
        except Exception as exc:
            # msgspec errors, a registered constructor refusing the fields, a bad leaf payload:
            # hostile input may cause any of them, and each one means the same thing.
            raise CheckpointCorrupt(f"the data is malformed: {_describe(exc)}") from exc

    def decode_many(
        self, datas: Sequence[bytes | memoryview], *, checked: bool = False
    ) -> list[Any]:
        """Decode several encodings at once: ``[decode(d) for d in datas]``, faster.

        Each encoding is checked and parsed on its own, so no bytes of one can be read as part
        of another; the checks of the parsed values (tags, depth) then run once over the whole
        batch, which for plain data is a handful of C-level passes instead of a Python walk per
        value. Meant for pages of records, such as a page of an inbox.

        Raises:
            CheckpointCorrupt: One of the encodings is bad; the error is the one `decode` raises
                for the first bad encoding.
        """
        parse = self._decoder.decode
        body = self._body
        try:
            return self._rebuilder.rebuild_each([parse(body(data, checked)) for data in datas])
        except Exception:
            # Name the first bad encoding exactly as decode() would.
            for data in datas:
                self.decode(data, checked=checked)
            raise  # each decodes on its own: what the batch hit was not the data's fault

    def decode_page(self, datas: Sequence[bytes | memoryview]) -> list[Any]:
        """`decode_many` for a page of records whose arrays end in the same items.

        When the first encoding is an array (of 2 to 15 items), the bytes of its items after
        the first are its *tail*; every encoding of the page that is an array of as many
        items ending in the same bytes has only its first item parsed, and shares the tail's
        items, decoded once; the others are decoded as `decode` would. Each encoding is still
        checked (header, size, checksum) and parsed on its own. An inbox page of approvals,
        ``[question, schema]`` with one schema, decodes the schema once.

        The shared items are the same objects in every value that has them: treat them as
        read-only.

        Examples:
            >>> from interlock.serde import Codec
            >>> codec = Codec()
            >>> schema = {"type": "boolean"}
            >>> page = codec.decode_page([codec.encode([q, schema]) for q in ("a?", "b?")])
            >>> page == [["a?", schema], ["b?", schema]], page[0][1] is page[1][1]
            (True, True)

        Raises:
            CheckpointCorrupt: One of the encodings is bad; the error is the one `decode`
                raises for the first bad encoding.
        """
        try:
            return self._decode_page(datas)
        except Exception:
            return self.decode_many(datas)  # names the first bad encoding as decode() would

    def _decode_page(self, datas: Sequence[bytes | memoryview]) -> list[Any]:
        first = datas[0] if len(datas) > 1 else None
        if type(first) is not bytes or not 0x92 <= first[_HEADER.size] <= 0x9F:
            return self.decode_many(datas)
        opening = first[_HEADER.size]
        body = self._body(first)
        tail = bytes(body[1 + memoryview(_ITEMS.decode(body)[0]).nbytes :])
        # The tail's items stand where they would in the array they come from: parsed and
        # checked as an array of themselves, at the same depth.
        items = self._decoder.decode(bytes([opening - 1]) + tail)
        if type(items[0]) is Tag:
            return self.decode_many(datas)  # a marker inside an array: let decode refuse it
        shared = self._rebuilder.rebuild(items)
        cut = _HEADER.size + 1
        end = -len(tail) or None
        parse, check = self._decoder.decode, self._body
        heads = self._alike_heads(datas, opening, tail)
        if heads is not None:
            return [[head, *shared] for head in self._rebuilder.rebuild_each(heads, inside=1)]
        heads = []
        alike: list[bool] = []
        others: list[Any] = []
        for data in datas:
            if type(data) is bytes and data[_HEADER.size] == opening and data.endswith(tail):
                # Header, size and checksum checked as for any encoding, then the head parsed:
                # it must be exactly one value (msgpack values delimit themselves), so the
                # encoding is exactly the array [head, *tail].
                check(data)
                heads.append(parse(memoryview(data)[cut:end]))
                alike.append(True)
            else:
                others.append(parse(check(data)))
                alike.append(False)
        rebuilt = iter(self._rebuilder.rebuild_each(heads, inside=1))
        rest = iter(self._rebuilder.rebuild_each(others))
        return [[next(rebuilt), *shared] if is_alike else next(rest) for is_alike in alike]

    def _alike_heads(
        self, datas: Sequence[bytes | memoryview], opening: int, tail: bytes
    ) -> list[Any] | None:
        """The parsed heads of a page all alike, its checks run in C-level passes; else None.

        The same checks as `_body` and `_decode_page`'s loop make one by one: bytes of this
        version, within the size limit, checksum right, the array's header and the tail.
        """
        if set(map(type, datas)) != {bytes}:
            return None
        page = cast("Sequence[bytes]", datas)
        least = _HEADER.size + 1 + len(tail)
        sizes = list(map(len, page))
        if min(sizes) <= least or max(sizes) > self._max_bytes:
            return None
        if (
            set(map(_PREFIX_OF, page)) != {_PREFIX}
            or set(map(_OPENING_OF, page)) != {opening}
            or not all(map(bytes.endswith, page, repeat(tail)))
        ):
            return None
        views = [memoryview(data) for data in page]
        if list(map(zlib.crc32, map(_BODY_OF, views))) != list(map(_U32, map(_CRC_OF, page))):
            return None
        # Each head must be exactly one value: msgpack values delimit themselves, so each
        # encoding is then exactly the array [head, *tail].
        heads = map(operator.itemgetter(slice(_HEADER.size + 1, -len(tail))), views)
        return list(map(self._decoder.decode, heads))

    def clone(self, value: Any) -> Any:
        """Return a deep copy of `value`, equal to ``decode(encode(value))``, that shares nothing.

        Plain data (dicts, lists, str, int, float, bool, None, bytes) is copied by msgspec in
        C; anything else goes through `encode` and `decode`.

        Raises:
            UnregisteredType, PayloadTooLarge, SerializationError: As `encode` would.
        """
        kind = type(value)
        if value is None or kind is str or kind is int or kind is float or kind is bool:
            return value  # immutable: the value is its own copy
        if (kind is dict or kind is list) and is_plain_tree(value, self._max_depth):
            try:
                return self._decoder.decode(self._encoder.encode(value))
            except (OverflowError, UnicodeEncodeError):
                pass  # an int over 64 bits, a lone surrogate: the codec holds or refuses it
        return self.decode(self.encode(value))

    def detach(self, value: Any) -> Any:
        """Return a copy of ``value``, a value this codec decoded, that shares no container.

        Like `clone`, but for values read back from storage, which the codec is known to
        hold: plain data (dicts and lists of str, int, float, bool, None, bytes) has its lists
        and dicts copied and shares its leaves, which are immutable, instead of being written
        out and parsed again. Anything else goes through `clone`.

        Examples:
            >>> from interlock.serde import Codec
            >>> state = {"messages": [{"role": "user", "content": "hi"}]}
            >>> copy = Codec().detach(state)
            >>> copy == state and copy["messages"][0] is not state["messages"][0]
            True
        """
        kind = type(value)
        if (kind is dict or kind is list) and is_plain_tree(value, self._max_depth):
            return copy_tree(value)
        return self.clone(value)

    def _body(self, data: bytes | memoryview, checked: bool = False) -> memoryview:
        """Check the header, size and checksum of an encoding and return its msgpack body.

        ``checked``: the bytes were checked against a checksum of their own (see `decode`).
        """
        # The common case first: bytes of this version, within the limit, checksum right.
        fits = type(data) is bytes and _HEADER.size <= len(data) <= self._max_bytes
        if fits and data[:4] == _PREFIX:
            body = memoryview(data)[_HEADER.size :]
            if checked or zlib.crc32(body) == _CRC.unpack_from(data, 4)[0]:
                return body
        # Otherwise the same checks one by one, each with its own explanation.
        try:
            view = memoryview(data).cast("B")
        except (TypeError, ValueError) as exc:
            raise CheckpointCorrupt(f"expected bytes to decode, got {type(data).__name__}") from exc
        size = view.nbytes
        if size > self._max_bytes:
            raise CheckpointCorrupt(
                f"the data is {size} bytes, over the limit of {self._max_bytes}; if it is "
                "genuine, decode it with a Codec(max_bytes=...) that allows it"
            )
        if size < _HEADER.size or bytes(view[:3]) != _MAGIC:
            raise CheckpointCorrupt(
                f"the data is not an interlock encoding (it starts {bytes(view[:8])!r}); "
                "it is damaged or was written by something else"
            )
        _, version, crc = _HEADER.unpack_from(view)
        if version != _VERSION:
            raise CheckpointCorrupt(
                f"format version {version} is not supported (this codec reads version "
                f"{_VERSION}); the data was written by another version of interlock"
            )
        body = view[_HEADER.size :]
        actual = zlib.crc32(body)
        if actual != crc:
            raise CheckpointCorrupt(
                f"checksum mismatch (stored {crc:#010x}, computed {actual:#010x}): "
                "the data was damaged in storage or in transit"
            )
        return body


def _describe(exc: Exception) -> str:
    try:
        detail = f"{type(exc).__name__}: {exc}"
    except Exception:  # a user exception whose __str__ fails
        detail = type(exc).__name__
    return detail if len(detail) <= 300 else detail[:300] + "..."


DEFAULT_CODEC: Final = Codec()
"""A codec with no registered types."""
