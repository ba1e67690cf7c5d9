"""TFLite models through NNAPI: a ``.tflite`` file becomes NNAPI models and CPU kernels.

On a phone an app hands a ``.tflite`` file to TFLite, whose NNAPI delegate gives NNAPI
the operations NNAPI can take and runs the rest on TFLite's own CPU kernels. This module
is that path for the emulator::

    model = loadTfLite("face_detection_short_range.tflite")
    print(model.describe())                    # which operation goes where, and why
    compiled = await model.compile(nn)         # nn: a NeuralNetworks runtime
    boxes, scores = await compiled.run([image])

What happens, as the delegate does it for an Android 10 device (NNAPI feature level 29):

- **Constants are folded** first: a DEQUANTIZE of a constant (float16 weights, int8
  weights) becomes a float32 constant, a DENSIFY of constant sparse weights becomes the
  dense constant. (The delegate converts float16 weights the same way; TFLite densifies
  constant weights once, at prepare.)
- **Each remaining operation is checked** against what NNAPI 1.2 takes (the delegate's
  validation rules for feature level 29: fused activations NONE/RELU/RELU1/RELU6 only,
  RESIZE_BILINEAR without ``align_corners``/``half_pixel_centers``, STRIDED_SLICE
  without ellipsis or new-axis masks, constant shapes, rank <= 4 ...). An operation that
  passes is *delegated*; HARD_SWISH, which NNAPI 1.2 lacks, is delegated as the
  delegate lowers it: ``0.5x * RELU1(x/3) + 0.5x``.
- **Delegated operations in a row form a partition**, one NNAPI ``Model`` each (tensors
  become operands with their quantization, per-channel included; padding SAME/VALID
  becomes NNAPI's implicit padding), which the app's runtime compiles like any other
  model: with ``create`` it partitions it again across the devices, with
  ``createForDevices`` only the devices named.
- **The rest runs in this process on the CPU**, with the kernels in this module, written
  after TFLite's reference semantics: RESIZE_BILINEAR with half-pixel centers or aligned
  corners, MediaPipe's ``Convolution2DTransposeBias``, DEQUANTIZE of a tensor computed at
  run time. A custom operation this module does not know, or a builtin that neither NNAPI
  1.2 nor these kernels can run, is a ``BadDataError`` naming it, at load.

The parser is the ``tflite`` package (the TFLite flatbuffer schema's accessors).
"""

from ._tflite import MODELS_DIR_ENV as MODELS_DIR_ENV
from ._tflite import CompiledTfLite as CompiledTfLite
from ._tflite import Partition as Partition
from ._tflite import PartitionTiming as PartitionTiming
from ._tflite import TfLiteModel as TfLiteModel
from ._tflite import TfLiteOperation as TfLiteOperation
from ._tflite import TfLiteTensor as TfLiteTensor
from ._tflite import densify as densify
from ._tflite import findModel as findModel
from ._tflite import loadTfLite as loadTfLite
from ._tflite import modelsDir as modelsDir
from ._tflite import syntheticImage as syntheticImage
