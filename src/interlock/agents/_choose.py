"""`chat_model`: a chat model chosen by name, ``"provider:model"``, or by an environment variable.

The same program can run on any provider's model without a change to its code::

    model = chat_model("anthropic:claude-sonnet-4-5", temperature=0)
    model = chat_model_from_env("openai:gpt-4o-mini")  # INTERLOCK_MODEL, if set, wins

A name is the provider, a colon, and the provider's own name of the model (which may hold
colons itself, as Ollama's ``llama3.1:8b`` does):

======================================  =====================================================
``openai:gpt-4o-mini``                  `OpenAIChatModel` (``interlock[openai]``)
``anthropic:claude-sonnet-4-5``         `AnthropicChatModel` (``interlock[anthropic]``)
``gemini:gemini-2.5-flash``             `GeminiChatModel` (``interlock[gemini]``)
``langchain:ollama:llama3.1``           `LangChainChatModel` over LangChain's
                                        ``init_chat_model(model, model_provider=...)``
======================================  =====================================================

Nothing of a provider is imported until its model is built, so naming a provider whose extra
is missing fails only then, with the ``pip install`` that adds it.

For ``langchain:``, LangChain's ``init_chat_model`` lives in the ``langchain`` package, not in
``langchain-core`` (which is all the ``langchain`` extra brings, and which keeps LangGraph out
of an interlock install). When ``langchain`` is not installed, ``langchain:openai:`` and
``langchain:anthropic:`` are built from ``langchain-openai``'s ``ChatOpenAI`` and
``langchain-anthropic``'s ``ChatAnthropic`` directly; any other LangChain provider needs
``pip install langchain`` and that provider's package.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .._errors import ModelSpecError
from ._models import ChatModel

__all__ = ["chat_model", "chat_model_from_env"]

VARIABLE: Final = "INTERLOCK_MODEL"
"""The environment variable `chat_model_from_env` reads by default."""


class _Provider(NamedTuple):
    module: str
    """The adapter's module, in this package."""
    cls: str
    """The adapter's class."""
    package: str
    """The package the adapter needs, as pip names it."""
    extra: str
    """interlock's extra that brings it."""
    example: str
    """A name of one of its models, for the messages."""


_PROVIDERS: Final[Mapping[str, _Provider]] = {
    "openai": _Provider("._openai", "OpenAIChatModel", "openai", "openai", "gpt-4o-mini"),
    "anthropic": _Provider(
        "._anthropic", "AnthropicChatModel", "anthropic", "anthropic", "claude-sonnet-4-5"
    ),
    "gemini": _Provider(
        "._gemini", "GeminiChatModel", "google-genai", "gemini", "gemini-2.5-flash"
    ),
    "langchain": _Provider(
        "._langchain", "LangChainChatModel", "langchain-core", "langchain", "openai:gpt-4o-mini"
    ),
}

# The LangChain classes built directly when LangChain's `init_chat_model` (the `langchain`
# package) is not installed: provider -> (module, class, package).
_LANGCHAIN_CLASSES: Final[Mapping[str, tuple[str, str, str]]] = {
    "openai": ("langchain_openai", "ChatOpenAI", "langchain-openai"),
    "anthropic": ("langchain_anthropic", "ChatAnthropic", "langchain-anthropic"),
}

# The keywords `LangChainChatModel` takes; the others go to the LangChain model.
_WRAPPER_OPTIONS: Final = frozenset({"stream", "own_loop"})

_EXAMPLES: Final = ", ".join(f"{name}:{p.example}" for name, p in _PROVIDERS.items())


def chat_model(spec: str, /, **options: Any) -> ChatModel:
    """Build the chat model a name such as ``"openai:gpt-4o-mini"`` stands for.

    Args:
        spec: The provider, a colon, and the provider's name of the model:
            ``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``,
            ``gemini:gemini-2.5-flash``, or ``langchain:<provider>:<model>`` for any of
            LangChain's providers (``langchain:ollama:llama3.1``).
        **options: Keyword arguments for the model's constructor: ``base_url``, ``api_key``,
            ``timeout``, ``max_retries``, ``stream`` and request parameters (``temperature``...)
            for `OpenAIChatModel`, `AnthropicChatModel` and `GeminiChatModel`. For
            ``langchain:``, ``stream`` and ``own_loop`` go to `LangChainChatModel` and the
            others to the LangChain model (``temperature``, ``base_url``...). Without
            ``base_url`` and ``api_key`` each SDK reads its own environment variables
            (``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ``GOOGLE_GEMINI_BASE_URL``...).

    Returns:
        The model, unused: it connects on its first call.

    Raises:
        ModelSpecError: ``spec`` is malformed or names no provider (the message lists them).
        ImportError: The provider's package is not installed (the message says what to
            install).
        TypeError: An option is of the wrong type for the model.
        ValueError: An option is out of range for the model.

    Examples:
        A sketch: Claude, then the same agent on a local Ollama server through its
        OpenAI-compatible API::

            model = chat_model("anthropic:claude-sonnet-4-5", temperature=0)
            model = chat_model("openai:llama3.1", base_url="http://localhost:11434/v1")
    """
    return _build(spec, options, variable=None)


