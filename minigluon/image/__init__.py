"""`mx.image`: decode, encode, resize and crop HxWxC uint8 images held in NDArrays.

Formats: PNG (decoded and encoded here with zlib + NumPy: 1/2/4/8/16-bit gray, gray+alpha,
RGB, RGBA and palette images, every filter type; Adam7-interlaced files need Pillow),
binary and ASCII PPM/PGM, and `.npy` arrays. JPEG and the other formats go through Pillow
when it is importable.

Channel order follows MXNet: `imdecode`/`imread` give RGB unless `to_rgb=False` (then BGR,
as OpenCV does); `imencode` takes RGB. Interpolation codes are OpenCV's: 0 nearest,
1 bilinear, 2 bicubic, 3 area, 4 Lanczos (computed as bicubic here), 9 automatic, 10 random.

One module per concept: `png`, `pnm`, `npy` and `pillow` are the codecs, `codec` picks one
and applies the flags, `resize` and `crop` do the geometry, `color` the channel arithmetic,
`conversion` moves images between NDArray and NumPy.

Out of scope: MXNet's ImageIter and augmenter classes, and 16-bit output images (16-bit
inputs are reduced to 8 bits, as OpenCV does for colour or gray reads).

Example::

    img = mx.image.imread('cat.png')            # NDArray (H, W, 3) uint8, RGB
    small = mx.image.imresize(img, 32, 32)      # bilinear
"""
from .codec import imdecode, imencode, imread
from .color import color_normalize
from .crop import (center_crop, center_crop_box, fixed_crop, fixed_crop_np,  # noqa: F401
                   random_crop, random_crop_box, random_size_crop, random_size_crop_box,
                   resize_short, scale_down)
from .errors import ImageFormatError
from .pillow import pillow_available
from .resize import imresize, resize_np  # noqa: F401

__all__ = ["imdecode", "imencode", "imread", "imresize", "scale_down", "resize_short",
           "fixed_crop", "center_crop", "random_crop", "random_size_crop", "color_normalize",
           "ImageFormatError", "pillow_available"]
