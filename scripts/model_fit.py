"""The cost model's fits (scripts/calibrate-model.py measures, this fits):
each figure from the medians of the series that pin it, as that script's
docstring lists them. Pure functions of {bytes: us} series; the host's
cache and what a byte beyond it costs are fitted with the library's and
the links' lines (fit)."""

CACHE_MIB = [2 ** (k / 2) for k in range(0, 19)]  # 1 MiB to 512 MiB, the candidates of the cache fit
BEYOND = [1 + k / 20 for k in range(0, 61)]         # 1 to 4


def line_fit(points):
    """t = a + b x over (x, t) points, least squares of the relative
    residuals (weights 1 / t^2): the small sizes' microseconds count as
    much as the large sizes' milliseconds, so the latency is not lost in
    the large sizes' noise. (a, b)."""
    w = [1 / (t * t) for _, t in points]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, points)) / sw
    mt = sum(wi * t for wi, (_, t) in zip(w, points)) / sw
    b = sum(wi * (x - mx) * (t - mt) for wi, (x, t) in zip(w, points)) / sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, points))
    return mt - b * mx, b


def beyond_factor(buffers, cache_mib, beyond):
    """What a byte costs, times its cost in cache, where two ranks' buffers
    span `buffers` bytes (the model's forBuffersOf)."""
    return 1 + (beyond - 1) * max(0.0, 1 - cache_mib * (1 << 20) / buffers)


def fit_with(lib, links, ar, copy, cache_mib, beyond):
    """The parameters for a given cache, and the squared relative residuals
    of the four line fits. Two ranks' buffers: all-reduce 2 x (S + S), all-gather 2 x (S / 2 + S)."""
    m = lambda s, per_rank: beyond_factor(2 * per_rank * s, cache_mib, beyond)
    series = [[(s * m(s, 2), t) for s, t in lib.items()], [(s / 2 * m(s, 1.5), t) for s, t in copy.items()],
              [(s / 2 * m(s, 1.5), t) for s, t in links.items()], [(s * m(s, 2), t) for s, t in ar.items()]]
    fits = [line_fit(x) for x in series]
    (lib_us, slope), (step_us, copy_slope), (link_us, link_slope), (_, ar_slope) = fits
    # The all-reduce of two one-rank domains: S / link + S / 2 / reduce (per byte).
    reduce_per_byte = max(ar_slope - link_slope, 1e-9) * 2  # (link_slope is per byte of S / 2)
    p = {"lib_us": max(lib_us, 0.1), "step_us": max(step_us, 0.1), "lib_gbs": 1e-3 / slope,
         "copy_gbs": 1e-3 / copy_slope, "link_us": max(link_us, 0.1), "link_gbs": 1e-3 / link_slope, "reduce_gbs": 1e-3 / reduce_per_byte, "cache_mib": cache_mib, "beyond": beyond}
    return p, sum(((a + b * xi) / t - 1) ** 2 for x, (a, b) in zip(series, fits) for xi, t in x)


def fit(lib, links, ar, copy):
    """The parameters from four measurements ({bytes: us}): the library's
    all-reduce in one domain of two ranks, the all-gather and the
    (hierarchical) all-reduce across two one-rank domains, the library's
    all-gather in one domain of two ranks; the cache (size, cost beyond)
    of the candidates whose line fits leave the least residual (beyond 1:
    no cache in the model)."""
    candidates = [fit_with(lib, links, ar, copy, 0, 1)]
    candidates += [fit_with(lib, links, ar, copy, c, b) for c in CACHE_MIB for b in BEYOND if b > 1]
    return min(candidates, key=lambda pr: pr[1])[0]


def handoff(measured, modelled):
    """The wake-up (us) where ranks outnumber the cores: the least-squares
    fit (relative residuals) of the model's times, t0 + h x per_us, to the
    measured. measured {key: us}, modelled {key: (t0, us added per us of
    handoff_us)}."""
    num = sum(per_us / measured[k] * (1 - t0 / measured[k]) for k, (t0, per_us) in modelled.items())
    den = sum((per_us / measured[k]) ** 2 for k, (_, per_us) in modelled.items())
    return max(0.0, num / den) if den > 0 else 0.0


