#!/usr/bin/python3
"""optkit's TPE against Optuna's (Debian python3-optuna, a test dependency only).

Debian ships Optuna 3.1.0, whose truncated-normal log-density omits the −log(scale) term; upstream
fixed that in PR #5110 (Optuna 3.5), and the v4 numerics optkit follows include it. The fix is
applied here to the installed Optuna before it serves as the oracle.

1. Parzen estimators, exactly: for stepped, log-scaled, continuous, integer and categorical
   parameters and several observation sets, optkit's kernel centres, bandwidths, weights and
   log-densities must equal Optuna's _ParzenEstimator's (rel. 1e-9; densities abs. 1e-7).
   Where observations tie, the bandwidths of a tie group depend on the order the sort leaves
   them in (the prior's centre can join the group, and its bandwidth is then replaced): numpy
   sorts up to 16 centres stably, where the (centre, bandwidth) pairs must agree as sets;
   beyond, its introsort orders ties its own way, and the densities must agree within 0.02.
2. Whole studies, in distribution: on three seeded benchmark functions (sphere, Branin, a mixed
   int-log/categorical/stepped space), the best value found after k = 20, 30, 40 trials over 24
   seeds. optkit and Optuna draw different random numbers, so the check is distributional: a
   two-sided Mann-Whitney U test must not reject equality at alpha = 0.01 for any (function, k),
   and optkit's median best-after-40 must be within a factor of 3 of Optuna's (or both below
   0.05 absolute of the known optimum's value). And TPE must beat random search: optkit's
   median best-after-40 below its own random search's on every function.
Usage: optuna_tpe.py TPE_CASES_BINARY
"""
import json, math, subprocess, sys

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator, _ParzenEstimatorParameters
from optuna.samplers._tpe.sampler import default_weights

from optuna.samplers._tpe import _truncnorm

optuna.logging.set_verbosity(optuna.logging.ERROR)
_logpdf_without_scale = _truncnorm.logpdf


def _logpdf_fixed(x, a, b, loc=0, scale=1):  # optuna PR #5110
    return _logpdf_without_scale(x, a, b, loc, scale) - np.log(scale)


_truncnorm.logpdf = _logpdf_fixed
TOOL = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def distribution(spec):
    if spec["type"] == "categorical":
        return CategoricalDistribution(spec["choices"])
    if spec["type"] == "int":
        return IntDistribution(spec["low"], spec["high"], log=spec.get("log", False), step=spec.get("step", 1))
    return FloatDistribution(spec["low"], spec["high"], log=spec.get("log", False), step=spec.get("step"))


def parzen_case(spec, observations, queries):
    dist = distribution(spec)
    params = _ParzenEstimatorParameters(
        consider_prior=True, prior_weight=1.0, consider_magic_clip=True, consider_endpoints=False,
        weights=default_weights, multivariate=False)
    internal = np.asarray([dist.to_internal_repr(o) for o in observations], dtype=float)
    pe = _ParzenEstimator({"p": internal}, {"p": dist}, params)
    q_internal = np.asarray([dist.to_internal_repr(q) for q in queries],
                            dtype=int if spec["type"] == "categorical" else float)
    ref_logpdf = pe.log_pdf({"p": q_internal})
    mine = json.loads(subprocess.run([TOOL, "parzen"], input=json.dumps(
        {"parameter": dict(spec, name="p"), "observations": observations, "queries": queries}),
        capture_output=True, text=True, check=True).stdout)
    name = f"parzen {spec} n={len(observations)}"
    check(np.allclose(mine["weights"], pe._weights, rtol=1e-9, atol=0), name + ": weights")
    ties = len(set(internal)) < len(internal)
    if spec["type"] != "categorical":
        check(np.allclose(mine["mus"], pe._mus["p"], rtol=1e-9, atol=1e-12), name + ": mus")
        if ties and len(internal) + 1 > 16:
            pass
        elif ties:
            check(np.allclose(sorted(zip(mine["mus"], mine["sigmas"])), sorted(zip(pe._mus["p"], pe._sigmas["p"])),
                              rtol=1e-9, atol=1e-12), name + ": (centre, bandwidth) pairs")
        else:
            check(np.allclose(mine["sigmas"], pe._sigmas["p"], rtol=1e-9, atol=1e-12),
                  name + f": sigmas {mine['sigmas']} vs {list(pe._sigmas['p'])}")
    tolerance = 0.02 if ties and len(internal) + 1 > 16 and spec["type"] != "categorical" else 1e-7
    check(np.allclose(mine["log_pdf"], ref_logpdf, rtol=0, atol=tolerance),
          name + f": log_pdf {mine['log_pdf']} vs {list(ref_logpdf)}")


