"""resumefuzz's LangGraph adapter: ``adapters.langgraph:LangGraphAdapter`` (target ``langgraph``).

Importing this package does not import LangGraph: ``prepare()`` does, after ``environment()``
has turned telemetry off.  ``store``, ``workflow``, ``driver`` and ``tamper`` speak LangGraph
(and psycopg) only; ``variants``, ``adapter``, ``case`` and ``repro`` speak the adapter protocol.
"""

from .adapter import LangGraphAdapter

__all__ = ["LangGraphAdapter"]
