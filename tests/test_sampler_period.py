"""Beam's state sampler ticks every 10 ms inside `short_sampler_period`, 200 ms outside."""
import pytest
from apache_beam.runners.worker import statesampler
from apache_beam.utils.counters import CounterFactory

from mintdim_beam.runtime.sampler_period import SAMPLING_PERIOD_MS, short_sampler_period


def _new_sampler():
    return statesampler.StateSampler("test", CounterFactory())


def test_samplers_made_inside_the_block_tick_every_10_ms_and_beams_default_returns():
    assert _new_sampler().sampling_period_ms == statesampler.DEFAULT_SAMPLING_PERIOD_MS == 200
    with short_sampler_period():
        assert _new_sampler().sampling_period_ms == SAMPLING_PERIOD_MS == 10
    assert _new_sampler().sampling_period_ms == 200
    with pytest.raises(KeyError):
        with short_sampler_period():
            raise KeyError("a failed run")
    assert _new_sampler().sampling_period_ms == 200


def test_a_sampler_signature_it_was_not_written_for_is_left_alone():
    init = statesampler.StateSampler.__init__
    init.__defaults__ = (50,)  # as if a later Beam changed its default
    try:
        with short_sampler_period():
            assert _new_sampler().sampling_period_ms == 50
        assert init.__defaults__ == (50,)
    finally:
        init.__defaults__ = (statesampler.DEFAULT_SAMPLING_PERIOD_MS,)

