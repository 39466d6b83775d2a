# The training-workflow example of cli99/flops-profiler's README.md ("Example Training Workflow", MIT licence,
# (c) its authors), run as a test. The example's lines are verbatim but for its import line; what it leaves to the
# reader (Model, data_loader, optimizer, ds_engine) is defined above it.
import torch

from tests.compat.cli99.lenet5 import LeNet5


def test_readme_training_workflow(capsys):
    ds_engine = None

    def Model():
        return LeNet5(10)

    data_loader = [torch.randn(2, 1, 32, 32) for _ in range(6)]

    # --- README, with `model(batch)` returning logits and probs: the loss is their sum -----------
    from deeplite_like.profiling import FlopsProfiler  # README: from flops_profiler import FlopsProfiler

    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    prof = FlopsProfiler(model, ds_engine if ds_engine else None)

    profile_step = 5
    print_profile = True

    for step, batch in enumerate(data_loader):
        # start profiling at training step "profile_step"
        if step == profile_step:
            prof.start_profile()

        # forward() method
        loss = model(batch)[0].sum()

        # end profiling and print output
        if step == profile_step:  # if using multi nodes, check global_rank == 0 as well
            prof.stop_profile()
            flops = prof.get_total_flops()
            macs = prof.get_total_macs()
            params = prof.get_total_params()
            if print_profile:
                prof.print_model_profile(profile_step=profile_step)
            prof.end_profile()

        # runs backpropagation
        loss.backward()

        # weight update
        optimizer.step()

    # LeNet-5 on 2 images: 416,520 MACs each (conv 117,600 + 240,000 + 48,000, linear 10,080 + 840)
    assert macs == 2 * 416520
    assert params == 61706  # the same parameter count DeepSpeed's and cli99's tests assert
    assert flops >= 2 * macs  # FLOPs = 2 x MACs + the elementwise work (tanh, pooling, bias adds, softmax)
    assert prof.macs == macs and prof.params == params  # DeepSpeed's attributes, set by print_model_profile
    assert "Flops profile of LeNet5 (torch) at step 5" in capsys.readouterr().out  # the printed report's title