rng = np.random.RandomState(7)
parzen_specs = [
    ({"type": "float", "low": -5.0, "high": 10.0}, lambda n: list(rng.uniform(-5, 10, n)), [-5.0, -1.2, 0.0, 3.3, 10.0]),
    ({"type": "float", "low": 0.001, "high": 10.0, "log": True}, lambda n: list(np.exp(rng.uniform(math.log(0.001), math.log(10), n))), [0.001, 0.02, 1.0, 9.99]),
    ({"type": "float", "low": 0.0, "high": 1.0, "step": 0.05}, lambda n: [round(v * 20) / 20 for v in rng.uniform(0, 1, n)], [0.0, 0.35, 0.5, 1.0]),
    ({"type": "int", "low": 0, "high": 20}, lambda n: [int(v) for v in rng.randint(0, 21, n)], [0, 7, 13, 20]),
    ({"type": "int", "low": 2, "high": 64, "step": 2}, lambda n: [int(v) * 2 for v in rng.randint(1, 33, n)], [2, 10, 64]),
    ({"type": "int", "low": 1, "high": 1024, "log": True}, lambda n: [int(round(math.exp(v))) for v in rng.uniform(math.log(0.5), math.log(1024.5), n)], [1, 3, 64, 1000, 1024]),
    ({"type": "categorical", "choices": ["a", "b", "c", "d"]}, lambda n: [str(v) for v in rng.choice(["a", "b", "c", "d"], n)], ["a", "b", "c", "d"]),
]
for spec, draw, queries in parzen_specs:
    for n in (0, 1, 2, 3, 7, 30):
        obs = [min(max(o, spec.get("low", o)), spec.get("high", o)) if spec["type"] != "categorical" else o for o in draw(n)]
        parzen_case(spec, obs, queries)


def objective(function, p):
    if function == "sphere":
        return p["x"] ** 2 + p["y"] ** 2
    if function == "branin":
        x, y = p["x"], p["y"]
        b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
        return (y - b * x * x + c * x - 6) ** 2 + 10 * (1 - t) * math.cos(x) + 10
    penalty = {"a": 1.0, "b": 0.0, "c": 0.5}[p["c"]]
    return (math.log2(p["n"]) - 6) ** 2 / 4 + penalty + 10 * (p["z"] - 0.35) ** 2 + abs(p["k"] - 13) / 5


def suggest(function, trial):
    if function == "sphere":
        return {"x": trial.suggest_float("x", -5, 5), "y": trial.suggest_float("y", -5, 5)}
    if function == "branin":
        return {"x": trial.suggest_float("x", -5, 10), "y": trial.suggest_float("y", 0, 15)}
    return {"n": trial.suggest_int("n", 1, 1024, log=True), "c": trial.suggest_categorical("c", ["a", "b", "c"]),
            "z": trial.suggest_float("z", 0, 1, step=0.05), "k": trial.suggest_int("k", 0, 20)}


def optuna_runs(function, seeds, trials):
    runs = []
    for seed in range(seeds):
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        values = []
        for _ in range(trials):
            trial = study.ask()
            v = objective(function, suggest(function, trial))
            study.tell(trial, v)
            values.append(v)
        runs.append(values)
    return runs


def best_after(runs, k):
    return sorted(min(r[:k]) for r in runs)


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U, normal approximation with tie correction."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks, i = [0.0] * len(pooled), 0
    ties = 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for m in range(i, j + 1):
            ranks[m] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (abs(u - mu) - 0.5) / sigma if sigma > 0 else 0.0
    return math.erfc(max(z, 0) / math.sqrt(2))


SEEDS, TRIALS = 24, 40
optimum = {"sphere": 0.0, "branin": 0.397887, "mixed": 0.0}
for function in ("sphere", "branin", "mixed"):
    mine = json.loads(subprocess.run([TOOL, "study", function, "tpe", str(SEEDS), str(TRIALS)],
                                     capture_output=True, text=True, check=True).stdout)
    mine_runs = [mine[str(s)] for s in range(SEEDS)]
    random_runs = json.loads(subprocess.run([TOOL, "study", function, "random", str(SEEDS), str(TRIALS)],
                                            capture_output=True, text=True, check=True).stdout)
    random_runs = [random_runs[str(s)] for s in range(SEEDS)]
    ref_runs = optuna_runs(function, SEEDS, TRIALS)
    for k in (20, 30, 40):
        a, b = best_after(mine_runs, k), best_after(ref_runs, k)
        p = mann_whitney_p(a, b)
        ma, mb = float(np.median(a)), float(np.median(b))
        print(f"{function} best-after-{k}: optkit median {ma:.4f} (IQR {np.percentile(a,25):.4f}-{np.percentile(a,75):.4f}), "
              f"optuna median {mb:.4f} (IQR {np.percentile(b,25):.4f}-{np.percentile(b,75):.4f}), Mann-Whitney p = {p:.3f}")
        check(p > 0.01, f"{function} best-after-{k}: distributions differ (p = {p:.4f})")
    ga, gb = float(np.median(best_after(mine_runs, 40))) - optimum[function], float(np.median(best_after(ref_runs, 40))) - optimum[function]
    check((ga <= 0.05 and gb <= 0.05) or (ga <= 3 * gb and gb <= 3 * ga),
          f"{function}: median gap to the optimum after 40: optkit {ga:.4f} vs optuna {gb:.4f}")
    gr = float(np.median(best_after(random_runs, 40))) - optimum[function]
    print(f"{function}: median gap after 40 trials: optkit tpe {ga:.4f}, optuna tpe {gb:.4f}, optkit random {gr:.4f}")
    check(ga < gr, f"{function}: TPE ({ga:.4f}) does not beat random search ({gr:.4f})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("optkit TPE matches Optuna", optuna.__version__)
