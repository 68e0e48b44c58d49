"""The claims each record checks, built with ``check`` so that missing or degenerate inputs
give "not measured" (a gap of 0 between two runs that both sit at zero accuracy tells nothing).
"""

from __future__ import annotations

from protocol import Setting, equivalence, mean, paired

from methodkit.bench import Claim, check


def close_to_dp(text: str, runs: list[dict], method: str, n: int, tol: float) -> Claim:
    ours, dp = paired(runs, method, n)
    d = abs(ours - dp)
    return check(
        text, d <= tol, f"abs diff = {d:.3f}", inputs=[ours, dp], degenerate=ours == dp == 0
    )


def accuracy_claims(s: Setting, runs: list[dict], grad_diff: float) -> list[Claim]:
    """``addition_accuracy``: EM == exact gradient, accuracy thresholds, samplers and BP vs DP."""
    small = [r for r in runs if r["n_digits"] in s.ns]
    worst, pairs, floor = equivalence(small, s.ns)
    claims = [
        check(
            "EM+AdditionDP and exact gradient: per-seed final sum accuracy within 0.005",
            pairs > 0 and worst <= 0.005,
            f"max abs diff = {worst:.4f} over {pairs} seed pairs",
            inputs=[worst],
            degenerate=floor,
        ),
        check(
            "gradients equal at initialisation (float64, 1e-10)",
            grad_diff <= 1e-10,
            f"max abs diff = {grad_diff:.2e}",
            inputs=[grad_diff],
            quick=True,  # an identity: it holds at any scale
        ),
    ]
    for n, thr in ((1, 0.92), (2, 0.85), (4, 0.75)):
        if n in s.ns:
            v = mean(small, "em_dp", n, "sum_accuracy")
            claims.append(
                check(
                    f"EM exact mean sum accuracy N={n} >= {thr}", v >= thr, f"{v:.3f}", inputs=[v]
                )
            )
    dig = {n: mean(small, "em_dp", n, "digit_accuracy") for n in s.ns}
    claims.append(
        check(
            "EM exact digit accuracy >= 0.95 for N <= 4",
            min(dig.values()) >= 0.95,
            ", ".join(f"N={n}: {v:.3f}" for n, v in dig.items()),
            inputs=list(dig.values()),
        )
    )
    claims.append(
        close_to_dp(
            "rejection sampling within 0.03 of exact at N=1", small, "em_rejection", 1, 0.03
        )
    )
    claims.append(close_to_dp("ABC within 0.05 of exact at N=2", small, "em_abc", 2, 0.05))
    bp = {n: paired(runs, "em_bp", n) for n in [*s.ns, s.big_n]}
    d_bp = {n: abs(a - b) for n, (a, b) in bp.items()}
    claims.append(
        check(
            "BP within 0.01 of DP (sum accuracy) at every N",
            max(d_bp.values()) <= 0.01,
            ", ".join(f"N={n}: {v:.3f}" for n, v in d_bp.items()),
            inputs=[x for pair in bp.values() for x in pair],
            degenerate=any(a == b == 0 for a, b in bp.values()),
        )
    )
    return claims


def n15_claims(s: Setting, big: list[dict]) -> list[Claim]:
    """``addition_n15``: EM-exact seeds succeed, median accuracy, trajectories, acceptance."""
    big_n = s.big_n
    em_big = sorted((r for r in big if r["method"] == "em_dp"), key=lambda r: r["seed"])
    ok = [r for r in em_big if r["digit_accuracy"] >= 0.95]
    med = sorted(r["sum_accuracy"] for r in ok)[len(ok) // 2] if ok else float("nan")
    need = 1 if s.quick else 3
    acc_rej = mean(big, "em_rejection", big_n, "acceptance_rate")
    worst, pairs, floor = equivalence(big, [big_n])
    claims = [
        check(
            f"N={big_n}: >= {need} of {len(em_big)} EM-exact seeds succeed (digit acc >= 0.95)",
            len(ok) >= need,
            f"{len(ok)} of {len(em_big)}: "
            + ", ".join(f"s{r['seed']}={r['digit_accuracy']:.3f}" for r in em_big),
            inputs=[r["digit_accuracy"] for r in em_big],
        ),
        check(
            f"N={big_n}: median sum accuracy of successful seeds >= 0.40",
            med >= 0.40,
            f"{med:.3f}",
            inputs=[med],
        ),
        check(
            f"N={big_n}: exact gradient follows EM-exact per seed (sum accuracy within 0.005)",
            pairs > 0 and worst <= 0.005,
            f"max abs diff = {worst:.4f} over {pairs} seed pairs",
            inputs=[worst],
            degenerate=floor,
        ),
        check(
            f"N={big_n}: rejection-sampling acceptance collapses (< 0.01)",
            acc_rej < 0.01,
            f"acceptance rate {acc_rej:.2e}",
            inputs=[acc_rej],
        ),
    ]
    return claims


def scaling_claims(
    r2: dict[str, float],
    ctl: dict[str, list[float]],
    ep_em: list[float],
    ep_ex: list[float],
    saved: dict[str, dict[str, float]],
    rss: dict[str, dict[str, float]],
    big_n: int,
    mem_ns: list[int],
) -> list[Claim]:
    def med(v: list[float]) -> float:
        return sorted(v)[len(v) // 2]

    def avg(v: list[float]) -> float:
        return sum(v) / len(v)

    mem_ok = all(saved["em_dp"][k] <= saved["exact_gradient"][k] for k in saved["em_dp"])
    rss_ok = all(rss["em_dp"][k] <= rss["exact_gradient"][k] for k in rss.get("em_dp", {}))
    mem_in = [v for d in (saved, rss) for m in d.values() for v in m.values()]
    return [
        check(
            "E-step time per example linear in N for DP and BP (linear fit R^2 >= 0.95, N=1..50)",
            min(r2.values()) >= 0.95,
            ", ".join(f"{m}: R^2={v:.3f}" for m, v in r2.items()),
            inputs=list(r2.values()),
        ),
        check(
            f"EM epoch time <= exact-gradient epoch time at N={big_n}",
            med(ctl["em_dp"]) <= med(ctl["exact_gradient"]),
            f"alone, interleaved (median of {len(ctl['em_dp'])}): {med(ctl['em_dp']):.2f} s vs "
            f"{med(ctl['exact_gradient']):.2f} s; in the parallel training runs: "
            f"{avg(ep_em):.2f} s vs {avg(ep_ex):.2f} s",
            inputs=[med(ctl["em_dp"]), med(ctl["exact_gradient"])],
        ),
        check(
            f"EM memory <= exact gradient at N in {mem_ns} (autograd saved tensors"
            + (", peak RSS increase)" if rss else ")"),
            mem_ok and rss_ok,
            "; ".join(
                f"N={k}: saved {saved['em_dp'][k]:.2f} vs {saved['exact_gradient'][k]:.2f} MiB"
                + (
                    f", RSS +{rss['em_dp'][k]:.1f} vs +{rss['exact_gradient'][k]:.1f} MiB"
                    if rss
                    else ""
                )
                for k in saved["em_dp"]
            ),
            inputs=mem_in,
        ),
    ]
