"""numba kernels: gsplat's rasterize_to_pixels forward and backward on the CPU, parallel over tiles.

Layout for speed: the splats of a tile are the outer loop and the tile's 256 pixels the inner one,
written branch-free so LLVM vectorizes it; float32 throughout (every constant is a np.float32,
since a Python float would promote the loop to float64). The backward pass walks each tile back to
front from the saved final transmittance and last contributing index, as gsplat's CUDA does, and
writes one gradient slot per (tile, splat) intersection; `scatter_slots` sums them per splat, so
there are no races and results are deterministic. Each splat visits only the tile rows it can
reach with alpha >= 1/255 and that still hold pixels in play (not yet stopped in the forward pass,
at or before their last splat in the backward one): exact shortcuts, the results are unchanged.

exp(-sigma) is `_exp_neg`, a float32 polynomial that vectorizes (numba has no vector exp without
Intel SVML); its relative error (< 2e-6 on [0, 8]) is of the order of CUDA's __expf, which gsplat uses.
"""

from __future__ import annotations

import numba
import numpy as np

F0 = np.float32(0.0)
F1 = np.float32(1.0)
HALF = np.float32(0.5)
MAX_ALPHA = np.float32(0.999)
ALPHA_THRESHOLD = np.float32(1.0 / 255.0)
T_EPSILON = np.float32(1e-4)
MEDIAN_T = np.float32(0.5)
SIGMA_CAP = np.float32(8.0)  # exp(-8) < 1/255: anything beyond is skipped anyway
EXP_SCALE = np.float32(1.0 / 16.0)
TILE = 16  # gsplat's default tile size; a constant so the pixel loops have a known trip count
N_PIX = TILE * TILE
# LLVM fast-math flags that change no finite result (no NaN or infinity, so min/max vectorize): not
# `reassoc`, with which results depend on how the kernels were compiled (see `_lane_sum`)
EXACT_FASTMATH = {"nnan", "ninf"}
U_TILE = np.uint64(TILE)  # the row stride in the pixel loops' unsigned indices
# Rows of a tile's float32 work block: one allocation with constant row offsets, so LLVM sees
# that the rows do not alias and vectorizes the pixel loops without runtime checks.
PX, PY, TRANS, LIVE, WEIGHT, MEDIAN = range(6)  # forward
# backward: PX, PY, TRANS, then
T_FINAL, V_ALPHA_OUT, INV_KEEP, T_HERE, FAC, V_ALPHA, D_SIGMA, D_OPACITY, DX, DY = range(3, 13)
SLOT_COLORS = 6  # a gradient slot: means2d (2), conic (3), opacity (1), then the colour channels


@numba.njit(inline="always", fastmath=EXACT_FASTMATH)
def _exp_neg(x):
    """exp(-x) for float32 x in [0, SIGMA_CAP]: Taylor on x/16 in [0, 0.5], then squared 4 times."""
    y = -x * EXP_SCALE
    p = np.float32(1.0 / 40320.0)
    p = p * y + np.float32(1.0 / 5040.0)
    p = p * y + np.float32(1.0 / 720.0)
    p = p * y + np.float32(1.0 / 120.0)
    p = p * y + np.float32(1.0 / 24.0)
    p = p * y + np.float32(1.0 / 6.0)
    p = p * y + HALF
    p = p * y + F1
    p = p * y + F1
    p = p * p
    p = p * p
    p = p * p
    return p * p


@numba.njit(inline="always", fastmath=EXACT_FASTMATH)
def _sigma(mean_x, mean_y, conic_a, conic_b, conic_c, pixel_x, pixel_y):
    dx = mean_x - pixel_x
    dy = mean_y - pixel_y
    return HALF * (conic_a * dx * dx + conic_c * dy * dy) + conic_b * dx * dy, dx, dy


