"""HF adapters on tiny configs built without weights (no download)."""

import copy

import pytest
import torch

from eva_cap import GRPOConfig, GRPOTrainer, HFCausalPolicy, HFSeq2SeqPolicy

transformers = pytest.importorskip("transformers")


class CharTok:
    """A stand-in tokenizer: ids 3..28 are letters, 0 pad, 1 eos."""

    pad_token_id, eos_token_id = 0, 1

    def batch_decode(self, rows, skip_special_tokens=True):
        return ["".join(chr(94 + t) for t in r if t > 2) for r in rows]


def _reward(prompts=None, completions=(), **kw):
    return [float(len(c)) for c in completions]


def _check(policy, batch):
    torch.manual_seed(0)
    tok, mask = policy.sample(batch, 3, 6, 1.0)
    assert tok.shape[0] == 6
    assert mask.shape == tok.shape
    lp = policy.token_logprobs(batch, tok)
    assert lp.shape == tok.shape
    assert torch.all(lp <= 0)
    assert len(policy.decode(tok)) == 6
    cfg = GRPOConfig(num_generations=3, max_completion_length=6)
    logs = GRPOTrainer(policy, copy.deepcopy(policy), _reward, cfg).step(batch)
    assert set(logs) >= {"kl", "loss", "reward/_reward"}


def test_seq2seq_policy_on_a_tiny_t5():
    cfg = transformers.T5Config(vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=1,
                                num_heads=2, decoder_start_token_id=0, pad_token_id=0,
                                eos_token_id=1)  # fmt: skip
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    batch = {"input_ids": torch.randint(3, 32, (2, 5)), "attention_mask": torch.ones(2, 5)}
    policy = HFSeq2SeqPolicy(model, CharTok())
    _check(policy, batch)
    tok = torch.tensor([[5, 6, 1, 0]])
    one = {k: v[:1] for k, v in batch.items()}
    logits = model(**one, decoder_input_ids=torch.tensor([[0, 5, 6, 1]])).logits
    want = torch.log_softmax(logits, -1)[0, torch.arange(4), tok[0]]
    torch.testing.assert_close(policy.token_logprobs(one, tok)[0], want)


def test_causal_policy_on_a_tiny_llama():
    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, pad_token_id=0, eos_token_id=1,
                                   bos_token_id=2)  # fmt: skip
    model = transformers.LlamaForCausalLM(cfg).eval()
    batch = {"input_ids": torch.tensor([[0, 4, 5], [6, 7, 8]]),
             "attention_mask": torch.tensor([[0, 1, 1], [1, 1, 1]])}  # fmt: skip
    _check(HFCausalPolicy(model, CharTok()), batch)


def test_missing_eos_is_an_error():
    class NoEos:
        pad_token_id = eos_token_id = None

    model = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="eos_token_id"):
        HFCausalPolicy(model, NoEos())
