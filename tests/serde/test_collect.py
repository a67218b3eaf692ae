"""`collect_types` finds every class a state annotation needs registered."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import uuid
from typing import (
    Annotated,
    Generic,
    Literal,
    NewType,
    NotRequired,
    Optional,
    TypedDict,
    TypeVar,
    Union,
)

import msgspec
import pydantic

from interlock.serde import Codec, collect_types

T = TypeVar("T")


class Status(enum.StrEnum):
    OPEN = "open"
    DONE = "done"


class Priority(enum.IntEnum):
    LOW = 1


class Kind(enum.Enum):
    A = "a"


@dataclasses.dataclass
class Attachment:
    name: str
    kind: Kind


@dataclasses.dataclass(frozen=True)
class Message:
    text: str
    attachments: tuple[Attachment, ...] = ()
    reply_to: Message | None = None  # self-reference
    sent: dt.datetime | None = None


class Tool(msgspec.Struct):
    name: str
    priority: Priority


class Review(pydantic.BaseModel):
    status: Status
    notes: list[Note] = []


class Note(pydantic.BaseModel):
    body: str
    review: Review | None = None  # mutual recursion with Review


Review.model_rebuild()


@dataclasses.dataclass
class Box(Generic[T]):
    item: T


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Palette:
    colors: list[Color]


@dataclasses.dataclass
class Partly:
    known: Attachment
    unknown: DoesNotExist  # type: ignore[name-defined]  # noqa: F821


class Plain:
    """Not registrable: never returned."""


UserId = NewType("UserId", uuid.UUID)
BoxedTool = NewType("BoxedTool", Tool)


def reducer(current: list[Message], update: list[Message]) -> list[Message]:
    return current + update


class Inner(TypedDict):
    tool: Tool
    label: Literal["x", "y"]


class State(TypedDict):
    messages: Annotated[list[Message], reducer]
    tools: dict[str, Tool]
    review: Optional[Review]  # noqa: UP045 - the old spelling must work too
    by_id: dict[UserId, Union[Palette, None]]  # noqa: UP007
    inner: NotRequired[Inner]
    boxes: list[Box[Attachment]]
    count: int
    when: dt.date
    money: decimal.Decimal
    plain: Plain


def test_state_typeddict_yields_every_registrable_class() -> None:
    found = collect_types(State)
    assert found == {
        Message,
        Attachment,
        Kind,
        Tool,
        Priority,
        Review,
        Note,
        Status,
        Palette,
        Color,
        Box,
    }
    assert State not in found and Inner not in found and Plain not in found


def test_containers_unions_and_wrappers() -> None:
    assert collect_types(list[Tool]) == {Tool, Priority}
    assert collect_types(dict[Kind, list[Status]]) == {Kind, Status}
    assert collect_types(tuple[Color, ...]) == {Color}
    assert collect_types(tuple[int, Color]) == {Color}
    assert collect_types(frozenset[Color] | None) == {Color}
    assert collect_types(Optional[Color]) == {Color}  # noqa: UP045
    assert collect_types(Union[Color, Kind, None]) == {Color, Kind}  # noqa: UP007
    assert collect_types(Annotated[Color, "metadata", reducer]) == {Color}
    assert collect_types(BoxedTool) == {Tool, Priority}
    assert collect_types(Box[Color]) == {Box, Color}


def test_builtins_and_always_supported_types_are_not_returned() -> None:
    for annotation in (
        int,
        str,
        bytes,
        None,
        list[int],
        dict[str, list[float]],
        dt.datetime,
        dt.timedelta,
        uuid.UUID,
        decimal.Decimal,
        UserId,
        Literal["a", "b"],
        Plain,
        "Message",
        T,
    ):
        assert collect_types(annotation) == set(), annotation


def test_recursive_classes_terminate() -> None:
    assert collect_types(Message) == {Message, Attachment, Kind}
    assert collect_types(Note) == {Note, Review, Status}


def test_unresolvable_forward_references_are_skipped() -> None:
    assert collect_types(Partly) == {Partly, Attachment, Kind}


def test_collected_types_make_the_state_encodable() -> None:
    codec = Codec(types=collect_types(State))
    state = {
        "messages": [
            Message("hi", (Attachment("a.png", Kind.A),), reply_to=Message("earlier")),
        ],
        "tools": {"search": Tool("search", Priority.LOW)},
        "review": Review(status=Status.OPEN, notes=[Note(body="ok")]),
        "by_id": {UserId(uuid.UUID(int=1)): Palette([Color.RED]), UserId(uuid.UUID(int=2)): None},
        "inner": {"tool": Tool("x", Priority.LOW), "label": "x"},
        "boxes": [Box(Attachment("b", Kind.A))],
        "count": 1,
        "when": dt.date(2024, 1, 1),
        "money": decimal.Decimal("1.10"),
    }
    assert codec.decode(codec.encode(state, path="state")) == state
