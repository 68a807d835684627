"""Failure is loud and safe: bad input gets one typed error, outputs are never
half-written, and a store whose cache or source changed is refused, not decoded."""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref

import numpy as np
import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual import errors
from vcfvirtual.io import outputs as cache_mod

from .. import bcfdata
from ..conftest import FullDisk
from ..integration.test_cli import run_index

# BCF 2.2 record layout (the BCF spec): l_shared, l_indiv, CHROM, POS, rlen, QUAL,
# n_info, n_allele, then n_sample (24 bits) and n_fmt at byte 28 of the record.
N_SAMPLE_OFFSET = 28


def pysam_positions(bcf):
    with pysam.VariantFile(str(bcf)) as vf:
        return [(r.chrom, r.pos) for r in vf]


def our_positions(refs):
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    contigs = ds["contig_id"].values.tolist()
    return [(contigs[c], int(p)) for c, p in zip(ds["variant_contig"].values, ds["variant_position"].values)]


def uncompressed(bcf, path):
    """The BCF as an uncompressed BCF (bcftools view -Ou writes the same bytes)."""
    path.write_bytes(gzip.decompress(bcf.read_bytes()))
    return path


def header_end(data: bytes) -> int:
    return 9 + int.from_bytes(data[5:9], "little")


def edited_header(bcf, path, old: str, new: str):
    """An uncompressed copy with a same-length edit in its header text."""
    assert len(old) == len(new)
    data = bytearray(gzip.decompress(bcf.read_bytes()))
    end = header_end(data)
    at = data.find(old.encode(), 0, end)
    assert at > 0, old
    data[at : at + len(old)] = new.encode()
    path.write_bytes(bytes(data))
    return path


# ------------------------------------------------------------------ bad input


def test_wrong_bcf_version_is_refused(small_bcf, tmp_path):
    data = bytearray(gzip.decompress(small_bcf.read_bytes()))
    assert data[:5] == b"BCF\x02\x02"
    for version, needle in ((b"\x02\x01", "2.1"), (b"\x03\x00", "version")):
        data[3:5] = version
        bad = tmp_path / f"v{version.hex()}.bcf"
        bad.write_bytes(bytes(data))
        with pytest.raises(errors.VcfVirtualError, match=needle) as info:
            vcfvirtual.index(bad, refs_path=tmp_path / "x.json", cache_path=tmp_path / "x.cache")
        assert str(bad) in str(info.value)
        assert not (tmp_path / "x.json").exists() and not (tmp_path / "x.cache").exists()


def test_missing_eof_block_warns_and_indexes_whole_records(cohort_bcf, tmp_path, caplog):
    raw = cohort_bcf.read_bytes()
    from vcfvirtual_codec.bcf import bgzf

    assert raw.endswith(bgzf.EOF_BLOCK)
    cut = tmp_path / "no_eof.bcf"
    cut.write_bytes(raw[: -len(bgzf.EOF_BLOCK)])
    with caplog.at_level(logging.WARNING):
        vcfvirtual.index(cut, refs_path=tmp_path / "n.json", cache_path=tmp_path / "n.cache")
    assert "no BGZF EOF block" in caplog.text
    assert our_positions(tmp_path / "n.json") == pysam_positions(cohort_bcf)


def test_record_whose_chrom_is_not_in_the_header(small_bcf, tmp_path):
    # chrX is the third contig; hiding its ##contig line leaves its record's CHROM dangling.
    bad = edited_header(small_bcf, tmp_path / "nochrX.bcf", "##contig=<ID=chrX,IDX=2>", "##xontig=<ID=chrX,IDX=2>")
    with pytest.raises(errors.CorruptBCFError, match="CHROM is not a contig the header defines") as info:
        vcfvirtual.index(bad, refs_path=False, cache_path=tmp_path / "c.bcf")
    assert str(bad) in str(info.value) and info.value.offset is not None


