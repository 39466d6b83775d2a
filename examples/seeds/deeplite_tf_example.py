"""Seed 002 (deeplite-profiler manual), "TensorFlow Example", with its import lines changed.

Replaced because they are downloads: CIFAR-100 (random arrays of its shapes, 256 images per
split) and VGG19's ImageNet weights (``weights=None``: random). ``Device.GPU`` is used where a
GPU exists, else ``Device.CPU``. Each such line is marked ``# changed``.
"""
import numpy as np
import tensorflow as tf  # changed: was `import TensorFlow as tf` (no such module)
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
try:
    tf.compat.v1.enable_eager_execution()
except Exception:
    pass

from deeplite_like.backends.keras import TFProfiler  # changed: was neutrino.framework.tf_profiler.tf_profiler
from deeplite_like.backends.keras import *  # changed: was neutrino.framework.tf_profiler.tf_profiler
from deeplite_like import Device, ComputeEvalMetric  # changed: was neutrino.framework.profiler
from deeplite_like.backends.keras import get_accuracy, get_missclass  # changed: was neutrino.framework.tf_profiler.tf_inference

DEVICE = Device.GPU if tf.config.list_physical_devices("GPU") else Device.CPU  # changed: the seed runs on Device.GPU

# Step 1: Define TensorFlow dataloaders and model (tf.data.Dataset)
# 1a. data_splits = {"train": train_dataloder, "test": test_dataloader}
rng = np.random.default_rng(0)  # changed: random CIFAR-100-shaped data instead of the download
(x_train, y_train), (x_test, y_test) = ((rng.integers(0, 256, (256, 32, 32, 3), dtype="uint8"),  # changed
                                         rng.integers(0, 100, (256, 1))),
                                        (rng.integers(0, 256, (256, 32, 32, 3), dtype="uint8"),
                                         rng.integers(0, 100, (256, 1))))
x_train = x_train.astype('float32') / 255
x_test = x_test.astype('float32') / 255    
y_train = np.eye(100)[y_train.reshape(-1)]
y_test = np.eye(100)[y_test.reshape(-1)]
train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)) \
        .shuffle(buffer_size=x_train.shape[0]) \
        .batch(128) 
test_dataset = tf.data.Dataset.from_tensor_slices((x_test, y_test)) \
        .batch(128) 
data_splits = {'train': train_dataset, 'test': test_dataset}

# 1b. Load the TensorFlow Keras model: Transfer learning from pretrained model
preprocess_input = tf.keras.applications.mobilenet_v2.preprocess_input#tf.keras.applications.vgg19.preprocess_input
base_model = tf.keras.applications.VGG19(input_shape=(32, 32, 3),
                                            include_top=False,
                                            weights=None)  # changed: was weights='imagenet' (a download)
inputs = tf.keras.Input(shape=(32, 32, 3))
x = preprocess_input(inputs)
x = base_model(x, training=False)
x = tf.keras.layers.GlobalAveragePooling2D()(x)
x = tf.keras.layers.Dropout(0.2)(x)
outputs = tf.keras.layers.Dense(100)(x)
model = tf.keras.Model(inputs, outputs)
model.compile(loss=tf.keras.losses.CategoricalCrossentropy(), optimizer=tf.keras.optimizers.SGD(), metrics=['accuracy'])

# Step 2: Create Profiler class and register the profiling functions
data_loader = TFProfiler.enable_forward_pass_data_splits(data_splits)
profiler = TFProfiler(model, data_loader, name="Original Model")
profiler.register_profiler_function(ComputeFlops())
profiler.register_profiler_function(ComputeSize())
profiler.register_profiler_function(ComputeParams())
profiler.register_profiler_function(ComputeLayerwiseSummary())
profiler.register_profiler_function(ComputeExecutionTime())
profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))

# Step 3: Compute the registered profiler metrics for the TensorFlow Keras Model
profiler.compute_network_status(batch_size=1, device=DEVICE, short_print=False,  # changed: device
                                                include_weights=True, print_mode='debug')
