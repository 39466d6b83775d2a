"""Data binding core: patterns, resizing by real samples, split access, error texts.

Framework-free: batches are numpy arrays and plain Python objects.
"""
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deeplite_like.data import (DataError, ForwardPass, Inputs, adapters as data, describe, first_batch, iter_batches,
                                split_loader)

IDS = np.array([[1, 2], [3, 4]], dtype=np.int64)  # 2 samples of 2 token ids


def image_batch(n=8):
    return {"label": np.zeros(n, dtype=np.int64), "img": np.zeros((n, 3, 32, 32), dtype=np.float32)}


# --------------------------------------------------------------------------------------------
# describe


def test_describe_nested_containers_arrays_and_others():
    batch = ([np.zeros((2, 3), dtype=np.float32), 5], {"mask": None, "name": "a"})
    assert describe(batch) == "tuple(list(ndarray[float32, 2x3], int), dict(mask=None, name=str))"


def test_describe_zero_d_array_namedtuple_and_odd_keys():
    Pair = namedtuple("Pair", "x y")
    assert describe(Pair(np.float64(1.0), np.array(3))) == "Pair(x=float64, y=ndarray[int64, scalar])"
    assert describe({1: 2, "two words": 3}) == "dict(1=int, 'two words'=int)"


def test_describe_truncates_long_containers_and_deep_nesting():
    # 10 items, 6 shown: 10 - 6 = 4 more.
    assert describe(list(range(10))) == "list(int, int, int, int, int, int, ... 4 more)"
    assert describe([[[[[1]]]]]) == "list(list(list(list(list(...)))))"


# --------------------------------------------------------------------------------------------
# ForwardPass: input patterns


def test_default_tensor_batch_is_the_one_input():
    x = np.ones((4, 3))
    args, kwargs = ForwardPass()(x)
    assert args[0] is x and len(args) == 1 and kwargs == {}


@pytest.mark.parametrize("container", [tuple, list])
def test_default_pair_batch_takes_the_first_element(container):
    x, y = np.ones((4, 3)), np.arange(4)
    args, kwargs = ForwardPass()(container([x, y]))
    assert args[0] is x and len(args) == 1 and kwargs == {}


def test_default_other_object_is_passed_as_the_one_input():
    graph = object()
    assert ForwardPass()(graph) == ((graph,), {})


def test_positions_give_several_positional_inputs():
    a, b, c = np.ones(2), np.zeros(2), np.arange(2)
    args, kwargs = ForwardPass(inputs=(0, 1))((a, b, c))
    assert args[0] is a and args[1] is b and len(args) == 2 and kwargs == {}
    args, _ = ForwardPass(inputs=2)((a, b, c))
    assert args[0] is c and len(args) == 1


def test_one_key_is_one_positional_input():
    batch = image_batch()
    args, kwargs = ForwardPass(inputs="img")(batch)
    assert args[0] is batch["img"] and len(args) == 1 and kwargs == {}


def test_several_keys_are_keyword_inputs_with_the_same_names():
    batch = {"input_ids": IDS, "attention_mask": np.ones((2, 2)), "labels": np.arange(2)}
    args, kwargs = ForwardPass(inputs=("input_ids", "attention_mask"))(batch)
    assert args == () and list(kwargs) == ["input_ids", "attention_mask"]
    assert kwargs["input_ids"] is batch["input_ids"] and kwargs["attention_mask"] is batch["attention_mask"]


def test_mapping_renames_batch_keys_to_keyword_names():
    batch = {"ids": IDS, "mask": np.ones((2, 2))}
    args, kwargs = ForwardPass(inputs={"ids": "input_ids", "mask": "attention_mask"})(batch)
    assert args == () and kwargs == {"input_ids": batch["ids"], "attention_mask": batch["mask"]}
    # A position can be mapped to a keyword too.
    args, kwargs = ForwardPass(inputs={0: "input_ids"})((IDS, np.arange(2)))
    assert args == () and kwargs["input_ids"] is IDS


def test_a_key_reads_a_named_tuple_field():
    Batch = namedtuple("Batch", "image label")
    batch = Batch(np.ones((2, 3)), np.arange(2))
    assert ForwardPass(inputs="image")(batch)[0][0] is batch.image
    assert ForwardPass(targets="label").targets(batch) is batch.label


