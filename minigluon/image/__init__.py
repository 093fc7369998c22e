"""`mx.image`: decode, encode, resize and crop HxWxC uint8 images held in NDArrays.

Decoding, encoding and resizing go through OpenCV (`opencv-python-headless`, a required
dependency), as in MXNet: JPEG, PNG, BMP, GIF, WebP, TIFF, PPM/PGM and the other formats
OpenCV reads. 16-bit images are reduced to 8 bits.

Channel order follows MXNet: `imdecode`/`imread` give RGB unless `to_rgb=False` (then BGR,
as OpenCV returns); `imencode` takes RGB. Interpolation codes are MXNet's, which are
OpenCV's: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 automatic, 10 random.

One module per concept: `opencv` imports the library, `codec` decodes and encodes with
MXNet's flags, `resize` and `crop` do the geometry, `color` the channel arithmetic,
`conversion` moves images between NDArray and NumPy. docs/images.md tells the choices.

Out of scope: MXNet's ImageIter and augmenter classes, and 16-bit output images.

Example::

    img = mx.image.imread('cat.jpg')            # NDArray (H, W, 3) uint8, RGB
    small = mx.image.imresize(img, 32, 32)      # bilinear
"""
from .codec import imdecode, imencode, imread
from .color import color_normalize
from .crop import (center_crop, center_crop_box, fixed_crop, fixed_crop_np,  # noqa: F401
                   random_crop, random_crop_box, random_size_crop, random_size_crop_box,
                   resize_short, scale_down)
from .errors import ImageFormatError
from .resize import imresize, resize_np  # noqa: F401

__all__ = ["imdecode", "imencode", "imread", "imresize", "scale_down", "resize_short",
           "fixed_crop", "center_crop", "random_crop", "random_size_crop", "color_normalize",
           "ImageFormatError"]
