"""What a model adapter costs per turn, over calling its provider's SDK directly.

    python bench/model_overhead.py                 # every adapter, 400 turns each way
    python bench/model_overhead.py --turns 1000 --only anthropic

A local llmock server (a mock of OpenAI's, Anthropic's and Gemini's APIs, on a free loopback
port, in a process of its own as a provider is; ``--server thread`` runs it in this one)
answers both sides. For each adapter, one turn is the same conversation
(a system prompt, a user message, an assistant turn with two parallel tool calls, their two
results, a follow-up) with the same two tools offered:

- *direct*: the SDK's own call with the request already in the provider's shape, and the reply's
  text and calls read from the SDK's object — the least a program calling the SDK does;
- *adapter*: ``model.generate(messages, tools)`` on interlock's messages, which converts the
  conversation, calls the same SDK, and checks and converts the reply into an
  `AssistantMessage`.

Turns alternate between the two sides (so drift in the server or the machine hits both), after a
warm-up; the script prints the median per turn of each, and the adapter's overhead: the
difference of the medians. The target is an overhead of at most 0.3 ms, or 5 % of the direct
call, whichever is larger. Streaming is measured the same way (``stream=True`` on both sides).

LangChain is measured twice, wrapping ``ChatOpenAI`` against llmock's OpenAI routes, against
``ChatOpenAI.ainvoke`` (``astream``) with the tools bound once: ``langchain`` runs the wrapped
model in the caller's loop (``own_loop=False``), as the direct side does; ``langchain+loop`` in
the loop LangChain models share (the default), adding the hop between threads.

Another adapter is added by one more `Provider` in `PROVIDERS` (see those there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from llmock.scenarios import Reply, behavior_to_dict
from llmock.testing import BASE_PATHS, LLMockServer

from interlock.agents import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

TARGET_MS = 0.3
TARGET_SHARE = 0.05

TOOLS = [
    ToolSpec(
        name="lookup",
        description="Look an order up.",
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
    ),
    ToolSpec(
        name="refund",
        description="Refund part of an order.",
        parameters={
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}},
        },
    ),
]
CONVERSATION: list[Message] = [
    SystemMessage(content="You are a support agent. Be brief."),
    UserMessage(content="Where are orders A-17 and A-18?"),
    AssistantMessage(
        content="Looking both up.",
        tool_calls=(
            ToolCall(id="call_1", name="lookup", arguments={"order": "A-17"}),
            ToolCall(id="call_2", name="lookup", arguments={"order": "A-18"}),
        ),
    ),
    ToolMessage(content="A-17: shipped on Monday", tool_call_id="call_1"),
    ToolMessage(content="A-18: waiting for stock", tool_call_id="call_2"),
    UserMessage(content="Refund A-18 then."),
]


@dataclass(frozen=True)
class Provider:
    """One adapter and its SDK, measured against the same llmock routes."""

    name: str
    """How the report names it, and ``--only`` selects it."""
    route: str
    """The llmock provider whose routes both sides call (``openai``, ``anthropic``...)."""
    setup: Callable[[str, bool], tuple[Any, Callable[[], Awaitable[Any]], Any]]
    """``setup(base_url, stream)``: the SDK client, a direct turn, and the adapter's model."""


# -- OpenAI ------------------------------------------------------------------------------------


def _openai(base_url: str, stream: bool) -> tuple[Any, Callable[[], Awaitable[Any]], Any]:
    import openai

    from interlock.agents import OpenAIChatModel, to_openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    messages = [to_openai(m) for m in CONVERSATION]  # prepared once: the direct side's best case
    tools = [t.to_openai() for t in TOOLS]

    async def direct() -> Any:
        if not stream:
            reply = await client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=tools
            )
            message = reply.choices[0].message
            return message.content, message.tool_calls
        text = []
        usage = None
        async with await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},  # as the adapter asks, by default
        ) as chunks:
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    text.append(chunk.choices[0].delta.content)
                usage = chunk.usage or usage
        return "".join(text), usage

    model = OpenAIChatModel(
        "gpt-4o-mini", base_url=base_url, api_key="sk-bench", max_retries=0, stream=stream
    )
    return client, direct, model


# -- Anthropic ---------------------------------------------------------------------------------


