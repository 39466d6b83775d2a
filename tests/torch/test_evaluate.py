"""accuracy / topk_accuracy / evaluate on a fixed linear model with known predictions."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from deeplite_like.backends.torch.compute import accuracy, evaluate, topk_accuracy
from deeplite_like.data import ForwardPass


def fixed_model() -> nn.Linear:
    """scores(a, b) = [a, b, -a - b] for classes 0, 1, 2."""
    model = nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]))
    return model


# x            scores          classes by score   target  top1  top2
# ( 2,  0)   [ 2,  0, -2]      0, 1, 2            0       yes   yes
# ( 0,  3)   [ 0,  3, -3]      1, 0, 2            1       yes   yes
# (-1, -2)   [-1, -2,  3]      2, 0, 1            2       yes   yes
# ( 1,  2)   [ 1,  2, -3]      1, 0, 2            0       no    yes
# ( 3,  1)   [ 3,  1, -4]      0, 1, 2            2       no    no
X = torch.tensor([[2.0, 0.0], [0.0, 3.0], [-1.0, -2.0], [1.0, 2.0], [3.0, 1.0]])
Y = torch.tensor([0, 1, 2, 0, 2])


def batches(n: int, size: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(X[i:min(i + size, n)], Y[i:min(i + size, n)]) for i in range(0, n, size)]


def test_three_of_four_right_is_75():
    assert accuracy(fixed_model(), batches(4)) == 75.0  # rows 1-4: 3 right of 4


def test_topk_over_uneven_batches():
    loader = batches(5)  # batches of 2, 2, 1
    model = fixed_model()
    assert accuracy(model, loader) == 60.0  # 3 of 5
    assert topk_accuracy(model, loader, k=2) == 80.0  # 4 of 5
    assert topk_accuracy(model, loader, k=3) == 100.0  # every class is in the top 3 of 3
    assert evaluate(model, loader, metrics=("top1", "top2")) == {"top1": 60.0, "top2": 80.0}


def test_torch_dataloader_and_one_hot_targets():
    loader = DataLoader(TensorDataset(X, nn.functional.one_hot(Y, 3).float()), batch_size=3)
    assert accuracy(fixed_model(), loader) == 60.0


def test_forward_pass_binding():
    dict_batches = [{"image": x, "label": y} for x, y in batches(4)]
    fp = ForwardPass("image", targets="label")  # the project's binding: __call__ + targets
    assert accuracy(fixed_model(), dict_batches, forward_pass=fp) == 75.0

    class Legacy:  # deeplite-style: extract_model_inputs + targets
        def extract_model_inputs(self, batch):
            return (batch["image"],), {}

        def targets(self, batch):
            return batch["label"]

    assert accuracy(fixed_model(), dict_batches, forward_pass=Legacy()) == 75.0


def test_logits_attribute_or_key():
    class DictOut(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = fixed_model()

        def forward(self, x):
            return {"logits": self.inner(x)}

    assert accuracy(DictOut(), batches(4)) == 75.0

    class TupleOut(DictOut):
        def forward(self, x):
            return self.inner(x), x

    with pytest.raises(TypeError, match="cannot read class scores from a model output of type tuple"):
        accuracy(TupleOut(), batches(4))


def test_mode_restored_and_eval_used():
    modes = []
    model = nn.Sequential(fixed_model(), nn.Dropout(p=0.99))  # dropout would ruin train-mode accuracy
    model.register_forward_hook(lambda m, i, o: modes.append((m.training, torch.is_grad_enabled())))
    model.train()
    assert accuracy(model, batches(4)) == 75.0
    assert set(modes) == {(False, False)}
    assert model.training and model[1].training


def test_errors_say_what_to_do():
    model = fixed_model()
    with pytest.raises(ValueError, match="top-5 accuracy needs at least 5 classes; the model scores 3"):
        evaluate(model, batches(4))  # default metrics top1, top5
    with pytest.raises(ValueError, match="unknown evaluation metric 'f1'"):
        evaluate(model, batches(4), metrics=("f1",))
    with pytest.raises(ValueError, match="yielded no samples"):
        accuracy(model, [])
    with pytest.raises(TypeError, match=r"expected \(inputs, targets\) batches, got Tensor"):
        accuracy(model, [X])
    with pytest.raises(ValueError, match=r"targets of shape \(2, 2\) do not match class scores of shape \(2, 3\)"):
        accuracy(model, [(X[:2], torch.zeros(2, 2, dtype=torch.long))])
    with pytest.raises(ValueError, match="k must be a positive int"):
        topk_accuracy(model, batches(4), k=0)
