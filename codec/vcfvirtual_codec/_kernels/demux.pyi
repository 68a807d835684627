# Types of the compiled module demux.pyx (mypy cannot read extension modules).
import numpy as np
import numpy.typing as npt

SEG_CONTIG: int
SEG_POSITION: int
SEG_RLEN: int
SEG_QUAL: int
SEG_ID: int
SEG_ALLELES: int
SEG_FILTER: int
N_FIXED_SEGMENTS: int
GT_SHIFT: int
GT_VECTORS: bool

def demux_chunk(
    buf: npt.NDArray[np.uint8],
    offsets: npt.NDArray[np.int64],
    info_slot: npt.NDArray[np.int32],
    fmt_slot: npt.NDArray[np.int32],
    n_info: int,
    n_fmt: int,
    n_samples: int,
    samples_chunk_size: int,
    end_key: int,
    gt_slot: int,
    scratch: npt.NDArray[np.uint8] | None,
    select: npt.NDArray[np.uint8] | None = None,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], int, int]: ...
def clear_avx_upper() -> None: ...
def gt_block_summary(seg: npt.NDArray[np.uint8], n: int, block_samples: int) -> tuple[int, bool, bool]: ...
def gt_block_encode(
    seg: npt.NDArray[np.uint8], n: int, block_samples: int, out: npt.NDArray[np.uint8], vectors: bool = True
) -> tuple[int, bool, bool, int]: ...
