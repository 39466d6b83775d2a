"""Data binding with torch tensors and DataLoader splits."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from deeplite_like.backends.torch.inputs import TorchAdapter
from deeplite_like.data import DataError, ForwardPass, adapter_for, describe, first_batch

IDS = torch.tensor([[1, 2], [3, 4]])  # 2 samples of 2 token ids, int64
take = TorchAdapter().take


class DictSamples(Dataset):
    """4 samples {'img': (3, 2, 2) float32 filled with i, 'label': i}."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"img": torch.full((3, 2, 2), float(i)), "label": i}


class Batches(IterableDataset):
    """Yields two whole batches of ids: a dataset that batches by itself."""

    def __iter__(self):
        yield IDS
        yield IDS + 10


# --------------------------------------------------------------------------------------------
# adapter


def test_describe_torch_tensors():
    batch = {"label": torch.zeros(8, dtype=torch.long), "img": torch.zeros(8, 3, 32, 32)}
    assert describe(batch) == "dict(label=Tensor[int64, 8], img=Tensor[float32, 8x3x32x32])"
    assert describe(nn.Parameter(torch.zeros(2, 2, dtype=torch.float16))) == "Parameter[float16, 2x2]"
    assert describe(torch.tensor(1.0)) == "Tensor[float32, scalar]"
    assert describe(torch.zeros(2, device="meta")) == "Tensor[float32, 2, meta]"


def test_the_spec_example_message():
    batch = {"label": torch.zeros(8, dtype=torch.long), "img": torch.zeros(8, 3, 32, 32)}
    with pytest.raises(DataError) as err:
        ForwardPass(inputs="image")(batch, "train")
    assert str(err.value) == (
        "split 'train': cannot take input 'image' from batch dict(label=Tensor[int64, 8], "
        "img=Tensor[float32, 8x3x32x32]); keys: 'img', 'label'"
    )


@pytest.mark.slow  # (about 2 s here)
def test_the_core_finds_the_torch_adapter_by_itself():
    # Without importing the adapter module: the core imports it when it first meets a tensor.
    code = ("import sys, torch; import deeplite_like.data as d; "
            "assert 'deeplite_like.backends.torch.inputs' not in sys.modules; "
            "print(d.describe(torch.zeros(2, 3)), 'deeplite_like.backends.torch.inputs' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "Tensor[float32, 2x3] True"


def test_take_up_and_down_exact_values():
    # 2 -> 3: rows 0, 1, 0.  2 -> 1: row 0.  2 -> 2: the same tensor.
    assert take(IDS, 3).tolist() == [[1, 2], [3, 4], [1, 2]]
    assert take(IDS, 1).tolist() == [[1, 2]]
    assert take(IDS, 2) is IDS
    # 3 -> 7: rows 0, 1, 2, 0, 1, 2, 0.
    x = torch.tensor([10, 20, 30], dtype=torch.int32)
    out = take(x, 7)
    assert out.tolist() == [10, 20, 30, 10, 20, 30, 10] and out.dtype == torch.int32


def test_take_keeps_dtype_per_sample_shape_and_channels_last():
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.float64).reshape(2, 3, 4, 4).to(memory_format=torch.channels_last)
    for n in (1, 5):
        out = take(x, n)
        assert out.shape == (n, 3, 4, 4) and out.dtype == torch.float64
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(out[n - 1], x[(n - 1) % 2])


def test_take_of_a_grad_tensor_is_a_leaf_that_requires_grad():
    x = torch.ones(2, 3, requires_grad=True)
    for n in (1, 4):
        out = take(x, n)
        assert out.requires_grad and out.is_leaf and out.grad_fn is None
    assert take(torch.ones(2, 3), 4).requires_grad is False


def test_take_of_a_zero_d_tensor_is_refused():
    with pytest.raises(ValueError, match=r"0-d tensor Tensor\[float32, scalar\]"):
        take(torch.tensor(1.0), 2)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(0, 3), n=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
def test_take_gives_n_rows_each_an_original_row(rows, cols, n, seed):
    x = torch.randint(0, 1000, (rows, cols), generator=torch.Generator().manual_seed(seed))
    out = take(x, n)
    assert out.shape == (n, cols) and out.dtype == x.dtype
    originals = [tuple(r) for r in x.tolist()]
    assert all(tuple(r) in originals for r in out.tolist())
    assert all(torch.equal(out[i], x[i % rows]) for i in range(n))  # the documented order


# --------------------------------------------------------------------------------------------
# DataLoader splits


def test_dataloader_split_first_batch_twice():
    x = torch.arange(10, dtype=torch.float32).reshape(10, 1)
    y = torch.arange(10)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    splits = {"train": loader}
    first, again = first_batch(splits, "train"), first_batch(splits, "train")
    assert isinstance(first, list) and torch.equal(first[0], again[0])  # default collate gives [x, y]
    assert first[0].flatten().tolist() == [0.0, 1.0, 2.0, 3.0]
    fp = ForwardPass()
    assert fp.batch_size(first) == 4 and torch.equal(fp.targets(first), torch.tensor([0, 1, 2, 3]))


