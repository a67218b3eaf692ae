"""The graph definition layer: state schemas, reducers, nodes, edges and the frozen plan.

Nothing here runs a graph: the runtime (`interlock.runtime`) executes the `CompiledGraph` this
layer produces, and `interlock.Graph` (the builder plus ``compile``) lives there.
"""

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

__all__ = [
    "END",
    "START",
    "CompiledGraph",
    "Durability",
    "GraphBuilder",
    "NodeSpec",
    "Reducer",
    "Subgraph",
    "append",
    "merge",
]
