"""LlamaIndex Workflows adapter for resumefuzz: ``adapters.llamaindex:LlamaIndexAdapter``.

Importing this package imports no framework code (the engine sets the environment first).
"""

from .adapter import LlamaIndexAdapter

__all__ = ["LlamaIndexAdapter"]
