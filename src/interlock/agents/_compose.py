"""Composing agents: in sequence, in parallel, in a loop, under a supervisor, or plan-and-execute.

Each composition is an ordinary graph whose nodes are agents, so a question raised deep inside
(a supervisor's plan-execute agent's executor's gated tool) stops the whole run with its full
address, is answered from the top by id, and continues exactly there. A composition is an
`Agent` itself and composes further.

All of them share one conversation: a child agent starts from the conversation as it is and
hands back the messages it added.

Addresses name every agent on the path, outermost first: a composition runs each child agent
from a node of its own graph under its own ``agent:NAME`` segment, as a `ToolAgent` serves its
calls under ``agent:NAME`` in its tools node. A question in a sequential ``office`` whose
``writer`` waits on a call is at
``node:writer/agent:office/node:tools/agent:writer/tool:write_file:CALL_ID``, whichever
composition (or ``as_tool``) the agents are nested in, and at whatever depth.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Final, TypedDict

from .._errors import GraphDefinitionError, ModelError, ReplyCutShort
from ..graph import END, START, append
from ..runtime import Graph, Segment, child_scope, emit_event, new_id, run_graph, step
from ._agent import AGENT_TYPES, Agent, AgentState, ToolAgent, pending_calls
from ._budget import Budget
from ._events import Transfer
from ._messages import (
    AssistantMessage,
    ConversationItem,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    conversation,
    shown_to_model,
)
from ._models import ChatModel, ToolSpec
from ._policy import ApprovalPolicy
from ._tools import Tool

__all__ = [
    "Loop",
    "Parallel",
    "PlanExecute",
    "Sequential",
    "Supervisor",
    "loop",
    "parallel",
    "plan_execute",
    "sequential",
    "supervisor",
]

TRANSFER: Final = "transfer_to_"


def _children(agents: Sequence[Agent], what: str) -> list[Agent]:
    if isinstance(agents, Agent) or not isinstance(agents, Sequence) or not agents:
        raise TypeError(f"{what}() needs a non-empty list of agents")
    names: set[str] = set()
    for a in agents:
        if not isinstance(a, Agent):
            raise TypeError(f"{what}() takes agents, not {type(a).__name__}")
        if a.name in names:
            raise GraphDefinitionError(f"{what}() got two agents named {a.name!r}")
        names.add(a.name)
    return list(agents)


def _runs(agent: Agent, parent: str) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    """A node of ``parent``'s graph that runs ``agent`` on the shared conversation.

    The agent runs as a child graph of the node's task, under ``agent:PARENT``, so the address
    of anything it asks names ``parent`` above it; it hands back the messages it added. A
    re-run of the task (an answer arrived) continues the agent where it stopped.
    """
    sub = agent.app  # built now: a process that resumes must know the child's graph
    where = Segment("agent", parent)

    async def node(state: Mapping[str, Any]) -> dict[str, Any]:
        given: list[ConversationItem] = list(state.get("messages") or ())
        # How much of the child's conversation it was given: recorded, because a re-run of
        # the task may see more (an edit made at the top while the child waited) while the
        # child goes on with its own copy.
        start: int = await step("given", len, given)
        with child_scope(where):
            values = await run_graph(sub, {"messages": given})
        return {"messages": values.get("messages", [])[start:]}

    node.__name__ = node.__qualname__ = agent.name
    return node


class _Composite(Agent):
    """An agent made of agents (passes outer policies down to them)."""

    def __init__(self, name: str, agents: Sequence[Agent], what: str, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.agents = _children(agents, what)

    def _adopt(self, policy: ApprovalPolicy) -> None:
        self.agents = [a.with_policy(policy) for a in self.agents]

    def step_budget(self) -> int:
        """The budgets of the agents in turn, added, and some to spare."""
        return sum(a.step_budget() for a in self.agents) + 10


class Sequential(_Composite):
    """Agents one after another on the shared conversation (`sequential`)."""

    def __init__(self, agents: Sequence[Agent], *, name: str = "sequential") -> None:
        super().__init__(name, agents, "sequential")

    def build(self) -> Graph[AgentState]:
        """Return the graph that runs the agents one after another."""
        g: Graph[AgentState] = Graph(AgentState, types=AGENT_TYPES, name=self.name)
        prev = START
        for a in self.agents:
            g.add_node(a.name, _runs(a, self.name), metadata={"graph": a.app.plan})
            g.add_edge(prev, a.name)
            prev = a.name
        g.add_edge(prev, END)
        return g


class Parallel(_Composite):
    """Agents side by side, each from the same conversation (`parallel`).

    Their messages are joined in the order the agents are given. A child that finished is
    never run again when a sibling's question is answered.
    """

    def __init__(self, agents: Sequence[Agent], *, name: str = "parallel") -> None:
        super().__init__(name, agents, "parallel")

    def step_budget(self) -> int:
        """The largest budget of the agents (they run side by side), and some to spare."""
        return max(a.step_budget() for a in self.agents) + 10

    def build(self) -> Graph[AgentState]:
        """Return the graph that runs the agents side by side and merges their messages."""
        g: Graph[AgentState] = Graph(AgentState, types=AGENT_TYPES, name=self.name)
        for a in self.agents:
            g.add_node(a.name, _runs(a, self.name), metadata={"graph": a.app.plan})
            g.add_edge(START, a.name)
            g.add_edge(a.name, END)
        return g


class LoopState(TypedDict):
    """A loop's state: the conversation and the passes made."""

    messages: Annotated[list[ConversationItem], append]
    iteration: int


