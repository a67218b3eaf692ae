"""The graph definition layer: state schemas, reducers, nodes, edges and the frozen plan.

Nothing here runs a graph: the runtime (`interlock.runtime`) executes the `CompiledGraph` this
layer produces, and `interlock.Graph` (the builder plus ``compile``) lives there.
"""

from .._public import publish
from ._builder import END as END
from ._builder import START as START
from ._builder import CompiledGraph as CompiledGraph
from ._builder import Durability as Durability
from ._builder import GraphBuilder as GraphBuilder
from ._builder import NodeSpec as NodeSpec
from ._builder import Subgraph as Subgraph
from ._channels import Reducer as Reducer
from ._channels import append as append
from ._channels import merge as merge
from ._chunks import FinishReason as FinishReason
from ._chunks import MessageChunk as MessageChunk
from ._chunks import ToolCallChunk as ToolCallChunk
from ._chunks import Usage as Usage
from ._chunks import join_message_chunks as join_message_chunks
from ._concat import concat as concat
from ._concat import register_concat as register_concat
from ._draw import Mark as Mark
from ._draw import node_path as node_path

__all__ = [
    "END",
    "START",
    "CompiledGraph",
    "Durability",
    "FinishReason",
    "GraphBuilder",
    "Mark",
    "MessageChunk",
    "NodeSpec",
    "Reducer",
    "Subgraph",
    "ToolCallChunk",
    "Usage",
    "append",
    "concat",
    "join_message_chunks",
    "merge",
    "node_path",
    "register_concat",
]

publish(__name__, globals(), __all__)
