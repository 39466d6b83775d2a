"""Preprocessing, augmentation, spectrogram and wrapper layers: priced by the operators they run.

Their work depends on the mode and the data (identity at inference, image transforms in
training; a lookup, or a tf-idf weighting), or is foreign code, so no shape formula fits; they
are marked ``OP_LEVEL`` and priced op by op (``engine.own_ops``), exactly what they run::

    identity at inference           AugMix, CutMix, MixUp, RandAugment, Random* augmentation (not
    (INFERENCE_IDENTITY)            RandomCrop): 0 at inference, their ops in training; where no
                                    operator hook exists (JAX) free at inference
    always transform                AutoContrast, CenterCrop, RandomCrop, Equalization, Solarization,
                                    ContrastLimitedAdaptiveHistogramEqualization, MaxNumBoundingBoxes
    lookups and encodings           CategoryEncoding, Discretization, Hashing, HashedCrossing,
                                    IntegerLookup, StringLookup, TextVectorization (lookups, hashing,
                                    bucketing: free TF ops; tf-idf multiplies counted)
    spectrograms                    MelSpectrogram (RFFT, its mel filter bank built each call, the
                                    matmul onto it, log), STFTSpectrogram (framing convolutions)
    foreign code                    Lambda, TFSMLayer, JaxLayer, FlaxLayer, TorchModuleWrapper,
                                    SpectralNormalization (power iteration in training)

Operators with no cost known (``ImageProjectiveTransformV3``: the bilinear resampling of
rotations and shears in training) are listed in ``untracked`` by op name.
"""
from __future__ import annotations

from ..registry import register_op_level_layer

_L = "keras.layers."

INFERENCE_IDENTITY_LAYERS = [_L + name for name in (
    "AugMix", "CutMix", "MixUp", "RandAugment", "RandomBrightness", "RandomColorDegeneration", "RandomColorJitter",
    "RandomContrast", "RandomElasticTransform", "RandomErasing", "RandomFlip", "RandomGaussianBlur",
    "RandomGrayscale", "RandomHue", "RandomInvert", "RandomPerspective", "RandomPosterization", "RandomRotation",
    "RandomSaturation", "RandomSharpness", "RandomShear", "RandomTranslation", "RandomZoom",
)]

OP_LEVEL_LAYERS = [_L + name for name in (
    "AutoContrast", "CenterCrop", "RandomCrop", "Equalization", "Solarization",
    "ContrastLimitedAdaptiveHistogramEqualization", "MaxNumBoundingBoxes",
    "CategoryEncoding", "Discretization", "Hashing", "HashedCrossing", "IntegerLookup", "StringLookup",
    "TextVectorization", "MelSpectrogram", "STFTSpectrogram",
    "Lambda", "TFSMLayer", "JaxLayer", "FlaxLayer", "TorchModuleWrapper", "SpectralNormalization",
)]

register_op_level_layer(*INFERENCE_IDENTITY_LAYERS, inference_identity=True)
register_op_level_layer(*OP_LEVEL_LAYERS)
