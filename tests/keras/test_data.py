"""Keras data binding: the TensorFlow tensor adapter, whole-array splits, and every split kind."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.inputs import as_model_input, model_inputs  # noqa: E402
from deeplite_like.backends.keras.tensors import ArraySplit, TensorFlowAdapter, normalise_splits  # noqa: E402
from deeplite_like.data import DataError, ForwardPass, adapter_for, first_batch  # noqa: E402

X = np.arange(10 * 3, dtype="float32").reshape(10, 3)  # sample i is [3i, 3i+1, 3i+2]
Y = np.arange(10, dtype="int64")


def _rows(x) -> list[int]:
    """The sample index of each row of an X slice (its first value / 3)."""
    return [int(v) // 3 for v in keras.ops.convert_to_numpy(x)[:, 0]]


# ------------------------------------------------------------------------ TensorFlow adapter
tf_only = pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="TensorFlow tensors")


@tf_only
def test_the_core_finds_the_tensorflow_adapter_for_an_eager_tensor():
    import tensorflow as tf

    adapter = adapter_for(tf.constant(X))
    assert adapter is not None and adapter.name == "tensorflow"
    assert adapter.describe(tf.constant(X)) == "Tensor[float32, 10x3]"


@tf_only
def test_take_slices_or_repeats_cyclically():
    import tensorflow as tf

    adapter = TensorFlowAdapter()
    x = tf.constant(X[:3])
    assert adapter.batch_dim(x) == 3 and adapter.batch_dim(tf.constant(1.0)) is None
    assert _rows(adapter.take(x, 2)) == [0, 1]
    assert _rows(adapter.take(x, 7)) == [0, 1, 2, 0, 1, 2, 0]  # sample i is sample i % 3
    assert adapter.take(x, 3) is x
    with pytest.raises(ValueError, match="0-d tensor"):
        adapter.take(tf.constant(1.0), 2)


def test_the_adapter_does_not_claim_other_objects():
    adapter = TensorFlowAdapter()
    assert not any(adapter.is_tensor(obj) for obj in (X, [1, 2], 3.0, "x"))


# ------------------------------------------------------------------------- whole arrays
def test_array_split_serves_batches_of_the_given_size():
    # 10 samples in batches of 4: 4 + 4 + 2, targets aligned with inputs.
    split = ArraySplit(X, Y, batch_size=4)
    batches = list(split)
    assert len(split) == 3 and [len(b[1]) for b in batches] == [4, 4, 2]
    assert _rows(batches[2][0]) == [8, 9] and list(batches[2][1]) == [8, 9]
    assert len(list(split)) == 3  # re-iterable


def test_array_split_takes_several_inputs_and_no_targets():
    split = ArraySplit({"a": X, "b": X[:, :1]}, batch_size=6)
    first = next(iter(split))
    assert set(first) == {"a", "b"} and first["a"].shape == (6, 3) and first["b"].shape == (6, 1)


def test_array_split_refuses_mismatched_samples():
    with pytest.raises(ValueError, match=r"one common leading \(sample\) dimension; got leading dimensions \[10, 9\]"):
        ArraySplit(X, Y[:9])


def test_normalise_wraps_tuples_and_arrays_and_keeps_everything_else():
    batches = [(X[:2], Y[:2])]
    splits = normalise_splits({"train": (X, Y), "calib": X, "test": batches}, array_batch_size=5)
    assert isinstance(splits["train"], ArraySplit) and splits["train"].y is Y and len(splits["train"]) == 2
    assert isinstance(splits["calib"], ArraySplit) and splits["calib"].y is None
    assert splits["test"] is batches  # a list is a list of batches
    untouched = {"test": batches}
    assert normalise_splits(untouched) is untouched


# ---------------------------------------------------------------- every split kind, end to end
class Squares(keras.utils.PyDataset):
    """3 batches of 4 samples of X (wrapping around)."""

    def __len__(self):
        return 3

    def __getitem__(self, index):
        rows = [(4 * index + i) % 10 for i in range(4)]
        return X[rows], Y[rows]


def _generator():
    for start in range(0, 10, 5):
        yield X[start:start + 5], Y[start:start + 5]


def _tf_dataset():
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)


SPLITS = {
    "list": lambda: [(X[:4], Y[:4])],
    "arrays": lambda: normalise_splits({"s": (X, Y)}, 4)["s"],
    "generator function": lambda: _generator,
    "PyDataset": lambda: Squares(),
}
if keras.config.backend() == "tensorflow":
    SPLITS["tf.data"] = _tf_dataset


@pytest.mark.parametrize("kind", list(SPLITS))
def test_every_split_kind_gives_model_inputs_resized_by_real_samples(kind):
    splits = {"test": SPLITS[kind]()}
    inputs = model_inputs(splits, ForwardPass(), "test", batch_size=6)
    # the first batch holds samples 0.. (4 or 5 of them); 6 are taken cyclically from it
    first = len(ForwardPass().targets(first_batch(splits, "test")))
    assert _rows(inputs) == [i % first for i in range(6)]
    assert keras.ops.is_tensor(inputs) and keras.backend.standardize_dtype(inputs.dtype) == "float32"
    again = model_inputs(splits, ForwardPass(), "test", batch_size=2)
    assert _rows(again) == [0, 1]  # re-read from the start: nothing was consumed


def test_a_one_shot_generator_is_refused():
    with pytest.raises(DataError, match="one-shot iterator"):
        model_inputs({"test": _generator()}, ForwardPass(), "test", batch_size=1)


# ------------------------------------------------------------------------- input structure
def test_input_structure_rules():
    a, b = X[:2], X[:2, :1]
    assert as_model_input((a,), {}) is a
    assert as_model_input((a, b), {}) == [a, b]  # several positional inputs: a list
    assert as_model_input((), {"ids": a}) == {"ids": a}  # keyword inputs: a dict
    with pytest.raises(DataError, match="one input structure"):
        as_model_input((a,), {"mask": b})


def test_importing_the_backend_and_its_data_module_imports_no_framework():
    code = ("import sys, deeplite_like, deeplite_like.backends.keras, deeplite_like.backends.keras.tensors; "
            "print(sorted(m for m in ('keras', 'tensorflow', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