def test_extract_function_results():
    x, y = np.ones((2, 3)), np.arange(2)
    assert ForwardPass(extract=lambda b: b[0])((x, y))[0][0] is x
    assert ForwardPass(extract=lambda b: (b[1], b[0]))((x, y)) == ((y, x), {})
    assert ForwardPass(extract=lambda b: [b[0]])((x, y)) == ((x,), {})
    args, kwargs = ForwardPass(extract=lambda b: Inputs((b[0],), {"scale": 2.0}))((x, y))
    assert args[0] is x and kwargs == {"scale": 2.0}


def test_inputs_unpacks_as_args_and_kwargs_and_checks_types():
    args, kwargs = Inputs([1], {"a": 2})
    assert args == (1,) and kwargs == {"a": 2}
    with pytest.raises(TypeError, match=r"Inputs.args must be a tuple .* write Inputs\(args=\(x,\)\)"):
        Inputs(np.ones(2))


def test_extract_returning_a_dict_is_refused_as_ambiguous():
    with pytest.raises(DataError) as err:
        ForwardPass(extract=lambda b: {"x": b})(IDS, "train")
    assert str(err.value) == (
        "split 'train': extract function test_extract_returning_a_dict_is_refused_as_ambiguous.<locals>.<lambda> "
        "returned a dict dict(x=ndarray[int64, 2x2]); return Inputs(kwargs=d) to pass keyword inputs, "
        "or Inputs(args=(d,)) to pass the dict as one positional input"
    )


def test_extract_failure_names_split_function_and_batch():
    def pick(batch):
        return batch["image"]

    with pytest.raises(DataError) as err:
        ForwardPass(extract=pick)(image_batch(2), "val")
    assert str(err.value) == (
        "split 'val': extract function test_extract_failure_names_split_function_and_batch.<locals>.pick failed "
        "on batch dict(label=ndarray[int64, 2], img=ndarray[float32, 2x3x32x32]): KeyError: 'image'"
    )
    assert isinstance(err.value.__cause__, KeyError)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"inputs": 0, "extract": len}, TypeError, "not both"),
    ({"inputs": 1.5}, TypeError, "takes None, a position, a key"),
    ({"inputs": (0, "mask")}, TypeError, "mixes positions and keys"),
    ({"inputs": ("input-ids",)}, TypeError, "not a valid keyword name"),
    ({"inputs": {"ids": 3}}, TypeError, "keyword argument name"),
    ({"inputs": ()}, ValueError, "names no input"),
    ({"inputs": True}, TypeError, "got bool"),
    ({"targets": ()}, ValueError, "names no target"),
    ({"extract": 3}, TypeError, "must be callable"),
])
def test_bad_specs_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        ForwardPass(**kwargs)


def test_repr_shows_the_spec():
    assert repr(ForwardPass(inputs=("a", "b"), targets=2)) == "ForwardPass(inputs=('a', 'b'), targets=2)"


# --------------------------------------------------------------------------------------------
# ForwardPass: errors when a batch does not fit


def test_missing_key_message_lists_the_keys():
    with pytest.raises(DataError) as err:
        ForwardPass(inputs="image")(image_batch(), "train")
    assert str(err.value) == (
        "split 'train': cannot take input 'image' from batch "
        "dict(label=ndarray[int64, 8], img=ndarray[float32, 8x3x32x32]); keys: 'img', 'label'"
    )


def test_position_out_of_range_message():
    with pytest.raises(DataError) as err:
        ForwardPass(inputs=(0, 2))((np.ones(2), np.arange(2)), "train")
    assert str(err.value) == (
        "split 'train': cannot take input 2 from batch tuple(ndarray[float64, 2], ndarray[int64, 2]); it has 2 elements"
    )


def test_key_on_a_tuple_batch_and_on_a_tensor_batch():
    with pytest.raises(DataError) as err:
        ForwardPass(inputs="img")([IDS], "test")
    assert str(err.value) == (
        "split 'test': cannot take input 'img' from batch list(ndarray[int64, 2x2]); "
        "it is a list: take elements by position"
    )
    with pytest.raises(DataError) as err:
        ForwardPass(inputs=0)(IDS)  # no split given: the message starts at the batch
    assert str(err.value) == "cannot take input 0 from batch ndarray[int64, 2x2]; it is not a tuple, list or dict"


