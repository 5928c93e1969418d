"""The pydantic-graph adapter: the 1.107.x ``BaseNode`` runner and its state persistence.

Importing this package imports no framework; ``PydanticGraphAdapter.prepare`` does (and refuses a
2.x install, which has no persistence).  See docs/frameworks/pydantic_graph.md.
"""

from .adapter import PydanticGraphAdapter
from .version import PersistenceRemoved, check_version

__all__ = ["PersistenceRemoved", "PydanticGraphAdapter", "check_version"]
