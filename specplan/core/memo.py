"""Memoize a pure function of frozen objects (profiles) by their identity."""

from __future__ import annotations

import functools

MAX_ENTRIES = 256


def by_identity(fn):
    """`fn` answered once per tuple of argument objects (by id(); the entry holds the objects, so an id cannot be
    reused while it is cached): for functions of frozen profiles that build a new object on every call (a draft
    model derived from its target), so that the answers downstream caches key on are the same object too."""
    cache: dict = {}

    @functools.wraps(fn)
    def wrapper(*args):
        key = tuple(id(a) for a in args)
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= MAX_ENTRIES:
                cache.clear()
            hit = cache[key] = (args, fn(*args))
        return hit[1]

    wrapper.cache_clear = cache.clear
    return wrapper
