"""Two eval reports of one grid on two layouts (tests/integration/task_eval.sh, mqar.sh): the same
documents through fp32 GEMMs of other shapes, so OpenBLAS may sum a logit in another order
(docs/reliability.md "Numerics"). same() holds them to the scripts' contract: every count, name
and length exact; *nats* fields within `nats_rel` relative; *accuracy* fields within
`accuracy_abs` (an argmax within rounding of a tie); fields named in `skip` not compared.
Returns the worst relative nats difference seen."""


def same(a, b, nats_rel, accuracy_abs, skip=(), path=""):
    worst = 0.0
    if isinstance(a, dict):
        assert list(a) == list(b), (path, list(a), list(b))
        for k in a:
            if k not in skip:
                worst = max(worst, same(a[k], b[k], nats_rel, accuracy_abs, skip, path + "." + k))
    elif isinstance(a, list):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            worst = max(worst, same(x, y, nats_rel, accuracy_abs, skip, "%s[%d]" % (path, i)))
    elif isinstance(a, float) and "nats" in path:
        d = abs(a - b) / max(abs(b), 1e-12)
        assert d <= nats_rel, (path, a, b, d)
        worst = d
    elif isinstance(a, float) and "accuracy" in path:
        assert abs(a - b) <= accuracy_abs + 1e-12, (path, a, b)
    else:
        assert a == b, (path, a, b)
    return worst