def test_default_on_a_dict_batch_asks_for_the_keys():
    with pytest.raises(DataError) as err:
        ForwardPass()(image_batch(), "train")
    assert str(err.value) == (
        "split 'train': batch dict(label=ndarray[int64, 8], img=ndarray[float32, 8x3x32x32]) is a dict; "
        "name its model inputs: ForwardPass(inputs='img') for one positional input, or "
        "ForwardPass(inputs=('img', 'label')) for keyword inputs"
    )


def test_default_on_an_empty_tuple_batch():
    with pytest.raises(DataError) as err:
        ForwardPass()((), "train")
    assert str(err.value) == "split 'train': batch tuple() is empty; it holds no model input"


# --------------------------------------------------------------------------------------------
# targets


def test_targets_default_configured_and_errors():
    x, y, w = np.ones((2, 3)), np.arange(2), np.ones(2)
    assert ForwardPass().targets((x, y)) is y
    assert ForwardPass().targets([x, y, w]) is y  # element 1, even with more elements
    assert ForwardPass(targets=2).targets((x, y, w)) is w
    assert ForwardPass(targets=(1, 2)).targets((x, y, w)) == (y, w)
    batch = image_batch()
    assert ForwardPass(inputs="img", targets="label").targets(batch) is batch["label"]
    assert ForwardPass(targets=lambda b: b["label"] + 1).targets(batch).tolist() == [1] * 8
    with pytest.raises(DataError) as err:
        ForwardPass().targets(x, "test")
    assert str(err.value) == (
        "split 'test': batch ndarray[float64, 2x3] has no default targets (element 1 of a tuple batch); "
        "say where they are with ForwardPass(targets=...)"
    )
    with pytest.raises(DataError) as err:
        ForwardPass().targets((x,), "test")
    assert str(err.value) == "split 'test': cannot take target 1 from batch tuple(ndarray[float64, 2x3]); it has 1 element"


# --------------------------------------------------------------------------------------------
# batch size


def test_batch_size_is_the_leading_dim_of_the_first_input_tensor():
    assert ForwardPass().batch_size((np.ones((5, 3)), np.arange(5))) == 5
    # kwargs only: the first tensor in keyword order; the str is skipped.
    batch = {"mode": "fast", "ids": np.ones((3, 7)), "mask": np.ones((7, 7))}
    assert ForwardPass(inputs=("mode", "ids", "mask")).batch_size(batch) == 3
    # A nested list of tensors as one input.
    assert ForwardPass(extract=lambda b: ([b, b],)).batch_size(np.ones((4, 1))) == 4


def test_batch_size_without_a_tensor_is_an_error():
    with pytest.raises(DataError) as err:
        ForwardPass().batch_size(("hello", 3), "train")
    assert str(err.value) == (
        "split 'train': no tensor with a batch dimension among the model inputs tuple(str), dict(); "
        "cannot tell the batch size"
    )


# --------------------------------------------------------------------------------------------
# splits


def test_first_batch_of_a_list_twice():
    splits = {"train": [(IDS, np.arange(2)), (IDS + 10, np.arange(2))]}
    assert first_batch(splits, "train") is splits["train"][0]
    assert first_batch(splits, "train") is splits["train"][0]


def test_a_factory_split_is_called_afresh_each_time():
    calls = []

    def batches():
        calls.append(1)
        yield IDS
        yield IDS + 10

    splits = {"test": batches}
    assert first_batch(splits, "test") is IDS
    assert first_batch(splits, "test") is IDS
    assert len(calls) == 2
    assert [b.tolist() for b in iter_batches(splits, "test")] == [[[1, 2], [3, 4]], [[11, 12], [13, 14]]]


def test_split_loader_returns_the_split_itself_or_the_factory_result():
    batches = [IDS]
    assert split_loader({"test": batches}, "test") is batches
    assert split_loader({"test": lambda: batches}, "test") is batches


def test_a_one_shot_iterator_is_refused_not_consumed():
    gen = (b for b in [IDS, IDS + 10])
    with pytest.raises(DataError) as err:
        first_batch({"train": gen}, "train")
    assert str(err.value) == (
        "split 'train': it is a one-shot iterator (generator); reading a batch would consume it. Pass a "
        "re-iterable (a list, the DataLoader itself) or a function that returns a fresh iterator, "
        "e.g. {'train': lambda: make_batches()}"
    )
    assert next(gen) is IDS  # nothing was taken from it


