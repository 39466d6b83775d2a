# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/torch_tests/functional/test_torch_inference.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.
import pytest
from tests.compat.deeplite.torch_tests.functional import BaseFunctionalTest, TORCH_AVAILABLE, MODEL, DATA
from unittest import mock

class TestTorchInference(BaseFunctionalTest):
    def test_get_acc(self):
        from deeplite_like.backends.torch import get_accuracy
        assert get_accuracy(MODEL, DATA['test']) < 100

    def test_get_topk(self):
        from deeplite_like.backends.torch import get_topk
        assert len(get_topk(MODEL, DATA['test'])) == 2
        assert len(get_topk(MODEL, DATA['test'], topk=1)) == 1

    def test_get_missclass(self):
        from deeplite_like.backends.torch import get_missclass
        assert get_missclass(MODEL, DATA['test']) > 0

    def test_eval_loss_fn(self):
        from deeplite_like.backends.torch import EvalLossFunction
        def loss_fn(model, batch):
            x, y = batch
            return model(x).mean()
        loss_fn.to_device = mock.MagicMock()
        eval_loss_fn = EvalLossFunction(loss_fn)
        eval_loss_fn(MODEL, DATA['test'])

