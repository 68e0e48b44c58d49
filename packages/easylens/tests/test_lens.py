import pytest
import torch

from easylens import EasyAmplifier, EasyBank, EasyLens, EasyTag, ZeroShotDetector, baselines
from easylens.synthetic import reports

POS = [
    "chest scan with a round lesion in the left lung",
    "chest scan with a ring lesion in the right lung",
]
NEG = ["normal chest scan with no lesion"]


def raw_lens(adapter, bank, **kw):
    return EasyLens(adapter, bank, tag=EasyTag(calibrated=False), **kw)


def test_identity_alpha_zero_empty_selection_and_identity_hook(tiny, bank, images):
    adapter = tiny[1]
    plain = adapter.encode_image(images)
    off = EasyLens(adapter, bank, tag=EasyTag(calibrated=False), amplifier=EasyAmplifier(alpha=0.0))
    torch.testing.assert_close(off.encode_image(images), plain, atol=1e-6, rtol=0)
    empty = EasyLens(adapter, bank, tag=EasyTag(threshold=1e9))
    torch.testing.assert_close(empty.encode_image(images), plain, atol=1e-6, rtol=0)
    same = adapter.forward_with_edits(images, {1: lambda x: x.clone()})
    torch.testing.assert_close(same, plain, atol=1e-6, rtol=0)
    torch.testing.assert_close(
        adapter.resume(adapter.tokens_at(images, 2), 2), plain, atol=1e-6, rtol=0
    )
    pool = EasyLens(adapter, bank, amplifier=EasyAmplifier(alpha=0.0), inject="pool")
    torch.testing.assert_close(pool.encode_image(images), plain, atol=1e-6, rtol=0)


def test_raw_lens_changes_lesion_images(tiny, bank, images):
    lens = raw_lens(tiny[1], bank)
    rep = lens.explain(images)
    assert int(rep.n_selected.sum()) > 0
    changed = (rep.g_lens - rep.g_plain).norm(dim=-1) > 0
    assert torch.equal(changed, rep.n_selected > 0)


def test_training_free(tiny, bank, images):
    model, adapter = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lens = raw_lens(adapter, bank, inject="layer")
    with torch.inference_mode():
        g = lens.encode_image(images)
    assert g.shape == (len(images), 16)
    lens.explain(images)
    with lens.attach():
        model.encode_image(images)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_attach_routes_downstream_forwards(tiny, bank, images):
    model, adapter = tiny
    lens = raw_lens(adapter, bank)
    with lens.attach():
        inside = model.encode_image(images)
    torch.testing.assert_close(inside, lens.encode_image(images), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        model.encode_image(images), adapter.encode_image(images), atol=0, rtol=0
    )
    torch.testing.assert_close(lens.as_module()(images), lens.encode_image(images), atol=0, rtol=0)


def test_batch_invariance(tiny, bank, images):
    lens = raw_lens(tiny[1], bank)
    together = lens.encode_image(images)
    alone = torch.cat([lens.encode_image(images[i : i + 1]) for i in range(len(images))])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)


def test_tag_layer_before_injection_layer(tiny, scans, images):
    adapter = tiny[1]
    bank = EasyBank.build(
        adapter, scans["normal"].images, scans["lesion"].images, layer=1, extra_layers=[2]
    )
    lens = EasyLens(adapter, bank, tag=EasyTag(calibrated=False), layer=2)
    g = lens.encode_image(images)
    assert g.shape == (len(images), 16)
    assert torch.isfinite(g).all()


def _verified_by_brute_force(adapter, bank, images, max_verify):
    """Per image, the candidates whose counterfactual replacement lowers s(I) (re-encoded)."""
    tokens = adapter.tokens_at(images, 1)
    cand = EasyTag(calibrated=False, k_max=max_verify)(tokens, bank)
    det = ZeroShotDetector(adapter, POS, NEG)
    cf = bank.normal_tokens[1]
    out = []
    for b in range(len(images)):
        base = det.score_embeddings(adapter.resume(tokens[b : b + 1], 1))[0]
        expect = set()
        for i in cand.selected[b].flatten().nonzero().flatten().tolist():
            x = tokens[b : b + 1].clone()
            z = x[0, 1 + i]
            x[0, 1 + i] = z.norm() * cf[cand.counterfactual_index[b, i]]
            if base - det.score_embeddings(adapter.resume(x, 1))[0] > 0:
                expect.add(i)
        out.append(expect)
    return out


def _selected_sets(selected):
    return [set(s.flatten().nonzero().flatten().tolist()) for s in selected]