def test_record_whose_keys_are_not_in_the_header(small_bcf, tmp_path):
    # Hiding the FORMAT line leaves GT's dictionary key undefined in every record.
    line = '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype",IDX=4>'
    bad = edited_header(small_bcf, tmp_path / "nogt.bcf", line, "##" + "x" * (len(line) - 2))
    with pytest.raises(errors.CorruptBCFError, match="key") as info:
        vcfvirtual.index(bad, refs_path=False, cache_path=tmp_path / "c.bcf")
    assert info.value.offset is not None


def test_record_sample_count_differs_from_the_header(small_bcf, tmp_path):
    data = bytearray(gzip.decompress(small_bcf.read_bytes()))
    first = header_end(data)
    assert int.from_bytes(data[first + N_SAMPLE_OFFSET : first + N_SAMPLE_OFFSET + 3], "little") == 3
    data[first + N_SAMPLE_OFFSET] = 2
    bad = tmp_path / "nsample.bcf"
    bad.write_bytes(bytes(data))
    with pytest.raises(errors.CorruptBCFError, match="sample") as info:
        vcfvirtual.index(bad, refs_path=False, cache_path=tmp_path / "c.bcf")
    assert info.value.offset == first


def test_malformed_header_line_is_a_header_error(small_bcf, tmp_path):
    bad = edited_header(small_bcf, tmp_path / "malformed.bcf", "Type=Integer", "Type=Integex")
    with pytest.raises(errors.HeaderError, match="INFO/DP has Type=Integex") as info:
        vcfvirtual.index(bad, refs_path=False, cache_path=tmp_path / "c.bcf")
    assert str(bad) in str(info.value)


def test_duplicate_header_lines_read_as_htslib_reads_them(data_dir, tmp_path):
    header = bcfdata.HEADER + '##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">\n'
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS, header=header), data_dir / "dup.bcf")
    refs = tmp_path / "dup.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "dup.cache")
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    with pysam.VariantFile(str(bcf)) as vf:
        expected = [r.info.get("DP", -1) for r in vf]
    assert ds["variant_DP"].values.tolist() == expected


def test_a_directory_is_not_a_bcf(tmp_path):
    with pytest.raises(errors.VcfVirtualError, match="directory"):
        vcfvirtual.index(tmp_path, refs_path=False, cache_path=tmp_path / "c.bcf")
    result = run_index(tmp_path)
    assert result.exit_code != 0 and "directory" in result.output and "Traceback" not in result.output


def test_no_space_left_names_the_output_and_leaves_nothing(cohort_bcf, tmp_path, monkeypatch):
    real_open = open

    monkeypatch.setattr(cache_mod, "open", lambda p, mode="r": FullDisk(real_open(p, mode), 100_000), raising=False)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(errors.OutputWriteError, match="No space left") as info:
        vcfvirtual.index(cohort_bcf, refs_path=out / "c.json", cache_path=out / "c.cache")
    assert str(out / "c.cache") in str(info.value) and "free disk space" in str(info.value)
    assert os.listdir(out) == []


# ------------------------------------------------------------------ stale caches


@pytest.fixture
def indexed(small_bcf, tmp_path):
    bcf = tmp_path / "s.bcf"
    shutil.copy(small_bcf, bcf)
    refs = tmp_path / "s.json"
    cache = tmp_path / "s.cache"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache)
    return bcf, refs, cache


def test_unchanged_store_opens(indexed):
    bcf, refs, _ = indexed
    assert our_positions(refs) == pysam_positions(bcf)


