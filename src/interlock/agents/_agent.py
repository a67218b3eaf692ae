"""`Agent`, the base of every agent, and `ToolAgent`: a model that calls tools under a policy.

An agent *is* a graph: ``agent.compile(store=...)`` returns an ordinary `App`, so it
checkpoints, interrupts, resumes, pauses and streams like any graph, and it can be a node of
another graph. A `ToolAgent` has two nodes, ``model`` and ``tools``: the model replies; while the
reply calls tools, the tools node serves the calls (concurrently) and the model replies again.

Serving one call, in order: the arguments are checked against the tool's schema; the policy
decides (its verdict is recorded, so a re-run gets the same one); a call that needs approval
asks a person with an interrupt at ``agent:NAME/tool:TOOL:CALL_ID``; the call runs with the
stored (or the person's edited) arguments, at most once when it is dangerous. Whatever happens
— success, an error, a rejection — the model reads it as the call's tool message.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Annotated, Any, Final, Literal, TypedDict

import msgspec

from .._errors import (
    GraphDefinitionError,
    InterlockError,
    ModelError,
    ReplyCutShort,
    StoreError,
    ThreadBusy,
    ToolError,
)
from ..graph import END, START, Mark, append
from ..runtime import (
    Address,
    App,
    Authority,
    Child,
    Graph,
    Price,
    Segment,
    approval_interrupt,
    child_scope,
    current_address,
    current_usage,
    effect,
    emit_event,
    gather_children,
    interrupt,
    keep_limits,
    listening,
    new_id,
    report_usage,
    run_graph,
    step,
)
from ..stores import Store
from ._budget import (
    BUDGET_TOOL,
    Budget,
    current_limits,
    describe,
    grant_key,
    limits_schema,
    proposal,
    reached,
    used,
    with_raised,
)
from ._decisions import (
    APPROVAL,
    APPROVING,
    Approve,
    Edit,
    Reject,
    Respond,
    ToolDecision,
    decision_schema,
    parse_decision,
)
from ._events import AssistantTurn, TextDelta, ToolCallEvent, ToolChunk, ToolResult
from ._messages import (
    AssistantMessage,
    ConversationItem,
    Message,
    RemoveMessage,
    ReplaceMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolStatus,
    Usage,
    UserMessage,
    conversation,
    folded,
    folded_shown,
    message_from_chunks,
)
from ._models import ChatModel, ToolSpec
from ._policy import ApprovalPolicy, Verdict, strictest
from ._tools import ArgumentsError, Tool, result_text

__all__ = ["AGENT_TYPES", "Agent", "AgentState", "AgentTool", "ToolAgent"]

_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_SAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")
_LABEL: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
ToolErrors = Literal["message", "raise"]
CutReplies = Literal["raise", "keep"]
"""What an agent does with a reply cut short by the token limit: fail the run with
`ReplyCutShort`, or keep the reply (marked ``finish_reason="length"``) and go on."""


class AgentState(TypedDict):
    """The state every agent graph shares: its conversation (messages and edits)."""

    messages: Annotated[list[ConversationItem], append]


AGENT_TYPES: Final[tuple[type[Any], ...]] = (
    SystemMessage,
    UserMessage,
    AssistantMessage,
    ToolMessage,
    ToolCall,
    Usage,
    ReplaceMessage,
    RemoveMessage,
    Approve,
    Reject,
    Edit,
    Respond,
    Verdict,
    Authority,
)
"""Types an agent's checkpoints hold (registered with every agent graph's codec)."""


class Agent:
    """What every agent is: a named graph over a conversation.

    Subclasses implement `build`. ``compile`` makes it runnable; ``as_tool`` offers it to
    another agent; ``with_policy`` puts every tool beneath it under one more policy.
    """

    def __init__(self, name: str, *, description: str | None = None) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"agent name {name!r} is not valid: use 1 to 48 letters, digits, '_' or '-' "
                "(it becomes part of tool names and addresses)"
            )
        if description is not None and not isinstance(description, str):
            raise TypeError("description must be a str")
        self.name = name
        self.description = description
        self._outer: tuple[ApprovalPolicy, ...] = ()
        self._app: App[AgentState] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def build(self) -> Graph[Any]:
        """Return the agent's graph (a new builder each call)."""
        raise NotImplementedError

    def compile(
        self,
        *,
        store: Store | None = None,
        durability: Literal["sync", "exit"] = "sync",
        lease_ttl: float = 30.0,
        recursion_limit: int | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> App[AgentState]:
        """Return the agent as a runnable `App` on ``store`` (see `Graph.compile`).

        Its input is ``{"messages": [...]}``; ``recursion_limit`` defaults to what the
        agent's turn bounds need; ``prices`` (``{model: Price}``) give its threads' usage a
        cost.
        """
        app: App[AgentState] = self.build().compile(
            store=store,
            durability=durability,
            lease_ttl=lease_ttl,
            recursion_limit=recursion_limit or self.step_budget(),
            prices=prices,
        )
        return app

    @property
    def app(self) -> App[AgentState]:
        """The agent compiled on an in-memory store (what a parent graph runs as its node)."""
        if self._app is None:
            self._app = self.compile()
        return self._app

    def step_budget(self) -> int:
        """How many supersteps one run of the agent may need (its default recursion limit)."""
        return 100

    def with_policy(self, policy: ApprovalPolicy) -> Agent:
        """A copy of this agent with one more policy over its tools and every tool beneath it.

        Where policies disagree, the stricter verdict wins.
        """
        if not isinstance(policy, ApprovalPolicy):
            raise TypeError(f"with_policy() takes an ApprovalPolicy, not {type(policy).__name__}")
        twin = copy.copy(self)
        twin._outer = (*self._outer, policy)
        twin._app = None
        twin._adopt(policy)
        return twin

    def _adopt(self, policy: ApprovalPolicy) -> None:
        """Pass an outer policy down to the agents beneath (subclasses with children)."""

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool of another agent.

        The model sends a request; the agent's final answer comes back. The agent's own tools
        keep its policy, and its questions reach the top.
        """
        return AgentTool(self, name=name, description=description)

    def draw(
        self,
        *,
        marks: Mapping[str, Mark] | None = None,
        show_tool: Callable[[str], bool] | None = None,
    ) -> str:
        """The agent's graph as Mermaid text (see `App.draw`), with the agents and tools
        beneath it drawn inside; ``marks`` (node path → `Mark`) show where a thread stands, and
        ``show_tool`` picks the tools shown, by name (see `CompiledGraph.draw`)."""
        return self.app.draw(marks=marks, show_tool=show_tool)


class AgentTool(Tool):
    """An agent offered as a tool (`Agent.as_tool`).

    The call runs the agent as a child graph of the calling task: when a tool deep inside it
    waits for a person, the call waits too, and an answer continues the agent where it stopped.
    """

    __slots__ = ("agent",)

    def __init__(self, agent: Agent, *, name: str | None, description: str | None) -> None:
        self.agent = agent
        parameters = {
            "type": "object",
            "properties": {
                "request": {"type": "string", "description": f"What to ask {agent.name}."}
            },
            "required": ["request"],
            "additionalProperties": False,
        }
        sub = agent.app  # built now: a process that resumes must know the child's graph

        async def ask(request: str) -> str:
            values = await run_graph(sub, {"messages": [UserMessage(content=request)]})
            return _last_answer(values.get("messages", ())) or ""

        super().__init__(
            name or agent.name,
            description or agent.description or f"Hand a request to the {agent.name} agent.",
            parameters,
            ask,
            dangerous=False,  # its own tools are recorded as effects; the call itself asks
        )

    def under(self, policy: ApprovalPolicy) -> AgentTool:
        """The same tool over the agent with ``policy`` added beneath."""
        return AgentTool(
            self.agent.with_policy(policy), name=self.name, description=self.description
        )


def _last_answer(items: Iterable[ConversationItem]) -> str | None:
    for m in reversed(conversation(items)):
        if isinstance(m, AssistantMessage) and m.content:
            return m.content
    return None


class ToolAgent(Agent):
    """A model that calls tools, under an approval policy, until it answers.

    Args:
        name: The agent's name (in addresses: ``agent:NAME/tool:TOOL:CALL_ID``).
        model: Any `ChatModel`.
        tools: `Tool`s (``@tool`` functions, MCP tools, ``agent.as_tool()``).
        policy: Which calls run, wait for approval, or are refused (default: all run).
        system: The system prompt, put before the conversation on every model call (it is
            configuration, not state: it is not stored in checkpoints).
        max_turns: Most model replies per user message; after that the agent stops with a
            message saying so.
        stream: Call the model's ``stream`` and report text as it comes (`TextDelta`).
        tool_errors: ``"message"``: a failing call (bad arguments, an exception in the tool)
            is answered to the model as an error; ``"raise"``: the run fails with `ToolError`.
        cut_replies: A reply that ended on the model's token limit (``finish_reason`` is
            ``"length"``) is half an answer: ``"raise"`` (the default) fails the run with
            `ReplyCutShort` before anything acts on it (the thread stays at its last
            checkpoint; a resume asks the model again); ``"keep"`` keeps it, marked, as the
            agent's reply.
        description: What the agent does (for supervisors and ``as_tool``).

    Examples:
        >>> from interlock.agents import ScriptedModel, ToolAgent, call, tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> agent = ToolAgent("calc", ScriptedModel([call("add", {"a": 2, "b": 3}), "5"]), [add])
        >>> result = agent.compile().run_sync({"messages": ["what is 2+3?"]}, thread="t")
        >>> result.values["messages"][-1].content
        '5'
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        tools: Sequence[Tool] = (),
        *,
        policy: ApprovalPolicy | None = None,
        system: str | None = None,
        max_turns: int = 25,
        stream: bool = False,
        tool_errors: ToolErrors = "message",
        cut_replies: CutReplies = "raise",
        budget: Budget | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name, description=description)
        if not callable(getattr(model, "generate", None)) or not callable(
            getattr(model, "stream", None)
        ):
            raise TypeError(
                f"model must be a ChatModel (with generate() and stream()), not "
                f"{type(model).__name__}"
            )
        if isinstance(tools, Tool) or not isinstance(tools, Sequence):
            raise TypeError("tools must be a list of Tool objects")
        by_name: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise TypeError(
                    f"tools must be Tool objects (decorate functions with @tool), not {t!r:.60}"
                )
            if t.name in by_name:
                raise GraphDefinitionError(f"agent {name!r} has two tools named {t.name!r}")
            by_name[t.name] = t
        if policy is not None and not isinstance(policy, ApprovalPolicy):
            raise TypeError(f"policy must be an ApprovalPolicy, not {type(policy).__name__}")
        if system is not None and not isinstance(system, str):
            raise TypeError("system must be a str")
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive int, not {max_turns!r}")
        if tool_errors not in ("message", "raise"):
            raise ValueError(f"tool_errors must be 'message' or 'raise', not {tool_errors!r}")
        if cut_replies not in ("raise", "keep"):
            raise ValueError(f"cut_replies must be 'raise' or 'keep', not {cut_replies!r}")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(
                f"budget must be a Budget (for example Budget(tokens=40_000)), not "
                f"{type(budget).__name__}"
            )
        self.model = model
        self.tools: dict[str, Tool] = by_name
        self.policy = policy
        self.system = system
        self.max_turns = max_turns
        self.stream = bool(stream)
        self.tool_errors: ToolErrors = tool_errors
        self.cut_replies: CutReplies = cut_replies
        self.budget = budget
        self._schemas: dict[str, dict[str, Any]] = {}

    def _adopt(self, policy: ApprovalPolicy) -> None:
        self._schemas = {}  # a copy's own (its tools may be new objects)
        self.tools = {
            n: t.under(policy) if isinstance(t, AgentTool) else t for n, t in self.tools.items()
        }

    def step_budget(self) -> int:
        """How many supersteps one run may need: two per model turn, and some to spare."""
        return 2 * self.max_turns + 10

    def build(self) -> Graph[AgentState]:
        """Return the agent's graph: the model node, the tools node, and the loop between them."""
        g: Graph[AgentState] = Graph(AgentState, types=AGENT_TYPES, name=self.name)
        g.add_node("model", self.model_node)
        g.add_node("tools", self.tools_node, metadata={"tools": self.tool_marks()})
        g.add_edge(START, "model")
        g.add_conditional_edges("model", route_tools, ["tools", END])
        g.add_edge("tools", "model")
        return g

    def tool_marks(self) -> list[dict[str, Any]]:
        """The agent's tools as its graph's picture shows them: ``{"name", "gated"}`` each,
        and ``"graph"``, the plan it runs, for an agent offered as a tool (`AgentTool`).

        A tool is gated when its own policy, or one it was put under, may ask a person about
        some call of it (`ApprovalPolicy.may_ask`); with no policy, none is.
        """
        policies = [p for p in (self.policy, *self._outer) if p is not None]
        marks: list[dict[str, Any]] = []
        for name, t in self.tools.items():
            mark: dict[str, Any] = {"name": name, "gated": any(p.may_ask(name) for p in policies)}
            if isinstance(t, AgentTool):
                mark["graph"] = t.agent.app.plan
            marks.append(mark)
        return marks

    # -- the model node ----------------------------------------------------------------------

    async def model_node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the model for its next reply (or stop, once ``max_turns`` replies were given)."""
        return {"messages": [await self.turn(state, [t.spec for t in self.tools.values()])]}

    async def turn(self, state: Mapping[str, Any], specs: Sequence[ToolSpec]) -> AssistantMessage:
        """The model's reply to the conversation, offered ``specs``; after ``max_turns``
        replies since the user last spoke, a message saying the agent stopped instead."""
        messages = folded_shown(state.get("messages") or [])
        if self._turns(messages) >= self.max_turns:
            stop = f"I stopped after {self.max_turns} turns without finishing the task."
            return AssistantMessage(content=stop, name=self.name, id=new_id())
        if self.budget is not None:
            refused = self._within_budget(self.budget)
            if refused is not None:
                return refused
        shown: list[Message] = (
            [SystemMessage(content=self.system), *messages] if self.system else list(messages)
        )
        reply = await self.reply(shown, specs)
        cost = report_usage(reply.usage or _NO_USAGE, model=_model_name(self.model))
        if listening():  # the totals are built for a reader only
            emit_event(
                AssistantTurn(agent=self.name, message=reply, cost=cost, totals=current_usage())
            )
        return reply

    def _within_budget(self, budget: Budget) -> AssistantMessage | None:
        """None while the budget allows another turn; once a limit is reached, a person's
        decision (an interrupt) first: None to go on, or the reply that stops the agent."""
        totals = current_usage()
        spent = used(totals, budget)
        limits = current_limits(totals, self.name, budget)
        over = reached(spent, limits)
        if not over:
            return None
        proposed = proposal(spent, limits, over, budget)
        per = "run" if budget.per == "run" else "thread"
        question: dict[str, Any] = {
            "type": APPROVAL,
            "kind": "budget",
            "question": describe(spent, limits, over, proposed, per),
            "agent": self.name,
            "tool": BUDGET_TOOL,
            "arguments": proposed,
            "schema": limits_schema(budget),
            "description": f"The {per}'s budget: approve to go on with the limits proposed, "
            "edit them to set others, reject to stop the agent.",
            "used": spent,
            "limits": limits,
            "over": over,
        }
        schema = self._schemas.get(BUDGET_TOOL)
        if schema is None:
            schema = self._schemas[BUDGET_TOOL] = decision_schema(limits_schema(budget))
        # Asked at the agent's budget "tool": inboxes, scopes and metrics name it ``budget``.
        with (
            child_scope(Segment("agent", self.name)),
            child_scope(Segment("tool", BUDGET_TOOL, budget.per)),
        ):
            question["address"] = str(current_address())
            decision = parse_decision(interrupt(question, schema=schema))
        if isinstance(decision, Approve | Edit):
            raised = proposed if isinstance(decision, Approve) else decision.arguments
            granted = with_raised(limits, raised)
            still = reached(spent, granted)
            if not still:
                keep_limits(grant_key(self.name, budget), granted)
                return None
            why = (
                f"the limits set ({', '.join(f'{k} {granted[k]:g}' for k in still)}) are "
                "already used up"
            )
        elif isinstance(decision, Reject):
            why = decision.message or "the budget was not raised"
        else:
            why = decision.content
        stop = f"I stopped: this {per} used its budget ({', '.join(over)}), and {why}."
        return AssistantMessage(content=stop, name=self.name, id=new_id())

    async def reply(self, shown: Sequence[Message], specs: Sequence[Any]) -> AssistantMessage:
        """One model reply, named after this agent and given an id."""
        if self.stream:
            chunks = []
            async for chunk in self.model.stream(shown, specs):
                chunks.append(chunk)
                if chunk.content:
                    emit_event(TextDelta(agent=self.name, text=chunk.content))
            reply = message_from_chunks(chunks)
        else:
            reply = await self.model.generate(shown, specs)
        if not isinstance(reply, AssistantMessage):
            endpoint = _endpoint(self.model)
            raise ModelError(
                f"model of agent {self.name!r} returned {type(reply).__name__}, not an "
                "AssistantMessage",
                endpoint=endpoint,
            )
        if reply.finish_reason == "length" and self.cut_replies == "raise":
            endpoint = _endpoint(self.model)
            tail = (reply.content or "")[-80:]
            raise ReplyCutShort(
                f"the model of agent {self.name!r} at {endpoint} stopped at its token limit "
                f"(finish_reason 'length') after {len(reply.content or '')} characters"
                f"{f' ending {tail!r}' if tail else ''}"
                f"{' and in a tool call' if reply.tool_calls else ''}; a reply cut short is "
                "not an answer: raise the model's max_tokens (or max_completion_tokens), "
                "shorten the conversation, or pass cut_replies='keep' to keep such replies "
                "(marked finish_reason='length'), then resume the thread",
                endpoint=endpoint,
                agent=self.name,
                content=reply.content,
            )
        if reply.name and reply.id:
            return reply
        return msgspec.structs.replace(reply, name=reply.name or self.name, id=reply.id or new_id())

    def _turns(self, messages: Sequence[Message]) -> int:
        """Replies this agent gave since the last user message."""
        n = 0
        for m in reversed(messages):
            if isinstance(m, UserMessage):
                break
            if isinstance(m, AssistantMessage) and m.name == self.name:
                n += 1
        return n

    # -- the tools node ----------------------------------------------------------------------

    async def tools_node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Serve the last reply's tool calls concurrently; report every question together."""
        calls = pending_calls(folded(state.get("messages") or ()))
        children = []
        seen: set[str] = set()
        for call in calls:
            sub = _SAFE.sub("_", call.id)[:64] or "call"
            while sub in seen:
                sub += "_"
            seen.add(sub)
            label = call.name if _LABEL.fullmatch(call.name) else "unknown"
            children.append(Child(Segment("tool", label, sub), partial(self.serve, call)))
        with child_scope(Segment("agent", self.name)):
            try:
                results = await gather_children(children)
            except BaseExceptionGroup as group:  # "raise" mode, several failed: the first
                found = group.subgroup(ToolError)
                if found is None:
                    raise
                raise _first(found) from None
        out: list[ConversationItem] = []
        for result in results:  # a decision may bring edits of the conversation with it
            out.extend(result) if isinstance(result, list) else out.append(result)
        return {"messages": out}

    async def serve(self, call: ToolCall) -> ToolMessage | list[ConversationItem]:
        """Serve one tool call (at its own address): check, decide, ask, run, answer."""
        if listening():
            emit_event(ToolCallEvent(agent=self.name, call=call))
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "none"
            return self._failed(call, f"There is no tool named {call.name!r}; tools: {names}.")
        if call.raw_arguments is not None:
            return self._failed(
                call,
                f"The arguments of {tool.name} are not a JSON object: {call.raw_arguments!r:.200}",
            )
        try:
            kwargs = tool.check(call.arguments)
        except ArgumentsError as exc:
            return self._failed(call, f"Invalid arguments for {tool.name}: {exc}", exc)
        verdict: Verdict = await step("policy", self.verdict, tool.name, call.arguments)
        if verdict.action == "deny":
            return self._answer(call, verdict.message or "Not allowed.", "denied")
        if verdict.action == "require_approval":
            return await self._gated(tool, call, kwargs, verdict)
        return await self._call(tool, call, call.arguments, kwargs, verdict)

    async def _gated(
        self, tool: Tool, call: ToolCall, kwargs: dict[str, Any], verdict: Verdict
    ) -> ToolMessage | list[ConversationItem]:
        """Ask about a call that needs approval, and carry out the decision.

        An edit of a call that needs one approval is that person's approval of the call as
        edited. An edit of a call that needs several (a quorum), or into arguments the policy
        gives a quorum, makes a new call: it is asked again, as a new question with the edited
        arguments and the larger of the two quorums, so approvals given to the old arguments
        do not count and no one person gets past a quorum.
        """
        quorum, asking = verdict.approvals, verdict
        arguments: dict[str, Any] = call.arguments
        previous: dict[str, Any] | None = None
        edits: list[ConversationItem] = []
        while True:
            decision = self._ask(tool, call, asking, arguments, previous, quorum)
            # Edits the person made to this agent's conversation: appended with the call's
            # answer, so the model reads them on its next turn.
            edits.extend(decision.conversation)
            if not isinstance(decision, Edit):
                break
            try:
                kwargs = tool.check(decision.arguments)
            except ArgumentsError as exc:
                failed = f"Invalid edited arguments for {tool.name}: {exc}"
                return _with(edits, self._failed(call, failed, exc))
            # A person approves the call as edited, but no one can approve past a deny rule:
            # the policy reads the edited arguments too (recorded, like the first verdict).
            again: Verdict = await step("policy", self.verdict, tool.name, decision.arguments)
            if again.action == "deny":
                refused = again.message or "Not allowed."
                return _with(
                    edits, self._answer(call, f"The edited call is refused: {refused}", "denied")
                )
            previous, arguments = arguments, decision.arguments
            needed = again.approvals if again.action == "require_approval" else 1
            if again.action == "require_approval" and (
                again.authority not in (None, asking.authority)
                or (again.confirm and not asking.confirm)
            ):
                # The edited call falls under a rule that names other deciders, or asks for
                # a confirmation step the edit did not take: it is asked again.
                quorum, asking = max(quorum, needed), again
                continue
            if quorum < 2 and needed < 2:
                break  # one person's edit approves the call as edited
            if needed >= quorum:  # an edit into a quorum rule needs that quorum, too
                quorum, asking = needed, again
        if isinstance(decision, Reject):
            answer = self._answer(call, decision.message, "rejected")
        elif isinstance(decision, Respond):
            answer = self._answer(call, decision.content, "responded")
        else:
            answer = await self._call(tool, call, arguments, kwargs, verdict)
        return _with(edits, answer)

    def _ask(
        self,
        tool: Tool,
        call: ToolCall,
        verdict: Verdict,
        arguments: dict[str, Any],
        previous: dict[str, Any] | None,
        quorum: int,
    ) -> ToolDecision:
        """The person's decision on the call with ``arguments`` (an interrupt the first time)."""
        question = self._question(tool, call, verdict, arguments, previous)
        if quorum < 2:
            return parse_decision(
                interrupt(question, schema=self._answer_schema(tool), authority=verdict.authority)
            )
        answer = approval_interrupt(
            question,
            approvals=quorum,
            approving=APPROVING,
            schema=self._answer_schema(tool, quorum=True),
            authority=verdict.authority,
        )
        return parse_decision(answer)

    async def _call(
        self,
        tool: Tool,
        call: ToolCall,
        arguments: dict[str, Any],
        kwargs: dict[str, Any],
        verdict: Verdict,
    ) -> ToolMessage:
        """Make the call (as an effect when it is dangerous) and answer it."""
        dangerous = tool.dangerous if tool.dangerous is not None else verdict.action != "allow"
        served = (
            call
            if arguments is call.arguments
            else msgspec.structs.replace(call, arguments=arguments)
        )
        outcome: Any
        if dangerous and not tool.idempotent:
            outcome = await effect(
                f"tool:{tool.name}",
                self._run,
                tool,
                kwargs,
                served,
                reconcile_info=_ReconcileInfo(self, tool, served, current_address()),
            )
        else:
            outcome = await self._run(tool, kwargs, served)
        status, content = _outcome(outcome)
        if status == "error" and self.tool_errors == "raise":
            raise ToolError(
                f"tool {tool.name!r} of agent {self.name!r} failed: {content}",
                tool=tool.name,
                call_id=call.id,
            )
        return self._answer(call, content, status)

    def _reconcile_info(self, tool: Tool, call: ToolCall, address: Address) -> dict[str, Any]:
        """What a person is shown if ``call`` (with the arguments that ran) must be reconciled
        at ``address``: the call as its approval question showed it, so they can look for it
        outside."""
        shown = msgspec.json.encode(call.arguments).decode()
        return {
            "question": (
                f"{self.name} called {tool.name}({shown:.300}) (call {call.id}), but the "
                "call's outcome was never recorded: the process stopped, or the call failed, "
                f"before it answered. Check what {tool.name} did in the outside system, then "
                'answer "retry" to call it again or {"result": ...} with what it returned.'
            ),
            "agent": self.name,
            "tool": tool.name,
            "call_id": call.id,
            "arguments": call.arguments,
            "address": str(address),
            "description": tool.description,
        }

    def _answer_schema(self, tool: Tool, *, quorum: bool = False) -> dict[str, Any]:
        """The approval's answer schema for ``tool`` (built once per tool and kind)."""
        name = f"{tool.name}\x1fquorum" if quorum else tool.name
        schema = self._schemas.get(name)
        if schema is None:
            schema = self._schemas[name] = decision_schema(tool.parameters, quorum=quorum)
        return schema

    async def verdict(self, tool: str, arguments: dict[str, Any]) -> Verdict:
        """The strictest verdict of this agent's policy and the policies it is under."""
        if not self._outer:  # one policy or none: nothing to weigh
            if self.policy is None:
                return Verdict(action="allow", rule="no policy")
            return self.policy.verdict(tool, arguments)
        policies = [p for p in (self.policy, *self._outer) if p is not None]
        if not policies:
            return Verdict(action="allow", rule="no policy")
        return strictest([p.verdict(tool, arguments) for p in policies])

    async def _run(self, tool: Tool, kwargs: dict[str, Any], call: ToolCall) -> tuple[str, str]:
        """Run the tool; ``("ok", text)`` or ``("error", text)`` (what is recorded)."""
        on_chunk = None
        if tool.streaming:

            def on_chunk(chunk: Any) -> None:
                emit_event(ToolChunk(agent=self.name, call_id=call.id, tool=tool.name, chunk=chunk))

        try:
            value = await tool.run(kwargs, call, on_chunk)
        except InterlockError as exc:
            if _is_infrastructure(exc):
                raise  # the run's own records failed: the thread stays where it was
            return "error", f"Error: {type(exc).__name__}: {exc}"
        except Exception as exc:
            return "error", f"Error: {type(exc).__name__}: {exc}"
        return "ok", result_text(value)

    def _question(
        self,
        tool: Tool,
        call: ToolCall,
        verdict: Verdict,
        arguments: dict[str, Any],
        previous: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What an approver is shown; ``previous``: the arguments an edit replaced."""
        shown = msgspec.json.encode(arguments).decode()
        question: dict[str, Any] = {
            "type": APPROVAL,
            "question": verdict.message or f"Allow {self.name} to call {tool.name}({shown:.300})?",
            "agent": self.name,
            "tool": tool.name,
            "call_id": call.id,
            "arguments": arguments,
            "address": str(current_address()),
            "rule": verdict.rule,
            "schema": tool.parameters,
            "description": tool.description,
        }
        if previous is not None:
            question["edited_from"] = previous
        if verdict.confirm:
            question["confirm"] = True
        return question

    def _answer(self, call: ToolCall, content: str, status: ToolStatus) -> ToolMessage:
        if listening():
            emit_event(
                ToolResult(
                    agent=self.name, call_id=call.id, tool=call.name, content=content, status=status
                )
            )
        return ToolMessage(
            content=content, tool_call_id=call.id, name=call.name, status=status, id=new_id()
        )

    def _failed(self, call: ToolCall, content: str, exc: Exception | None = None) -> ToolMessage:
        if self.tool_errors == "raise":
            raise ToolError(
                f"agent {self.name!r}: {content}", tool=call.name, call_id=call.id
            ) from exc
        return self._answer(call, content, "error")


class _ReconcileInfo(Mapping[str, Any]):
    """`ToolAgent._reconcile_info`, built on first read.

    Only a reconcile question reads it (a call whose outcome was never recorded, seen by the
    process that continues the thread): a call that runs and records its outcome, nearly every
    call, never builds it.
    """

    __slots__ = ("_address", "_agent", "_call", "_fields", "_tool")

    def __init__(self, agent: ToolAgent, tool: Tool, call: ToolCall, address: Address) -> None:
        self._agent, self._tool, self._call, self._address = agent, tool, call, address
        self._fields: dict[str, Any] | None = None

    def _built(self) -> dict[str, Any]:
        if self._fields is None:
            self._fields = self._agent._reconcile_info(self._tool, self._call, self._address)
        return self._fields

    def __getitem__(self, key: str) -> Any:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def _with(
    edits: list[ConversationItem], answer: ToolMessage
) -> ToolMessage | list[ConversationItem]:
    """A call's answer, after the conversation edits its decisions brought (if any)."""
    return [*edits, answer] if edits else answer


_NO_USAGE: Final = Usage()


def _endpoint(model: ChatModel) -> str:
    """How errors name ``model``: its ``endpoint``, else its class."""
    return str(getattr(model, "endpoint", type(model).__name__))


def _model_name(model: ChatModel) -> str | None:
    """The name prices and usage sums know ``model`` by: its ``model`` (the provider's name
    for it), else its ``name`` (a LangChain model's, a scripted model's)."""
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def route_tools(state: Mapping[str, Any]) -> str:
    """``tools`` while the last reply calls tools that are not answered yet, else the end."""
    return "tools" if pending_calls(folded(state.get("messages") or ())) else END


def pending_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the last assistant message that no tool message answers yet."""
    if messages and isinstance(last := messages[-1], AssistantMessage):
        return list(last.tool_calls)  # nothing after it answers them (the common case)
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            answered = {t.tool_call_id for t in messages[i + 1 :] if isinstance(t, ToolMessage)}
            return [c for c in m.tool_calls if c.id not in answered]
        if not isinstance(m, ToolMessage):
            return []
    return []


def _outcome(value: Any) -> tuple[ToolStatus, str]:
    """A recorded call's ``(status, text)``; a person's reconcile answer ``{"result": x}``
    records whatever they give, which is the tool's result."""
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and value[0] in ("ok", "error")
        and isinstance(value[1], str)
    ):
        return value[0], value[1]
    return "ok", result_text(value)


def _is_infrastructure(exc: InterlockError) -> bool:
    return isinstance(exc, StoreError | ThreadBusy)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner
