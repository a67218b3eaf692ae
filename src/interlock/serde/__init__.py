"""Safe, fast encoding of checkpoint state and payloads.

`Codec` turns values into checksummed msgpack bytes and back. Decoding never unpickles, imports
or evaluates anything: it only constructs classes registered with the codec, and any damaged or
hostile input raises `interlock.CheckpointCorrupt`.
"""

from __future__ import annotations

from .._public import publish
from ._codec import DEFAULT_CODEC as DEFAULT_CODEC
from ._codec import Codec as Codec
from ._collect import collect_types as collect_types

__all__ = [
    "DEFAULT_CODEC",
    "Codec",
    "collect_types",
]

publish(__name__, globals(), __all__)