def test_missing_split_with_did_you_mean():
    splits = {"train": [IDS], "test": [IDS]}
    with pytest.raises(DataError) as err:
        first_batch(splits, "tset")
    assert str(err.value) == "no split 'tset'; available: 'test', 'train'; did you mean 'test'?"
    with pytest.raises(DataError) as err:
        first_batch(splits, "calibration")
    assert str(err.value) == "no split 'calibration'; available: 'test', 'train'"
    with pytest.raises(DataError) as err:
        first_batch({}, "test")
    assert str(err.value) == "no split 'test'; data_splits is empty"


def test_data_splits_must_be_a_mapping():
    with pytest.raises(DataError) as err:
        first_batch([IDS], "test")
    assert str(err.value) == (
        "data_splits must be a mapping of split name -> iterable of batches, e.g. "
        "{'train': train_loader, 'test': test_loader}; got list while looking for split 'test'"
    )


def test_empty_split():
    with pytest.raises(DataError) as err:
        first_batch({"test": []}, "test")
    assert str(err.value) == "split 'test' is empty"
    assert isinstance(err.value, ValueError)
    with pytest.raises(DataError, match="^split 'test' is empty$"):
        first_batch({"test": lambda: iter(())}, "test")


@pytest.mark.parametrize("value, message", [
    (None, "split 'test': it is None, not an iterable of batches"),
    ("data/test", "split 'test': it is a str, not an iterable of batches; load the data and pass a data "
                  "loader or a list of batches"),
    (np.zeros((4, 3), dtype=np.float32), "split 'test': it is a single ndarray[float32, 4x3], not an iterable "
                                         "of batches; iterating it would yield single rows. Pass a list of "
                                         "batches, e.g. {'test': [batch]}"),
    (3, "split 'test': int is not an iterable of batches; pass a data loader, a list of batches, or a "
        "function returning an iterator"),
])
def test_splits_that_are_not_iterables_of_batches(value, message):
    with pytest.raises(DataError) as err:
        first_batch({"test": value}, "test")
    assert str(err.value) == message


def test_a_factory_returning_a_single_array_is_refused():
    with pytest.raises(DataError, match=r"^split 'test': its factory returned a single ndarray\[int64, 2x2\]"):
        first_batch({"test": lambda: IDS}, "test")


def test_an_error_in_the_users_loader_propagates_with_a_note():
    def broken():
        raise OSError("cannot open shard 3")
        yield  # a generator function

    with pytest.raises(OSError, match="cannot open shard 3") as err:
        first_batch({"train": broken}, "train")
    assert err.value.__notes__ == ["(raised while reading the first batch of split 'train')"]


def test_first_batch_closes_a_generator_it_opened():
    closed = []

    def batches():
        try:
            yield IDS
            yield IDS
        finally:
            closed.append(True)

    first_batch({"test": batches}, "test")
    assert closed == [True]


# --------------------------------------------------------------------------------------------
# resizing by real samples


def test_taking_token_ids_up_cycles_the_real_samples():
    # 2 samples -> 3: rows 0, 1, 0 (row i is sample i % 2).
    (ids,), _ = ForwardPass().inputs_for({"test": [IDS]}, "test", batch_size=3)
    assert ids.tolist() == [[1, 2], [3, 4], [1, 2]]
    assert ids.dtype == np.int64 and ids.shape == (3, 2)
    # 2 -> 5: rows 0, 1, 0, 1, 0.
    (ids,), _ = ForwardPass().inputs_for({"test": [IDS]}, "test", batch_size=5)
    assert ids.tolist() == [[1, 2], [3, 4], [1, 2], [3, 4], [1, 2]]


def test_taking_down_slices_and_same_size_is_unchanged():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)  # rows [0,1,2], [3,4,5], [6,7,8], [9,10,11]
    (one,), _ = ForwardPass().inputs_for({"test": [(x, np.arange(4))]}, "test", batch_size=1)
    assert one.tolist() == [[0.0, 1.0, 2.0]] and one.dtype == np.float32
    (same,), _ = ForwardPass().inputs_for({"test": [(x, np.arange(4))]}, "test", batch_size=4)
    assert same is x
    (unchanged,), _ = ForwardPass().inputs_for({"test": [(x, np.arange(4))]}, "test")
    assert unchanged is x
    assert x.tolist()[0] == [0.0, 1.0, 2.0] and x.shape == (4, 3)  # the user's batch is untouched


