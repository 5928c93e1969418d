"""``repro_script``: a standalone script (pydantic-graph 1.x and the standard library) that replays
a shrunk trace with the same spellings the adapter uses, for a bug report.

The script is ``repro_body.py`` (a plain script, never imported here) with the variant, the
workflow and the operations prepended as one ``CONFIG`` literal.
"""

from __future__ import annotations

import json
import pprint
from pathlib import Path

BODY = Path(__file__).with_name("repro_body.py")


def repro_script(variant, workflow, ops) -> str:
    options = variant.options
    config = {
        "variant": variant.name,
        "n": workflow.n,
        "gates": sorted(workflow.gates),
        "values": list(workflow.values),
        "backend": options["backend"],
        "shape": options["shape"],
        "resume": options["resume"],
        "recover": options["recover"],
        "corrupt": options.get("corrupt", "truncate"),
        "ops": [op.to_json() for op in ops],
    }
    header = (
        f'"""Reproduce a resumefuzz finding on pydantic-graph 1.107.x, variant {variant.name}.\n\n'
        f"{variant.description}.\n"
        "Run: python this_file.py   (needs only pydantic-graph<2; writes ./pg_repro_store)\n"
        '"""\n'
    )
    literal = pprint.pformat(json.loads(json.dumps(config)), width=100, sort_dicts=False)
    return f"{header}\nCONFIG = {literal}\n\n{BODY.read_text()}"
