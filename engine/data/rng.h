// A small, portable, seedable RNG (SplitMix64) so data order and the built-in corpus are the same on
// every platform and LibTorch version.
#pragma once

#include <cstdint>

namespace lathe::data {

class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n) without modulo bias (Lemire's method with rejection).
    uint64_t below(uint64_t n) {
        uint64_t threshold = (0 - n) % n;
        while (true) {
            uint64_t r = next();
            __uint128_t m = static_cast<__uint128_t>(r) * n;
            if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
        }
    }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

private:
    uint64_t state_;
};

}  // namespace lathe::data
