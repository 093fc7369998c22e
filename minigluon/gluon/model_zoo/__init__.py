"""`gluon.model_zoo`: ready-made network definitions (`model_zoo.vision.get_model`)."""
from . import vision  # noqa: F401
