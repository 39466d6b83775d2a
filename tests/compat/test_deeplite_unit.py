"""deeplite-profiler's own unit and functional tests, ported by rewriting their imports.

Source: the ``tests/`` folder of Deeplite/deeplite-profiler (``profiler_tests/unit``,
``torch_tests/unit``, ``torch_tests/functional``, ``tf_tests/unit``, ``tf_tests/functional``),
41 tests. Each test body is theirs; what changed is said in a comment where it is:

* imports: ``deeplite.profiler...`` -> ``deeplite_like``, ``deeplite.torch_profiler...`` ->
  ``deeplite_like.backends.torch``, ``deeplite.tf_profiler...`` -> ``deeplite_like.backends.keras``;
* ``mock.patch`` of deeplite's internals (``ComputeComplexity._compute_complexity``,
  ``AverageAggregator.get``) are dropped, and a ``MagicMock`` standing for a torch model is
  replaced by a real one of the shapes the test's data has: our profilers refuse a model that
  is not one, and compute real numbers;
* where a test asserts one of deeplite's numbers that we compute differently on purpose
  (GigaMACs with bias adds and pooling inside, MiB labelled MB, millions of parameters, the
  sum of every activation as the footprint), the call is kept and our number is asserted, with
  its derivation;
* tests that need the deeplite alias names added by the backends part of issue 9
  (``get_missclass``, ``get_accuracy``, ``EvaluationFunction``, ``TFProfiler``, ...) are skipped
  while those names are missing, and run once they exist;
* tests of deeplite internals we do not have (its ``DataLoader``/``TensorSampler`` classes, its
  logger holder) and its TensorFlow 1 tests (which deeplite itself skips on Python 3.8+, and
  which feed unbatched samples) are skipped with the reason.
"""
import sys
from copy import deepcopy
from unittest import mock

import pytest

import deeplite_like.backends.torch as _torch_backend
from deeplite_like import ComputeEvalMetric, Device, ExternalProfilerFunction, Profiler, ProfilerFunction
from deeplite_like.data import ForwardPass
from deeplite_like.metrics import *  # noqa: F401,F403  (deeplite: from deeplite.profiler.metrics import *)
from deeplite_like.metrics import Flops, TotalParams
from deeplite_like.reports.ordering import make_display_filter_function
from deeplite_like.status import Comparative


def _has(module, *names):
    return all(name in dir(module) for name in names)


NEEDS_ALIASES = "needs backend alias names (issue 9 backends part)"
TORCH_ALIASES = _has(_torch_backend, "get_missclass")
needs_get_missclass = pytest.mark.skipif(not TORCH_ALIASES, reason=NEEDS_ALIASES)
needs_evaluation_function = pytest.mark.skipif(not _has(_torch_backend, "EvaluationFunction"),
                                               reason=NEEDS_ALIASES)
needs_inference = pytest.mark.skipif(
    not _has(_torch_backend, "get_accuracy", "get_topk", "get_missclass", "EvalLossFunction"), reason=NEEDS_ALIASES)
NO_DATA_LOADER = ("deeplite's DataLoader / TensorSampler / ModelInputPattern classes are not part of our API: our data "
                  "splits are plain iterables, and ForwardPass(model_input_pattern=...) replaces ModelInputPattern "
                  "(tested in test_deeplite_backends_core.py)")
TF1_TESTS = ("deeplite's TensorFlow tests (which it skips itself on Python 3.8+) profile a MagicMock model with every "
             "computation mocked, or feed unbatched 224x224x3 samples that its TF1 loader batched; our Keras "
             "profiler takes batches. The same calls on a real Keras model are in test_deeplite_backends_core.py")