class Loop(_Composite):
    """Agents in sequence, again and again (`loop`)."""

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        max_iterations: int,
        until: Callable[[list[Message]], bool] | None = None,
        name: str = "loop",
    ) -> None:
        super().__init__(name, agents, "loop")
        if not isinstance(max_iterations, int) or isinstance(max_iterations, bool):
            raise TypeError("max_iterations must be an int")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, not {max_iterations}")
        if until is not None and not callable(until):
            raise TypeError("until must be callable: until(messages) -> bool")
        self.max_iterations = max_iterations
        self.until = until

    def step_budget(self) -> int:
        """The budget of one iteration, times the most iterations."""
        return self.max_iterations * (super().step_budget() + 1)

    def build(self) -> Graph[LoopState]:
        """Return the graph that runs the agents in turn until one stops the loop."""
        g: Graph[LoopState] = Graph(LoopState, types=AGENT_TYPES, name=self.name)
        prev = START
        for a in self.agents:
            g.add_node(a.name, _runs(a, self.name), metadata={"graph": a.app.plan})
            g.add_edge(prev, a.name)
            prev = a.name
        g.add_node("next_iteration", lambda s: {"iteration": (s.get("iteration") or 0) + 1})
        g.add_edge(prev, "next_iteration")
        first = self.agents[0].name

        def again(state: Mapping[str, Any]) -> str:
            if (state.get("iteration") or 0) >= self.max_iterations:
                return END
            if self.until is not None and self.until(conversation(state.get("messages") or ())):
                return END
            return first

        g.add_conditional_edges("next_iteration", again, [first, END])
        return g


def sequential(agents: Sequence[Agent], *, name: str = "sequential") -> Sequential:
    """Run agents one after another on the shared conversation."""
    return Sequential(agents, name=name)


def parallel(agents: Sequence[Agent], *, name: str = "parallel") -> Parallel:
    """Run agents side by side from the same conversation; join what they add."""
    return Parallel(agents, name=name)


def loop(
    agents: Sequence[Agent],
    *,
    max_iterations: int,
    until: Callable[[list[Message]], bool] | None = None,
    name: str = "loop",
) -> Loop:
    """Run agents in sequence, ``max_iterations`` times or until ``until(messages)`` holds."""
    return Loop(agents, max_iterations=max_iterations, until=until, name=name)


# -- supervisor ---------------------------------------------------------------------------------


