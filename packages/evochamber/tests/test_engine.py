"""The engine on the simulator: determinism, resume, invariance, sanity, bad inputs."""

import json

import numpy as np
import pytest

from evochamber import (
    EvoChamber,
    EvoConfig,
    NicheTagger,
    NicheWorld,
    NicheWorldConfig,
    SimPolicy,
    Task,
)
from evochamber.baselines import Debate, MajorityVote, SingleAgent
from evochamber.metrics import n_stable_specialists

WORLD = NicheWorld()


def run(cfg=None, seed=0, n=300, world=WORLD):
    eng = EvoChamber(SimPolicy(world), cfg or EvoConfig(), seed=seed)
    return eng, eng.run(world.make_stream(n, seed=seed))


def test_seeded_runs_give_identical_event_log_hashes():
    _, a = run(seed=5)
    _, b = run(seed=5)
    _, c = run(seed=6)
    assert a.digest() == b.digest() != c.digest()


def test_save_load_resumes_exactly(tmp_path):
    tasks = WORLD.make_stream(200, seed=1)
    full = EvoChamber(SimPolicy(WORLD), EvoConfig(period=25), seed=1)
    full.run(tasks)
    half = EvoChamber(SimPolicy(WORLD), EvoConfig(period=25), seed=1)
    half.run(tasks[:100])
    half.save(tmp_path / "state.json", tasks[:100])
    back = EvoChamber.load(tmp_path / "state.json", SimPolicy(WORLD))
    back.run(tasks[100:])  # issue 43: the simulator's counters travel with the state
    assert back.log.digest() == full.log.digest()
    assert json.dumps(back.state(), sort_keys=True) == json.dumps(full.state(), sort_keys=True)
    assert json.loads((tmp_path / "state.json").read_text())["tasks"][0]["task_id"] == "t00000"


def test_noise_off_world_is_solved_perfectly():
    world = NicheWorld(NicheWorldConfig.noise_off())
    _, log = run(seed=0, n=200, world=world)
    assert log.accuracy() == 1.0


def test_random_teams_give_at_most_one_stable_specialist():
    counts = [n_stable_specialists(run(EvoConfig(teams="random"), seed=s, n=600)[1].steps)
              for s in range(2)]  # fmt: skip
    assert max(counts) <= 1, counts


def test_memoryless_baselines_write_nothing():
    for b in (SingleAgent(SimPolicy(WORLD)), MajorityVote(SimPolicy(WORLD)),
              Debate(SimPolicy(WORLD))):  # fmt: skip
        log = b.run(WORLD.make_stream(100, seed=0))
        assert sum(s["codream_calls"] for s in log.steps) == 0
    with pytest.raises(ValueError, match="only rounds=2"):
        Debate(SimPolicy(WORLD), rounds=3)


def test_cost_is_recorded_per_structure():
    _, log = run(EvoConfig(structure="DEBATE", lifecycle=False), n=50)
    assert all(s["calls"] - s["codream_calls"] == 6 for s in log.steps)  # 2 rounds x 3 members
    fired = [s for s in log.steps if s["codream"]]
    assert fired
    assert all(s["codream_calls"] == 5 for s in fired)


@pytest.mark.slow
def test_permuting_agent_ids_leaves_metric_distributions_unchanged():
    from scipy.stats import ks_2samp

    def acc(seed, permute):
        eng = EvoChamber(SimPolicy(WORLD), EvoConfig(), seed=seed)
        if permute:
            order = np.random.default_rng(1000 + seed).permutation(len(eng.population))
            for a, i in zip(eng.population.agents, order, strict=True):
                a.agent_id = f"p{i:02d}"
            eng.population.agents.sort(key=lambda a: a.agent_id)
        return eng.run(WORLD.make_stream(300, seed=seed)).accuracy(100)

    base = [acc(s, False) for s in range(20)]
    perm = [acc(s, True) for s in range(20)]
    assert ks_2samp(base, perm).pvalue > 0.01


