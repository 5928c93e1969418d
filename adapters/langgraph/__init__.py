"""resumefuzz's LangGraph adapter: ``adapters.langgraph:LangGraphAdapter`` (target ``langgraph``).

Importing this package does not import LangGraph: ``prepare()`` does, after ``environment()``
has turned telemetry off.  ``store``, ``workflow``, ``driver`` and ``tamper`` are standalone
(LangGraph, psycopg and the standard library only) so that repro scripts can embed them;
``variants``, ``adapter``, ``case`` and ``repro`` speak the adapter protocol.
"""

from .adapter import LangGraphAdapter

__all__ = ["LangGraphAdapter"]