def test_verify_through_encode_image_and_explain(tiny, bank, images):
    adapter = tiny[1]
    tag = EasyTag(calibrated=False, k_max=None, verify=True, max_verify=6)
    lens = EasyLens(adapter, bank, tag=tag, prompts=(POS, NEG))
    g = lens.encode_image(images)  # used to raise RecursionError once a patch was tagged
    rep = lens.explain(images)
    expect = _verified_by_brute_force(adapter, bank, images, 6)
    assert sum(map(len, expect)) > 0  # the case exercises a tagged, verified patch
    assert _selected_sets(rep.tag.selected) == expect
    torch.testing.assert_close(rep.g_lens, g, atol=0, rtol=0)
    # the lens equals the same amplifier fed the verified patches as a fixed selection
    oracle = baselines.OracleTag(adapter, bank, tag=EasyTag(calibrated=False, k_max=None))
    torch.testing.assert_close(oracle.encode_image(images, rep.tag.selected), g, atol=1e-6, rtol=0)
    changed = (g - adapter.encode_image(images)).norm(dim=-1) > 0
    assert torch.equal(changed, rep.n_selected > 0)


def test_verify_with_tag_layer_before_injection_layer_and_attach(tiny, scans, images):
    model, adapter = tiny
    bank = EasyBank.build(
        adapter, scans["normal"].images, scans["lesion"].images, layer=1, extra_layers=[2]
    )
    tag = EasyTag(calibrated=False, k_max=None, verify=True, max_verify=6)
    lens = EasyLens(adapter, bank, tag=tag, layer=2, prompts=(POS, NEG))
    rep = lens.explain(images)
    assert _selected_sets(rep.tag.selected) == _verified_by_brute_force(adapter, bank, images, 6)
    with lens.attach():
        inside = model.encode_image(images)
    torch.testing.assert_close(inside, rep.g_lens, atol=1e-6, rtol=0)


def _no_hooks_left(model):
    return all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_every_hook_is_removed_also_after_an_error(tiny, bank, images, monkeypatch):
    model, adapter = tiny
    tag = EasyTag(calibrated=False, k_max=None, verify=True, max_verify=6)
    lens = EasyLens(adapter, bank, tag=tag, prompts=(POS, NEG))
    lens.explain(images)
    assert _no_hooks_left(model)

    def broken(*args, **kwargs):
        raise RuntimeError("boom inside the amplifier")

    monkeypatch.setattr(lens.amplifier, "amplify", broken)
    with pytest.raises(RuntimeError, match="boom inside the amplifier"):
        lens.encode_image(images)
    assert _no_hooks_left(model)
    with pytest.raises(RuntimeError, match="boom inside the amplifier"), lens.attach():
        model.encode_image(images)
    assert _no_hooks_left(model)
    with pytest.raises(KeyError, match="raised in the body"), lens.attach():
        raise KeyError("raised in the body")
    assert _no_hooks_left(model)
    monkeypatch.undo()  # the lens works again after the errors (its guard was released)
    rep = lens.explain(images)
    assert int(rep.n_selected.sum()) > 0
    changed = (lens.encode_image(images) - rep.g_plain).norm(dim=-1) > 0
    assert torch.equal(changed, rep.n_selected > 0)


def test_zero_shot_detector_and_baselines_run(tiny, bank, scans):
    adapter = tiny[1]
    imgs = scans["subtle"].images
    det = ZeroShotDetector(EasyLens(adapter, bank), POS, NEG).fit()
    assert det.decision_function(imgs).shape == (len(imgs),)
    for enc in (
        baselines.Vanilla(adapter),
        baselines.BlindAmplifier(adapter, bank),
        baselines.RandomTag(adapter, bank, seed=0),
        baselines.LesionOnlyTag(adapter, bank),
        baselines.NoMorphology(adapter, bank),
        baselines.CLSAttentionReweight(adapter, 1),
    ):
        g = enc.encode_image(imgs)
        assert g.shape == (len(imgs), 16)
        assert torch.isfinite(g).all()
    oracle = baselines.OracleTag(adapter, bank)
    g_o = oracle.encode_image(imgs, scans["subtle"].patch_mask(4))
    assert not torch.allclose(g_o, adapter.encode_image(imgs))
    pms = baselines.PatchMaxScore(adapter, POS, NEG)
    assert pms.decision_function(imgs).shape == (len(imgs),)
    assert len(reports(scans["subtle"])) == len(imgs)


def test_blind_amplifier_rewrites_normal_images(tiny, bank, scans):
    adapter = tiny[1]
    imgs = scans["normal"].images[:3]
    g0 = adapter.encode_image(imgs)
    g = baselines.BlindAmplifier(adapter, bank).encode_image(imgs)
    change = (g - g0).norm(dim=-1)
    assert (change > 0).all()  # every normal image is rewritten
    assert change.max() > 1e-3