# =============================================================================================
# tests/profiler_tests/unit/test_profiler.py
# =============================================================================================
class TestProfiler:
    def test_compute_status(self):
        profiler = get_profiler()
        flops_func = DummyFlopsProfilerFunction()
        profiler.register_profiler_function(flops_func)
        flops = profiler.compute_status('flops', dummy_arg=2)
        assert flops == 2

        with pytest.raises(ValueError):
            profiler.compute_status('coverage')
        assert not profiler.status_contains('coverage')

    def test_compute_network_status(self):
        profiler = get_profiler()
        flops_func = DummyFlopsProfilerFunction()
        profiler.register_profiler_function(flops_func)
        profiler.compute_status('flops', dummy_arg='a')

        rval = profiler.compute_network_status(recompute=False)
        assert rval['flops'] == 'a'
        rval = profiler.compute_network_status(recompute=True)
        assert rval['flops'] == 1

    def test_register_profiler_function(self):
        profiler = get_profiler()
        flops_func = DummyFlopsProfilerFunction()
        pfunc = DummyProfilerFunction()

        profiler.register_profiler_function(flops_func)

        # this should trigger the warning
        profiler.register_profiler_function(pfunc)

        profiler.register_profiler_function(flops_func, override=True)
        assert profiler._profiling_functions_register['flops'].function is flops_func
        assert profiler._profiling_functions_register['flops'].overriding is True

        with pytest.raises(RuntimeError):
            # conflicts over 'flops' with two override=True
            profiler.register_profiler_function(pfunc, override=True)

    def test_status_dict(self):
        profiler = get_profiler()
        flops_func = DummyFlopsProfilerFunction()
        pfunc = DummyAccProfilerFunction()
        profiler.register_profiler_function(flops_func)
        profiler.register_profiler_function(pfunc)
        profiler.compute_network_status()
        status_dict = profiler.status_to_dict()
        profiler.reset_status()
        prof2 = profiler.clone()
        prof2.load_from_dict(status_dict)
        assert all([status_dict[k] == v for k, v in prof2.status_to_dict().items()])

    def test_multiple_eval_metrics(self):
        def evaluate(model, data_loader):
            return {'a': 10, 'b': 20, 'c': 30, 'd': 40}

        profiler = get_profiler()
        profiler.display_status_filter_func = make_display_filter_function(exclude='c')
        compute_eval = ComputeEvalMetric(evaluate, key='a', default_split='train')
        compute_eval.add_secondary_metric('b')
        profiler.register_profiler_function(compute_eval)
        profiler.add_secondary_eval_metric('c')

        status = profiler.compute_network_status()
        assert 'inference_time' in status
        assert status['eval_metric'] == 10
        assert status['b'] == 20
        assert status['c'] == 30
        assert 'd' not in status

        # should display 'b' but not 'c' and 'd'
        profiler.display_status()

    def test_fail_register_profiler_function(self):
        profiler = get_profiler()
        with pytest.raises(TypeError):
            profiler.register_profiler_function(BadDefinedProfilerFunction())
        with pytest.raises(TypeError):
            profiler.register_profiler_function(BadDefinedExternalProfilerFunction())

    @pytest.mark.skip(reason="deeplite's logger holder (formatter.getLogger / setLogger) is not ported: we log to "
                             "the standard logger logging.getLogger('deeplite_like'), configured the usual way")
    def test_profiler_logger(self):
        logger_holder = getLogger()  # noqa: F821
        logger = logger_holder.logger
        setLogger(logger)  # noqa: F821
        assert logger_holder.logger is logger

        with pytest.raises(TypeError):
            type(logger_holder)()


class DummyFlopsProfilerFunction(ProfilerFunction):
    def get_bounded_status_keys(self):
        return Flops()

    def __call__(self, model, data_splits, dummy_arg=1):
        return dummy_arg


class DummyAccProfilerFunction(ProfilerFunction):
    def get_bounded_status_keys(self):
        return TotalParams()

    def __call__(self, model, data_splits, dummy_arg=1):
        return dummy_arg


class DummyProfilerFunction(ProfilerFunction):
    def get_bounded_status_keys(self):
        return Flops()

    def __call__(self, model, data_splits):
        return 'x'


class BadDefinedProfilerFunction(ProfilerFunction):
    def __call__(self, *args, **kwargs):
        pass


class BadDefinedExternalProfilerFunction(ExternalProfilerFunction):
    def __init__(self):
        def bad_func(x, y, **kwargs):
            pass
        super().__init__(bad_func)

    def get_bounded_status_keys(self):
        return Flops()


class DummyProfiler(Profiler):
    @property
    def dl_cls(self):
        return mock.MagicMock()

    @property
    def fp_cls(self):
        return mock.MagicMock()


def get_profiler():
    model = mock.MagicMock()
    # was {'train': mock.MagicMock()}: a MagicMock is a one-shot iterator (it has __next__), which our splits
    # refuse, since evaluating would consume it; a list holding one mock batch stands for the loader
    data_splits = {'train': [mock.MagicMock()]}
    return DummyProfiler(model, data_splits)


