"""Shape changes, padding, resampling and rescaling.

Free (moves, copies, look-ups; as torch's views, pads and nearest upsampling)::

    InputLayer, Flatten, Reshape, Permute, RepeatVector, Identity, ZeroPadding{1,2,3}D,
    Cropping{1,2,3}D, UpSampling1D, UpSampling3D (repeats), ActivityRegularization (its loss
    is a training aid, not the model's arithmetic)

Priced per OUTPUT element (interpolation: n neighbours, n multiplies + n - 1 adds)::

    UpSampling2D, Resizing   nearest 0, bilinear 7, bicubic 31; other interpolations (lanczos,
                             area) and anti-aliased downscaling are reported untracked
    Rescaling                x * scale (+ offset): 1, or 2 with a non-zero offset
    Normalization            (x - mean) / std: 2 (inverse: x * std + mean, 2)
    Masking                  x * mask: 1 (finding the masked steps is a comparison: free)

Preprocessing, augmentation, spectrogram and wrapper layers:

    Preprocessing, augmentation, spectrogram and wrapper layers: priced by the operators they run.

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

import deeplite_like.backends.keras.counting.formulas._common as c
from ..registry import Cost, LayerCall, register_free_layer, register_layer_formula, register_op_level_layer
from ._common import float_elements, per_output_element


register_free_layer(
    "keras.layers.InputLayer", "keras.layers.Flatten", "keras.layers.Reshape", "keras.layers.Permute",
    "keras.layers.RepeatVector", "keras.layers.Identity", "keras.layers.ZeroPadding1D", "keras.layers.ZeroPadding2D",
    "keras.layers.ZeroPadding3D", "keras.layers.Cropping1D", "keras.layers.Cropping2D", "keras.layers.Cropping3D",
    "keras.layers.UpSampling1D", "keras.layers.UpSampling3D", "keras.layers.ActivityRegularization",
)

INTERPOLATION = {"nearest": c.NEAREST, "bilinear": c.BILINEAR, "bicubic": c.BICUBIC}


def _interpolation(call: LayerCall, mode: str) -> Cost:
    per = INTERPOLATION.get(mode)
    if per is None:
        call.report_untracked(f"{type(call.layer).__name__}(interpolation={mode!r})")
        return Cost()
    return Cost.elementwise(per * float_elements(call.output))


@register_layer_formula("keras.layers.UpSampling2D")
def upsampling2d(call: LayerCall) -> Cost:
    """nearest 0, bilinear 7, bicubic 31 FLOPs per output element."""
    return _interpolation(call, call.layer.interpolation)


@register_layer_formula("keras.layers.Resizing")
def resizing(call: LayerCall) -> Cost:
    """As UpSampling2D per output element; anti-aliased downscaling is reported untracked."""
    layer = call.layer
    if getattr(layer, "antialias", False) and layer.interpolation != "nearest":
        shape = call.input.shape
        if layer.height < shape[layer.height_axis] or layer.width < shape[layer.width_axis]:
            call.report_untracked(f"Resizing(antialias=True, interpolation={layer.interpolation!r})")
            return Cost()
    return _interpolation(call, layer.interpolation)


@register_layer_formula("keras.layers.Rescaling")
def rescaling(call: LayerCall) -> Cost:
    """x * scale + offset: 1 FLOP per element, 2 with a non-zero offset."""
    offset = call.layer.offset
    has_offset = not (isinstance(offset, (int, float)) and float(offset) == 0.0)
    return Cost.elementwise((1 + int(has_offset)) * float_elements(call.output))


register_layer_formula("keras.layers.Normalization")(per_output_element(
    2, "normalization", "(x - mean) / std (or its inverse): 2 FLOPs per element."))
register_layer_formula("keras.layers.Masking")(per_output_element(1, "masking", "x * mask: 1 FLOP per element."))


# -- Preprocessing, augmentation, spectrogram and wrapper layers ------------------------------------
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
