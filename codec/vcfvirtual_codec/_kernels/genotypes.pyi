# Types of the compiled module genotypes.pyx (mypy cannot read extension modules).
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
SHIFT_ADDED: int

def records_genotypes(
    buf: U8,
    offsets: npt.NDArray[np.int64],
    gt_key: int,
    out_gt: np.ndarray,
    out_phased: npt.NDArray[np.bool_],
    max_allele: int,
) -> tuple[int, int]: ...
def columns_genotypes(
    seg: U8,
    n: int,
    out_gt: np.ndarray,
    out_phased: npt.NDArray[np.bool_],
    max_allele: int,
    shifted: bool = False,
) -> tuple[int, int]: ...
def local_alleles(gt: np.ndarray, out: npt.NDArray[np.int8]) -> None: ...
def local_ad(ad: np.ndarray, la: npt.NDArray[np.int8], out: np.ndarray) -> None: ...
def local_pl(pl: np.ndarray, la: npt.NDArray[np.int8], out: np.ndarray) -> None: ...
