#!/usr/bin/python3
"""genscene.py: deterministic aerial-like GeoTIFF road scenes for cdpool.

Draws a synthetic orthophoto at 0.5 m (by default): textured fields and
meadows, curved roads of 3-12 px with junctions, houses with gable roofs and
shadows along the minor roads, lakes, and round tree canopies, some of them
over road edges. Optionally writes the road mask beside it, and the
buildings' footprints as EPSG:4326 polygons. A second mode
writes small 5-class scene tiles with a list file for classification.

Everything is drawn in row strips of about 2^20 pixels from global object
lists (road segments, buildings, lakes, trees), so memory stays bounded (a few
hundred MB) for 16384^2 scenes and beyond, and every random choice comes from the seed: the same arguments give
the same bytes (with the same numpy and GDAL). Needs only numpy and GDAL.
"""
import argparse
import errno
import math
import os
import signal
import sys

import numpy as np
from osgeo import gdal, ogr, osr

PROG = os.path.basename(sys.argv[0])
STRIP_PIXELS = 1 << 20   # pixels per strip; the strip height is part of the output
CLASSES = ("residential", "road", "green", "lake", "land")
SHORT = ("res", "road", "green", "lake", "land")

# Colours as (R, G, B, NIR) reflectance-like values in [0, 1].
FIELD_TYPES = np.array([      # ground cover of a field; row = type
    (0.62, 0.56, 0.33, 0.45),     # ripe crop
    (0.36, 0.46, 0.22, 0.62),     # green crop
    (0.30, 0.42, 0.20, 0.58),     # meadow
    (0.45, 0.36, 0.27, 0.33),     # bare soil
    (0.52, 0.50, 0.36, 0.42),     # dry grass
    (0.18, 0.28, 0.14, 0.55),     # woodland floor
], np.float32)
FIELD_STRIPES = np.array([0.10, 0.08, 0.0, 0.06, 0.0, 0.0], np.float32)
ROOFS = np.array([
    (0.56, 0.27, 0.19, 0.32), (0.42, 0.18, 0.14, 0.28), (0.23, 0.23, 0.25, 0.22),
    (0.60, 0.60, 0.60, 0.40), (0.38, 0.29, 0.21, 0.30), (0.33, 0.45, 0.40, 0.30),
], np.float32)
WATER = np.array((0.09, 0.17, 0.20, 0.03), np.float32)
SHALLOW = np.array((0.20, 0.30, 0.27, 0.08), np.float32)
SAND = np.array((0.60, 0.55, 0.43, 0.40), np.float32)
TREE = np.array((0.14, 0.27, 0.11, 0.62), np.float32)
MARKING = np.array((0.85, 0.85, 0.82, 0.60), np.float32)
SUN = (3.0, 3.0)   # shadow direction per unit height, pixels (sun in the NW)


