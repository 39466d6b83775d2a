"""Seed 001 (DeepSpeed pytorch-profiler README), "Use the low-level APIs", with its import lines changed.

The seed's snippet does not run as printed, with any library: it has a syntax error
(``model.print_model_profile())``), two misspelt names (``profile_setp``,
``pring_aggregated_profile``), a truncated attribute (``model.compute_ta``), a comparison of the
model with the step (``if model == profile_step``) and ``print_model_aggregated_profile`` called
as a free function. Those lines are fixed and marked ``# fixed``; ``Model``, ``data_loader`` and
``optimizer`` come from ``seed_stand_ins`` (random data). The calls are the seed's.
"""
import torch  # changed: for the optimizer the seed assumes

import deeplite_like.profiling.legacy as prof  # changed: was `import deepspeed.profiler as prof`
from seed_stand_ins import Model, data_loader  # changed: what the seed assumes exists

model = Model()
model = prof.add_profile_methods(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)  # changed: the optimizer the seed assumes

profile_step = 5  # fixed: was `profile_setp = 5`
print_profile = True
print_aggregated_profile = True  # fixed: was `pring_aggregated_profile = True`

for step, batch in enumerate(data_loader):
  # start profiling at training step "profile_step"
  if step == profile_step:
    model.start_profile()

  # forward() method
  loss = model(batch)

  # stop profiling and print output at training step "profile_step"
  if step == profile_step:  # fixed: was `if model == profile_step:`
    flops = model.get_total_flops()
    duration = model.get_total_duration()
    params = model.compute_total_params()  # fixed: was `params = model.compute_ta`
    if print_profile:
        model.print_model_profile()  # fixed: was `model.print_model_profile())`
    if print_aggregated_profile:
        model.print_model_aggregated_profile(depth=-1, top_num=3)  # fixed: was a free function
    model.stop_profile()

  # runs backpropagation
  loss.backward()

  # weight update
  optimizer.step()

print(f"flops={flops} params={params} profiled={hasattr(model, 'start_profile')}")  # changed: for the test
