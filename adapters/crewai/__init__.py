"""resumefuzz adapter for CrewAI Flows: ``adapters.crewai:CrewAIAdapter`` (target name "crewai").

Importing this package does not import CrewAI (``prepare()`` does, after ``environment()``).
"""

from .adapter import CrewAIAdapter

__all__ = ["CrewAIAdapter"]