def _anthropic(base_url: str, stream: bool) -> tuple[Any, Callable[[], Awaitable[Any]], Any]:
    import anthropic

    from interlock.agents import AnthropicChatModel
    from interlock.agents._anthropic import to_anthropic

    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-bench", max_retries=0)
    system, messages = to_anthropic(CONVERSATION)  # prepared once
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in TOOLS
    ]
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": system,
        "messages": messages,
        "tools": tools,
    }

    async def direct() -> Any:
        if not stream:
            reply = await client.messages.create(**request)
            return [block for block in reply.content]
        text = []
        async with await client.messages.create(**request, stream=True) as events:
            async for event in events:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    text.append(event.delta.text)
        return "".join(text)

    model = AnthropicChatModel(
        "claude-sonnet-4-5", base_url=base_url, api_key="sk-bench", max_retries=0, stream=stream
    )
    return client, direct, model


# -- Gemini ------------------------------------------------------------------------------------


def _gemini(base_url: str, stream: bool) -> tuple[Any, Callable[[], Awaitable[Any]], Any]:
    import httpx2
    from google import genai
    from google.genai import types

    from interlock.agents import GeminiChatModel
    from interlock.agents._gemini import gemini_schema, to_gemini

    # The client as the model builds its own: the same HTTP transport (httpx2) on both sides.
    options = types.HttpOptions(
        base_url=base_url,
        api_version="v1beta",
        async_client_args={"transport": httpx2.AsyncHTTPTransport()},
    )
    client = genai.Client(api_key="bench", http_options=options)
    system, contents = to_gemini(CONVERSATION)  # prepared once
    config = types.GenerateContentConfig(
        system_instruction=system,
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=t.name,
                        description=t.description,
                        parameters=types.Schema.model_validate(gemini_schema(t.parameters)),
                    )
                    for t in TOOLS
                ]
            )
        ],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )

    async def direct() -> Any:
        if not stream:
            reply = await client.aio.models.generate_content(
                model="gemini-2.5-flash", contents=contents, config=config
            )
            return reply.text, reply.function_calls
        text = []
        async for chunk in await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents=contents, config=config
        ):
            if chunk.text:
                text.append(chunk.text)
        return "".join(text)

    model = GeminiChatModel(
        "gemini-2.5-flash", base_url=base_url, api_key="bench", max_retries=0, stream=stream
    )
    return _Closing(client.aio.aclose), direct, model


# -- LangChain ---------------------------------------------------------------------------------


def _langchain(base_url: str, stream: bool) -> tuple[Any, Callable[[], Awaitable[Any]], Any]:
    from langchain_openai import ChatOpenAI

    from interlock.agents import LangChainChatModel
    from interlock.agents._langchain import to_langchain

    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=base_url,
        api_key="sk-bench",  # type: ignore[arg-type]
        max_retries=0,
        stream_usage=True,
    )
    bound = chat.bind_tools([t.to_openai() for t in TOOLS])  # prepared once
    messages = [to_langchain(m) for m in CONVERSATION]

    async def direct() -> Any:
        if not stream:
            reply = await bound.ainvoke(messages)
            return reply.content, reply.tool_calls
        text = []
        async for chunk in bound.astream(messages):
            if chunk.content:
                text.append(chunk.content)
        return text

    # In the caller's loop, as the direct side runs: the shared loop's hop between threads is
    # what own_loop=True adds on top (measured as "langchain+loop").
    model = LangChainChatModel(chat, stream=stream, own_loop=False)
    return _Closing(None), direct, model


def _langchain_own_loop(
    base_url: str, stream: bool
) -> tuple[Any, Callable[[], Awaitable[Any]], Any]:
    from langchain_openai import ChatOpenAI

    from interlock.agents import LangChainChatModel

    closing, direct, _ = _langchain(base_url, stream)
    # ChatOpenAI keeps one HTTP client per base URL and timeout for the whole process, bound
    # to the loop that first used it: the wrapped model, which runs in the shared loop, gets
    # a timeout (and so a client) of its own.
    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=base_url,
        api_key="sk-bench",  # type: ignore[arg-type]
        max_retries=0,
        stream_usage=True,
        timeout=600.5,
    )
    return closing, direct, LangChainChatModel(chat, stream=stream)


