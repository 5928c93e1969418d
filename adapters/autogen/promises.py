"""What AutoGen AgentChat 0.7.5 promises about each resume property, in its own words.

AutoGen has no checkpointer: ``team.save_state()`` returns a dict, the application stores it, and
``team.load_state(d)`` plus another ``team.run(task=...)`` resumes.  So most of what AutoGen
documents is the mechanism (what a saved state holds, that it is validated when loaded, that it
can be loaded into another team), and the storing, the save schedule and any guard between calls
are the caller's.  Quotes are verbatim at the pinned release: the installed package's docstrings
(``autogen-agentchat 0.7.5 <path>:LINE``) and the user guide (the stable page, whose source is the
notebook at tag ``python-v0.7.5``, commit 83afbf5857aac683340d4c692194e548b1e8edda of
microsoft/autogen).  Docstring line breaks are joined with one space.
"""

from adapters.protocol import Promise

_TAG = "microsoft/autogen python-v0.7.5 (83afbf5857aa)"
_STATE_PAGE = "https://microsoft.github.io/autogen/stable/user-guide/agentchat-user-guide/tutorial/state.html"
_STATE_NB = "python/docs/src/user-guide/agentchat-user-guide/tutorial/state.ipynb"
_HITL_PAGE = ("https://microsoft.github.io/autogen/stable/user-guide/agentchat-user-guide/tutorial/"
              "human-in-the-loop.html")
_HITL_NB = "python/docs/src/user-guide/agentchat-user-guide/tutorial/human-in-the-loop.ipynb"
_BGC = "autogen-agentchat 0.7.5 autogen_agentchat/teams/_group_chat/_base_group_chat.py"
_MESSAGES = "autogen-agentchat 0.7.5 autogen_agentchat/messages.py"

PROMISES = (
    # PC: what a save holds.  hitl variants save when a run returns, the documented HITL loop.
    Promise(
        "PC",
        quote="When we call `save_state` on a team, it saves the state of all the agents in the team.",
        source=f"{_STATE_PAGE} ('Saving and Loading Teams'; {_TAG} {_STATE_NB}:127)",
    ),
    Promise(
        "PC",
        quote=("Once a team finishes a run, the application saves the state of the team, puts it in "
               "a persistent storage, and resumes the team when the feedback arrives."),
        source=f"{_HITL_PAGE} ('Providing Feedback to the Next Run'; {_TAG} {_HITL_NB}:178-179)",
        options={"save": "hitl"},
    ),
    Promise(
        "EO",
        why=("AutoGen saves nothing during a run, and a run resumed or re-issued from a saved state "
             "executes its agents again; an agent that calls a tool with an external effect (a "
             "payment, an e-mail) needs that effect to happen once, or the application must make "
             "it idempotent."),
    ),
    Promise(
        "FD",
        quote="Load an external state and overwrite the current state of the group chat team.",
        source=f"{_BGC}:799 (BaseGroupChat.load_state)",
    ),
    Promise(
        "CV",
        quote=("The default implementation uses the Pydantic model's :meth:`model_validate` method "
               "to create the message from the data."),
        source=(f"{_MESSAGES}:61-62 (BaseMessage.load, which load_state applies to every saved "
                "message through the team's MessageFactory)"),
    ),
    Promise(
        "CO",
        why=("AutoGen has no interrupt object, id or consume record: an answer is one more task "
             "message, so two workers (or a retried request holding an old saved state) can "
             "deliver the same answer twice; a human approval that releases an action must be "
             "consumed once."),
    ),
    Promise(
        "RD",
        quote="This is to allow the state to be portable across different teams and runtimes.",
        source=f"{_BGC}:769-770 (BaseGroupChat.save_state, note)",
    ),
    Promise(
        "FI",
        why=("Resuming and branching are the same calls, load_state(state) then run(task=answer), "
             "so nothing tells a retry of the pending question from a new branch off an older "
             "state; an application that offers both (edit an earlier answer, retry a failed "
             "request) must keep the difference itself."),
    ),
    Promise(
        "LV",
        quote=("In many cases, it is useful to save the state of these components to disk and load "
               "them back later. This is particularly useful in a web application where stateless "
               "endpoints respond to requests and need to load the state of the application from "
               "persistent storage."),
        source=f"{_STATE_PAGE} ('Managing State'; {_TAG} {_STATE_NB}:9)",
    ),
)
