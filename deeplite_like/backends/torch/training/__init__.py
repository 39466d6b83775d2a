"""What a training step costs in memory, on PyTorch: ``estimate_training_memory`` and ``largest_batch``.

    estimate.py     the estimate: one counted step (forward, loss, backward, optimizer step),
                    the bytes it holds by kind, the ``TrainingMemory`` result
    step.py         the step as it runs: the optimizers the estimate builds and how their state
                    is sharded (ZeRO, FSDP); storage tracking, activation checkpointing, autocast
    batch_fit.py    the largest batch that fits a memory budget
"""
