"""`lru.Lru`, the bounded map behind the parsed-lock, beam-call and compared-version caches."""

from __future__ import annotations

from hexlocal_core.lru import Lru


def test_the_least_recently_used_goes_first() -> None:
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the more recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_put_returns_the_value_and_a_second_put_replaces_it() -> None:
    cache: Lru[str, int] = Lru(1)
    assert cache.put("a", 1) == 1
    cache.put("a", 2)
    assert cache.get("a") == 2 and len(cache) == 1
