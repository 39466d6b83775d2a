"""Seed 004 (cli99 flops-profiler README), "Example Training Workflow", with its import lines changed.

The seed assumes a ``Model`` whose forward returns the loss, a ``data_loader`` and an
``optimizer``; they come from ``seed_stand_ins`` (random data) and one marked line.
"""
import torch  # changed: for the optimizer the seed assumes

from deeplite_like.profiling import FlopsProfiler  # changed: was `from flops_profiler import FlopsProfiler`
from seed_stand_ins import Model, data_loader  # changed: what the seed assumes exists

model = Model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)  # changed: the optimizer the seed assumes
prof = FlopsProfiler(model)

profile_step = 5
print_profile= True

for step, batch in enumerate(data_loader):
  # start profiling at training step "profile_step"
  if step == profile_step:
    prof.start_profile()

  # forward() method
  loss = model(batch)

  # end profiling and print output
  if step == profile_step: # if using multi nodes, check global_rank == 0 as well
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

print(f"flops={flops} macs={macs} params={params}")  # changed: show the figures to the test
