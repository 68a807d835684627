# Types of the compiled module info_planes.pyx (mypy cannot read extension modules).
import numpy as np
import numpy.typing as npt

ERRORS: dict[int, str]

def info_planes(seg: npt.NDArray[np.uint8], n: int, out: npt.NDArray[np.uint8]) -> tuple[int, int]: ...
def undo_info_planes(planes: npt.NDArray[np.uint8], n: int, out: npt.NDArray[np.uint8]) -> tuple[int, int]: ...