def test_tagger_labels_tasks_without_niche():
    tagger = NicheTagger({"math": ["integral"], "code": ["python"]})
    tasks = [Task("1", None, "an integral", check=lambda a: True),
             Task("2", None, "some python", check=lambda a: True)]  # fmt: skip
    from evochamber import LLMPolicy, ScriptedChatModel

    eng = EvoChamber(LLMPolicy(ScriptedChatModel(["Answer: 1"])),
                     EvoConfig(n_agents=3, lifecycle=False), tagger=tagger)  # fmt: skip
    log = eng.run(tasks)
    assert [s["niche"] for s in log.steps] == ["math", "code"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"team_size": 0}, "team size must be an integer in 1..5"),
        ({"team_size": 4, "n_agents": 3}, "exceeds the population size 3"),
        ({"capacity": 0}, r"capacity must be an int in \[1, inf\)"),
        ({"n_min": 30, "n_max": 24}, r"n_min \(30\) must be <= n_max \(24\)"),
        ({"n_min": 2, "team_size": 3}, r"n_min \(2\) must be >= the team size \(3\)"),
        ({"lam": 0.0}, r"lam must be in \(0\.0, 1\.0\]"),
        ({"lam": 1.5}, r"lam must be in \(0\.0, 1\.0\]"),
        ({"structure": "chorus"}, "unknown structure 'chorus'"),
        ({"routing": "gossip"}, "unknown routing 'gossip'"),
        ({"teams": "friends"}, "unknown teams 'friends'"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EvoConfig(**kwargs)


def test_bad_streams(tmp_path):
    eng = EvoChamber(SimPolicy(WORLD), EvoConfig())
    with pytest.raises(ValueError, match="the task stream is empty"):
        eng.run([])
    with pytest.raises(ValueError, match="has no niche and no NicheTagger"):
        eng.run([Task("x", None, "p")])
    t = WORLD.make_stream(2)
    with pytest.raises(ValueError, match="duplicate task id 't00000'"):
        eng.run([t[0], t[0]])
    with pytest.raises(ValueError, match="meta that is not JSON-serialisable"):
        eng.save(tmp_path / "s.json", [Task("x", "n0", "p", meta={"f": object()})])


@pytest.mark.parametrize("cut", [37, 50, 149])
def test_resume_mid_period_is_bit_for_bit(tmp_path, cut):
    tasks = WORLD.make_stream(160, seed=4)
    cfg = EvoConfig(period=25, min_age=25, route_scope="active")
    full = EvoChamber(SimPolicy(WORLD), cfg, seed=4)
    full.run(tasks)
    half = EvoChamber(SimPolicy(WORLD), EvoConfig(**vars(cfg)), seed=4)
    half.run(tasks[:cut])
    half.save(tmp_path / "s.json")
    back = EvoChamber.load(tmp_path / "s.json", SimPolicy(WORLD))
    back.run(tasks[cut:])
    assert json.dumps(back.state(), sort_keys=True) == json.dumps(full.state(), sort_keys=True)
    assert back.policy.state() == full.policy.state()


def test_idle_members_are_credited_only_when_asked():
    """Audit 4a: by default only members that answered are updated (SOLO_VERIFY: the anchor)."""
    eng, log = run(EvoConfig(structure="SOLO_VERIFY", lifecycle=False), n=30)
    counts = {a.agent_id: sum(a.counts.values()) for a in eng.population}
    anchors = {}
    for s in log.steps:
        anchors[s["anchor"]] = anchors.get(s["anchor"], 0) + 1
    assert {a: c for a, c in counts.items() if c} == anchors


def test_every_member_is_updated_under_solo_verify_when_asked():
    """Spec step 4 read literally: s_a = own answer if known, else the team outcome."""
    cfg = EvoConfig(structure="SOLO_VERIFY", lifecycle=False, credit_idle_members=True)
    eng, log = run(cfg, n=30)
    counts = {a.agent_id: sum(a.counts.values()) for a in eng.population}
    seen = {}
    for s in log.steps:
        for aid in s["team"]:
            seen[aid] = seen.get(aid, 0) + 1
    assert {a: c for a, c in counts.items() if c} == seen


# bad configuration values: (EvoConfig keyword arguments, exception type, message pattern)
BAD_CONFIGS = [
    ({"tau": -1.0}, ValueError, r"tau must be in \(0\.0, inf\)"),
    ({"tau": 0.0}, ValueError, r"tau must be in \(0\.0, inf\)"),
    ({"tau": float("nan")}, ValueError, "tau must be finite"),
    ({"tau": "300"}, TypeError, "tau must be a real number"),
    ({"lam": float("inf")}, ValueError, "lam must be finite"),
    ({"lam": -0.1}, ValueError, r"lam must be in \(0\.0, 1\.0\]"),
    ({"beta": -0.3}, ValueError, r"beta must be in \[0\.0, inf\)"),
    ({"gamma": -0.2}, ValueError, r"gamma must be in \[0\.0, inf\)"),
    ({"beta": float("nan")}, ValueError, "beta must be finite"),
    ({"specialist_guard": 1.5}, ValueError, r"specialist_guard must be in \[0\.0, 1\.0\]"),
    ({"specialist_guard": -0.1}, ValueError, r"specialist_guard must be in \[0\.0, 1\.0\]"),
    ({"prune_q": 1.2}, ValueError, r"prune_q must be in \[0\.0, 1\.0\]"),
    ({"prune_q": -0.5}, ValueError, r"prune_q must be in \[0\.0, 1\.0\]"),
    ({"merge_cos": 1.1}, ValueError, r"merge_cos must be in \[0\.0, 1\.0\]"),
    ({"fork_c": -0.7}, ValueError, r"fork_c must be in \[0\.0, 1\.0\]"),
    ({"fork_c": 7.0}, ValueError, r"fork_c must be in \[0\.0, 1\.0\]"),
    ({"cover_c": 2.0}, ValueError, r"cover_c must be in \[0\.0, 1\.0\]"),
    ({"cover_c": float("nan")}, ValueError, "cover_c must be finite"),
    ({"period": 0}, ValueError, r"period must be an int in \[1, inf\)"),
    ({"period": 2.5}, TypeError, "period must be an int, got"),
    ({"min_age": -1}, ValueError, r"min_age must be an int in \[0, inf\)"),
    ({"fork_cooldown": -5}, ValueError, r"fork_cooldown must be an int in \[0, inf\)"),
    ({"active_window": 0}, ValueError, r"active_window must be an int in \[1, inf\)"),
    ({"max_insights": 0}, ValueError, r"max_insights must be an int in \[1, inf\)"),
    ({"retrieve_r": -1}, ValueError, r"retrieve_r must be an int in \[0, inf\)"),
    ({"n_agents": 0}, ValueError, r"n_agents must be an int in \[1, inf\)"),
    ({"n_agents": 20.0}, TypeError, "n_agents must be an int, got"),
    ({"n_min": 0, "team_size": 1}, ValueError, r"n_min must be an int in \[1, inf\)"),
    ({"capacity": 8.5}, TypeError, "capacity must be an int, got"),
    ({"lifecycle": "yes"}, TypeError, "lifecycle must be True or False"),
    ({"memory": 1}, TypeError, "memory must be True or False"),
    ({"trigger": "always"}, ValueError, "unknown trigger 'always'"),
    ({"route_scope": "world"}, ValueError, "unknown route_scope 'world'"),
]


@pytest.mark.parametrize(("kwargs", "exc", "match"), BAD_CONFIGS)
def test_bad_config_values_raise_clear_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        EvoConfig(**kwargs)


def test_bad_operator_arguments():
    from evochamber import CoDream, Lifecycle, NicheTeamAssembler, ThompsonStructureSelector

    with pytest.raises(ValueError, match=r"merge_cos must be in \[0\.0, 1\.0\]"):
        Lifecycle(merge_cos=1.5)
    with pytest.raises(ValueError, match=r"min_age must be an int in \[0, inf\)"):
        Lifecycle(min_age=-1)
    with pytest.raises(ValueError, match=r"specialist_guard must be in \[0\.0, 1\.0\]"):
        CoDream(None, specialist_guard=-0.2)
    with pytest.raises(ValueError, match=r"window must be an int in \[1, inf\)"):
        CoDream(None, window=0)
    with pytest.raises(ValueError, match=r"beta must be in \[0\.0, inf\)"):
        NicheTeamAssembler(beta=-1.0)
    with pytest.raises(ValueError, match=r"prior a must be in \(0\.0, inf\)"):
        ThompsonStructureSelector(prior=(0.0, 1.0))
    with pytest.raises(ValueError, match="prior must be a pair"):
        ThompsonStructureSelector(prior=(1.0,))


def test_run_shows_progress_only_when_asked(monkeypatch):
    import io

    stream = WORLD.make_stream(20, seed=0)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    EvoChamber(SimPolicy(WORLD), EvoConfig(), seed=0).run(stream, progress=True)
    assert "EvoChamber tasks" in err.getvalue()
    assert "20/20" in err.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    EvoChamber(SimPolicy(WORLD), EvoConfig(), seed=0).run(stream)
    EvoChamber(SimPolicy(WORLD), EvoConfig(), seed=0).run(stream, progress=True)
    assert err.getvalue() == ""
