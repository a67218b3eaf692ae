"""A2A: interlock agents served to other agents, and remote agents called as tools.

Needs the ``a2a`` extra (``pip install 'interlock[a2a]'``, the official ``a2a-sdk``). Serve an
agent (a sketch; the A2A how-to guide runs one)::

    from interlock.a2a import a2a_app, agent_card

    app = agent.compile(store=SqliteStore("agent.db"))
    card = agent_card(agent, url="http://127.0.0.1:8000/")
    asgi = a2a_app(app, card, auth=TokenAuth.from_file("tokens.toml"))   # uvicorn, or Mount it

A task is a thread (of the same id); a question makes the task ``auth-required`` (a tool call
waiting for approval) or ``input-required``, and a message on the task answers it through
`App.decide`, with the caller's identity as the actor.

Call a remote agent as a tool (a sketch: the how-to guide runs one)::

    from interlock.a2a import remote_agent

    deployer = remote_agent("deployer", "http://deploy.example:8000/")
    agent = ToolAgent("ops", model, [deployer], policy=policy)

When the remote task asks (``input-required`` / ``auth-required``), the question is asked here,
at ``.../tool:deployer:CALL/a2a:TASK``, and its answer is sent to the remote task.
"""

from __future__ import annotations

from .._public import publish
from ._call import (
    A2ACallError,
    RemoteAgentUnreachable,
    RemoteTaskFailed,
    RemoteTaskLost,
    remote_agent,
)
from ._serve import InterlockExecutor, a2a_app, agent_card
from ._serve_answers import DECISIONS
from ._serve_tasks import ThreadTasks

__all__ = [
    "DECISIONS",
    "A2ACallError",
    "InterlockExecutor",
    "RemoteAgentUnreachable",
    "RemoteTaskFailed",
    "RemoteTaskLost",
    "ThreadTasks",
    "a2a_app",
    "agent_card",
    "remote_agent",
]

publish(__name__, globals(), __all__)
