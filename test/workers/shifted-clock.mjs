// Preloaded (`node --import`) into a worker whose host clock is wrong: moves
// Date.now() and performance.timeOrigin by RWLOCK_CLOCK_SHIFT_MS, as a host
// whose wall clock runs ahead (or, negative, behind) would.
const shift = Number(process.env.RWLOCK_CLOCK_SHIFT_MS ?? 0);
const realNow = Date.now;
Date.now = () => realNow() + shift;
const origin = performance.timeOrigin + shift;
Object.defineProperty(performance, 'timeOrigin', { get: () => origin });
