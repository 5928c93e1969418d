"""Campaigns are independent: chunk seeds are hashed from (seed, chunk), and each target
variant has its own example database entries (fuzz.profiles.database's ``key``)."""

import pytest

from fuzz.campaign import CampaignOptions, chunk_seed, run_campaign
from fuzz.profiles import DATABASE_DIR, profile_settings
from fuzz.targets import prepare, resolve


def test_chunk_seeds_never_repeat_across_seeds():
    seeds = [chunk_seed(s, c) for s in range(1, 30) for c in range(30)]
    assert len(set(seeds)) == len(seeds)
    # ``seed + chunk`` made seed 2's first chunk seed 1's second one.
    assert chunk_seed(2, 0) != chunk_seed(1, 1)


def _ops(target, seed, tmp_path, **overrides):
    adapter = prepare(resolve(target))
    ops = []
    options = CampaignOptions(seed=seed, corpus_dir=tmp_path / "corpus",
                              reports_dir=tmp_path / "reports", workdir=tmp_path / f"w{seed}",
                              **{"profile": "ci", **overrides})
    run_campaign(adapter, list(adapter.variants()), options,
                 observer=lambda event, **d: ops.append(d["op"]) if event == "op" else None)
    return ops


@pytest.mark.slow
def test_two_seeds_differ_in_their_first_chunk(tmp_path):
    first, second = (_ops("reference", seed, tmp_path, max_examples=4) for seed in (1, 2))
    assert first and second and first != second
    assert _ops("reference", 1, tmp_path, max_examples=4) == first  # a seed is reproducible


def test_targets_do_not_see_each_others_saved_examples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RESUMEFUZZ_REDIS_URL", raising=False)
    one = profile_settings("dev", key="mutant:Replay/default").database
    other = profile_settings("dev", key="mutant:LostUpdate/default").database
    same = profile_settings("nightly", key="mutant:Replay/default").database
    one.save(b"machine", b"choices")
    assert list(one.fetch(b"machine")) == [b"choices"]
    assert list(same.fetch(b"machine")) == [b"choices"]  # the same target, another profile
    assert list(other.fetch(b"machine")) == []


@pytest.mark.slow
def test_a_campaign_saves_under_its_own_target_variant(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RESUMEFUZZ_REDIS_URL", raising=False)
    _ops("mutant:InvalidPersist", 1, tmp_path, max_examples=30, stop_on_finding=True,
         shrink=False, profile="dev")
    saved = [p.name for p in (tmp_path / DATABASE_DIR).iterdir()]
    assert saved and all(name.startswith("mutant_InvalidPersist_default-") for name in saved)
