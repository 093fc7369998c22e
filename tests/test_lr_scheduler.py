"""mx.lr_scheduler against a stateful reimplementation of MXNet 1.x's schedulers."""
import math

import pytest

import minigluon as mx
from minigluon.base import MXNetError
from minigluon.lr_scheduler import (CosineScheduler, FactorScheduler, MultiFactorScheduler,
                                    PolyScheduler)


def warmup_ref(n, base_lr, steps, begin, mode):
    if mode == "constant":
        return begin
    return begin + (base_lr - begin) * n / steps


class FactorRef:
    """MXNet's FactorScheduler: decays base_lr in place as updates pass count + step."""

    def __init__(self, step, factor, stop, base_lr):
        self.step, self.factor, self.stop, self.lr, self.count = step, factor, stop, base_lr, 0

    def __call__(self, n):
        while n > self.count + self.step:
            self.count += self.step
            self.lr = max(self.lr * self.factor, self.stop)
        return self.lr


class MultiFactorRef:
    def __init__(self, steps, factor, base_lr):
        self.steps, self.factor, self.lr, self.i = steps, factor, base_lr, 0

    def __call__(self, n):
        while self.i < len(self.steps) and n > self.steps[self.i]:
            self.i += 1
            self.lr *= self.factor
        return self.lr


def with_warmup(ref, base_lr, steps, begin, mode):
    return lambda n: warmup_ref(n, base_lr, steps, begin, mode) if n < steps else ref(n)


def check_sequence(sched, ref, upto):
    for n in range(upto):
        assert sched(n) == pytest.approx(ref(n), rel=1e-12, abs=1e-15), f"num_update={n}"


@pytest.mark.parametrize("warmup, mode", [(0, "linear"), (4, "linear"), (3, "constant")])
def test_factor_scheduler(warmup, mode):
    sched = FactorScheduler(step=3, factor=0.5, stop_factor_lr=0.02, base_lr=1.0,
                            warmup_steps=warmup, warmup_begin_lr=0.1, warmup_mode=mode)
    ref = with_warmup(FactorRef(3, 0.5, 0.02, 1.0), 1.0, warmup, 0.1, mode)
    check_sequence(sched, ref, 30)


def test_factor_scheduler_first_decay_after_step():
    sched = FactorScheduler(step=10, factor=0.1, base_lr=1.0)
    assert [sched(n) for n in (0, 1, 10, 11, 20, 21)] == pytest.approx(
        [1.0, 1.0, 1.0, 0.1, 0.1, 0.01])


@pytest.mark.parametrize("warmup", [0, 2])
def test_multifactor_scheduler(warmup):
    sched = MultiFactorScheduler(step=[3, 7, 8], factor=0.1, base_lr=2.0, warmup_steps=warmup,
                                 warmup_begin_lr=0.5)
    ref = with_warmup(MultiFactorRef([3, 7, 8], 0.1, 2.0), 2.0, warmup, 0.5, "linear")
    check_sequence(sched, ref, 15)


@pytest.mark.parametrize("warmup, pwr, final", [(0, 2, 0.0), (5, 1, 0.1), (5, 3, 0.0)])
def test_poly_scheduler(warmup, pwr, final):
    sched = PolyScheduler(max_update=20, base_lr=1.0, pwr=pwr, final_lr=final,
                          warmup_steps=warmup, warmup_begin_lr=0.2)

    def ref(n):
        if n < warmup:
            return warmup_ref(n, 1.0, warmup, 0.2, "linear")
        n = min(n, 20)
        return final + (1.0 - final) * (1 - (n - warmup) / (20 - warmup)) ** pwr
    check_sequence(sched, ref, 30)


@pytest.mark.parametrize("warmup, final", [(0, 0.0), (4, 0.05)])
def test_cosine_scheduler(warmup, final):
    sched = CosineScheduler(max_update=16, base_lr=0.5, final_lr=final, warmup_steps=warmup,
                            warmup_begin_lr=0.0)

    def ref(n):
        if n < warmup:
            return warmup_ref(n, 0.5, warmup, 0.0, "linear")
        n = min(n, 16)
        return final + (0.5 - final) * (1 + math.cos(math.pi * (n - warmup) / (16 - warmup))) / 2
    check_sequence(sched, ref, 25)


def test_values_do_not_depend_on_call_order():
    sched = FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    late = sched(9)
    assert sched(1) == 1.0 and sched(9) == late == 0.0625


def test_reachable_as_mx_lr_scheduler():
    assert mx.lr_scheduler.CosineScheduler is CosineScheduler
    assert isinstance(mx.lr_scheduler.FactorScheduler(1), mx.lr_scheduler.LRScheduler)


@pytest.mark.parametrize("make, needle", [
    (lambda: FactorScheduler(step=0), "step must be an integer >= 1"),
    (lambda: FactorScheduler(step=2, factor=1.5), "factor"),
    (lambda: MultiFactorScheduler(step=[5, 5, 9]), "strictly increasing"),
    (lambda: MultiFactorScheduler(step=[0, 3]), "step[0]"),
    (lambda: MultiFactorScheduler(step=[]), "non-empty list"),
    (lambda: PolyScheduler(max_update=0), "max_update"),
    (lambda: CosineScheduler(max_update=5, warmup_steps=10), "warmup_steps"),
    (lambda: FactorScheduler(step=2, base_lr=0.1, warmup_begin_lr=0.5), "warmup_begin_lr"),
    (lambda: FactorScheduler(step=2, warmup_mode="exp"), "warmup_mode"),
    (lambda: FactorScheduler(step=2, warmup_steps=-1), "warmup_steps"),
])
def test_bad_arguments(make, needle):
    with pytest.raises(MXNetError, match=None) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert needle in str(info.value)


def test_factor_schedulers_multiply_once_per_decay_as_mxnet():
    # 0.1 * 0.1 * 0.1 * 0.1 differs from 0.1 * 0.1**3 in the last bit; MXNet multiplies
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.1, base_lr=0.1)
    expected, lr = [], 0.1
    for _ in range(6):
        expected.append(lr)
        lr *= 0.1
    assert [sched(i) for i in range(1, 7)] == expected
    assert sched(3) == expected[2]          # going back recomputes from base_lr
    multi = mx.lr_scheduler.MultiFactorScheduler(step=[2, 4, 6], factor=0.1, base_lr=0.1)
    assert [multi(n) for n in (3, 5, 7)] == expected[1:4]
    floor = mx.lr_scheduler.FactorScheduler(step=1, factor=0.1, base_lr=1.0, stop_factor_lr=0.05)
    assert floor(3) == 0.05 and floor(50) == 0.05
