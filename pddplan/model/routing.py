"""How the router's relay threshold splits each request class: a request is relayed when its
own WAN payload is above the threshold, and a class's requests spread around its mean
payload, so a threshold relays part of a class (``relay_split``). The evaluator and the
planner's decision space read the same split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from pddplan.model.numeric import Array

if TYPE_CHECKING:
    from pddplan.model.problem import Problem


class RelaySplit(NamedTuple):
    """How relay thresholds split the classes (``relay_split``): cuts x classes."""

    shares: Array
    """The share of the class's requests relayed."""
    below_bytes: Array
    """The mean WAN payload of the class's requests not relayed (the class's mean where
    all are)."""
    below_sd_bytes: Array
    """The standard deviation of the payloads not relayed (0 where all are)."""


def relay_shares(problem: Problem, hits: Array, cuts_mb: Sequence[float | None]) -> Array:
    """Cuts x classes: the share of each class's requests whose WAN payload is above
    each relay threshold (MB; None relays nothing), when the classes hit ``hits`` of
    their context at main decode (``relay_split``)."""
    return relay_split(problem, hits, cuts_mb).shares


def relay_split(problem: Problem, hits: Array, cuts_mb: Sequence[float | None]) -> RelaySplit:
    """How each relay threshold (MB; None relays nothing) splits each class, when the
    classes hit ``hits`` of their context at main decode.

    The router compares each request's own payload, and a class's requests spread
    around its mean: over its input lengths (``ClassArrays.inp_points``) times its
    decode-side hits (``md_hit_points``, scaled to ``hits``: a decode-side cache
    keeps the same share of every request's reuse), taken as independent. A
    threshold at a class's mean payload relays about half of it, and the half it
    keeps direct is the half with the smaller payloads."""
    a, kv = problem.arrays, problem.kv
    scale = np.divide(hits, a.md_hit, out=np.zeros_like(hits), where=a.md_hit > 0)
    hit_points = np.where(
        a.md_hit[:, None] > 0,
        np.clip(a.md_hit_points * scale[:, None], 0.0, 1.0),
        hits[:, None],
    )
    payload = np.asarray(kv.transfer_bytes(a.inp_points[:, :, None], hit_points[:, None, :]))
    points = payload.reshape(len(hits), -1)  # classes x points, equally likely
    mean, n = points.mean(axis=1), points.shape[1]
    shares, below, below_sd = [], [], []
    for cut in cuts_mb:
        kept = np.ones(points.shape, dtype=bool) if cut is None else points / 1e6 <= cut
        n_kept = np.maximum(kept.sum(axis=1), 1)
        kept_mean = np.where(kept.any(axis=1), (points * kept).sum(axis=1) / n_kept, mean)
        shares.append(1.0 - kept.sum(axis=1) / n)
        below.append(kept_mean)
        below_sd.append(np.sqrt((kept * (points - kept_mean[:, None]) ** 2).sum(axis=1) / n_kept))
    shape = (len(cuts_mb), len(hits))
    return RelaySplit(*(np.array(x).reshape(shape) for x in (shares, below, below_sd)))
