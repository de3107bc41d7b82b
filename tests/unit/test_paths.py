"""How results and θ travel, settled from --reduce and --relay: by their bytes and whether a
worker is on another node than rank 0; a combination that cannot work refused with the fix."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mpicoded.codes import make_code
from mpicoded.options import RunOptions, UsageError
from mpicoded.plan import NETWORK_BYTES, reduce_path, relay_path


def job(values: int, half: bool = True, data_coded: bool = False) -> SimpleNamespace:
    """A coded job whose results and θ hold ``values`` entries each."""
    return SimpleNamespace(result_size=values, dim=values, half=half, half_theta=half,
                           data_coded=data_coded)


SUM = make_code("gfrc", 6, stragglers=2)


@pytest.mark.parametrize(("megabytes", "apart", "reduce", "relay"), [
    (0.5, False, "off", "off"), (2, True, "off", "off"), (4, False, "off", "off"),
    (4, True, "on", "on"), (8, False, "off", "off"), (64, False, "off", "off"),
    (32, True, "on", "on")])
def test_auto_is_on_by_the_bytes_and_where_rank_0s_link_is_a_network(megabytes, apart, reduce,
                                                                      relay):
    big = job(int(megabytes * 2**20 / 4))
    opts = RunOptions()
    assert (reduce_path(opts, big, SUM, apart), relay_path(opts, big, apart)) == (reduce, relay)


def test_a_path_that_cannot_work_is_refused_with_the_fix_and_auto_leaves_it_off():
    big = job(NETWORK_BYTES)
    each = make_code("mds", 6, stragglers=2)  # decodes each partition
    for why, opts, coded, code in [
            ("coded on its data", RunOptions(reduce="on"), job(10, data_coded=True), SUM),
            ("decodes each partition", RunOptions(reduce="on"), big, each),
            ("--no-purge", RunOptions(reduce="on", no_purge=True), big, SUM)]:
        with pytest.raises(UsageError, match=why) as refused:
            reduce_path(opts, coded, code)
        assert "--reduce off" in str(refused.value)
        assert reduce_path(RunOptions(no_purge=opts.no_purge), coded, code, True) == "off"
    with pytest.raises(UsageError, match="--no-purge.*--relay off"):
        relay_path(RunOptions(relay="on", no_purge=True), big)
    assert relay_path(RunOptions(no_purge=True), big, True) == "off"
    assert (reduce_path(RunOptions(reduce="on"), job(10), SUM),
            relay_path(RunOptions(relay="on"), job(10))) == ("on", "on")
