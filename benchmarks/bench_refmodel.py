"""Reference model throughput: Model.step calls per second, and `explore` at the default config.

    python benchmarks/bench_refmodel.py
"""

import random
import statistics
import time

from refmodel import MUTANTS, Model, World, Workflow, candidate_ops, explore_reference
from refmodel import shortest_exposure


def random_steps(count: int = 3000, seed: int = 0) -> list:
    """(model, world, op) triples from random walks (up to 12 ops) over every enabled op."""
    rng = random.Random(seed)
    model = Model(Workflow(3, {2}, ("a", "b")))
    triples = []
    while len(triples) < count:
        world = World()
        for _ in range(12):
            ops = list(candidate_ops(model, world))
            if not ops:
                break
            op = rng.choice(ops)
            triples.append((model, world, op))
            world = rng.choice(model.step(world, op))[1]
    return triples


def steps_per_second(triples: list, repeat: int = 5) -> float:
    """Model.step calls per second (each returns every allowed alternative)."""
    best = 0.0
    for _ in range(repeat):
        started = time.perf_counter()
        for model, world, op in triples:
            model.step(world, op)
        best = max(best, len(triples) / (time.perf_counter() - started))
    return best


def enumerations_per_second(triples: list) -> float:
    """candidate_ops calls per second: enumerating every enabled op with every crash point."""
    started = time.perf_counter()
    for model, world, _ in triples[:500]:
        list(candidate_ops(model, world))
    return 500 / (time.perf_counter() - started)


def explore_seconds(depth: int = 3, repeat: int = 3) -> float:
    workflow = Workflow(3, {2}, ("a", "b"))
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        explore_reference(workflow, depth)
        shortest_exposure(workflow, None, depth)
        for mutant in MUTANTS:
            shortest_exposure(workflow, mutant, depth)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


if __name__ == "__main__":
    triples = random_steps()
    print(f"refmodel: {steps_per_second(triples):,.0f} Model.step calls/s; "
          f"{enumerations_per_second(triples):,.0f} candidate_ops enumerations/s "
          "(random walks, n=3, gate 2)")
    print(f"explore (n=3, gate 2, values a,b, depth 3, reference + 9 mutants): "
          f"{explore_seconds():.2f} s median of 3")
    print(f"explore at depth 4: {explore_seconds(depth=4, repeat=1):.2f} s")
