"""Seed 004 (cli99 flops-profiler README), "Example: AlexNet", with its import lines changed.

Changed lines, each marked ``# changed``: the imports; ``torch.cuda.device(0)`` is entered only
where CUDA exists (it raises on a CPU-only build); ``batch_size`` may be lowered by the
environment variable ``SEED_BATCH_SIZE`` so that the test suite runs it quickly (256 by default).
"""
import contextlib  # changed: for the CPU fallback below
import os  # changed: SEED_BATCH_SIZE

from seed_stand_ins import models  # changed: was `import torchvision.models as models`
import torch
from deeplite_like.profiling import get_model_profile  # changed: was `from flops_profiler import get_model_profile`

with torch.cuda.device(0) if torch.cuda.is_available() else contextlib.nullcontext():  # changed: CPU fallback
    model = models.alexnet()
    batch_size = int(os.environ.get("SEED_BATCH_SIZE", 256))  # changed: was `batch_size = 256`
    flops, macs, params = get_model_profile(model=model, # model
                                    input_shape=(batch_size, 3, 224, 224), # input shape to the model. If specified, the model takes a tensor with this shape as the only positional argument.
                                    args=None, # list of positional arguments to the model.
                                    kwargs=None, # dictionary of keyword arguments to the model.
                                    print_profile=True, # prints the model graph with the measured profile attached to each module
                                    detailed=True, # print the detailed profile
                                    module_depth=-1, # depth into the nested modules, with -1 being the inner most modules
                                    top_modules=1, # the number of top modules to print aggregated profile
                                    warm_up=10, # the number of warm-ups before measuring the time of each module
                                    as_string=True, # print raw numbers (e.g. 1000) or as human-readable strings (e.g. 1k)
                                    output_file=None, # path to the output file. If None, the profiler prints to stdout.
                                    ignore_modules=None, # the list of modules to ignore in the profiling
                                    func_name='forward') # the function name to profile, "forward" by default, for huggingface generative models, `generate` is used

print(f"flops={flops} macs={macs} params={params} batch_size={batch_size}")  # changed: show the figures to the test
