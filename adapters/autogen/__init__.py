"""resumefuzz adapter for AutoGen AgentChat (autogen-agentchat / autogen-core 0.7.5).

``AutoGenAdapter`` (target name ``autogen``) drives GraphFlow and Swarm teams of deterministic
``BaseChatAgent`` tasks through AutoGen's caller-saved ``save_state``/``load_state`` pattern.
Importing this package does not import AutoGen: ``prepare()`` and ``open()`` do.
"""

from .adapter import AutoGenAdapter

__all__ = ["AutoGenAdapter"]
