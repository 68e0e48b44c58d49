"""The cost suite (issue 51): s/step and memory of eva-cap's GRPO trainer beside TRL's.

TRL's ``GRPOTrainer`` needs a ``transformers`` model and tokenizer, which the procedural
world's TinyAVCaptioner is not; both trainers therefore run the same tiny HF causal LM
(Llama layout at the captioner's scale, fresh weights saved to and loaded from a temporary
folder, a character tokenizer built in the run: nothing downloaded) through
``eva_cap.HFCausalPolicy``, with the same prompts, gold events, rewards
(``trl_reward_funcs``: the gated event reward), G, completion length, beta, epsilon and
learning rate. A rep is two GRPO steps of each; TRL's steps are timed by a callback
(its one-off set-up is outside), eva-cap's by the clock around ``step``. Reps interleave and
the statistic is the median per step. Peak memory: ``methodkit.bench.peak_memory`` of two
steps of each in a spawned process.
"""

from __future__ import annotations

import statistics
import string
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from eva_cap import (
    GrammarDecomposer,
    GRPOConfig,
    GRPOTrainer,
    HFCausalPolicy,
    trl_reward_funcs,
)
from eva_cap.synthetic import AVWorld, collate
from methodkit.bench import (
    Outcome,
    ResultRow,
    check,
    cost_entry,
    load_average,
    peak_memory,
    stable_ratio,
)

MIB = 2**20
CHARS = string.ascii_lowercase + " .,:"
SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4}  # fmt: skip


def tiny_lm(folder: Path) -> tuple[Any, Any]:
    """A fresh tiny Llama and its character tokenizer, saved to and loaded from ``folder``."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<pad>": 0, "</s>": 1, "<s>": 2, "<unk>": 3} | {c: i + 4 for i, c in enumerate(CHARS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()  # characters back without spaces between them
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="</s>", bos_token="<s>",
        unk_token="<unk>", padding_side="left",
    )  # fmt: skip
    cfg = transformers.LlamaConfig(vocab_size=len(vocab), pad_token_id=0, eos_token_id=1,
                                   bos_token_id=2, max_position_embeddings=128,
                                   **SHAPE)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    return model, transformers.AutoTokenizer.from_pretrained(folder)


def _prompts(n: int) -> tuple[list[str], list[str]]:
    clips = collate(AVWorld(0).sample(n))
    prompts = [f"caption clip {i}:" for i in range(n)]
    return prompts, [g.to_json() for g in clips["gold_events"]]


def ours_steps(
    folder: str, prompts: list[str], gold: list[str], g: dict, steps: int
) -> list[float]:
    """Seconds of ``steps`` eva-cap GRPO steps (all prompts per step) on the model in folder."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    cfg = GRPOConfig(num_generations=g["G"], beta=g["beta"], epsilon=0.2, learning_rate=g["lr"],
                     max_completion_length=g["max_len"], seed=0)  # fmt: skip
    trainer = GRPOTrainer(HFCausalPolicy(model, tok), None,
                          trl_reward_funcs(GrammarDecomposer()), cfg)  # fmt: skip
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "gold_events": gold}  # fmt: skip
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.step(batch)
        out.append(time.perf_counter() - t0)
    return out


def trl_steps(folder: str, prompts: list[str], gold: list[str], g: dict, steps: int) -> list[float]:
    """Seconds of ``steps`` TRL GRPO steps (set-up excluded: timed by a callback)."""
    import datasets
    import transformers
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer as TRLTrainer

    class StepClock(transformers.TrainerCallback):
        def __init__(self) -> None:
            self.t0, self.secs = 0.0, []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.secs.append(time.perf_counter() - self.t0)

    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    data = datasets.Dataset.from_dict({"prompt": prompts, "gold_events": gold})
    clock = StepClock()
    with tempfile.TemporaryDirectory(prefix="evacap-trl-") as out:
        args = TRLConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=len(prompts) * g["G"],
            num_generations=g["G"], max_completion_length=g["max_len"], learning_rate=g["lr"],
            lr_scheduler_type="constant", beta=g["beta"], epsilon=0.2, temperature=1.0,
            use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1,
            disable_tqdm=True, seed=0, shuffle_dataset=False,
        )  # fmt: skip
        TRLTrainer(model=model, reward_funcs=trl_reward_funcs(GrammarDecomposer()), args=args,
                   train_dataset=data, processing_class=tok, callbacks=[clock]).train()  # fmt: skip
    return clock.secs


