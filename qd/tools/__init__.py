"""`qd.tools`: the parts of Quadrants' `quadrants.tools` that need no GUI: `PLYWriter` (`np2ply.py`) and image files
(`imwrite`, `imread`, `imresize`; `image.py`, through the optional Pillow). Loaded on first use of `qd.tools`.
Quadrants' other tools (`write_vtk`, `diagnose`) and `imshow` (a GUI window) raise an error naming them."""

from qd.tools.image import imread, imresize, imwrite
from qd.tools.np2ply import PLYWriter

__all__ = ["PLYWriter", "imread", "imresize", "imwrite"]


def __getattr__(name: str) -> object:
    """A Quadrants `qd.tools` name qd lacks raises an error naming its feature (qd/_unsupported.py)."""
    from qd._unsupported import missing

    raise missing("qd.tools", name)
