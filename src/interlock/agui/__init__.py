"""AG-UI: an interlock agent for any AG-UI front-end, its approvals intact.

Needs the ``agui`` extra (``pip install 'interlock[agui]'``). `AGUIEndpoint` is an ASGI
application: a front-end (``@ag-ui/client``'s ``HttpAgent``, CopilotKit...) POSTs a
``RunAgentInput`` and reads the run as AG-UI events. A question ends the run with an
``interrupt`` outcome, one interrupt per pending question (its id the interlock interrupt id,
its ``metadata["interlock"]`` what the web inbox shows); the next run's ``resume`` entries answer
them, decided by the caller under the questions' authority, exactly once.

A sketch (the AG-UI how-to guide runs one)::

    from interlock.agui import agui_app

    api = agui_app(agent.compile(store=SqliteStore("agents.db")), auth=auth)
"""

from __future__ import annotations

from .._public import publish
from ._endpoint import AGUIEndpoint, agui_app
from ._errors import RefusalCode, RunRefused
from ._run import AGUIRun

__all__ = ["AGUIEndpoint", "AGUIRun", "RefusalCode", "RunRefused", "agui_app"]

publish(__name__, globals(), __all__)