# =============================================================================================
# tests/profiler_tests/unit/test_data_loader.py (deeplite's DataLoader machinery: not ours)
# =============================================================================================
class TestDataLoader:
    @pytest.mark.skip(reason=NO_DATA_LOADER)
    def test_default_loader(self):
        pass  # DefaultDL(DataLoader) / NumpyForwardPass / NumpySampler(TensorSampler): deeplite classes

    @pytest.mark.skip(reason=NO_DATA_LOADER)
    def test_valid_pattern(self):
        pass  # ModelInputPattern(('_', 1, 2, '_', 0)).rearrange_from_pattern(...): see test_deeplite_backends_core

    @pytest.mark.skip(reason=NO_DATA_LOADER)
    def test_invalid_pattern(self):
        pass  # ModelInputPattern(('&', ...)) raises TypeError: see test_invalid_model_input_patterns

    @pytest.mark.skip(reason=NO_DATA_LOADER)
    def test_simple_pass(self):
        pass  # NumpyForwardPass.infer_sampler / random_perform via a TensorSampler

    @pytest.mark.skip(reason=NO_DATA_LOADER)
    def test_user_defined_pass(self):
        pass  # ForwardPass subclass with _tensor_sampler_cls / infer_sampler: see test_forward_pass_subclass_hooks


# =============================================================================================
# tests/profiler_tests/unit/test_evaluate.py
# =============================================================================================
@needs_evaluation_function
def test_dict_eval_func():
    from deeplite_like.backends.torch import EvaluationFunction

    class DictReturnEval(EvaluationFunction):
        def __call__(self, model, loader, **kwargs):
            return EvaluationFunction.filter_call_rval({'a': 1, 'b': 2}, **kwargs)
    f = DictReturnEval()
    with pytest.raises(ValueError):
        f(None, None, return_dict=False, return_keys=None)

    with pytest.raises(ValueError):
        f(None, None, return_dict=False, return_keys=['a', 'b'])

    with pytest.raises(KeyError):
        f(None, None, return_dict=False, return_keys='c')

    with pytest.raises(KeyError):
        f(None, None, return_dict=True, return_keys='c')

    rval = f(None, None, return_dict=True, return_keys=None)
    assert rval == {'a': 1, 'b': 2}

    rval = f(None, None, return_dict=True, return_keys='a')
    assert rval == {'a': 1}

    rval = f(None, None, return_dict=False, return_keys='b')
    assert rval == 2

    class DictReturnEval(EvaluationFunction):
        def __call__(self, model, loader, **kwargs):
            return EvaluationFunction.filter_call_rval({'c': 3}, **kwargs)
    g = DictReturnEval()
    assert g(None, None, return_dict=False, return_keys=None) == 3


@needs_evaluation_function
def test_non_dict_eval_func():
    from deeplite_like.backends.torch import EvaluationFunction

    class NonDictReturnEval(EvaluationFunction):
        def __call__(self, model, loader, **kwargs):
            return EvaluationFunction.filter_call_rval(1, **kwargs)
    f = NonDictReturnEval()
    with pytest.raises(ValueError):
        f(None, None, return_dict=True)

    assert f(None, None) == 1
    assert f(None, None, return_dict=False) == 1

    rval = f(None, None, return_dict=True, key_for_non_dict='a')
    assert rval == {'a': 1}


# =============================================================================================
# tests/torch_tests/unit/__init__.py + test_torch_profiler.py + test_torch_data_loader.py
# =============================================================================================
torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

from deeplite_like.backends.torch import *  # noqa: E402,F401,F403  (deeplite: torch_profiler.torch_profiler *)
from deeplite_like.backends.torch import ComputeComplexity, ComputeExecutionTime, TorchProfiler  # noqa: E402


class FakeData:
    def __init__(self):
        self.x = [torch.randn(1, 1, 2, 2)]
        self.y = [torch.randn(1, 1)]
        self.batch_size = 1

    def __iter__(self):
        for x, y in zip(self.x, self.y):
            yield torch.FloatTensor(x), torch.FloatTensor(y)

    def __len__(self):
        return 1


def get_unit_profiler():
    data = {"train": FakeData(), "test": FakeData()}
    data = TorchProfiler.enable_forward_pass_data_splits(data)
    # was TorchProfiler(mock.MagicMock(), data): a real model of the data's shapes, (1, 1, 2, 2) -> (1, 1)
    profiler = TorchProfiler(nn.Sequential(nn.Flatten(), nn.Linear(4, 1)), data)
    profiler.register_profiler_function(ComputeComplexity())
    profiler.register_profiler_function(ComputeExecutionTime())
    return profiler


