"""PLVMClassifier keeps the monorepo's estimator contract."""

from methodkit.testing import EstimatorContract
from plvm import PLVMClassifier, simulate_population


class TestPLVMClassifierContract(EstimatorContract):
    # X is a TraceSet of partial process traces, not a 2-D array: scikit-learn's generic
    # array checks do not apply (its splitters and cross_val_score do; see test_traces).
    sklearn_check = False

    def make_estimator(self):
        return PLVMClassifier(epochs=2, hidden=4, restarts=0, random_state=0)

    def make_data(self):
        study = simulate_population(30, "complementary", seed=0)
        return study.traces.truncate(frac=0.25).select_tasks(["A", "B"]), study.y