def test_timing_batch_sizes_from_a_loader_of_4():
    loader = DataLoader(TensorDataset(torch.arange(6).reshape(6, 1), torch.zeros(6)), batch_size=4)
    fp = ForwardPass()
    # Batch [[0], [1], [2], [3]]: size 1 -> [0]; size 8 -> 0..3 twice; size 32 -> 0..3 eight times.
    sizes = {n: fp.inputs_for({"test": loader}, "test", batch_size=n)[0][0] for n in (1, 8, 32)}
    assert sizes[1].flatten().tolist() == [0]
    assert sizes[8].flatten().tolist() == [0, 1, 2, 3] * 2
    assert sizes[32].flatten().tolist() == [0, 1, 2, 3] * 8 and sizes[32].dtype == torch.int64


def test_dict_samples_collated_into_a_dict_batch():
    loader = DataLoader(DictSamples(), batch_size=2)
    fp = ForwardPass(inputs="img", targets="label")
    (img,), kwargs = fp.inputs_for({"train": loader}, "train", batch_size=3)
    # Batch samples 0 and 1; 3 samples -> 0, 1, 0; each (3, 2, 2) filled with its index.
    assert img.shape == (3, 3, 2, 2) and kwargs == {}
    assert [img[i].unique().item() for i in range(3)] == [0.0, 1.0, 0.0]
    assert fp.targets(first_batch({"train": loader}, "train")).tolist() == [0, 1]


def test_loader_without_automatic_batching_yields_the_datasets_batches():
    loader = DataLoader(Batches(), batch_size=None)
    assert first_batch({"test": loader}, "test") is not None
    assert first_batch({"test": loader}, "test").tolist() == [[1, 2], [3, 4]]
    # An IterableDataset passed directly is accepted too: its items are batches.
    assert first_batch({"test": Batches()}, "test").tolist() == [[1, 2], [3, 4]]


def test_a_bare_map_style_dataset_is_refused():
    with pytest.raises(DataError) as err:
        first_batch({"train": TensorDataset(torch.zeros(4, 2))}, "train")
    assert str(err.value) == (
        "split 'train': it is a TensorDataset (a map-style Dataset), which yields single samples, not batches; "
        "wrap it: DataLoader(dataset, batch_size=...)"
    )


def test_an_empty_loader_and_an_iterator_over_a_loader():
    with pytest.raises(DataError, match="^split 'test' is empty$"):
        first_batch({"test": DataLoader(TensorDataset(torch.zeros(0, 2)), batch_size=2)}, "test")
    loader = DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)
    with pytest.raises(DataError, match=r"one-shot iterator \(_SingleProcessDataLoaderIter\)"):
        first_batch({"test": iter(loader)}, "test")


def test_a_single_tensor_as_a_split_is_refused():
    with pytest.raises(DataError) as err:
        first_batch({"test": torch.zeros(4, 2)}, "test")
    assert str(err.value).startswith("split 'test': it is a single Tensor[float32, 4x2], not an iterable of batches")


# --------------------------------------------------------------------------------------------
# inputs into a model


class TinyLM(nn.Module):
    """Embedding over a 5-token vocabulary, masked with a shared (L, L) mask."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 4)

    def forward(self, input_ids, attn_mask):
        h = self.embed(input_ids)  # (B, L, 4); fails if an id is outside 0..4
        return attn_mask.float() @ h  # (L, L) @ (B, L, 4) -> (B, L, 4)


def test_resized_token_ids_stay_valid_and_the_shared_mask_is_untouched():
    ids = torch.tensor([[0, 4, 2], [3, 1, 4]])  # batch 2, L = 3
    mask = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    batch = {"ids": ids, "mask": mask, "labels": torch.tensor([1, 0])}
    fp = ForwardPass(inputs={"ids": "input_ids", "mask": "attn_mask"}, targets="labels")
    model = TinyLM()
    for n in (1, 8, 32):
        args, kwargs = fp.inputs_for({"test": [batch]}, "test", batch_size=n)
        assert kwargs["attn_mask"] is mask
        assert kwargs["input_ids"].shape == (n, 3) and kwargs["input_ids"].dtype == torch.int64
        assert set(kwargs["input_ids"].flatten().tolist()) <= {0, 1, 2, 3, 4}
        assert model(*args, **kwargs).shape == (n, 3, 4)


def test_every_registered_adapter_sees_torch_tensors_as_torch():
    assert adapter_for(torch.zeros(1)).name == "torch"
    assert adapter_for(nn.Parameter(torch.zeros(1))).name == "torch"
    assert adapter_for([torch.zeros(1)]) is None