def test_resizing_keyword_inputs_leaves_shared_tensors_and_non_tensors():
    mask = np.tril(np.ones((3, 3), dtype=bool))  # (L, L) = (3, 3), shared by all samples; batch is 2
    batch = {"input_ids": np.array([[5, 6, 7], [8, 9, 10]]), "mask": mask, "mode": "causal"}
    fp = ForwardPass(inputs={"input_ids": "input_ids", "mask": "attn_mask", "mode": "mode"})
    args, kwargs = fp.inputs_for({"test": [batch]}, "test", batch_size=3)
    assert args == ()
    assert kwargs["input_ids"].tolist() == [[5, 6, 7], [8, 9, 10], [5, 6, 7]]
    assert kwargs["attn_mask"] is mask and kwargs["mode"] == "causal"


def test_resizing_several_positional_and_nested_inputs():
    x = np.array([[1.0], [2.0]])
    t = np.array([10, 20])
    fp = ForwardPass(extract=lambda b: (b[0], [b[1], b[1]], 7))
    args, kwargs = fp.inputs_for({"test": [(x, t)]}, "test", batch_size=3)
    assert args[0].tolist() == [[1.0], [2.0], [1.0]]
    assert [a.tolist() for a in args[1]] == [[10, 20, 10], [10, 20, 10]] and isinstance(args[1], list)
    assert args[2] == 7 and kwargs == {}


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_bad_batch_size(bad):
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        ForwardPass().inputs_for({"test": [IDS]}, "test", batch_size=bad)


def test_an_empty_first_batch_cannot_be_resized():
    with pytest.raises(DataError) as err:
        ForwardPass().inputs_for({"test": [np.zeros((0, 3))]}, "test", batch_size=2)
    assert str(err.value) == (
        "split 'test': the first batch has 0 samples (tuple(ndarray[float64, 0x3])); cannot take 2 samples from it"
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6), cols=st.integers(0, 3), n=st.integers(1, 20),
    seed=st.integers(0, 2**31 - 1),
)
def test_take_gives_n_rows_each_an_original_row(rows, cols, n, seed):
    x = np.random.default_rng(seed).integers(0, 1000, size=(rows, cols))
    out = data.NumpyAdapter().take(x, n)
    assert out.shape == (n, cols) and out.dtype == x.dtype
    originals = [tuple(r) for r in x.tolist()]
    assert all(tuple(r) in originals for r in out.tolist())
    assert all(np.array_equal(out[i], x[i % rows]) for i in range(n))  # the documented order


# --------------------------------------------------------------------------------------------
# adapters


class Box:
    """A minimal foreign tensor: a list of rows with a dtype name."""

    def __init__(self, rows):
        self.rows = list(rows)


class BoxAdapter:
    name = "box"

    def is_tensor(self, x):
        return isinstance(x, Box)

    def describe(self, x):
        return f"Box[{len(x.rows)}]"

    def batch_dim(self, x):
        return len(x.rows)

    def take(self, x, n):
        return Box(x.rows[i] for i in data.cyclic_indices(len(x.rows), n))


@pytest.fixture
def isolated_adapters(monkeypatch):
    monkeypatch.setattr(data, "_ADAPTERS", list(data._ADAPTERS))


def test_a_registered_adapter_is_used_for_its_tensors(isolated_adapters):
    data.register_adapter(BoxAdapter())
    batch = (Box("abc"), np.arange(3))
    assert describe(batch) == "tuple(Box[3], ndarray[int64, 3])"
    (box,), _ = ForwardPass().inputs_for({"test": [batch]}, "test", batch_size=4)
    assert box.rows == ["a", "b", "c", "a"]


def test_registering_the_same_name_replaces_in_place(isolated_adapters):
    data.register_adapter(BoxAdapter())
    count = len(data._ADAPTERS)
    data.register_adapter(BoxAdapter())
    assert len(data._ADAPTERS) == count
    with pytest.raises(TypeError, match="expects a TensorAdapter"):
        data.register_adapter(object())


def test_the_core_imports_no_framework():
    code = "import sys, numpy; import deeplite_like.data as d; d.describe(numpy.ones(2)); " \
           "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules))"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
