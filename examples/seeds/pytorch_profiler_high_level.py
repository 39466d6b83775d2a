"""Seed 001 (DeepSpeed pytorch-profiler README), "Use the high level-API", with its import lines changed.

Changed lines are marked ``# changed``: the imports, and ``torch.cuda.device(0)`` entered only
where CUDA exists (it raises on a CPU-only build).
"""
import contextlib  # changed: for the CPU fallback below

from seed_stand_ins import models  # changed: was `import torchvision.models as models`
import torch
from deeplite_like.profiling.legacy import get_model_profile  # changed: was `from deepspeed.profiler.pytorch_profiler import get_model_profile`

with torch.cuda.device(0) if torch.cuda.is_available() else contextlib.nullcontext():  # changed: CPU fallback
    mod = models.alexnet()
    macs, params = get_model_profile(mod, # model
                                     (3, 224, 224), # input shape or input to the input_constructor
                                     input_constructor=None, # if specified, a constructor taking the the parameter before is used as input to the model
                                     print_profile=True, # print model graph with the profile annotated
                                     print_aggregated_profile=True, # print aggregated profile for top modules
                                     depth=-1, # depth into the nested modules with -1 being the inner most modules
                                     top_num=3, # the number of top modules to print aggregated profile
                                     warm_up=10, # the number of warm-ups before measuring the time of each module
                                     as_strings=True, # print raw numbers (e.g. 1000) or strings (e.g. 1k)
                                     ignore_modules=None) # the list of modules to ignore in the profiling
    print('{:<30}  {:<8}'.format('Number of multiply-adds: ', macs))
    print('{:<30}  {:<8}'.format('Number of parameters: ', params))