def gap(broadcasts, p):
    """gap_us: the pace of back-to-back messages that leave without waiting
    for their receiver, from the smallest broadcast between two one-rank
    domains (one message per call: its pace less its bytes at the links'
    bandwidth). 0 (the links' latency) where not measured."""
    if not broadcasts:
        return 0.0
    s, t = min(broadcasts.items())
    return max(0.05, t - s / (p["link_gbs"] * 1e3))


def further_fit(fours, twos, p):
    """further_message_us: each further message a rank posts at once with
    its first (a root's to several leaders), from the smallest broadcast
    of four one-rank domains (the root's three messages: the gap, two
    further ones and three halves of their bytes at the links' rate)
    against two's (the gap and one half). 0 (the gap) where not measured."""
    if not fours or not twos:
        return 0.0
    s = min(fours)
    return max(0.05, (fours[s] - twos[s] - s / (p["link_gbs"] * 1e3)) / 2)


def one_way(broadcasts, p, eager):
    """one_way_gbs: the links' bandwidth for a message going one way at a
    time (a rooted call's), from the broadcasts between two one-rank
    domains above the eager size (one message each, read whole by its
    receiver): the slope of their line fit (each rank's buffers 1.5 x S
    for the cache). 0 (the links' bandwidth) where fewer than two sizes."""
    return slope_gbs([(s * beyond_factor(3 * s, p["cache_mib"], p["beyond"]), t) for s, t in broadcasts.items() if s > eager])


def rs_fit(scatters, p, ranks):
    """rs_gbs: the library's reduce-scatter bus bandwidth, from one domain
    of `ranks`' reduce-scatters (a ring step that reduces costs more than
    the all-reduce's figure gives it, one that copies less): the slope of
    their line fit against S (ranks - 1) / ranks (the ranks' buffers
    ranks x (S + S / ranks) for the cache). 0 (the all-reduce's) where
    fewer than two sizes."""
    return slope_gbs([(s * (ranks - 1) / ranks * beyond_factor(ranks * (s + s / ranks), p["cache_mib"], p["beyond"]), t)
                      for s, t in scatters.items()])


def slope_gbs(points):
    """GB/s from the slope of the line fit of (bytes, us) points; 0 where
    fewer than two points or no positive slope."""
    if len(points) < 2:
        return 0.0
    slope = line_fit(points)[1]
    return 1e-3 / slope if slope > 0 else 0.0


MANY_RANKS = [0.90, 0.95, 1.00, 1.05]  # the candidates of many_ranks_fit, in 5% steps


def many_ranks_fit(pairs_at):
    """The factor on the two-rank series' bandwidths that calls of more
    ranks see (their caches and memory shared by more cores: on most
    16-core hosts a few percent less, by an amount that differs from host
    to host): of MANY_RANKS, the one whose (predicted, measured) pairs,
    `pairs_at(factor)`, lie closest (squared relative errors, each at most
    0.25: a row off by more than half counts no more than one off by half).
    The coarse steps keep it from chasing a few rows' noise."""
    def loss(k):
        return sum(min((p / m - 1) ** 2, 0.25) for p, m in pairs_at(k))
    return min(MANY_RANKS, key=lambda k: (loss(k), abs(k - 1)))


def with_bandwidths_times(p, k):
    """The figures with every bandwidth that moves bytes (the library's,
    its copy and reduce-scatter rates, the links' both ways and one way)
    times k; latencies, reductions and the cache as they are."""
    q = dict(p)
    for f in ("lib_gbs", "copy_gbs", "rs_gbs", "link_gbs", "one_way_gbs"):
        if f in q:
            q[f] *= k
    return q
