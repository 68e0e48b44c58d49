"""Arithmetic task, character tokenizer, rollouts, ESSAMTrainer and MinimalGRPO on tiny GPT-2s."""

import pytest
import torch

from essam import ESSAMConfig, ESSAMTrainer
from essam.tasks import arithmetic as ar

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok():
    return ar.CharTokenizer()


def _model(tok, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        n_positions=192,
        vocab_size=len(tok),
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return transformers.GPT2LMHeadModel(cfg)


def test_problems_splits_and_reward():
    for split in ar.SPLITS:
        rows = ar.make_problems(30, split, seed=1)
        assert len(rows) == 30
        for r in rows:
            assert r["prompt"].endswith(" A:")
            assert ar.extract_answer(r["target"]) == r["answer"]
    train = {r["prompt"] for r in ar.make_problems(300, "rl_train")}
    test = {r["prompt"] for r in ar.make_problems(300, "rl_test")}
    assert not train & test
    assert all(21 <= int(r["prompt"].split()[2]) <= 40 for r in ar.make_problems(20, "ood"))
    assert ar.correctness_reward(["p", "p"], [" 1+1=2 #### 2", "#### 3"], [2, 2]) == [1.0, 0.0]
    assert ar.partial_reward(["p"] * 3, ["#### 7", "#### 5", "none"], [5, 5, 5]) == [
        0.5 * 0.8,
        1.0,
        0.0,
    ]
    with pytest.raises(ValueError, match="split must be one of"):
        ar.make_problems(3, "dev")
    with pytest.raises(ValueError, match="2 completions for 1 answers"):
        ar.correctness_reward(["p"], ["a", "b"], [1])


def test_char_tokenizer_round_trip(tok):
    text = "Ana has 7 pens. A: 7+5=12 #### 12"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    batch = tok(["ab", "abcd"], padding=True)
    assert batch["input_ids"][0][:2] == [tok.pad_token_id] * 2  # left padding


def test_generate_greedy_is_deterministic_and_padding_invariant(tok):
    from essam.rollout import generate

    model = _model(tok)
    prompts = ["Ana has 3 pens. A:", "Ben has 12 cups. Gets 4 more. How many cups? A:"]
    a = generate(model, tok, prompts, max_new_tokens=6)
    b = generate(model, tok, prompts, max_new_tokens=6)
    assert a == b
    assert len(a) == 2
    alone = generate(model, tok, prompts[:1], max_new_tokens=6)
    assert alone[0] == a[0]  # left padding + position ids: batching does not change the text
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, tok, prompts, max_new_tokens=0)


def test_trainer_smoke_two_iterations(tok, tmp_path):
    model = _model(tok)
    before = [p.detach().clone() for p in model.parameters()]
    train = ar.make_problems(16, "rl_train")
    args = ESSAMConfig(
        max_steps=2,
        per_device_train_batch_size=4,
        population_size=4,
        sigma=1e-2,
        learning_rate=1e-3,
        max_completion_length=8,
        variant="accelerated",
        output_dir=str(tmp_path / "out"),
    )
    trainer = ESSAMTrainer(
        model,
        [ar.partial_reward],
        train,
        args,
        processing_class=tok,
        eval_dataset=ar.make_problems(4, "rl_test"),
    )
    hist = trainer.train()
    assert [h["step"] for h in hist] == [0, 1]
    assert trainer.rollouts == (8 + 4) * 4  # accelerated: 2N prompts-batches then N
    assert any(not torch.equal(p, q) for p, q in zip(before, model.parameters(), strict=False))
    ev = trainer.evaluate()
    assert 0.0 <= ev["accuracy"] <= 1.0
    path = trainer.save_model()
    assert (tmp_path / "out" / "config.json").exists()
    assert path.endswith("out")