def hash_u64(ix, iy, key):
    """SplitMix64 finaliser of (ix, iy, key): int arrays -> uint64 array."""
    with np.errstate(over="ignore"):
        z = (np.asarray(ix).astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             ^ np.asarray(iy).astype(np.int64).astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
             ^ np.uint64(key & 0xFFFFFFFFFFFFFFFF))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def unit(h, shift=40):
    """24 bits of a hash as float32 in [0, 1)."""
    return ((h >> np.uint64(shift)) & np.uint64(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)


def value_noise(y0, h, w, cell, key):
    """Smooth value noise of the lattice spacing `cell` px: (h, w) in [0, 1).

    Lattice values come from hash_u64, so any strip gives the same values
    as the whole image would; interpolation is separable (x, then y)."""
    fy = (np.arange(y0, y0 + h, dtype=np.float64) + 0.5) / cell
    fx = (np.arange(w, dtype=np.float64) + 0.5) / cell
    iy0, ix0 = np.floor(fy).astype(np.int64), np.floor(fx).astype(np.int64)
    ty, tx = fy - iy0, fx - ix0
    ty, tx = (ty * ty * (3 - 2 * ty)).astype(np.float32), (tx * tx * (3 - 2 * tx)).astype(np.float32)
    ly = np.arange(iy0[0], iy0[-1] + 2)
    lx = np.arange(ix0[0], ix0[-1] + 2)
    lat = unit(hash_u64(lx[None, :], ly[:, None], key))           # (ny, nx)
    a = lat[:, ix0 - lx[0]] * (1 - tx) + lat[:, ix0 - lx[0] + 1] * tx   # (ny, w)
    r = iy0 - ly[0]
    return a[r] * (1 - ty)[:, None] + a[r + 1] * ty[:, None]


def fbm(y0, h, w, cell, octaves, key):
    """Sum of octaves of value noise, halving cell and amplitude: (h, w) in [0, 1)."""
    out, amp, norm = np.zeros((h, w), np.float32), 1.0, 0.0
    for o in range(octaves):
        out += np.float32(amp) * value_noise(y0, h, w, max(cell / 2 ** o, 1.0), key + 7919 * o)
        norm += amp
        amp *= 0.5
    return out / np.float32(norm)


class Scene:
    """Global object lists of one scene and the strip renderer.

    Pixel coordinates are (x, y) with pixel (row r, col c) centred on
    (c + 0.5, r + 0.5). Segments: (n, 6) x0 y0 x1 y1 width s0 (s0 = distance
    along the road at the segment start), with per-segment road ids."""

    def __init__(self, w, h, seed):
        self.w, self.h, self.seed = w, h, seed
        self.rng = np.random.default_rng(seed)
        self.key = int(hash_u64(seed, 1, 0x5CE7E))
        self.angle = self.rng.uniform(0, math.pi)
        self.field_size = self.rng.uniform(140, 320), self.rng.uniform(70, 200)
        self.field_weights = np.array([1, 1, 1.2, 0.8, 0.6, 0.4])
        self.roads = []        # (points (n, 2), width, kind 0 paved / 1 dirt, marked, tone)
        self.lakes = []        # (cx, cy, radius, amps (4,), phases (4,))
        self.buildings = []    # (cx, cy, half length, half width, angle, roof, flat)
        self.trees = []        # (cx, cy, radius, shade)

    # --- object placement ------------------------------------------------
    def add_road(self, x, y, heading, width, length, wiggle, kind=0):
        step, pts, curv, aim = 12.0, [(x, y)], 0.0, heading
        margin = width + 40
        for _ in range(int(length / step)):
            # Curvature is mean-reverting and the heading drifts back to the
            # road's overall direction: bends, but no spirals (radius >= 200 px).
            curv = min(max(0.85 * curv + self.rng.normal(0, wiggle), -0.005), 0.005)
            heading += curv * step + 0.03 * (aim - heading)
            x, y = x + step * math.cos(heading), y + step * math.sin(heading)
            pts.append((x, y))
            if not (-margin < x < self.w + margin and -margin < y < self.h + margin):
                break
        if len(pts) >= 2:
            self.roads.append((np.array(pts), float(width), kind, kind == 0 and width >= 8,
                               self.rng.uniform(0.30, 0.42)))

    def border_start(self):
        """A point on a random edge and a heading into the scene."""
        side, t = self.rng.integers(4), self.rng.uniform(0.1, 0.9)
        x, y, head = [(t * self.w, 0, 0.5), (self.w, t * self.h, 1.0),
                      (t * self.w, self.h, 1.5), (0, t * self.h, 0.0)][side]
        return x, y, head * math.pi + self.rng.uniform(-0.5, 0.5)

    def branch(self, width, length, kind=0):
        """A road leaving an existing one at roughly a right angle (a junction)."""
        if not self.roads:
            return
        pts = self.roads[self.rng.integers(len(self.roads))][0]
        i = int(self.rng.integers(0, len(pts) - 1))
        d = pts[i + 1] - pts[i]
        head = math.atan2(d[1], d[0]) + (1 if self.rng.random() < 0.5 else -1) * (
            math.pi / 2 + self.rng.uniform(-0.3, 0.3))
        self.add_road(pts[i][0], pts[i][1], head, width, length, 0.0008, kind)

    def build_index(self):
        """Road segments, and a 64 px grid of them and of placed buildings
        for clearance tests."""
        segs, ids = [np.zeros((0, 6))], [np.zeros(0, np.int64)]
        for rid, (pts, width) in enumerate(r[:2] for r in self.roads):
            d = np.hypot(*(pts[1:] - pts[:-1]).T)
            s0 = np.concatenate(([0.0], np.cumsum(d)[:-1]))
            segs.append(np.column_stack((pts[:-1], pts[1:], np.full(len(d), width), s0)))
            ids.append(np.full(len(d), rid))
        self.seg, self.seg_id = np.concatenate(segs), np.concatenate(ids)
        self.grid = {}
        for i, (x0, y0, x1, y1, w, _) in enumerate(self.seg):
            r = w / 2
            for gx in range(int((min(x0, x1) - r) // 64), int((max(x0, x1) + r) // 64) + 1):
                for gy in range(int((min(y0, y1) - r) // 64), int((max(y0, y1) + r) // 64) + 1):
                    self.grid.setdefault((gx, gy), []).append(i)
        self.occupied = {}

    def road_clear(self, x, y, clearance):
        """True if (x, y) is more than clearance px outside every road."""
        near = set()
        for gx in range(int((x - clearance) // 64), int((x + clearance) // 64) + 1):
            for gy in range(int((y - clearance) // 64), int((y + clearance) // 64) + 1):
                near.update(self.grid.get((gx, gy), ()))
        if not near:
            return True
        s = self.seg[sorted(near)]
        d = s[:, 2:4] - s[:, 0:2]
        t = np.clip(((x - s[:, 0]) * d[:, 0] + (y - s[:, 1]) * d[:, 1]) /
                    np.maximum((d * d).sum(1), 1e-9), 0, 1)
        dist = np.hypot(s[:, 0] + t * d[:, 0] - x, s[:, 1] + t * d[:, 1] - y)
        return bool(np.all(dist - s[:, 4] / 2 > clearance))

    def in_lake(self, x, y, pad=0.0):
        for cx, cy, rad, amps, phases in self.lakes:
            if abs(x - cx) > 1.3 * rad + pad or abs(y - cy) > 1.3 * rad + pad:
                continue        # the shore stays within 1.25 radius
            th = math.atan2(y - cy, x - cx)
            rt = rad * (1 + sum(a * math.cos((k + 2) * th + p) for k, (a, p) in enumerate(zip(amps, phases))))
            if math.hypot(x - cx, y - cy) < rt + pad:
                return True
        return False

    def free(self, x, y, r):
        """True if a disc of radius r at (x, y) overlaps no placed building."""
        for gx in range(int((x - r - 40) // 64), int((x + r + 40) // 64) + 1):
            for gy in range(int((y - r - 40) // 64), int((y + r + 40) // 64) + 1):
                for (ox, oy, orad) in self.occupied.get((gx, gy), ()):
                    if math.hypot(x - ox, y - oy) < r + orad:
                        return False
        return True

    def occupy(self, x, y, r):
        self.occupied.setdefault((int(x // 64), int(y // 64)), []).append((x, y, r))

    def add_lake(self, cx, cy, rad):
        amps = self.rng.uniform(0, 0.12, 4) / np.arange(1, 5)
        self.lakes.append((cx, cy, rad, amps, self.rng.uniform(0, 2 * math.pi, 4)))

    def add_building(self, x, y, a, b, ang, flat=False):
        rad = math.hypot(a, b)
        if (not (0 <= x < self.w and 0 <= y < self.h) or not self.road_clear(x, y, rad + 2)
                or self.in_lake(x, y, rad + 4) or not self.free(x, y, rad)):
            return False
        self.buildings.append((x, y, a, b, ang, int(self.rng.integers(len(ROOFS))), flat))
        self.occupy(x, y, rad)
        return True

    def add_tree(self, x, y, r):
        if -r <= x < self.w + r and -r <= y < self.h + r and not self.in_lake(x, y, 2) \
                and self.free(x, y, r * 0.3):
            self.trees.append((x, y, r, self.rng.uniform(0.8, 1.2)))

    def along(self, rid, spacing):
        """Points every `spacing` px along road rid: (x, y, normal x, normal y, heading)."""
        pts = self.roads[rid][0]
        for i in range(len(pts) - 1):
            d = pts[i + 1] - pts[i]
            seg_len = math.hypot(*d)
            for s in np.arange(0, seg_len, spacing):
                yield (pts[i][0] + d[0] * s / seg_len, pts[i][1] + d[1] * s / seg_len,
                       -d[1] / seg_len, d[0] / seg_len, math.atan2(d[1], d[0]))

    def houses_along(self, rid, spacing, prob):
        width = self.roads[rid][1]
        for x, y, nx, ny, ang in self.along(rid, spacing):
            for side in (-1, 1):
                if self.rng.random() > prob:
                    continue
                a, b = self.rng.uniform(7, 14), self.rng.uniform(6, 11)
                off = width / 2 + self.rng.uniform(5, 12) + b
                if self.add_building(x + side * nx * off, y + side * ny * off, a, b, ang) \
                        and self.rng.random() < 0.5:    # a garden tree behind the house
                    g = side * (off + b + self.rng.uniform(4, 12))
                    self.add_tree(x + nx * g, y + ny * g, self.rng.uniform(3, 7))

    def avenue(self, rid, spacing):
        width = self.roads[rid][1]
        for x, y, nx, ny, _ in self.along(rid, spacing):
            for side in (-1, 1):
                r = self.rng.uniform(4, 8)
                if self.rng.random() < 0.3:
                    continue
                # Canopies reach 0.1-0.9 r over the road edge, hiding narrow
                # roads in places; the mask keeps the road.
                off = side * (width / 2 + r * self.rng.uniform(0.1, 0.9))
                self.add_tree(x + nx * off, y + ny * off, r)

    def tree_cluster(self, x, y, spread, n):
        for _ in range(n):
            self.add_tree(x + self.rng.normal(0, spread), y + self.rng.normal(0, spread),
                          self.rng.uniform(3, 9))

    def populate(self):
        """The general scene: roads first, then what sits beside them."""
        w, h, rng = self.w, self.h, self.rng
        area, nmain = w * h, max(1, round((w + h) / 1400))
        for _ in range(nmain):
            self.add_road(*self.border_start(), rng.uniform(7, 12), 3 * (w + h) + 100, 0.0015)
        for _ in range(max(1, round(area / 300e3))):
            self.branch(rng.uniform(3, 7), rng.uniform(200, 1500), int(rng.random() < 0.2))
        for _ in range(rng.poisson(max(0.5, area / 3e6))):
            self.add_lake(rng.uniform(0, w), rng.uniform(0, h),
                          rng.uniform(40, max(41, min(250, 0.3 * min(w, h)))))
        self.build_index()
        for rid in range(len(self.roads)):
            if rid >= nmain and self.roads[rid][2] == 0 and rng.random() < 0.7:
                self.houses_along(rid, rng.uniform(22, 34), 0.65)
            if rng.random() < 0.25:
                self.avenue(rid, rng.uniform(12, 20))
        for _ in range(rng.poisson(area / 250e3)):
            self.tree_cluster(rng.uniform(0, w), rng.uniform(0, h), rng.uniform(8, 40),
                              int(rng.integers(3, 30)))
        for _ in range(rng.poisson(area / 2e6)):
            x, y = rng.uniform(0, w), rng.uniform(0, h)
            self.add_building(x, y, rng.uniform(20, 45), rng.uniform(15, 30), self.angle, flat=True)

    def populate_tile(self, cls):
        """One classification tile: the content says which of CLASSES it is."""
        w, h, rng = self.w, self.h, self.rng
        c = (w / 2, h / 2)
        if cls == 0:                                   # residential
            self.field_weights = np.array([0, 0, 1, 0, 0.3, 0])
            self.add_road(*self.border_start(), rng.uniform(3, 6), 3 * (w + h) + 100, 0.001)
            self.build_index()
            self.houses_along(0, rng.uniform(20, 26), 0.9)
            for _ in range(40):
                self.add_building(rng.uniform(0, w), rng.uniform(0, h), rng.uniform(7, 13),
                                  rng.uniform(6, 10), self.angle + rng.normal(0, 0.05))
            for _ in range(int(rng.integers(2, 8))):
                self.add_tree(rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, 6))
        elif cls == 1:                                 # road
            x, y, head = self.border_start()
            head = math.atan2(c[1] - y, c[0] - x) + rng.uniform(-0.2, 0.2)
            self.add_road(x, y, head, rng.uniform(6, 12), 3 * (w + h) + 100, 0.001)
            if rng.random() < 0.4:
                self.branch(rng.uniform(4, 8), w + h)
            self.build_index()
            if rng.random() < 0.5:
                self.avenue(0, rng.uniform(10, 16))
        elif cls == 2:                                 # green
            self.field_weights = np.array([0, 0.3, 1, 0, 0.2, 1])
            self.build_index()
            for _ in range(int(rng.integers(1, 4))):
                self.tree_cluster(rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, 30),
                                  int(rng.integers(5, 30)))
        elif cls == 3:                                 # lake
            self.add_lake(c[0] + rng.normal(0, w / 10), c[1] + rng.normal(0, h / 10),
                          rng.uniform(0.4, 0.7) * min(w, h))
            self.build_index()
            for _ in range(int(rng.integers(0, 10))):
                ang = rng.uniform(0, 2 * math.pi)
                rad = self.lakes[0][2] * rng.uniform(1.05, 1.4)
                self.add_tree(c[0] + rad * math.cos(ang), c[1] + rad * math.sin(ang), rng.uniform(3, 7))
        else:                                          # land: open fields
            self.field_weights = np.array([1, 1, 0, 1, 0.5, 0])
            self.field_size = rng.uniform(40, 120), rng.uniform(30, 90)
            self.build_index()

    # --- rendering ----------------------------------------------------------
    def prepare(self):
        """Per-object row extents, so that each strip visits only its objects."""
        b = np.array([(y, math.hypot(a, hb), 1.5 if flat else 1.0)
                      for _, y, a, hb, _, _, flat in self.buildings]).reshape(-1, 3)
        self.bld_y0 = b[:, 0] - b[:, 1] - 1
        self.bld_y1 = b[:, 0] + b[:, 1] + SUN[1] * b[:, 2] + 1
        t = np.array(self.trees, np.float64).reshape(-1, 4)
        rad = np.round(t[:, 2]).astype(int)
        self.tree_classes = [(r, t[rad == r]) for r in np.unique(rad)]

    def render(self, y0, sh):
        """Rows [y0, y0 + sh): image (4, sh, w) float32 and road mask (sh, w) u8."""
        w, key = self.w, self.key
        img = self.ground(y0, sh)
        mask = np.zeros((sh, w), np.uint8)
        for lake in self.lakes:
            self.draw_lake(img, y0, lake)
        for i in np.nonzero((self.bld_y0 < y0 + sh) & (self.bld_y1 > y0))[0]:
            self.draw_building(img, y0, self.buildings[i])
        sel = np.nonzero((np.minimum(self.seg[:, 1], self.seg[:, 3]) - self.seg[:, 4] < y0 + sh + 2)
                         & (np.maximum(self.seg[:, 1], self.seg[:, 3]) + self.seg[:, 4] > y0 - 2))[0]
        for i in sel:
            self.draw_segment(img, mask, y0, self.seg[i], self.roads[self.seg_id[i]])
        self.draw_trees(img, y0)
        # Fine texture and sensor noise over everything.
        tex = fbm(y0, sh, w, 6.0, 2, key + 101) - np.float32(0.5)
        rng = np.random.default_rng([self.seed, 1, y0])
        noise = rng.standard_normal((sh, w), dtype=np.float32)
        img *= (1 + np.float32(0.18) * tex + np.float32(0.02) * noise)[None]
        return img, mask

    def ground(self, y0, sh):
        w, key = self.w, self.key
        yy = np.arange(y0, y0 + sh, dtype=np.float32)[:, None] + np.float32(0.5)
        xx = np.arange(w, dtype=np.float32)[None, :] + np.float32(0.5)
        ca, sa = np.float32(math.cos(self.angle)), np.float32(math.sin(self.angle))
        u = xx * ca + yy * sa + np.float32(50) * (fbm(y0, sh, w, 160.0, 2, key + 11) - np.float32(0.5))
        v = yy * ca - xx * sa + np.float32(50) * (fbm(y0, sh, w, 160.0, 2, key + 12) - np.float32(0.5))
        fu, fv = u / np.float32(self.field_size[0]), v / np.float32(self.field_size[1])
        iu, iv = np.floor(fu), np.floor(fv)
        hsh = hash_u64(iu.astype(np.int64), iv.astype(np.int64), key + 13)
        cum = np.cumsum(self.field_weights) / np.sum(self.field_weights)
        ftype = np.minimum(np.searchsorted(cum, unit(hsh, 0)), len(cum) - 1)
        bright = np.float32(0.85) + np.float32(0.3) * unit(hsh, 24)
        # Crop rows along or across the field, 4-9 px apart.
        period = np.float32(4) + np.float32(5) * unit(hsh, 48)
        across = (hsh & np.uint64(1 << 20)) != 0
        phase = np.where(across, u, v) / period
        stripes = FIELD_STRIPES[ftype] * np.sin(np.float32(2 * math.pi) * phase)
        # Tracks and hedges between fields: darker seams at the cell borders.
        edge = np.minimum(np.minimum(fu - iu, 1 - fu + iu) * np.float32(self.field_size[0]),
                          np.minimum(fv - iv, 1 - fv + iv) * np.float32(self.field_size[1]))
        shade = bright * (1 + stripes) * np.where(edge < 1.2, np.float32(0.8), np.float32(1))
        shade *= np.float32(0.85) + np.float32(0.3) * fbm(y0, sh, w, 48.0, 3, key + 14)
        img = FIELD_TYPES[ftype].transpose(2, 0, 1) * shade[None]
        woods = ftype == 5                 # woodland: dense canopy texture
        if woods.any():
            canopy = fbm(y0, sh, w, 5.0, 2, key + 15)
            img[:, woods] = TREE[:, None] * (np.float32(0.6) + canopy[woods])[None]
        return img

    def window(self, y0, x0, x1, ya, yb, sh):
        """Clipped pixel window [ya, yb) x [x0, x1) of the strip, or None."""
        c0, c1 = max(0, int(math.floor(x0))), min(self.w, int(math.ceil(x1)) + 1)
        r0, r1 = max(y0, int(math.floor(ya))), min(y0 + sh, int(math.ceil(yb)) + 1)
        if c0 >= c1 or r0 >= r1:
            return None
        yy = np.arange(r0, r1, dtype=np.float32)[:, None] + np.float32(0.5)
        xx = np.arange(c0, c1, dtype=np.float32)[None, :] + np.float32(0.5)
        return (slice(r0 - y0, r1 - y0), slice(c0, c1)), xx, yy

    def draw_lake(self, img, y0, lake):
        cx, cy, rad, amps, phases = lake
        rmax = rad * (1 + amps.sum()) + 3
        win = self.window(y0, cx - rmax, cx + rmax, cy - rmax, cy + rmax, img.shape[1])
        if win is None:
            return
        sl, xx, yy = win
        th = np.arctan2(yy - cy, xx - cx)
        rt = rad * (1 + sum(a * np.cos((k + 2) * th + p) for k, (a, p) in enumerate(zip(amps, phases))))
        d = np.hypot(xx - cx, yy - cy) - rt         # < 0 inside
        sub = img[:, sl[0], sl[1]]
        sub[:] = np.where(d < 2, SAND[:, None, None], sub)
        depth = np.clip(-d / 6, 0, 1)[None]
        sub[:] = np.where(d < 0, SHALLOW[:, None, None] * (1 - depth) + WATER[:, None, None] * depth, sub)

    def draw_building(self, img, y0, b):
        cx, cy, a, hb, ang, roof, flat = b
        r = math.hypot(a, hb)
        sx, sy = SUN[0] * (1.5 if flat else 1.0), SUN[1] * (1.5 if flat else 1.0)
        win = self.window(y0, cx - r, cx + r + sx, cy - r, cy + r + sy, img.shape[1])
        if win is None:
            return
        sl, xx, yy = win
        ca, sa = math.cos(ang), math.sin(ang)
        sub = img[:, sl[0], sl[1]]
        def inside(ox, oy):
            lx = (xx - cx - ox) * ca + (yy - cy - oy) * sa
            ly = (yy - cy - oy) * ca - (xx - cx - ox) * sa
            return (np.abs(lx) <= a) & (np.abs(ly) <= hb), lx, ly
        shadow, _, _ = inside(sx, sy)
        sub *= np.where(shadow, np.float32(0.5), np.float32(1))[None]
        roof_in, lx, ly = inside(0, 0)
        col = ROOFS[roof][:, None, None]
        if flat:
            tone = np.where(np.maximum(np.abs(lx) - a, np.abs(ly) - hb) > -1.2, 1.15, 1.0)
        else:           # gable roof: the sunlit slope is brighter, ridge brightest
            tone = np.where(ly < 0, 1.1, 0.8) * np.where(np.abs(ly) < 0.7, 1.1, 1.0)
        sub[:] = np.where(roof_in[None], col * tone.astype(np.float32)[None], sub)

    def draw_segment(self, img, mask, y0, s, road):
        x0, ya, x1, yb, width, s0 = s
        _, _, kind, marked, tone = road
        hw = width / 2
        win = self.window(y0, min(x0, x1) - hw - 1, max(x0, x1) + hw + 1,
                          min(ya, yb) - hw - 1, max(ya, yb) + hw + 1, img.shape[1])
        if win is None:
            return
        sl, xx, yy = win
        dx, dy = x1 - x0, yb - ya
        seg_len = math.hypot(dx, dy)
        t = np.clip(((xx - x0) * dx + (yy - ya) * dy) / max(seg_len * seg_len, 1e-9), 0, 1)
        d = np.hypot(x0 + t * dx - xx, ya + t * dy - yy)
        cover = np.clip(hw - d + 0.5, 0, 1)[None]      # anti-aliased edge
        col = (np.array((tone, tone, tone * 1.02, tone * 0.9), np.float32) if kind == 0
               else np.array((0.55, 0.47, 0.36, 0.40), np.float32))[:, None, None]
        sub = img[:, sl[0], sl[1]]
        paint = np.broadcast_to(col, sub.shape).copy()
        if marked:      # 6 m dashes with 12 m gaps on the centre line
            along = s0 + t * seg_len
            line = (d < 0.6) & ((along % 36) < 12)
            if width >= 10:     # and solid edge lines on the wide roads
                line |= np.abs(d - (hw - 1.5)) < 0.4
            paint = np.where(line[None], MARKING[:, None, None], paint)
        sub[:] = sub * (1 - cover) + paint * cover
        mask[sl] |= (d <= hw).astype(np.uint8)

    def draw_trees(self, img, y0):
        """Tree shadows, then canopies, stamped per integer radius at once."""
        sh = img.shape[1]
        for pass_ in (0, 1):
            for r, sel in self.tree_classes:
                ox = oy = 0.6 * r if pass_ == 0 else 0.0
                cy = np.floor(sel[:, 1] + oy).astype(np.int64)
                cx = np.floor(sel[:, 0] + ox).astype(np.int64)
                near = (cy + r >= y0) & (cy - r < y0 + sh)
                if not near.any():
                    continue
                dy, dx = np.mgrid[-r:r + 1, -r:r + 1]
                disc = dy * dy + dx * dx <= r * r + r
                dy, dx = dy[disc], dx[disc]
                rows = cy[near, None] + dy[None, :] - y0
                cols = cx[near, None] + dx[None, :]
                ok = (rows >= 0) & (rows < sh) & (cols >= 0) & (cols < self.w)
                if pass_ == 0:
                    img[:, rows[ok], cols[ok]] *= np.float32(0.6)
                    continue
                # Rounded canopy, lit from the upper left.
                rr = np.hypot(dx + 0.35 * r, dy + 0.35 * r) / (1.5 * r)
                shade = (1.25 - 0.7 * rr)[None, :] * sel[near, 3][:, None]
                val = TREE[:, None, None] * shade[None].astype(np.float32)
                img[:, rows[ok], cols[ok]] = val[:, ok]


def create(path, w, h, nb, dtype, args, origin):
    drv = gdal.GetDriverByName("GTiff")
    opts = ["PHOTOMETRIC=" + ("RGB" if nb >= 3 else "MINISBLACK"), "BIGTIFF=IF_SAFER"]
    if args.tiled:
        opts.append("TILED=YES")
    if args.compress:
        opts += ["COMPRESS=DEFLATE", "PREDICTOR=2"]
    ds = drv.Create(path, w, h, nb, dtype, opts)
    if ds is None:
        raise OSError(gdal.GetLastErrorMsg() or "GDAL could not create it")
    ds.SetGeoTransform((origin[0], args.res, 0.0, origin[1], 0.0, -args.res))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(args.epsg)
    ds.SetProjection(srs.ExportToWkt())
    return ds


def quantise(img, nb, dtype):
    """(4, h, w) float -> (nb, h, w) integers: RGB, gray or RGB + NIR."""
    if nb == 1:
        img = (0.3 * img[0] + 0.59 * img[1] + 0.11 * img[2])[None]
    else:
        img = img[:nb]
    top = 255 if dtype == "u8" else 65535
    return np.clip(img * top + 0.5, 0, top).astype(np.uint8 if dtype == "u8" else np.uint16)


def write_scene(scene, path, mask_path, args, origin):
    """Renders scene strip by strip into path (and mask_path), each written
    under a temporary name and renamed at the end."""
    nb, gdt = args.bands, gdal.GDT_Byte if args.dtype == "u8" else gdal.GDT_UInt16
    outs = [(path, nb, gdt)] + ([(mask_path, 1, gdal.GDT_Byte)] if mask_path else [])
    for p, _, _ in outs:
        if not os.path.isdir(os.path.dirname(p) or "."):
            raise FileNotFoundError(errno.ENOENT, "no such directory", p)
    tmps = [os.path.join(os.path.dirname(p) or ".", ".%s.tmp%d" % (os.path.basename(p), os.getpid()))
            for p, _, _ in outs]
    try:
        dss = [create(t, scene.w, scene.h, n, g, args, origin) for t, (_, n, g) in zip(tmps, outs)]
        if nb >= 3:
            for i, ci in enumerate((gdal.GCI_RedBand, gdal.GCI_GreenBand, gdal.GCI_BlueBand)):
                dss[0].GetRasterBand(i + 1).SetColorInterpretation(ci)
        scene.prepare()
        rows = max(16, min(256, STRIP_PIXELS // scene.w))
        for y0 in range(0, scene.h, rows):
            sh = min(rows, scene.h - y0)
            img, mask = scene.render(y0, sh)
            q = quantise(img, nb, args.dtype)
            for b in range(nb):
                if dss[0].GetRasterBand(b + 1).WriteArray(q[b], 0, y0) != 0:
                    raise OSError(gdal.GetLastErrorMsg())
            if mask_path and dss[1].GetRasterBand(1).WriteArray(mask, 0, y0) != 0:
                raise OSError(gdal.GetLastErrorMsg())
        for ds in dss:
            if ds.FlushCache() not in (None, 0):
                raise OSError(gdal.GetLastErrorMsg())
        dss = None
        for t, (p, _, _) in zip(tmps, outs):
            os.replace(t, p)
    except BaseException:
        dss = None
        for t in tmps:
            if os.path.exists(t):
                os.unlink(t)
        raise


def write_buildings(scene, path, args, origin):
    """The footprints of scene's buildings (the roof rectangles, without
    their shadows) as a GeoPackage layer 'buildings' in EPSG:4326, written
    under a temporary name and renamed: labels as map data holds them."""
    if not os.path.isdir(os.path.dirname(path) or "."):
        raise FileNotFoundError(errno.ENOENT, "no such directory", path)
    tmp = os.path.join(os.path.dirname(path) or ".", ".%s.tmp%d.gpkg" % (os.path.basename(path), os.getpid()))
    src = osr.SpatialReference()
    src.ImportFromEPSG(args.epsg)
    ll = osr.SpatialReference()
    ll.ImportFromEPSG(4326)
    for s in (src, ll):
        s.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    ct = osr.CoordinateTransformation(src, ll)
    # The GeoPackage stores the time of writing (gpkg_contents.last_change):
    # a fixed one keeps "same arguments, same bytes" (OGR_CURRENT_DATE, the
    # GPKG driver's option for it; one the caller set is kept).
    date = gdal.GetConfigOption("OGR_CURRENT_DATE")
    if date is None:
        gdal.SetConfigOption("OGR_CURRENT_DATE", "2000-01-01T00:00:00.000Z")
    try:
        ds = gdal.GetDriverByName("GPKG").Create(tmp, 0, 0, 0, gdal.GDT_Unknown)
        lay = ds.CreateLayer("buildings", ll, ogr.wkbPolygon)
        lay.CreateField(ogr.FieldDefn("building", ogr.OFTString))
        lay.StartTransaction()
        for cx, cy, a, hb, ang, _, flat in scene.buildings:
            ca, sa = math.cos(ang), math.sin(ang)
            ring = ogr.Geometry(ogr.wkbLinearRing)
            for lx, ly in ((-a, -hb), (a, -hb), (a, hb), (-a, hb), (-a, -hb)):
                px, py = cx + lx * ca - ly * sa, cy + lx * sa + ly * ca
                ring.AddPoint_2D(origin[0] + px * args.res, origin[1] - py * args.res)
            g = ogr.Geometry(ogr.wkbPolygon)
            g.AddGeometry(ring)
            g.Transform(ct)
            f = ogr.Feature(lay.GetLayerDefn())
            f.SetField("building", "commercial" if flat else "house")
            f.SetGeometry(g)
            lay.CreateFeature(f)
        lay.CommitTransaction()
        ds = lay = None
        os.replace(tmp, path)
    except BaseException:
        ds = lay = None
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        gdal.SetConfigOption("OGR_CURRENT_DATE", date)


def scene_tiles(args, origin):
    os.makedirs(args.scene_tiles, exist_ok=True)
    digits = len(str(max(args.count - 1, 0)))
    rng = np.random.default_rng([args.seed, 2])
    classes = rng.permutation(np.arange(args.count) % len(CLASSES))
    lines = []
    for i, cls in enumerate(classes):
        name = "%s_%0*d.tif" % (SHORT[cls], digits, i)
        scene = Scene(args.size, args.height or args.size, int(hash_u64(args.seed, i, 0x711E)))
        scene.populate_tile(int(cls))
        ox = origin[0] + i * scene.w * args.res
        write_scene(scene, os.path.join(args.scene_tiles, name), None, args, (ox, origin[1]))
        lines.append("%s %d\n" % (name, cls))
    tmp = os.path.join(args.scene_tiles, ".list.txt.tmp%d" % os.getpid())
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, os.path.join(args.scene_tiles, "list.txt"))


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s OUT.tif --size N [--height H] --seed S [--mask MASK.tif]\n"
              "           [--buildings OUT.gpkg] [--bands 1|3|4] [--dtype u8|u16] [--epsg E]\n"
              "           [--origin X,Y] [--res R] [--tiled] [--compress]\n"
              "       %(prog)s --scene-tiles DIR --count N [--size 64] --seed S [options]",
        description=__doc__.split("\n\n")[1],
        epilog="The road mask is u8, 1 = road and 0 = background, with the image's size,\n"
               "geotransform and CRS. It marks the road surface wherever it is, also under\n"
               "tree canopies that hide it in the image, as masks rasterised from map data\n"
               "(OSM) do. Bands: 1 = gray, 3 = RGB, 4 = RGB + near infrared. u16 samples\n"
               "use the full range 0-65535.\n\n"
               "--scene-tiles writes COUNT tiles DIR/CLASS_I.tif, balanced over the classes\n"
               "0 residential, 1 road, 2 green, 3 lake, 4 land, and DIR/list.txt with one\n"
               "line 'FILE CLASS' per tile (FILE relative to DIR), the input of\n"
               "'cdp-lmdbpack --list'. Exit status: 0 ok, 1 failure, 2 usage error.")
    p.add_argument("out", nargs="?", metavar="OUT.tif", help="output GeoTIFF")
    p.add_argument("--size", type=int, help="width in pixels (and height unless --height)")
    p.add_argument("--height", type=int, help="height in pixels")
    p.add_argument("--seed", type=int, required=True, help="random seed (0 .. 2^63-1)")
    p.add_argument("--mask", metavar="MASK.tif", help="also write the road mask here")
    p.add_argument("--buildings", metavar="OUT.gpkg",
                   help="also write the building footprints here, as EPSG:4326 polygons with a "
                        "field building ('house' or 'commercial')")
    p.add_argument("--bands", type=int, default=3, choices=(1, 3, 4), help="bands (default 3)")
    p.add_argument("--dtype", default="u8", choices=("u8", "u16"), help="sample type (default u8)")
    p.add_argument("--epsg", type=int, default=32633, help="projected CRS (default 32633, UTM 33N)")
    p.add_argument("--origin", default="500000,5800000", metavar="X,Y",
                   help="upper-left corner in CRS units (default 500000,5800000)")
    p.add_argument("--res", type=float, default=0.5, help="pixel size in CRS units (default 0.5)")
    p.add_argument("--tiled", action="store_true", help="write a tiled GeoTIFF (256x256 blocks)")
    p.add_argument("--compress", action="store_true", help="DEFLATE compression with predictor")
    p.add_argument("--scene-tiles", metavar="DIR", help="write classification tiles into DIR")
    p.add_argument("--count", type=int, help="number of scene tiles")
    a = p.parse_args(argv)
    if a.scene_tiles is None:
        if a.out is None or a.size is None:
            p.error("OUT.tif and --size are required")
        if a.count is not None:
            p.error("--count needs --scene-tiles")
    else:
        if a.out is not None or a.mask is not None or a.buildings is not None:
            p.error("--scene-tiles takes no OUT.tif, no --mask and no --buildings")
        if a.count is None or a.count < 1:
            p.error("--scene-tiles needs --count N with N >= 1")
        if a.size is None:
            a.size = 64
    if a.size < 1 or a.size > 1 << 20 or (a.height is not None and not 1 <= a.height <= 1 << 20):
        p.error("--size and --height must be in 1..1048576")
    if not 0 <= a.seed < 1 << 63:
        p.error("--seed must be in 0..2^63-1")
    if not (a.res > 0 and math.isfinite(a.res)):
        p.error("--res must be a positive number")
    try:
        origin = tuple(float(v) for v in a.origin.split(","))
        if len(origin) != 2 or not all(math.isfinite(v) for v in origin):
            raise ValueError
    except ValueError:
        p.error("--origin must be X,Y (two numbers)")
    if osr.SpatialReference().ImportFromEPSG(a.epsg) != 0:
        p.error("--epsg %d is not a known EPSG code" % a.epsg)
    return a, origin


def main(argv):
    # A kill must still remove the temporary files: make it an exception.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    gdal.UseExceptions()
    # GDAL's block cache would otherwise grow to 5% of RAM with written strips.
    gdal.SetCacheMax(64 << 20)
    args, origin = parse_args(argv)
    what = args.scene_tiles or args.out
    try:
        if args.scene_tiles:
            scene_tiles(args, origin)
        else:
            scene = Scene(args.size, args.height or args.size, args.seed)
            scene.populate()
            write_scene(scene, args.out, args.mask, args, origin)
            if args.buildings:
                what = args.buildings
                write_buildings(scene, args.buildings, args, origin)
    except (OSError, RuntimeError) as e:
        why = getattr(e, "strerror", None) or str(e).strip() or type(e).__name__
        what = getattr(e, "filename", None) or what
        sys.stderr.write("%s: cannot write '%s': %s\n" % (PROG, what, why))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
