# Types of the compiled module scan.pyx (mypy cannot read extension modules).
import numpy as np
import numpy.typing as npt

KIND_NONE: int
KIND_INTEGER: int
KIND_FLOAT: int
KIND_FLAG: int
KIND_CHAR: int

def scan_records(
    buf: npt.NDArray[np.uint8],
    n_samples: int,
    n_contigs: int,
    gt_key: int,
    base: int,
    out_offset: npt.NDArray[np.int64],
    out_chrom: npt.NDArray[np.int32],
    out_pos: npt.NDArray[np.int32],
    out_rlen: npt.NDArray[np.int32],
    out_n_allele: npt.NDArray[np.int32],
    out_ploidy: npt.NDArray[np.int32],
    info_stats: npt.NDArray[np.int64],
    fmt_stats: npt.NDArray[np.int64],
    info_kind: npt.NDArray[np.int8],
    fmt_kind: npt.NDArray[np.int8],
    filter_declared: npt.NDArray[np.bool_],
    end_key: int = -1,
    rlen_needs_more: bool = False,
) -> tuple[int, int, int, int, int]: ...
def count_records(buf: npt.NDArray[np.uint8], n_samples: int) -> tuple[int, int, int, int]: ...