def flip_middle_bit(path):
    """Change one bit in the middle of a file, keeping its size."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_cache_with_one_byte_changed_is_refused(indexed):
    _, refs, cache = indexed
    flip_middle_bit(bcfdata.cache_file(cache))
    with pytest.raises(errors.StaleCacheError, match="contents changed"):
        vcfvirtual.open_store(refs)


@pytest.mark.parametrize("change", ["truncate", "append", "delete"])
def test_cache_truncated_appended_or_deleted_is_refused(indexed, change):
    _, refs, folder = indexed
    cache = bcfdata.cache_file(folder)  # its one part
    data = cache.read_bytes()
    if change == "delete":
        cache.unlink()
    else:
        cache.write_bytes(data[:-10] if change == "truncate" else data + b"\0" * 10)
    with pytest.raises(errors.StaleCacheError, match="missing" if change == "delete" else "bytes"):
        vcfvirtual.open_store(refs)


def test_touched_source_is_accepted(indexed):
    bcf, refs, _ = indexed
    later = time.time() + 100
    os.utime(bcf, (later, later))
    assert our_positions(refs) == pysam_positions(bcf)


def test_changed_source_is_refused(indexed, data_dir):
    bcf, refs, _ = indexed
    other = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:3]), data_dir / "other.bcf")
    shutil.copy(other, bcf)
    with pytest.raises(errors.StaleCacheError, match="source BCF .* changed"):
        vcfvirtual.open_store(refs)


def test_same_size_source_rewrite_is_refused(indexed):
    bcf, refs, _ = indexed
    flip_middle_bit(bcf)
    with pytest.raises(errors.StaleCacheError, match="sampled hash"):
        vcfvirtual.open_store(refs)


def test_without_its_source_the_store_still_opens(indexed):
    """A collaborator may have the cache and references but not the BCF."""
    bcf, refs, _ = indexed
    expected = pysam_positions(bcf)
    bcf.unlink()
    assert our_positions(refs) == expected


# ------------------------------------------------------------------ killed runs


@pytest.fixture(scope="module")
def slow_bcf(tmp_path_factory):
    """Big enough that indexing takes a while after start-up: ~4,000 records x 400 samples."""
    path = tmp_path_factory.mktemp("kill") / "k.bcf"
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(4000, 400, seed=11), path, index=False)


def _index_cmd(bcf, refs, cache, chunk, layout="bgzf"):
    return [
        sys.executable,
        "-m",
        "vcfvirtual.cli",
        "index",
        "--force",
        "--no-progress",
        "-c",
        str(chunk),
        "--cache-layout",
        layout,
        "-o",
        str(refs),
        "--cache",
        str(cache),
        str(bcf),
    ]


def test_kill_9_leaves_previous_outputs_or_none_and_rerun_succeeds(slow_bcf, tmp_path):
    refs, cache = tmp_path / "k.json", tmp_path / "k.cache"
    expected = pysam_positions(slow_bcf)
    start = time.perf_counter()
    subprocess.run(_index_cmd(slow_bcf, refs, cache, 500), check=True, capture_output=True)
    duration = time.perf_counter() - start
    previous_cache = cache.read_bytes()
    # Kill at points spread over a whole run: start-up, scan, writing, renaming.
    for fraction in (0.3, 0.55, 0.7, 0.8, 0.88, 0.95, 1.0):
        proc = subprocess.Popen(
            _index_cmd(slow_bcf, refs, cache, 500), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Whatever stands under the final names is whole: the cache as before (a run
        # writes the same bytes) and references that open and read what pysam reads.
        assert refs.exists() and cache.exists()
        assert cache.read_bytes() == previous_cache
        assert our_positions(refs) == expected
    # A fresh run cleans up what the killed ones left and succeeds.
    subprocess.run(_index_cmd(slow_bcf, refs, cache, 500), check=True, capture_output=True)
    assert sorted(os.listdir(tmp_path)) == ["k.cache", "k.json"]
    assert our_positions(refs) == expected


@pytest.mark.parametrize("layout", ["bgzf", "raw"])  # each layout writes its cache its own way
def test_kill_9_of_a_first_run_leaves_no_outputs(slow_bcf, tmp_path, layout):
    refs, cache = tmp_path / "k.json", tmp_path / "k.cache"
    proc = subprocess.Popen(
        _index_cmd(slow_bcf, refs, cache, 500, layout), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # Wait until the cache's temporary exists: the run is mid-write.
    deadline = time.time() + 60
    while not any(p.name.startswith(".k.cache.tmp-") for p in tmp_path.iterdir()):
        assert time.time() < deadline and proc.poll() is None, "the run ended before writing"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not refs.exists() and not cache.exists()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".k.")]
    assert leftovers  # the killed run's temporary is still there...
    vcfvirtual.index(slow_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=500, cache_layout=layout)
    assert not any(p.exists() for p in leftovers)  # ...until the next run removes it
    assert our_positions(refs) == pysam_positions(slow_bcf)


def test_a_live_runs_temporary_is_left_alone(tmp_path):
    target = tmp_path / "x.cache"
    live = tmp_path / f".x.cache.tmp-{os.getppid()}"  # our parent is alive
    dead = tmp_path / ".x.cache.tmp-999999999"
    live.write_bytes(b"in progress")
    dead.write_bytes(b"left over")
    assert cache_mod.remove_stale_temporaries(target) == [dead]
    assert live.exists() and not dead.exists()
    assert np.array_equal(np.frombuffer(live.read_bytes(), np.uint8), np.frombuffer(b"in progress", np.uint8))


def test_a_signal_whose_raise_python_swallows_still_keeps_previous_outputs(tmp_path, capsys):
    """A signal handled inside a weakref callback (importlib's module locks run one) raises
    where Python can only print the exception and carry on: the run must still stop
    before it replaces an output, exit as interrupted, and print no traceback."""
    from vcfvirtual import cli

    target = tmp_path / "k.json"
    target.write_text("previous")

    class Collected:
        pass

    def run() -> None:
        obj = Collected()
        # The callback runs Python code, so the pending SIGTERM's handler runs inside it.
        keep = weakref.ref(obj, lambda _: signal.raise_signal(signal.SIGTERM))
        del obj
        assert keep() is None  # the callback ran and Python swallowed the raise...
        with cache_mod.atomic_file(target, "references", "refs_path=", "w") as f:
            f.write("new")  # ...so the run went on as far as putting its output in place

    with pytest.raises(SystemExit) as exit_info, cli._cleanup_on_signals():
        run()
    assert exit_info.value.code == 128 + signal.SIGTERM
    assert target.read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == ["k.json"]
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err and "Exception ignored" not in err
    assert signal.getsignal(signal.SIGTERM) is not cli._raise_interrupted  # the handler put back


def test_a_signal_inside_native_code_is_raised_when_it_returns(tmp_path, capsys):
    """Icechunk's Rust writer calls back into Python (numpy's C API import); a handler
    raising there makes it panic and print a traceback. Inside interrupts.deferred() the
    signal waits: the block runs to its end, then the run stops as interrupted."""
    from vcfvirtual import cli, interrupts

    reached = []
    with pytest.raises(SystemExit) as exit_info, cli._cleanup_on_signals():
        with interrupts.deferred():
            signal.raise_signal(signal.SIGTERM)
            reached.append("after the signal")  # the handler did not raise here
        reached.append("after the block")  # not reached: the block's end raised it
    assert reached == ["after the signal"]
    assert exit_info.value.code == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is not cli._raise_interrupted


@pytest.mark.parametrize(
    "workers, layout, marker, sig",
    [
        (1, "bgzf", ".k.cache.tmp-", signal.SIGTERM),  # a serial run writing its cache
        (2, "raw", ".k.cache.tmp-parts-", signal.SIGTERM),  # worker processes writing their parts
        (1, "raw", ".k.cache.tmp-", signal.SIGINT),  # Ctrl-C
    ],
)
def test_sigterm_removes_temporaries_and_keeps_previous_outputs(slow_bcf, tmp_path, workers, layout, marker, sig):
    """timeout(1) and batch schedulers end a run with SIGTERM: it cleans up as it goes."""
    refs, cache = tmp_path / "k.json", tmp_path / "k.cache"
    subprocess.run(_index_cmd(slow_bcf, refs, cache, 500, layout), check=True, capture_output=True)
    previous = refs.read_bytes(), cache.read_bytes()
    cmd = _index_cmd(slow_bcf, refs, cache, 500, layout)
    cmd[4:4] = ["-j", str(workers)]
    # SIGINT is left at its default in the child even if this process ignores it.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while not any(p.name.startswith(marker) for p in tmp_path.iterdir()):
        assert time.time() < deadline and proc.poll() is None, "the run ended before writing"
        time.sleep(0.005)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert f"interrupted by {sig.name}" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["k.cache", "k.json"]  # no temporary of any kind
    assert (refs.read_bytes(), cache.read_bytes()) == previous
    assert our_positions(refs) == pysam_positions(slow_bcf)