class _Closing:
    """What `measure` closes at the end for an SDK whose client closes otherwise."""

    def __init__(self, close: Callable[[], Awaitable[None]] | None) -> None:
        self._close = close

    async def close(self) -> None:
        if self._close is not None:
            await self._close()


PROVIDERS = [
    Provider("openai", "openai", _openai),
    Provider("anthropic", "anthropic", _anthropic),
    Provider("gemini", "gemini", _gemini),
    Provider("langchain", "openai", _langchain),
    Provider("langchain+loop", "openai", _langchain_own_loop),
]


# -- the measure -------------------------------------------------------------------------------


class Server(Protocol):
    """The llmock both sides call: where a provider's routes are, and its scripted answer."""

    def base_url(self, provider: str) -> str: ...

    def answer(self, reply: Reply) -> None: ...

    def forget(self) -> None: ...


class InProcess:
    """llmock in a thread of this process (``--server thread``)."""

    def __init__(self, server: LLMockServer) -> None:
        self.server = server

    def base_url(self, provider: str) -> str:
        return self.server.base_url(provider)

    def answer(self, reply: Reply) -> None:
        self.server.state.scenarios.add(reply)

    def forget(self) -> None:
        self.server.state.scenarios.clear()


class OwnProcess:
    """llmock in a process of its own (``--server process``, the default): as a provider is,
    it takes no share of this process's interpreter lock, which a model that runs in a thread
    of its own (LangChain's shared loop) would otherwise contend for with the server."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        serve = "from llmock.cli import app; app()"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                serve,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/_llmock/scenario", timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("llmock did not start") from None
                time.sleep(0.1)

    def base_url(self, provider: str) -> str:
        return self.url + BASE_PATHS[provider]

    def _admin(self, method: str, body: Any = None) -> None:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/_llmock/scenario",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def answer(self, reply: Reply) -> None:
        self._admin("POST", {"behaviors": [behavior_to_dict(reply)]})

    def forget(self) -> None:
        self._admin("DELETE")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


async def measure(server: Server, provider: Provider, stream: bool, turns: int) -> str:
    """Time ``turns`` turns each way; return the report's line."""
    server.answer(Reply(text="Refunding A-18 now.", times=None))
    client, direct, model = provider.setup(server.base_url(provider.route), stream)
    try:
        for _ in range(max(20, turns // 10)):  # warm-up: connections, caches, imports
            await direct()
            await model.generate(CONVERSATION, TOOLS)
        sides: dict[str, list[float]] = {"direct": [], "adapter": []}
        for _ in range(turns):
            started = time.perf_counter()
            await direct()
            sides["direct"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await model.generate(CONVERSATION, TOOLS)
            sides["adapter"].append(time.perf_counter() - started)
    finally:
        server.forget()
        await model.aclose()
        await client.close()
    base = statistics.median(sides["direct"]) * 1000
    mine = statistics.median(sides["adapter"]) * 1000
    overhead = mine - base
    allowed = max(TARGET_MS, TARGET_SHARE * base)
    verdict = "ok" if overhead <= allowed else "OVER"
    mode = "stream" if stream else "generate"
    return (
        f"{provider.name:<14} {mode:<9} {base:8.3f} {mine:8.3f} {overhead:+9.3f} "
        f"{100 * overhead / base:+6.1f}%  (target <= {allowed:.3f} ms) {verdict}"
    )


async def main(turns: int, only: set[str] | None, where: str) -> None:
    print(f"{turns} turns each way, medians in ms per turn; llmock in its own {where}")
    print(f"{'adapter':<14} {'mode':<9} {'direct':>8} {'adapter':>8} {'overhead':>9}")
    with contextlib.ExitStack() as stack:
        if where == "thread":
            server: Server = InProcess(stack.enter_context(LLMockServer()))
        else:
            own = OwnProcess()
            stack.callback(own.close)
            server = own
        for provider in PROVIDERS:
            if only and provider.name not in only:
                continue
            for stream in (False, True):
                print(await measure(server, provider, stream, turns), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400, help="turns per side and mode")
    parser.add_argument("--only", action="append", help="an adapter's name (repeatable)")
    parser.add_argument(
        "--server",
        choices=("process", "thread"),
        default="process",
        help="where llmock runs: a process of its own (as a provider is), or a thread of this one",
    )
    args = parser.parse_args()
    asyncio.run(main(args.turns, set(args.only) if args.only else None, args.server))
