# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/tf_tests/functional/test_tf_inference.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.
import pytest
from tests.compat.deeplite.tf_tests.functional import BaseFunctionalTest, TENSORFLOW_SUPPORTED, TENSORFLOW_AVAILABLE, MODEL, DATA

class TestTFInference(BaseFunctionalTest):
    def test_get_acc(self):
        from deeplite_like.backends.keras import get_accuracy
        assert get_accuracy(MODEL, DATA['test']) < 100

    def test_get_topk(self):
        from deeplite_like.backends.keras import get_topk
        assert len(get_topk(MODEL, DATA['test'])) == 2
        assert len(get_topk(MODEL, DATA['test'], topk=1)) == 1

    def test_get_missclass(self):
        from deeplite_like.backends.keras import get_missclass
        assert get_missclass(MODEL, DATA['test']) > 0


