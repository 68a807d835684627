# Types of the compiled module verify_cells.pyx (mypy cannot read extension modules).
import numpy as np
import numpy.typing as npt

def decode_genotypes(
    raw: npt.NDArray[np.int32],
    n_alleles: npt.NDArray[np.int64],
    present: npt.NDArray[np.bool_],
    gt: npt.NDArray[np.signedinteger],
    phased: npt.NDArray[np.bool_],
    overflow: npt.NDArray[np.bool_],
    max_allele: int,
) -> None: ...
def decode_cells(
    raw: npt.NDArray[np.int32],
    values: npt.NDArray[np.int64],
    present: npt.NDArray[np.bool_],
    count: npt.NDArray[np.int64],
    scalar: bool,
    fill_beyond: bool,
    is_float: bool,
    n_items: npt.NDArray[np.int64],
    overflow: npt.NDArray[np.bool_],
) -> None: ...