def _two_steps(which: str, folder: str, prompts: list, gold: list, g: dict) -> None:
    """A spawned child for peak_memory."""
    torch.set_num_threads(1)
    (ours_steps if which == "ours" else trl_steps)(folder, prompts, gold, g, 2)


def cost(args: Any) -> Outcome:
    """eva-cap GRPOTrainer vs trl.GRPOTrainer on the same tiny HF LM: s/step, peak MiB."""
    quick = args.quick
    reps, n_prompts = (1, 2) if quick else (5, 8)
    g = {"G": 4 if quick else 8, "beta": 0.04, "lr": 1e-4, "max_len": 16 if quick else 40}
    prompts, gold = _prompts(n_prompts)
    with tempfile.TemporaryDirectory(prefix="evacap-lm-") as folder:
        model, _ = tiny_lm(Path(folder))
        n_params = sum(p.numel() for p in model.parameters())
        secs: dict[str, list[float]] = {"eva-cap GRPOTrainer": [], "TRL GRPOTrainer": []}
        runs = {"eva-cap GRPOTrainer": ours_steps, "TRL GRPOTrainer": trl_steps}
        for rep in range(reps + 1):  # rep 0 warms both up, untimed
            order = list(runs) if rep % 2 == 0 else list(runs)[::-1]
            for name in order:
                steps = runs[name](folder, prompts, gold, g, 2)
                if rep > 0:
                    secs[name].append(statistics.median(steps))
        mem = {
            k: peak_memory(_two_steps, args=(w, folder, prompts, gold, g), in_process=quick) / MIB
            for k, w in (("eva-cap GRPOTrainer", "ours"), ("TRL GRPOTrainer", "trl"))
        }
    ours, trl = runs
    stat = f"median of {reps} interleaved reps (each the median of 2 steps)"
    cost_list = [
        cost_entry(f"time per GRPO step ({n_prompts} prompts x G={g['G']}, {g['max_len']} tokens)",
              "s/step", True, ours, secs[ours], "TRL GRPOTrainer", secs[trl], stat),
        cost_entry("peak memory of 2 GRPO steps (RSS above import torch)", "MiB", True, ours,
              [mem[ours]], trl, [mem[trl]],
              "one spawned run each" if not quick else "in-process lower bound"),
    ]  # fmt: skip
    claims = (
        [stable_ratio(cost_list[0])]
        if reps >= 4
        else [check("step time measured", False, "quick run: one rep", degenerate=True)]
    )
    rows = [ResultRow.from_values(k, "s_per_step", v, False) for k, v in secs.items()]
    rows += [ResultRow.from_values(k, "peak_MiB", [v], False) for k, v in mem.items()]
    config = {"policy": {"kind": "LlamaForCausalLM, fresh weights", "params": n_params, **SHAPE,
                         "tokenizer": f"characters ({len(CHARS)} + 4 specials)"},
              "prompts_per_step": n_prompts, **g, "reps": reps, "load_avg_after": load_average(),
              "note": "the TinyAVCaptioner is no transformers model, so TRL cannot run it: "
              "both trainers run the same tiny HF LM", "cost": cost_list}  # fmt: skip
    return Outcome(config, rows, claims, seeds=[0], plot_metrics=["s_per_step", "peak_MiB"],
                   labels={"s_per_step": "time per GRPO step", "peak_MiB": "peak memory"},
                   units={"s_per_step": "s", "peak_MiB": "MiB"})  # fmt: skip