# was decorated with mock.patch of ComputeComplexity._compute_complexity and AverageAggregator.get (deeplite
# internals); the computations run for real here
class TestTorchProfiler:
    def test_compute_flops(self, *args):
        profiler = get_unit_profiler()
        profiler.compute_status('flops')

    def test_compute_execution_time(self, *args):
        profiler = get_unit_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('execution_time', device=device, batch_size=batch_size)

    def test_compute_size(self, *args):
        profiler = get_unit_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('model_size', device=device, batch_size=batch_size)

    def test_compute_memory_footprint(self, *args):
        profiler = get_unit_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('memory_footprint', device=device, batch_size=batch_size)


@pytest.fixture(scope='module')
def fp():
    # deeplite: TorchForwardPass(model_input_pattern=(0, '_')); our ForwardPass serves every backend
    return ForwardPass(model_input_pattern=(0, '_'))


class TestTorchDataLoader:
    def test_pass(self, fp):
        fp.expecting_common_inputs = False
        with pytest.raises(TypeError):
            fp.model_call(None, 1, Device.CPU)

    @pytest.mark.skip(reason=NO_DATA_LOADER + " (TorchTensorSampler)")
    def test_sampler(self):
        pass


# =============================================================================================
# tests/torch_tests/functional/__init__.py + test_torch_profiler.py + test_torch_inference.py
# =============================================================================================
class FunctionalFakeData:
    def __init__(self):
        self.x = [torch.randn(1, 3, 32, 32)]
        self.y = [torch.randn(1, 8192)]
        self.batch_size = 1

    def __iter__(self):
        for x, y in zip(self.x, self.y):
            yield torch.FloatTensor(x), torch.FloatTensor(y)

    def __len__(self):
        return 1


torch.manual_seed(0)
MODEL = nn.Sequential(
    nn.Conv2d(3, 32, kernel_size=5, stride=1, padding=2),
    nn.ReLU(),
    nn.MaxPool2d(kernel_size=2, stride=2),
    nn.Flatten(),
)
DATA = {"train": FunctionalFakeData(), "test": FunctionalFakeData()}


def get_functional_profiler():
    from deeplite_like.backends.torch import get_missclass

    data = TorchProfiler.enable_forward_pass_data_splits(DATA)
    profiler = TorchProfiler(MODEL, data)
    profiler.register_profiler_function(ComputeComplexity())
    profiler.register_profiler_function(ComputeExecutionTime())
    profiler.register_profiler_function(ComputeEvalMetric(get_missclass, 'missclass', unit_name='%'))
    return profiler


