"""`chat_model` and `chat_model_from_env`: a model chosen by name, built, and answering llmock.

The llmock fixture points every provider's SDK at llmock through the environment variables
the SDKs read (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL`` and the
keys), so each model here is built from its name alone, as a user's program builds it.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import anyio
import pytest
from llmock.pytest_plugin import LLMock

from _imports import run_fresh
from interlock import InterlockError, ModelSpecError
from interlock.agents import (
    AnthropicChatModel,
    ChatModel,
    GeminiChatModel,
    LangChainChatModel,
    OpenAIChatModel,
    UserMessage,
    chat_model,
    chat_model_from_env,
)

HELLO = [UserMessage(content="Hello")]


def ask(model: ChatModel) -> str | None:
    """The model's reply to one message, in an event loop of its own."""

    async def go() -> str | None:
        try:
            return (await model.generate(HELLO, [])).content
        finally:
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()

    return anyio.run(go)


# -- every provider, built by name and answering ------------------------------------------------

# (name, adapter class, where llmock must have received the request)
PROVIDERS = [
    ("openai:gpt-4o-mini", OpenAIChatModel, "/v1/chat/completions"),
    ("anthropic:claude-sonnet-4-5", AnthropicChatModel, "/anthropic/v1/messages"),
    (
        "gemini:gemini-2.5-flash",
        GeminiChatModel,
        "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
    ),
    ("langchain:openai:gpt-4o-mini", LangChainChatModel, "/v1/chat/completions"),
    ("langchain:anthropic:claude-sonnet-4-5", LangChainChatModel, "/anthropic/v1/messages"),
]


@pytest.mark.parametrize(("spec", "cls", "path"), PROVIDERS)
def test_each_provider_is_built_by_name_and_answers(
    llmock: LLMock, spec: str, cls: type, path: str
) -> None:
    llmock.reply(f"Hello from {spec}.")
    model = chat_model(spec)
    assert isinstance(model, cls)
    assert ask(model) == f"Hello from {spec}."
    [request] = llmock.requests
    assert request.path == path
    if not spec.startswith("gemini:"):  # Gemini names the model in the path
        assert request.body["model"] == spec.rsplit(":", 1)[1]


def test_a_model_name_may_hold_colons(llmock: LLMock) -> None:
    # Ollama's names do ("llama3.1:8b"); only the first colon ends the provider.
    llmock.reply("Hi.")
    model = chat_model("openai:llama3.1:8b")
    assert ask(model) == "Hi."
    assert llmock.last_request.body["model"] == "llama3.1:8b"


def test_options_go_to_the_adapter(llmock: LLMock, monkeypatch: pytest.MonkeyPatch) -> None:
    llmock.reply("Hi.").reply("Hi.")
    assert ask(chat_model("anthropic:claude-sonnet-4-5", max_tokens=77, temperature=0.5)) == "Hi."
    body = llmock.last_request.body
    assert (body["max_tokens"], body["temperature"]) == (77, 0.5)
    # With no endpoint in the environment, the base_url option is how the model finds llmock.
    monkeypatch.delenv("OPENAI_BASE_URL")
    model = chat_model("openai:gpt-4o-mini", base_url=llmock.base_url("openai"), seed=7)
    assert ask(model) == "Hi."
    assert llmock.last_request.body["seed"] == 7


def test_langchain_options_go_to_the_langchain_model_and_stream_to_the_wrapper(
    llmock: LLMock,
) -> None:
    llmock.reply("Hi.")
    model = chat_model("langchain:openai:gpt-4o-mini", temperature=0.25, stream=True)
    assert isinstance(model, LangChainChatModel)
    assert ask(model) == "Hi."
    body = llmock.last_request.body
    assert body["temperature"] == 0.25
    assert body["stream"] is True  # LangChainChatModel(stream=True) streamed the reply


def test_bad_options_are_the_adapters_refusals(llmock: LLMock) -> None:
    with pytest.raises(TypeError, match="stream must be True or False"):
        chat_model("openai:gpt-4o-mini", stream="yes")


# -- langchain: through LangChain's own init_chat_model when it is installed --------------------


def test_langchain_goes_through_init_chat_model_when_langchain_is_installed(
    llmock: LLMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_openai import ChatOpenAI

    calls: list[tuple[str, dict[str, Any]]] = []

    def init_chat_model(model: str, **kwargs: Any) -> ChatOpenAI:
        calls.append((model, kwargs))
        settings = {k: v for k, v in kwargs.items() if k != "model_provider"}
        return ChatOpenAI(model=model, **settings)

    package = types.ModuleType("langchain")
    chat_models = types.ModuleType("langchain.chat_models")
    chat_models.init_chat_model = init_chat_model  # type: ignore[attr-defined]
    package.chat_models = chat_models  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain", package)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", chat_models)

    llmock.reply("Through init_chat_model.")
    model = chat_model("langchain:ollama:llama3.1:8b", temperature=0, own_loop=True)
    assert calls == [("llama3.1:8b", {"model_provider": "ollama", "temperature": 0})]
    assert ask(model) == "Through init_chat_model."


def test_without_langchain_another_langchain_provider_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)
    with pytest.raises(ImportError) as caught:
        chat_model("langchain:ollama:llama3.1")
    message = str(caught.value)
    assert "init_chat_model" in message and "pip install langchain" in message
    assert "'ollama'" in message
    assert "langchain:openai: and langchain:anthropic:" in message