@numba.njit(inline="always")
def _pixel_span(mean_y, conic_a, conic_b, conic_c, opacity, y0):
    """Pixels [p0, p1) of the tile rows the splat can reach with alpha >= 1/255 (unsigned, so that
    indexing with them needs no negative-index check and the pixel loops vectorize).

    alpha >= 1/255 needs sigma <= ln(255 o), and sigma >= dy^2 / (2 cov_yy), so rows farther than
    sqrt(2 ln(255 o) cov_yy) (+1 px against rounding) are skipped: an exact shortcut, not a cut-off.
    """
    reach = np.log(max(np.float64(opacity) * 255.0, 1.0))
    cov_yy = np.float64(conic_a) / max(np.float64(conic_a) * conic_c - np.float64(conic_b) * conic_b, 1e-30)
    half = np.sqrt(2.0 * reach * cov_yy) + 1.0
    row0 = max(np.floor(mean_y - half - y0 - 0.5), 0.0)
    row1 = min(np.floor(mean_y + half - y0 - 0.5) + 1.0, np.float64(TILE))
    if row1 <= row0:
        return np.uint64(0), np.uint64(0)
    return np.uint64(row0) * np.uint64(TILE), np.uint64(row1) * np.uint64(TILE)


@numba.njit(inline="always")
def _lane_sum(lanes):
    """The sum of a row of per-column partial sums, in column order.

    A splat's gradient is a sum over the pixels it covers. Summed pixel by pixel it does not vectorize
    unless LLVM may reorder the additions (fastmath's `reassoc`), and then the order depends on how the
    kernel was compiled: a process that compiled the kernels and one that loaded them from numba's cache
    trained different splats from the same frames. Summed down each of the tile's 16 columns (whole rows
    at a time, which vectorizes as it is) and then across them in order, every build adds in one order.
    """
    total = F0
    for c in range(TILE):
        total += lanes[c]
    return total


@numba.njit(inline="always")
def _row_maxima(pixel_values):
    """The largest value in each of the tile's rows."""
    maxima = np.empty(TILE, pixel_values.dtype)
    for row in range(TILE):
        maxima[row] = pixel_values[row * TILE:(row + 1) * TILE].max()
    return maxima


@numba.njit(inline="always")
def _rows_at_least(row_values, threshold):
    """Pixels [p0, p1) spanning the tile rows whose value is >= threshold (empty if none)."""
    low, high = np.uint64(0), np.uint64(0)
    for row in range(TILE):
        if row_values[row] >= threshold:
            if high == 0:
                low = np.uint64(row * TILE)
            high = np.uint64((row + 1) * TILE)
    return low, high


