import pytest
import torch

transformers = pytest.importorskip("transformers")
from engine_zo.hf import OPTIMIZERS, ZOTrainer  # noqa: E402


def _tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16)
    return transformers.GPT2LMHeadModel(config)  # built from config: no download


def _rows():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 40, (8, 8), generator=g)
    return [{"input_ids": r, "labels": r} for r in ids]


def _args(tmp_path, **kw):
    base = dict(
        learning_rate=1e-3,
        max_steps=3,
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        lr_scheduler_type="constant",
        disable_tqdm=True,
    )
    return transformers.TrainingArguments(str(tmp_path), **{**base, **kw})


@pytest.mark.parametrize("name", ["engine", "mezo"])
def test_zotrainer_runs_forward_only_steps(tmp_path, name):
    model = _tiny_gpt2()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = ZOTrainer(
        model=model,
        args=_args(tmp_path),
        train_dataset=_rows(),
        zo_optimizer=name,
        zo_kwargs={"eps": 1e-3, "seed": 0},
    )
    out = trainer.train()
    assert out.global_step == 3
    assert isinstance(trainer.optimizer_zo, OPTIMIZERS[name])
    assert trainer.optimizer_zo.forward_passes == 6
    assert all(p.grad is None for p in model.parameters())
    moved = sum(float((p.detach() - before[n]).abs().sum()) for n, p in model.named_parameters())
    assert moved > 0


def test_zotrainer_rejects_bad_options(tmp_path):
    with pytest.raises(ValueError, match="zo_optimizer"):
        ZOTrainer(
            model=_tiny_gpt2(), args=_args(tmp_path), train_dataset=_rows(), zo_optimizer="sgd"
        )
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        ZOTrainer(
            model=_tiny_gpt2(),
            args=_args(tmp_path, gradient_accumulation_steps=2),
            train_dataset=_rows(),
        )


def test_engine_on_llama_config_with_closure():
    from engine_zo import Engine

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 32, (2, 8))
    opt = Engine(model.parameters(), lr=1e-3, eps=1e-3, ranks=(4,), coarse_steps=(2,))
    losses = [float(opt.step(lambda: model(input_ids=ids, labels=ids).loss)) for _ in range(4)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert opt.forward_passes == 8