def chat_model_from_env(
    default: str | None = None, /, *, variable: str = VARIABLE, **options: Any
) -> ChatModel:
    """Build the chat model an environment variable names (``INTERLOCK_MODEL`` unless told).

    The variable holds a name as `chat_model` takes it
    (``INTERLOCK_MODEL=gemini:gemini-2.5-flash``); unset or empty, ``default`` is used instead.

    Args:
        default: The name to use when the variable is unset or empty; None requires it.
        variable: The environment variable to read.
        **options: Keyword arguments for the model's constructor, as for `chat_model`. They
            must suit whichever provider the variable names.

    Raises:
        ModelSpecError: The variable is unset and there is no default, or the name is
            malformed or names no provider (the message names the variable).
        ImportError: The provider's package is not installed (the message says what to
            install).
    """
    value = os.environ.get(variable, "").strip()
    if value:
        return _build(value, options, variable=variable)
    if default is None:
        raise ModelSpecError(
            f"{variable} is not set: set it to the model to use, as provider:model "
            f"(for example {variable}=openai:gpt-4o-mini; providers: {', '.join(_PROVIDERS)})",
            spec=None,
            variable=variable,
        )
    return _build(default, options, variable=None)


def _build(spec: object, options: dict[str, Any], *, variable: str | None) -> ChatModel:
    provider, model = _parse(spec, variable=variable)
    entry = _PROVIDERS[provider]
    module = _import(entry, spec=str(spec))
    if provider == "langchain":
        return _langchain(module, str(spec), model, options)
    adapter: ChatModel = getattr(module, entry.cls)(model, **options)
    return adapter


def _parse(spec: object, *, variable: str | None) -> tuple[str, str]:
    """The provider and the model's name of a spec."""
    where = f"{variable}={spec!r}" if variable is not None else f"model {spec!r}"

    def refuse(reason: str) -> ModelSpecError:
        return ModelSpecError(
            f"{where} {reason}: name a model as provider:model, one of {_EXAMPLES} "
            f"(providers: {', '.join(_PROVIDERS)})",
            spec=spec if isinstance(spec, str) else None,
            variable=variable,
        )

    if not isinstance(spec, str):
        raise ModelSpecError(
            f"a model's name is a str such as 'openai:gpt-4o-mini', not {type(spec).__name__}",
            spec=None,
            variable=variable,
        )
    provider, colon, model = spec.strip().partition(":")
    if not colon:
        raise refuse("names no provider")
    if provider not in _PROVIDERS:
        raise refuse(f"names the provider {provider!r}, which interlock does not know")
    if not model.strip() or model != model.strip():
        raise refuse("names no model" if not model.strip() else "has spaces around the model")
    if provider == "langchain":
        inner, colon, name = model.partition(":")
        if not colon or not inner or not name.strip():
            raise ModelSpecError(
                f"{where} names no LangChain provider and model: write "
                "langchain:<provider>:<model>, as langchain:openai:gpt-4o-mini or "
                "langchain:ollama:llama3.1 (the providers of LangChain's init_chat_model)",
                spec=spec,
                variable=variable,
            )
    return provider, model


def _import(entry: _Provider, *, spec: str) -> Any:
    """The adapter's module, or an ImportError that says which extra to install."""
    try:
        return importlib.import_module(entry.module, __package__)
    except ImportError as exc:
        raise ImportError(
            f"the model {spec!r} needs the {entry.package} package: "
            f"pip install 'interlock[{entry.extra}]'"
        ) from exc


def _langchain(module: Any, spec: str, name: str, options: dict[str, Any]) -> ChatModel:
    """A `LangChainChatModel` over the LangChain model ``name`` (``provider:model``) stands for."""
    provider, _, model = name.partition(":")
    wrapper = {k: v for k, v in options.items() if k in _WRAPPER_OPTIONS}
    settings = {k: v for k, v in options.items() if k not in _WRAPPER_OPTIONS}
    try:
        # The `langchain` package (not langchain-core): imported by name, as it may be absent.
        init_chat_model = importlib.import_module("langchain.chat_models").init_chat_model
    except ImportError:
        init_chat_model = None
    if init_chat_model is not None:
        inner = init_chat_model(model, model_provider=provider, **settings)
    else:
        known = _LANGCHAIN_CLASSES.get(provider)
        if known is None:
            built = " and ".join(f"langchain:{p}:" for p in _LANGCHAIN_CLASSES)
            raise ImportError(
                f"the model {spec!r} is built by LangChain's init_chat_model, which needs the "
                f"langchain package: pip install langchain, and the LangChain package of "
                f"{provider!r} (without langchain, only {built} models are built)"
            )
        module_name, cls, package = known
        try:
            chat_class = getattr(importlib.import_module(module_name), cls)
        except ImportError as exc:
            raise ImportError(
                f"the model {spec!r} needs the {package} package: pip install {package}"
            ) from exc
        inner = chat_class(model=model, **settings)
    wrapped: ChatModel = module.LangChainChatModel(inner, **wrapper)
    return wrapped
