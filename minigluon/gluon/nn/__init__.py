"""`mx.gluon.nn`: neural-network layers (Dense, Conv2D, BatchNorm, ...) and containers."""
from .activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, Swish  # noqa: F401
from .basic_layers import (BatchNorm, Dense, Dropout, Embedding, Flatten,  # noqa: F401
                           GroupNorm, HybridLambda, HybridSequential, InstanceNorm, Lambda,
                           LayerNorm, Sequential)
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D,  # noqa: F401
                          Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose,
                          GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D,
                          GlobalMaxPool2D, GlobalMaxPool3D, MaxPool1D, MaxPool2D, MaxPool3D,
                          ReflectionPad2D)
from ..block import Block, HybridBlock, SymbolBlock  # noqa: F401
