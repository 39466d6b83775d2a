import numpy as np
from deeplite_like.backends.keras._tf import import_keras
keras = import_keras()
from deeplite_like.backends.keras.counting import count_ops
L = keras.layers
m = keras.Sequential([keras.Input((256,)), L.MelSpectrogram(fft_length=64, sequence_stride=16, sequence_length=64, num_mel_bins=8)])
r = count_ops(m, (2, 256))
print(r.macs, r.flops, r.untracked, {k:(v.macs, v.flops, v.calls) for k,v in r.by_operator.items() if v.flops})
m = keras.Sequential([keras.Input((8, 8, 3)), L.RandomRotation(0.1), L.RandomFlip()])
print(count_ops(m, (2, 8, 8, 3)).flops)
r = count_ops(m, (2, 8, 8, 3), training=True, warn_untracked=False); print(r.flops, r.untracked)
