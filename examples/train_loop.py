"""Profile one step of a real PyTorch training loop with ``FlopsProfiler``.

Run it from the repository root (needs torch)::

    python examples/train_loop.py [--steps 6] [--profile-step 3] [--optimizer adam] [--output step.txt]

A small CNN classifier trains on random 16x16 RGB images. At ``--profile-step`` the profiler
starts before the forward and stops after ``optimizer.step()``, so everything the step runs is
counted, phase by phase: the forward, ``loss.backward()`` (measured operator by operator, not
estimated as 2x the forward) and the optimizer update. The report shows the totals per phase
with latency and achieved FLOP/s, the top module types per depth, and the module tree with
each module's forward and backward FLOPs.

The model's first layer gets images that need no gradient, so its backward computes only the
weight gradient: backward MACs are less than twice the forward MACs (the report shows by how
much).
"""
from __future__ import annotations

import argparse

import torch
from torch import nn

from deeplite_like import FlopsProfiler


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--profile-step", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="adam")
    parser.add_argument("--module-depth", type=int, default=-1)
    parser.add_argument("--top-modules", type=int, default=3)
    parser.add_argument("--output", default=None, help="write the report there (.txt, .json, .html) instead")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = (torch.optim.Adam(model.parameters(), lr=1e-3) if args.optimizer == "adam"
                 else torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    loss_fn = nn.CrossEntropyLoss()
    prof = FlopsProfiler(model)

    for step in range(args.steps):
        images = torch.randn(args.batch_size, 3, 16, 16)
        labels = torch.randint(0, 10, (args.batch_size,))
        if step == args.profile_step:
            prof.start_profile()

        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

        if step == args.profile_step:
            prof.stop_profile()
            forward = prof.get_total_flops(phase="forward")
            backward = prof.get_total_flops(phase="backward")
            print(f"step {step}: loss {loss.item():.4f}; total {prof.get_total_flops(as_string=True)} "
                  f"(forward {forward:,}, backward {backward:,} = {backward / forward:.2f}x forward, "
                  f"optimizer {prof.get_total_flops(phase='optimizer'):,}) "
                  f"in {prof.get_total_duration(as_string=True)}")
            prof.print_model_profile(profile_step=step, module_depth=args.module_depth, top_modules=args.top_modules,
                                     output_file=args.output)
            prof.end_profile()
        else:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
