"""Graph building: state schemas, reducers, nodes, edges and the compiled plan."""

from ._builder import END as END
from ._builder import START as START
from ._builder import CompiledGraph as CompiledGraph
from ._builder import Durability as Durability
from ._builder import Graph as Graph
from ._channels import Reducer as Reducer
from ._channels import append as append
from ._channels import merge as merge

__all__ = ["END", "START", "CompiledGraph", "Durability", "Graph", "Reducer", "append", "merge"]