class Supervisor(ToolAgent):
    """A model that hands the conversation to sub-agents and writes the final answer.

    Each sub-agent is offered to the model as a tool ``transfer_to_<name>``; calling it gives
    the sub-agent the conversation, and when the sub-agent answers, control comes back to the
    supervisor. The supervisor may also have tools of its own. ``policy`` covers them and, as
    an outer policy, every tool of every agent beneath it.
    """

    def __init__(
        self,
        model: ChatModel,
        agents: Sequence[Agent],
        *,
        name: str = "supervisor",
        tools: Sequence[Tool] = (),
        policy: ApprovalPolicy | None = None,
        system: str | None = None,
        max_turns: int = 25,
        budget: Budget | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(
            name,
            model,
            tools,
            system=system,
            max_turns=max_turns,
            budget=budget,
            description=description,
        )
        self.agents = _children(agents, "supervisor")
        clash = [a.name for a in self.agents if f"{TRANSFER}{a.name}" in self.tools]
        if clash or any(a.name in ("model", "tools") for a in self.agents):
            raise GraphDefinitionError(
                f"supervisor {name!r}: sub-agent names {clash or ['model/tools']} clash with "
                "its own tools or nodes; rename them"
            )
        if policy is not None:  # over its own tools and everything beneath, like with_policy
            if not isinstance(policy, ApprovalPolicy):
                raise TypeError(f"policy must be an ApprovalPolicy, not {type(policy).__name__}")
            self._outer = (policy,)
            self._adopt(policy)

    def _adopt(self, policy: ApprovalPolicy) -> None:
        super()._adopt(policy)
        self.agents = [a.with_policy(policy) for a in self.agents]

    def step_budget(self) -> int:
        """The supervisor's own budget plus each worker agent's."""
        return super().step_budget() + sum(a.step_budget() for a in self.agents)

    def transfer_specs(self) -> list[ToolSpec]:
        """The transfer tools the model is offered, one per sub-agent."""
        return [
            ToolSpec(
                name=f"{TRANSFER}{a.name}",
                description=a.description or f"Hand the conversation to the {a.name} agent.",
                parameters={"type": "object", "properties": {}, "additionalProperties": False},
            )
            for a in self.agents
        ]

    def build(self) -> Graph[AgentState]:
        """Return the graph: the supervisor's model, its tools, and the hand-offs to the agents."""
        g: Graph[AgentState] = Graph(AgentState, types=AGENT_TYPES, name=self.name)
        g.add_node("model", self.supervise)
        g.add_node("tools", self.tools_node, metadata={"tools": self.tool_marks()})
        names = {a.name for a in self.agents}
        for a in self.agents:
            g.add_node(a.name, _runs(a, self.name), metadata={"graph": a.app.plan})
            g.add_edge(a.name, "model")
        g.add_edge(START, "model")

        def route(state: Mapping[str, Any]) -> str:
            messages = conversation(state.get("messages") or ())
            target = _transfer_of(messages, self.name)
            if target in names:
                return target
            return "tools" if pending_calls(messages) else END

        g.add_conditional_edges("model", route, [*(a.name for a in self.agents), "tools", END])
        g.add_edge("tools", "model")
        return g

    async def supervise(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The supervisor's turn: reply, and answer a transfer call by handing over."""
        messages = conversation(state.get("messages") or ())
        last = messages[-1] if messages else None
        if isinstance(last, AssistantMessage) and last.name and last.name != self.name:
            emit_event(Transfer(source=last.name, target=self.name))
        specs = [*self.transfer_specs(), *(t.spec for t in self.tools.values())]
        reply = await self.turn(state, specs)
        transfers = [c for c in reply.tool_calls if c.name.startswith(TRANSFER)]
        if not transfers:
            return {"messages": [reply]}
        target = transfers[0].name.removeprefix(TRANSFER)
        known = {a.name for a in self.agents}
        out: list[ConversationItem] = [reply]
        handed = False
        for c in reply.tool_calls:
            if c is transfers[0] and target in known:
                out.append(_tool_answer(c, f"Transferred to {target}."))
                handed = True
            elif c.name.startswith(TRANSFER):
                why = (
                    f"No agent named {c.name.removeprefix(TRANSFER)!r}; agents: {sorted(known)}."
                    if c.name.removeprefix(TRANSFER) not in known
                    else "Only one transfer per reply; this one was not made."
                )
                out.append(_tool_answer(c, why, "error"))
            else:
                out.append(
                    _tool_answer(c, "Not run: control was transferred in the same reply.", "error")
                )
        if handed:
            emit_event(Transfer(source=self.name, target=target))
        return {"messages": out}


def _tool_answer(call: ToolCall, content: str, status: Any = "ok") -> ToolMessage:
    return ToolMessage(
        content=content, tool_call_id=call.id, name=call.name, status=status, id=new_id()
    )


def _transfer_of(messages: Sequence[Message], supervisor: str) -> str | None:
    """The agent the supervisor's last reply handed over to, if it did (and it succeeded)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            if m.name != supervisor:
                return None
            ok = {
                t.tool_call_id
                for t in messages[i + 1 :]
                if isinstance(t, ToolMessage) and t.status == "ok"
            }
            for c in m.tool_calls:
                if c.name.startswith(TRANSFER) and c.id in ok:
                    return c.name.removeprefix(TRANSFER)
            return None
    return None


def supervisor(
    model: ChatModel,
    agents: Sequence[Agent],
    *,
    name: str = "supervisor",
    tools: Sequence[Tool] = (),
    policy: ApprovalPolicy | None = None,
    system: str | None = None,
    max_turns: int = 25,
    budget: Budget | None = None,
    description: str | None = None,
) -> Supervisor:
    """A supervisor over ``agents`` (see `Supervisor`)."""
    return Supervisor(
        model,
        agents,
        name=name,
        tools=tools,
        policy=policy,
        system=system,
        max_turns=max_turns,
        budget=budget,
        description=description,
    )


# -- plan and execute ---------------------------------------------------------------------------


class PlanState(TypedDict, total=False):
    """A plan-execute agent's state: the conversation, the plan and the steps done."""

    messages: Annotated[list[ConversationItem], append]
    plan: list[str]
    done: Annotated[list[list[str]], append]
    """``[step, result]`` pairs, in order."""


_PLAN: Final = ToolSpec(
    name="plan",
    description="Set the plan: the steps still to do, in order.",
    parameters={
        "type": "object",
        "properties": {"steps": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["steps"],
        "additionalProperties": False,
    },
)
_RESPOND: Final = ToolSpec(
    name="respond",
    description="Finish: give the final answer to the user.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    },
)


class PlanExecute(Agent):
    """A planner writes a plan, an executor does it step by step, a replanner revises or answers.

    Built by `plan_execute`.

    The planner and the replanner are models that answer through tools: ``plan(steps)``, and
    for the replanner also ``respond(answer)``. The executor is any agent; each step is one run
    of it on a request naming the step. A step's question (the executor's gated tool) stops the
    whole agent; answering it continues that step, and the planner is not called again.
    """

    def __init__(
        self,
        planner: ChatModel,
        executor: Agent,
        replanner: ChatModel | None = None,
        *,
        name: str = "plan_execute",
        max_steps: int = 10,
        description: str | None = None,
    ) -> None:
        super().__init__(name, description=description)
        for label, m in (("planner", planner), ("replanner", replanner)):
            if m is not None and not callable(getattr(m, "generate", None)):
                raise TypeError(f"{label} must be a ChatModel, not {type(m).__name__}")
        if not isinstance(executor, Agent):
            raise TypeError(f"executor must be an Agent, not {type(executor).__name__}")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, not {max_steps!r}")
        self.planner = planner
        self.executor = executor
        self.replanner = replanner
        self.max_steps = max_steps

    def _adopt(self, policy: ApprovalPolicy) -> None:
        self.executor = self.executor.with_policy(policy)

    def step_budget(self) -> int:
        """Three supersteps per planned step, and some to spare."""
        return 3 * self.max_steps + 10

    def build(self) -> Graph[PlanState]:
        """Return the graph that plans, executes each step, and replans."""
        # The executor's graph, built now: a process that resumes must know it to deliver an
        # answer into the step that stopped.
        executor = self.executor.app
        g: Graph[PlanState] = Graph(PlanState, types=AGENT_TYPES, name=self.name)
        g.add_node("plan", self.plan_node)
        g.add_node("execute", self.execute_node, metadata={"graph": executor.plan})
        g.add_node("replan", self.replan_node)
        g.add_edge(START, "plan")
        g.add_conditional_edges("plan", self._after_plan, ["execute", END])
        g.add_edge("execute", "replan")
        g.add_conditional_edges("replan", self._after_plan, ["execute", END])
        return g

    def _after_plan(self, state: Mapping[str, Any]) -> str:
        if not state.get("plan") or len(state.get("done") or ()) >= self.max_steps:
            return END
        return "execute"

    async def plan_node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the planner for the plan."""
        messages = shown_to_model(state.get("messages") or [])
        reply = await self._ask(self.planner, messages, [_PLAN], "planner")
        steps = _steps_of(reply)
        shown = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        note = AssistantMessage(content=f"Plan:\n{shown}", name=self.name, id=new_id())
        return {"plan": steps, "messages": [note]}

    async def execute_node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Run the executor on the plan's first step."""
        plan: list[str] = list(state.get("plan") or ())
        done = state.get("done") or []
        step = plan[0]
        context = "\n".join(f"- {s}: {r}" for s, r in done)
        request = f"Do this step: {step}" + (f"\n\nDone so far:\n{context}" if context else "")
        with child_scope(Segment("agent", self.name)):
            asked = {"messages": [UserMessage(content=request)]}
            values = await run_graph(self.executor.app, asked)
        result = _final_text(values.get("messages") or ()) or ""
        note = AssistantMessage(content=result, name=self.executor.name, id=new_id())
        return {"plan": plan[1:], "done": [[step, result]], "messages": [note]}

    async def replan_node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the replanner to revise the rest of the plan or to answer."""
        plan: list[str] = list(state.get("plan") or ())
        done = state.get("done") or []
        if self.replanner is None:
            if plan and len(done) < self.max_steps:
                return {}
            answer = done[-1][1] if done else ""
            return {"plan": [], "messages": [self._final(answer)]}
        messages = shown_to_model(state.get("messages") or [])
        summary = "\n".join(f"- {s}: {r}" for s, r in done)
        rest = "\n".join(f"- {s}" for s in plan) or "(nothing)"
        ask = UserMessage(
            content=f"Steps done:\n{summary}\n\nSteps left:\n{rest}\n\n"
            "Call plan(steps) with the steps still to do, or respond(answer) to finish."
        )
        reply = await self._ask(self.replanner, [*messages, ask], [_PLAN, _RESPOND], "replanner")
        for c in reply.tool_calls:
            if c.name == "respond":
                return {"plan": [], "messages": [self._final(str(c.arguments.get("answer", "")))]}
        if any(c.name == "plan" for c in reply.tool_calls):
            return {"plan": _steps_of(reply)}
        return {"plan": [], "messages": [self._final(reply.content or "")]}

    def _final(self, answer: str) -> AssistantMessage:
        return AssistantMessage(content=answer, name=self.name, id=new_id())

    async def _ask(
        self, model: ChatModel, messages: Sequence[Message], specs: list[ToolSpec], role: str
    ) -> AssistantMessage:
        reply = await model.generate(messages, specs)
        endpoint = str(getattr(model, "endpoint", type(model).__name__))
        if not isinstance(reply, AssistantMessage):
            raise ModelError(
                f"the {role} of {self.name!r} returned {type(reply).__name__}, not an "
                "AssistantMessage",
                endpoint=endpoint,
            )
        # A plan cut by the token limit is a plan with steps (or their arguments) missing:
        # never a plan to run, whatever the executor's `cut_replies` says.
        if reply.finish_reason == "length":
            raise ReplyCutShort(
                f"the {role} of {self.name!r} at {endpoint} stopped at its token limit "
                "(finish_reason 'length'), so its plan may miss steps; raise the model's "
                "max_tokens (or max_completion_tokens) or shorten the conversation, then "
                "resume the thread",
                endpoint=endpoint,
                agent=self.name,
                content=reply.content,
            )
        return reply


def _steps_of(reply: AssistantMessage) -> list[str]:
    for c in reply.tool_calls:
        if c.name == "plan":
            steps = c.arguments.get("steps")
            if isinstance(steps, list) and steps and all(isinstance(s, str) for s in steps):
                return [s for s in steps if s.strip()]
    text = (reply.content or "").strip()
    return [text] if text else []


def _final_text(items: Sequence[ConversationItem]) -> str | None:
    for m in reversed(conversation(items)):
        if isinstance(m, AssistantMessage) and m.content:
            return m.content
    return None


def plan_execute(
    planner: ChatModel,
    executor: Agent,
    replanner: ChatModel | None = None,
    *,
    name: str = "plan_execute",
    max_steps: int = 10,
    description: str | None = None,
) -> PlanExecute:
    """A plan-execute agent (see `PlanExecute`)."""
    return PlanExecute(
        planner, executor, replanner, name=name, max_steps=max_steps, description=description
    )