def test_trainer_bad_inputs(tok):
    model = _model(tok)
    train = ar.make_problems(4, "rl_train")
    with pytest.raises(ValueError, match="rows need a 'prompt' key"):
        ESSAMTrainer(model, ar.correctness_reward, [{"question": "x"}], processing_class=tok)
    with pytest.raises(TypeError, match="reward_funcs must be callables"):
        ESSAMTrainer(model, [3], train, processing_class=tok)
    args = ESSAMConfig(
        max_steps=1, per_device_train_batch_size=2, population_size=2, max_completion_length=2
    )
    tr = ESSAMTrainer(model, lambda prompts, completions, **kw: [1.0], train, args, tok)
    with pytest.raises(ValueError, match="returned 1 values for 2 completions"):
        tr.train()
    tr = ESSAMTrainer(
        model, lambda prompts, completions, **kw: [float("nan")] * 2, train, args, tok
    )
    with pytest.raises(ValueError, match="NaN"):
        tr.train()


def test_minimal_grpo_step_and_reference_model(tok):
    from essam.baselines import MinimalGRPO

    model = _model(tok)
    rows = ar.make_problems(2, "rl_train")
    grpo = MinimalGRPO(
        model,
        tok,
        ar.partial_reward,
        num_generations=4,
        beta=0.1,
        max_completion_length=8,
        learning_rate=1e-2,
    )
    before = [p.detach().clone() for p in model.parameters()]
    calls = []

    def reward(prompts, completions, answer, **kw):
        calls.append(len(completions))
        return [float(len(c) % 3) for c in completions]  # varied rewards -> non-zero advantage

    grpo.reward_funcs = [reward]
    out = grpo.step(rows)
    assert calls == [8]
    assert grpo.rollouts == 8
    assert set(out) == {"reward", "loss", "rollouts"}
    assert any(not torch.equal(p, q) for p, q in zip(before, model.parameters(), strict=False))
    assert all(torch.equal(p, q) for p, q in zip(before, grpo.ref.parameters(), strict=False))
    with pytest.raises(ValueError, match="num_generations must be >= 2"):
        MinimalGRPO(model, tok, reward, num_generations=1)


def test_trl_adapter_is_lazy():
    import importlib.util

    from essam.baselines import trl_grpo

    if importlib.util.find_spec("trl") is None:
        with pytest.raises(ImportError, match="pip install trl"):
            trl_grpo.run(None, [], [])


def test_wall_clock_limit_rejects_a_bad_budget():
    from essam.baselines import trl_grpo

    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive finite"):
            trl_grpo.wall_clock_limit(bad)


def _text_hash_reward(prompts, completions, **_):
    """A reward that varies between random completions, so GRPO advantages are non-zero."""
    return [sum(map(ord, t)) % 5 / 4 for t in completions]


@pytest.mark.slow
def test_trl_grpo_trains_only_the_subset_of_tiny_smollm2_within_the_wall_clock(tmp_path):
    pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from essam.baselines import trl_grpo
    from essam.tasks.sums import make_sum_prompts, sum_reward
    from methodkit.smollm2 import tiny_smollm2

    model, tok = tiny_smollm2(layers=2, hidden=24)
    model.save_pretrained(tmp_path / "model")  # TRL builds its reference model from here
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    for p in model.parameters():
        p.requires_grad_(False)
    subset = {f"model.layers.1.{n}" for n, _ in model.model.layers[1].named_parameters()}
    subset.add("model.norm.weight")
    for n, p in model.named_parameters():
        p.requires_grad_(n in subset)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def partial_sum_reward(prompts, completions, answer, **_):
        return sum_reward(prompts, completions, answer, partial=True)

    budget, max_steps = 1.0, 200
    limit = trl_grpo.wall_clock_limit(budget)
    trainer = trl_grpo.run(
        model,
        [partial_sum_reward, _text_hash_reward],
        datasets.Dataset.from_list(make_sum_prompts(40, "train")),
        processing_class=tok,
        callbacks=[limit],
        output_dir=str(tmp_path / "out"),
        max_steps=max_steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=3,
        learning_rate=1e-2,
        beta=0.04,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    steps = trainer.state.global_step
    assert trainer.ref_model is not None
    # stopped by the clock, at the first step that ended past the budget
    assert 2 <= steps < max_steps
    assert limit.steps == steps == len(limit.curve)
    assert limit.curve[-2][0] < budget <= limit.curve[-1][0] == limit.elapsed
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed
    assert changed <= subset