class TestTorchProfilerFunctional:
    @needs_get_missclass
    def test_empty_display_status(self, *args):
        profiler = get_functional_profiler()
        profiler.display_status()

    @pytest.mark.skip(reason="uses deeplite's TorchDataLoader wrapper, which is not part of our API; the same dict "
                             "model with a ForwardPass subclass is test_forward_pass_subclass_hooks")
    def test_dict_profiling(self, *args):
        pass

    @needs_get_missclass
    def test_compute_network_status(self, *args):  # was patched: AverageAggregator.get -> 2
        # test invalid device
        with pytest.raises(ValueError):
            Device('unknown device')

        device = Device('CPU')
        batch_size = 1
        profiler = get_functional_profiler()
        status = profiler.compute_network_status(batch_size=batch_size, device=device, short_print=False,
                                                 include_weights=True, print_mode='debug')
        # deeplite: flops == 0.002555904 "GigaMACs" = 2,457,600 MACs + 98,304 bias adds, ReLUs and pool reads.
        # Ours, raw: MACs of the conv only, 32 * 32x32 outputs * (3 * 5 * 5) = 2,457,600; FLOPs = 2 * MACs
        # + bias adds 32,768 + ReLU 32,768 + max pool 8,192 outputs * 4 reads = 5,013,504
        assert status['macs'] == 2_457_600
        assert status['flops'] == 5_013_504
        # deeplite: 0.002432 (millions); ours: the count, 32 * 3 * 25 + 32 = 2,432
        assert status['total_params'] == 2432
        # deeplite: == 2000 (ms, from the mocked timer); ours is measured, in seconds
        assert status['execution_time'] > 0
        # deeplite: 0.00927734375 "MB" (= MiB); ours: bytes, 2,432 fp32 = 9,728
        assert status['model_size'] == 9728
        # deeplite: 0.33349609375 "MB" = params + the SUM of every activation (input 12,288 + conv 131,072 +
        # ReLU 131,072 + pool 32,768 + flatten 32,768 B). Ours: params + buffers + the PEAK of live tensors:
        # input 12,288 + conv out 131,072 + ReLU out 131,072 = 274,432 (the pool output comes after the conv
        # output is freed; flatten is a view) -> 9,728 + 0 + 274,432 = 284,160
        assert status['memory_footprint'] == 284_160
        assert status['eval_metric'] == 100
        assert status['layerwise_summary']
        assert 'inference_time' in status

    @needs_get_missclass
    @mock.patch('deeplite_like.metrics.Flops.get_comparative', return_value='coverage')
    def test_compare_profiles(self, *args):
        device = Device.CPU
        batch_size = 1
        profiler = get_functional_profiler()
        profiler2 = profiler.clone(model=deepcopy(MODEL))
        profiler.compare(profiler2, short_print=False, batch_size=batch_size, device=device, print_mode='debug')
        assert profiler.status_get('layerwise_summary') is not None
        assert profiler2.status_get('layerwise_summary') is not None
        # 'throughput' added to deeplite's list of timing keys: we also report it, and it is measured
        assert all(v1 == v2 for (k1, v1), (k2, v2) in zip(profiler.status_items(), profiler2.status_items())
                   if k1 not in ('layerwise_summary', 'inference_time', 'execution_time', 'throughput'))

    @needs_evaluation_function
    def test_secondary_eval_override(self, *args):
        from deeplite_like.backends.torch import EvaluationFunction

        profiler = get_functional_profiler()
        rval = {'acc': 1, 'b': 2, 'c': 4}

        class DictReturnEval(EvaluationFunction):
            def __call__(self, model, loader):
                return rval

        dummy_eval = DictReturnEval()
        eval_profiler = ComputeEvalMetric(dummy_eval, 'acc', unit_name='%')
        eval_profiler.add_secondary_metric('b')
        eval_profiler.add_secondary_metric('c', 'ms', 'milliseconds', Comparative.DIV)
        profiler.register_profiler_function(eval_profiler, override=True)
        profiler.compute_status('eval_metric')
        profiler.display_status()
        assert profiler.status_get('eval_metric') == rval['acc']
        assert profiler.status_get('b') == rval['b']
        assert profiler.status_get('c') == rval['c']


class TestTorchInference:
    @needs_inference
    def test_get_acc(self):
        from deeplite_like.backends.torch import get_accuracy
        assert get_accuracy(MODEL, DATA['test']) < 100

    @needs_inference
    def test_get_topk(self):
        from deeplite_like.backends.torch import get_topk
        assert len(get_topk(MODEL, DATA['test'])) == 2
        assert len(get_topk(MODEL, DATA['test'], topk=1)) == 1

    @needs_inference
    def test_get_missclass(self):
        from deeplite_like.backends.torch import get_missclass
        assert get_missclass(MODEL, DATA['test']) > 0

    @needs_inference
    def test_eval_loss_fn(self):
        from deeplite_like.backends.torch import EvalLossFunction

        def loss_fn(model, batch):
            x, y = batch
            return model(x).mean()
        loss_fn.to_device = mock.MagicMock()
        eval_loss_fn = EvalLossFunction(loss_fn)
        eval_loss_fn(MODEL, DATA['test'])


# =============================================================================================
# tests/tf_tests/unit + tests/tf_tests/functional (TensorFlow 1; skipped by deeplite on Python 3.8+)
# =============================================================================================
@pytest.mark.skip(reason=TF1_TESTS)
class TestTFProfiler:
    def test_compute_flops(self):
        pass

    def test_compute_execution_time(self):
        pass

    def test_compute_size(self):
        pass

    def test_compute_memory_footprint(self):
        pass


@pytest.mark.skip(reason=TF1_TESTS)
class TestTFDataLoader:
    def test_pass(self):
        pass

    def test_sampler(self):
        pass


@pytest.mark.skip(reason=TF1_TESTS)
class TestTFProfilerFunctional:
    def test_empty_display_status(self):
        pass

    def test_compute_network_status(self):
        pass

    def test_compare_profiles(self):
        pass


@pytest.mark.skip(reason=TF1_TESTS)
class TestTFInference:
    def test_get_acc(self):
        pass

    def test_get_topk(self):
        pass

    def test_get_missclass(self):
        pass


assert sys.version_info >= (3, 8)  # deeplite skipped its TF tests from here on; ours run on Keras 3 elsewhere