def test_a_missing_langchain_provider_package_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    with pytest.raises(ImportError, match=r"pip install langchain-anthropic$"):
        chat_model("langchain:anthropic:claude-sonnet-4-5")


# -- a missing extra ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "blocked", "module", "extra"),
    [
        ("openai:gpt-4o-mini", "openai", "_openai", "openai"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "_anthropic", "anthropic"),
        ("gemini:gemini-2.5-flash", "google.genai", "_gemini", "gemini"),
        ("langchain:openai:gpt-4o-mini", "langchain_core", "_langchain", "langchain"),
    ],
)
def test_a_provider_without_its_extra_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, spec: str, blocked: str, module: str, extra: str
) -> None:
    # As on a machine without the provider's package: importing it fails.
    monkeypatch.setitem(sys.modules, blocked, None)
    monkeypatch.delitem(sys.modules, f"interlock.agents.{module}")
    with pytest.raises(ImportError) as caught:
        chat_model(spec)
    assert f"pip install 'interlock[{extra}]'" in str(caught.value)
    assert repr(spec) in str(caught.value)


def test_nothing_is_imported_until_a_model_is_built() -> None:
    code = (
        "import sys\n"
        "import interlock.agents as a\n"
        "sdks = ('openai', 'anthropic', 'google.genai', 'langchain_core')\n"
        "a.chat_model, a.chat_model_from_env\n"
        "print(sorted(m for m in sdks if m in sys.modules))\n"
        "a.chat_model('anthropic:claude-sonnet-4-5', api_key='k')\n"
        "print(sorted(m for m in sdks if m in sys.modules))\n"
    )
    assert run_fresh(code) == ["[]", "['anthropic']"]


# -- bad names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("gpt-4o-mini", "names no provider"),
        ("", "names no provider"),
        ("mistral:mistral-large", "names the provider 'mistral', which interlock does not know"),
        ("OpenAI:gpt-4o-mini", "names the provider 'OpenAI'"),
        ("openai:", "names no model"),
        ("openai: gpt-4o-mini", "has spaces around the model"),
    ],
)
def test_a_bad_name_lists_the_providers_and_shows_an_example(spec: str, reason: str) -> None:
    with pytest.raises(ModelSpecError) as caught:
        chat_model(spec)
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, InterlockError)
    message = str(error)
    assert message.startswith(f"model {spec!r} {reason}")
    assert "providers: openai, anthropic, gemini, langchain" in message
    assert "openai:gpt-4o-mini" in message and "langchain:openai:gpt-4o-mini" in message
    assert error.spec == spec and error.variable is None


@pytest.mark.parametrize("spec", ["langchain:gpt-4o-mini", "langchain:openai:", "langchain::x"])
def test_a_langchain_name_needs_a_provider_and_a_model(spec: str) -> None:
    with pytest.raises(ModelSpecError, match=r"langchain:<provider>:<model>, as langchain:openai"):
        chat_model(spec)


def test_a_name_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(ModelSpecError, match=r"a model's name is a str .* not int"):
        chat_model(42)  # type: ignore[arg-type]


# -- from the environment -----------------------------------------------------------------------


def test_the_environment_names_the_model(llmock: LLMock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_MODEL", "gemini:gemini-2.5-flash")
    llmock.reply("Gemini here.")
    model = chat_model_from_env("openai:gpt-4o-mini", temperature=0)
    assert isinstance(model, GeminiChatModel)  # the variable wins over the default
    assert ask(model) == "Gemini here."
    assert llmock.last_request.body["generationConfig"]["temperature"] == 0


@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_or_empty_the_default_is_used(
    llmock: LLMock, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("INTERLOCK_MODEL", raising=False)
    else:
        monkeypatch.setenv("INTERLOCK_MODEL", value)
    assert isinstance(chat_model_from_env("anthropic:claude-sonnet-4-5"), AnthropicChatModel)


def test_unset_without_a_default_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERLOCK_MODEL", raising=False)
    with pytest.raises(ModelSpecError) as caught:
        chat_model_from_env()
    message = str(caught.value)
    assert message.startswith("INTERLOCK_MODEL is not set")
    assert "INTERLOCK_MODEL=openai:gpt-4o-mini" in message
    assert "providers: openai, anthropic, gemini, langchain" in message
    assert (caught.value.spec, caught.value.variable) == (None, "INTERLOCK_MODEL")


def test_another_variable_may_name_the_model(
    llmock: LLMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_MODEL", "gemini:gemini-2.5-flash")
    monkeypatch.setenv("PLANNER_MODEL", "anthropic:claude-sonnet-4-5")
    assert isinstance(chat_model_from_env(variable="PLANNER_MODEL"), AnthropicChatModel)
    monkeypatch.delenv("PLANNER_MODEL")
    with pytest.raises(ModelSpecError, match=r"^PLANNER_MODEL is not set"):
        chat_model_from_env(variable="PLANNER_MODEL")


def test_a_bad_name_in_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INTERLOCK_MODEL", "gpt-4o")
    with pytest.raises(ModelSpecError) as caught:
        chat_model_from_env("openai:gpt-4o-mini")  # a default does not hide a bad value
    assert str(caught.value).startswith("INTERLOCK_MODEL='gpt-4o' names no provider")
    assert (caught.value.spec, caught.value.variable) == ("gpt-4o", "INTERLOCK_MODEL")