@numba.njit(inline="always")
def _tile_origin(tile, tiles_x, tiles_y):
    """Camera and top-left pixel of the tile-th tile (the tiles of all cameras in a row)."""
    cam = tile // (tiles_x * tiles_y)
    in_cam = tile % (tiles_x * tiles_y)
    return cam, (in_cam % tiles_x) * TILE, (in_cam // tiles_x) * TILE


@numba.njit(inline="always")
def _pixel_centres(work, x0, y0):
    for p in range(N_PIX):
        work[PX, p] = np.float32(x0 + p % TILE) + HALF
        work[PY, p] = np.float32(y0 + p // TILE) + HALF


@numba.njit(fastmath=EXACT_FASTMATH, error_model="numpy", cache=True)
def _forward_tile(ids, first, means2d, conics, colors, opacities, depths, x0, y0, width, height):
    """Blend the tile's splats ids (isect indices first, first + 1, ...) front to back.

    Returns the work block (transmittance, median depth rows), colours [D, N_PIX] and last indices.
    """
    n_ch = colors.shape[1]
    work = np.zeros((6, N_PIX), np.float32)
    _pixel_centres(work, x0, y0)
    for p in range(N_PIX):
        work[TRANS, p] = F1
        work[LIVE, p] = F1 if x0 + p % TILE < width and y0 + p // TILE < height else F0
    accum = np.zeros((n_ch, N_PIX), np.float32)
    last = np.full(N_PIX, first - 1, np.int32)
    live_lo, live_hi = np.uint64(0), np.uint64(N_PIX)  # pixels outside have all finished
    for j in range(len(ids)):
        g = ids[j]
        mx = means2d[g, 0]
        my = means2d[g, 1]
        ca = conics[g, 0]
        cb = conics[g, 1]
        cc = conics[g, 2]
        opacity = opacities[g]
        depth = depths[g]
        index = np.int32(first + j)
        p0, p1 = _pixel_span(my, ca, cb, cc, opacity, y0)
        p0, p1 = max(p0, live_lo), min(p1, live_hi)
        for p in range(p0, p1):
            sigma, dx, dy = _sigma(mx, my, ca, cb, cc, work[PX, p], work[PY, p])
            alpha = min(MAX_ALPHA, opacity * _exp_neg(min(max(sigma, F0), SIGMA_CAP)))
            t = work[TRANS, p]
            next_t = t * (F1 - alpha)
            kept = (sigma >= F0) & (alpha >= ALPHA_THRESHOLD) & (work[LIVE, p] > F0)
            used = kept & (next_t > T_EPSILON)
            work[WEIGHT, p] = alpha * t if used else F0
            work[MEDIAN, p] = depth if used & (t > MEDIAN_T) else work[MEDIAN, p]
            work[LIVE, p] = F0 if kept & (next_t <= T_EPSILON) else work[LIVE, p]
            work[TRANS, p] = next_t if used else t
            last[p] = index if used else last[p]
        for k in range(n_ch):
            color = colors[g, k]
            for p in range(p0, p1):
                accum[k, p] += color * work[WEIGHT, p]
        if j % 32 == 31:
            live_lo, live_hi = _rows_at_least(_row_maxima(work[LIVE]), F1)
            if live_hi == live_lo:
                break
    return work, accum, last


@numba.njit(parallel=True, error_model="numpy", cache=True)
def forward(means2d, conics, colors, opacities, depths, backgrounds, offsets, flatten_ids, width, height,
            tiles_x, tiles_y, out_colors, out_alphas, out_last, out_median):
    """Render every tile; fills out_colors [C,H,W,D] and out_alphas, out_last, out_median [C,H,W]."""
    n_ch = colors.shape[1]
    for tile in numba.prange(len(offsets) - 1):
        cam, x0, y0 = _tile_origin(tile, tiles_x, tiles_y)
        start = offsets[tile]
        work, accum, last = _forward_tile(flatten_ids[start:offsets[tile + 1]], start, means2d, conics, colors,
                                          opacities, depths, x0, y0, width, height)
        for p in range(N_PIX):
            x = x0 + p % TILE
            y = y0 + p // TILE
            if x < width and y < height:
                for k in range(n_ch):
                    out_colors[cam, y, x, k] = accum[k, p] + work[TRANS, p] * backgrounds[cam, k]
                out_alphas[cam, y, x] = F1 - work[TRANS, p]
                out_last[cam, y, x] = last[p]
                out_median[cam, y, x] = work[MEDIAN, p]


@numba.njit(fastmath=EXACT_FASTMATH, error_model="numpy", cache=True)
def _backward_tile(ids, first, means2d, conics, colors, opacities, background, alphas, last_ids, v_colors,
                   v_alphas, x0, y0, width, height, slots):
    """Walk the tile's splats back to front from each pixel's last one, filling their gradient slots
    (rows of `slots`: d/d means2d x, y | conic a, b, c | opacity | colour channels).

    alphas, last_ids, v_colors, v_alphas are this camera's images, background its [D] colour.
    """
    n_ch = colors.shape[1]
    work = np.zeros((13, N_PIX), np.float32)
    _pixel_centres(work, x0, y0)
    last = np.full(N_PIX, first - 1, np.int32)
    v_out = np.zeros((n_ch, N_PIX), np.float32)
    buffer = np.zeros((n_ch, N_PIX), np.float32)
    lanes = np.zeros((6, TILE), np.float32)  # per-column partial sums of a splat's gradient (see _lane_sum)
    for p in range(N_PIX):
        x = x0 + p % TILE
        y = y0 + p // TILE
        work[T_FINAL, p] = F1
        if x < width and y < height:
            work[T_FINAL, p] = F1 - alphas[y, x]
            last[p] = last_ids[y, x]
            work[V_ALPHA_OUT, p] = v_alphas[y, x]
            for k in range(n_ch):
                v_out[k, p] = v_colors[y, x, k]
                work[V_ALPHA_OUT, p] -= background[k] * v_out[k, p]
        work[TRANS, p] = work[T_FINAL, p]
    row_last = _row_maxima(last)  # rows whose pixels all stopped in front of a splat skip it
    for j in range(last.max() - first, -1, -1):
        g = ids[j]
        mx = means2d[g, 0]
        my = means2d[g, 1]
        ca = conics[g, 0]
        cb = conics[g, 1]
        cc = conics[g, 2]
        opacity = opacities[g]
        index = np.int32(first + j)
        p0, p1 = _pixel_span(my, ca, cb, cc, opacity, y0)
        active_lo, active_hi = _rows_at_least(row_last, index)
        p0, p1 = max(p0, active_lo), min(p1, active_hi)
        if p1 <= p0:
            continue
        for p in range(p0, p1):
            sigma, dx, dy = _sigma(mx, my, ca, cb, cc, work[PX, p], work[PY, p])
            vis = _exp_neg(min(max(sigma, F0), SIGMA_CAP))
            raw_alpha = opacity * vis
            alpha = min(MAX_ALPHA, raw_alpha)
            valid = (index <= last[p]) & (sigma >= F0) & (alpha >= ALPHA_THRESHOLD)
            inv_keep = F1 / (F1 - alpha)
            t = work[TRANS, p] * inv_keep
            work[INV_KEEP, p] = inv_keep
            work[T_HERE, p] = t
            work[FAC, p] = alpha * t if valid else F0
            unclamped = valid & (raw_alpha <= MAX_ALPHA)
            work[D_SIGMA, p] = -raw_alpha if unclamped else F0
            work[D_OPACITY, p] = vis if unclamped else F0
            work[DX, p] = dx
            work[DY, p] = dy
            work[TRANS, p] = t if valid else work[TRANS, p]
            work[V_ALPHA, p] = work[T_FINAL, p] * inv_keep * work[V_ALPHA_OUT, p]
        for k in range(n_ch):
            color = colors[g, k]
            lanes[0] = F0
            for row in range(p0, p1, U_TILE):
                for c in range(U_TILE):
                    p = row + c
                    work[V_ALPHA, p] += (color * work[T_HERE, p] - buffer[k, p] * work[INV_KEEP, p]) * v_out[k, p]
                    lanes[0, c] += work[FAC, p] * v_out[k, p]
                    buffer[k, p] += color * work[FAC, p]
            slots[first + j, SLOT_COLORS + k] = _lane_sum(lanes[0])
        lanes[:] = F0
        for row in range(p0, p1, U_TILE):
            for c in range(U_TILE):
                p = row + c
                v_sigma = work[D_SIGMA, p] * work[V_ALPHA, p]
                dx = work[DX, p]
                dy = work[DY, p]
                lanes[0, c] += HALF * v_sigma * dx * dx
                lanes[1, c] += v_sigma * dx * dy
                lanes[2, c] += HALF * v_sigma * dy * dy
                lanes[3, c] += v_sigma * (ca * dx + cb * dy)
                lanes[4, c] += v_sigma * (cb * dx + cc * dy)
                lanes[5, c] += work[D_OPACITY, p] * work[V_ALPHA, p]
        v_a = _lane_sum(lanes[0])
        v_b = _lane_sum(lanes[1])
        v_c = _lane_sum(lanes[2])
        v_x = _lane_sum(lanes[3])
        v_y = _lane_sum(lanes[4])
        v_o = _lane_sum(lanes[5])
        slots[first + j, 0] = v_x
        slots[first + j, 1] = v_y
        slots[first + j, 2] = v_a
        slots[first + j, 3] = v_b
        slots[first + j, 4] = v_c
        slots[first + j, 5] = v_o


@numba.njit(parallel=True, error_model="numpy", cache=True)
def backward(means2d, conics, colors, opacities, backgrounds, offsets, flatten_ids, width, height,
             tiles_x, tiles_y, alphas, last_ids, v_colors, v_alphas,
             slots):
    """Gradients of every tile into one row of slots [n_isects, 6 + D] per intersection (see `scatter_slots`)."""
    for tile in numba.prange(len(offsets) - 1):
        cam, x0, y0 = _tile_origin(tile, tiles_x, tiles_y)
        start = offsets[tile]
        _backward_tile(flatten_ids[start:offsets[tile + 1]], start, means2d, conics, colors, opacities,
                       backgrounds[cam], alphas[cam], last_ids[cam], v_colors[cam], v_alphas[cam], x0, y0,
                       width, height, slots)


@numba.njit(cache=True)
def scatter_slots(flatten_ids, slots, out):
    """out[flatten_ids[i]] += slots[i], in intersection order (deterministic)."""
    for i in range(len(flatten_ids)):
        g = flatten_ids[i]
        for k in range(slots.shape[1]):
            out[g, k] += slots[i, k]


@numba.njit(inline="always")
def _tile_box(mean, radius, n_tiles):
    """gsplat's isect_tiles range along one axis: [floor((m - r) / 16), ceil((m + r) / 16)) in the grid."""
    centre = mean / np.float32(TILE)
    extent = np.float32(radius) / np.float32(TILE)
    low = min(max(np.int64(np.floor(centre - extent)), 0), n_tiles)
    high = min(max(np.int64(np.ceil(centre + extent)), 0), n_tiles)
    return low, high


@numba.njit(inline="always")
def _tile_rect(means2d, radii, m, tiles_x, tiles_y):
    x0, x1 = _tile_box(means2d[m, 0], radii[m, 0], tiles_x)
    y0, y1 = _tile_box(means2d[m, 1], radii[m, 1], tiles_y)
    if radii[m, 0] <= 0 or radii[m, 1] <= 0:
        return 0, 0, 0, 0
    return x0, x1, y0, y1


@numba.njit(cache=True)
def bin_tiles(means2d, radii, depth_order, tiles_x, tiles_y):
    """Counting sort of (splat, tile) pairs into tiles, visiting splats front to back per camera.

    means2d [C*N, 2], radii [C*N, 2]; depth_order [C, N] is each camera's stable depth order, so
    every tile's list comes out sorted by depth with ties in index order, as gsplat's radix sort of
    (tile, depth) keys. Returns offsets [C * tiles + 1] and flatten_ids (camera * N + splat).
    """
    n_cams, n_gauss = depth_order.shape
    tiles_per_cam = tiles_x * tiles_y
    offsets = np.zeros(n_cams * tiles_per_cam + 1, np.int64)
    for m in range(n_cams * n_gauss):
        x0, x1, y0, y1 = _tile_rect(means2d, radii, m, tiles_x, tiles_y)
        for ty in range(y0, y1):
            for tx in range(x0, x1):
                offsets[(m // n_gauss) * tiles_per_cam + ty * tiles_x + tx + 1] += 1
    for t in range(n_cams * tiles_per_cam):
        offsets[t + 1] += offsets[t]
    flatten_ids = np.empty(offsets[-1], np.int64)
    cursor = offsets[:-1].copy()
    for cam in range(n_cams):
        for rank in range(n_gauss):
            m = cam * n_gauss + depth_order[cam, rank]
            x0, x1, y0, y1 = _tile_rect(means2d, radii, m, tiles_x, tiles_y)
            for ty in range(y0, y1):
                for tx in range(x0, x1):
                    tile = cam * tiles_per_cam + ty * tiles_x + tx
                    flatten_ids[cursor[tile]] = m
                    cursor[tile] += 1
    return offsets, flatten_ids
