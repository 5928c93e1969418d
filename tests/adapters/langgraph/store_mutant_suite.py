"""A store author's suite on a saver with a defect of its own (run by
test_langgraph_store_pytest.py in a fresh interpreter; not collected by itself).

The mutant is the self-test of ``resumefuzz.pytest``: LangGraph's ``SqliteSaver`` with
``put_writes`` made a no-op, so interrupts and task results are never stored.  LangGraph's own
saver does not do that, so the baseline must not set the finding aside: the test must fail.
"""

import sqlite3

from hypothesis import Phase, settings

import resumefuzz.pytest
from resumefuzz import StoreContext, StoreHandle

settings.register_profile("mutant", max_examples=10, stateful_step_count=4, derandomize=True,
                          database=None, phases=[Phase.explicit, Phase.generate])
settings.load_profile("mutant")


def forgetful_saver(ctx: StoreContext) -> StoreHandle:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class ForgetfulSaver(SqliteSaver):
        def put_writes(self, config, writes, task_id, task_path=""):
            return None  # the defect: pending writes (interrupts, results) are dropped

    conn = sqlite3.connect(str(ctx.workdir / "f.sqlite"), check_same_thread=False, timeout=60)
    return StoreHandle(store=ForgetfulSaver(conn), close=conn.close)


forgetful_saver.store_name = "forgetful"

TestForgetful = resumefuzz.pytest.store_test(
    "langgraph", forgetful_saver, variants=("graph-sync-head-update",), op_timeout=20,
).TestCase
