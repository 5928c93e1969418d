"""A store author's suite on a CrewAI ``FlowPersistence`` (run by test_crewai_custom_store.py in a
fresh interpreter; not collected by itself): ``resumefuzz.pytest.store_test("crewai", ...)`` on
the factory named by ``RESUMEFUZZ_SUITE_STORE``, under a small profile of the suite's own."""

import os

from hypothesis import Phase, settings

import resumefuzz.pytest
from adapters import storefactory

settings.register_profile("crewai-store-suite", max_examples=3, stateful_step_count=3,
                          derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])
settings.load_profile("crewai-store-suite")

make_persistence = storefactory.load(os.environ["RESUMEFUZZ_SUITE_STORE"]).func

TestMyFlowPersistence = resumefuzz.pytest.store_test(
    "crewai", make_persistence, op_timeout=120).TestCase
