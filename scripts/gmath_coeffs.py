#!/usr/bin/env python3
"""Derives the polynomial coefficients of src/core/gmath.h (mpmath Chebyshev
fits, rounded to float32, printed as exact hex literals). Re-run only to
change gmath.h; the golden functions are defined by the printed constants,
not by this script."""
import re
import struct
import mpmath as mp

mp.mp.dps = 40

def f32(x):
    return struct.unpack('f', struct.pack('f', float(x)))[0]

def fit(name, f, a, b, n):
    c, err = mp.chebyfit(f, [a, b], n, error=True)
    print('/* %s: degree %d on [%s, %s], fit error %.2e */' % (name, n - 1, mp.nstr(a, 6), mp.nstr(b, 6), err))
    print('  ' + ', '.join(re.sub(r'\.?0+p', 'p', float.hex(f32(x))) + 'f' for x in c))

def safe(g, at0):
    return lambda t: at0 if t == 0 else g(t)

# exp(r) = 1 + r + r^2 P(r), |r| <= 0.36
fit('exp P', safe(lambda r: (mp.exp(r) - 1 - r) / r**2, mp.mpf(1) / 2), -0.36, 0.36, 6)
# log(1+f) = f - f^2/2 + f^3 Q(f), f in [sqrt(1/2)-1, sqrt(2)-1]
fit('log Q', safe(lambda f: (mp.log1p(f) - f + f**2 / 2) / f**3, mp.mpf(1) / 3), mp.sqrt(0.5) - 1 - 0.001, mp.sqrt(2) - 1 + 0.001, 9)
# sinpi(f) = f S(f^2), cospi(f) = 1 + t C(t), t = f^2 <= 1/16
fit('sinpi S', lambda t: mp.pi if t == 0 else mp.sin(mp.pi * mp.sqrt(t)) / mp.sqrt(t), 0, 0.0625, 5)
fit('cospi C', lambda t: -mp.pi**2 / 2 if t == 0 else (mp.cos(mp.pi * mp.sqrt(t)) - 1) / t, 0, 0.0625, 5)
# tanh(x) = x + x t T(t), t = x^2, |x| < 0.625
fit('tanh T', lambda t: mp.mpf(-1) / 3 if t == 0 else (mp.tanh(mp.sqrt(t)) / mp.sqrt(t) - 1) / t, 0, 0.625**2, 7)
# erf(x) = x E(t), t = x^2, |x| < 1
fit('erf E', lambda t: 2 / mp.sqrt(mp.pi) if t == 0 else mp.erf(mp.sqrt(t)) / mp.sqrt(t), 0, 1, 9)
# erfc(x) = exp(-x^2) G(x - 2.5), 1 <= x <= 4
fit('erfc G', lambda u: mp.erfc(u + 2.5) * mp.exp((u + 2.5)**2), -1.5, 1.5, 14)
print('ln2 hi/lo', float.hex(f32(mp.log(2))), float.hex(f32(mp.log(2) - f32(mp.log(2)))))
print('log2e', float.hex(f32(1 / mp.log(2))))
print('sqrt(2/pi)*2', float.hex(f32(2 * mp.sqrt(2 / mp.pi))))
