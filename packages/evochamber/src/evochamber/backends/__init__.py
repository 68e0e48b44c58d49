"""Chat back-ends: the ChatModel protocol, transformers, OpenAI-compatible HTTP, a test double.

The protocol has the shape of the chat back-ends of the ``preg`` and ``eva-agent`` specs, so
the three can later share one implementation in the core package.
"""

from evochamber.backends.base import ChatModel, ChatResult, ScriptedChatModel, check_choices
from evochamber.backends.hf import HFChatModel
from evochamber.backends.openai import OpenAIChatModel

__all__ = [
    "ChatModel",
    "ChatResult",
    "HFChatModel",
    "OpenAIChatModel",
    "ScriptedChatModel",
    "check_choices",
]
