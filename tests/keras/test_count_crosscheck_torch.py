"""Same architecture, same numbers: a Keras model against its PyTorch twin, counted by the
torch backend's engine (operator level, ``deeplite_like.backends.torch.count_ops``).

Where the two architectures really differ, the difference is derived by hand: torch's
recurrent layers carry two bias vectors (Keras' LSTM and SimpleRNN one), and torch's fused
attention scales both q and k where Keras scales q once.
"""
import pytest

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from deeplite_like.backends.torch import count_ops as torch_count  # noqa: E402
from tests.keras._count_helpers import count  # noqa: E402

L = keras.layers


def _torch(module, shape):
    module.eval()
    with torch.no_grad():
        result = torch_count(module, torch.randn(*shape))
    assert result.untracked == {}
    return result.macs, result.flops


def _keras(model, shape):
    result = count(model, shape)
    return result.macs, result.flops


class _Recurrent(nn.Module):
    def __init__(self, cls):
        super().__init__()
        self.rnn = cls(6, 4, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class _SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("keras_model, torch_model, keras_shape, torch_shape", [
    (lambda: keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(8, 3, padding="same"), L.BatchNormalization(),
                               L.ReLU(), L.MaxPooling2D(2), L.Conv2D(16, 3, activation="relu"),
                               L.GlobalAveragePooling2D(), L.Dense(10)]),
     lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                           nn.Conv2d(8, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)),
     (2, 8, 8, 3), (2, 3, 8, 8)),
    (lambda: keras.Sequential([keras.Input((5, 8)), L.LayerNormalization(), L.Dense(16, activation="gelu"),
                               L.Dense(8)]),
     lambda: nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)),
     (2, 5, 8), (2, 5, 8)),
    (lambda: keras.Sequential([keras.Input((5, 6)), L.GRU(4, return_sequences=True)]),
     lambda: _Recurrent(nn.GRU), (2, 5, 6), (2, 5, 6)),
    (lambda: keras.Sequential([keras.Input((5, 5, 4)), L.SeparableConv2D(6, 3, depth_multiplier=2)]),
     lambda: nn.Sequential(nn.Conv2d(4, 8, 3, groups=4, bias=False), nn.Conv2d(8, 6, 1)),
     (1, 5, 5, 4), (1, 4, 5, 5)),
    (lambda: keras.Sequential([keras.Input((3, 3, 4)), L.Conv2DTranspose(2, 3, strides=2)]),
     lambda: nn.ConvTranspose2d(4, 2, 3, stride=2), (1, 3, 3, 4), (1, 4, 3, 3)),
    (lambda: keras.Sequential([keras.Input((3, 3, 4)), L.UpSampling2D(interpolation="bilinear")]),
     lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (1, 3, 3, 4), (1, 4, 3, 3)),
])
def test_same_architecture_same_count(keras_model, torch_model, keras_shape, torch_shape):
    assert _keras(keras_model(), keras_shape) == _torch(torch_model(), torch_shape)


class _EmbedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.conv = nn.Embedding(20, 6), nn.Conv1d(6, 4, 3)

    def forward(self, ids):
        return self.conv(self.embed(ids).transpose(1, 2)).amax(-1)


def test_embedding_conv1d_global_max_pool():
    keras_model = keras.Sequential([keras.Input((10,), dtype="int32"), L.Embedding(20, 6), L.Conv1D(4, 3),
                                    L.GlobalMaxPooling1D()])
    with torch.no_grad():
        expected = torch_count(_EmbedConv().eval(), torch.zeros(2, 10, dtype=torch.long))
    # conv: out (2,8,4) = 64 x 3 taps x 6 = 1152 MACs, + 64 bias; max over 64: 2304 + 64 + 64 = 2432
    assert _keras(keras_model, (2, 10)) == (expected.macs, expected.flops) == (1152, 2432)


def test_lstm_and_simple_rnn_differ_by_torchs_second_bias():
    # rows = 2*5 = 10. torch's LSTM adds b_ih and b_hh: one more 4H bias per row than Keras:
    # 10 * 16 = 160 FLOPs; SimpleRNN: 10 * 4 = 40 FLOPs. MACs are equal.
    lstm_k = _keras(keras.Sequential([keras.Input((5, 6)), L.LSTM(4, return_sequences=True)]), (2, 5, 6))
    lstm_t = _torch(_Recurrent(nn.LSTM), (2, 5, 6))
    assert lstm_k == (lstm_t[0], lstm_t[1] - 160) == (1600, 4240)
    rnn_k = _keras(keras.Sequential([keras.Input((5, 6)), L.SimpleRNN(4, return_sequences=True)]), (2, 5, 6))
    rnn_t = _torch(_Recurrent(nn.RNN), (2, 5, 6))
    assert rnn_k == (rnn_t[0], rnn_t[1] - 40) == (400, 920)


def test_attention_differs_by_torchs_key_scaling():
    # torch's fused MHA (need_weights=False) prices SDPA's math path, which scales q and k;
    # Keras scales q once: the difference is the k scaling, B*H*Lk*head_dim = 2*2*5*4 = 80.
    x = keras.Input((5, 8))
    keras_model = keras.Model(x, L.MultiHeadAttention(2, 4)(x, x))
    macs, flops = _keras(keras_model, (2, 5, 8))
    assert (macs, flops + 80) == _torch(_SelfAttention(), (2, 5, 8)) == (3360, 7700)
