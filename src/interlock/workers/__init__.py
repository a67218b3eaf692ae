"""Workers: an App's runs spread over worker processes on many machines sharing one PostgreSQL.

Built on procrastinate (PostgreSQL-based task processing); needs the ``worker`` extra (a
sketch of the commands; the workers how-to guide runs them)::

    pip install 'interlock[worker]'
    interlock worker --app myapp:app

See `Workers` and docs/scale.md.
"""

from .._public import publish
from ._workers import Workers

__all__ = ["Workers"]

publish(__name__, globals(), __all__)
