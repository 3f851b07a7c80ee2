// Bit-exact reimplementation of the numpy code path behind
//     rng = numpy.random.Generator(numpy.random.PCG64(seed)); rng.shuffle(arr)
// for a non-negative integer seed < 2**64 and a 1-D array, so that data order can match
// OLMo-core's NumpyFSLDataLoader (get_rng(seed + epoch) then rng.shuffle(indices)).
// Sources (numpy/random): bit_generator.pyx (SeedSequence), _pcg64.pyx (PCG64.__init__),
// src/pcg64/pcg64.h (XSL-RR 128/64 step, output, next32 buffering), _generator.pyx
// (Generator.shuffle -> _shuffle_raw) and src/distributions/distributions.c (random_interval).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace lathe::data {

namespace numpy_detail {

// SeedSequence constants (bit_generator.pyx). XSHIFT = 32 / 2.
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr unsigned kXShift = 16;
constexpr int kPoolSize = 4;  // DEFAULT_POOL_SIZE

inline uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    value ^= value >> kXShift;
    return value;
}

inline uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = kMixMultL * x - kMixMultR * y;
    result ^= result >> kXShift;
    return result;
}

/// SeedSequence(seed).generate_state(4, np.uint64): the int seed becomes little-endian uint32
/// words (_int_to_uint32_array: 0 -> [0], so 1 word below 2**32, else 2; no spawn key), is mixed
/// into a 4-word pool (mix_entropy), and 8 uint32 words are drawn cycling over the pool and paired
/// little-endian into 4 uint64 words.
inline void seed_sequence_state(uint64_t seed, uint64_t out[4]) {
    uint32_t entropy[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    const int n_entropy = (seed >> 32) != 0 ? 2 : 1;

    uint32_t pool[kPoolSize];
    uint32_t hash_const = kInitA;
    for (int i = 0; i < kPoolSize; ++i)
        pool[i] = hashmix(i < n_entropy ? entropy[i] : 0u, hash_const);
    for (int src = 0; src < kPoolSize; ++src)
        for (int dst = 0; dst < kPoolSize; ++dst)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
    // Entropy beyond the pool size (never for a uint64 seed) would be mixed in here.

    uint32_t words[8];
    uint32_t hc = kInitB;
    for (int i = 0; i < 8; ++i) {
        uint32_t v = pool[i % kPoolSize];
        v ^= hc;
        hc *= kMultB;
        v *= hc;
        v ^= v >> kXShift;
        words[i] = v;
    }
    for (int i = 0; i < 4; ++i)
        out[i] =
            static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
}

}  // namespace numpy_detail

/// numpy.random.PCG64(seed) (PCG XSL-RR 128/64 with numpy's default multiplier), including the
/// bitgen's next_uint32 buffering, plus Generator's random_interval.
class NumpyPcg64 {
public:
    explicit NumpyPcg64(uint64_t seed) {
        // PCG64.__init__: val = generate_state(4, uint64);
        // pcg64_set_seed(state = val[0]:val[1], inc = val[2]:val[3]) (high:low).
        uint64_t val[4];
        numpy_detail::seed_sequence_state(seed, val);
        const u128 initstate = (static_cast<u128>(val[0]) << 64) | val[1];
        const u128 initseq = (static_cast<u128>(val[2]) << 64) | val[3];
        // pcg_setseq_128_srandom_r.
        state_ = 0;
        inc_ = (initseq << 1) | 1;
        step();
        state_ += initstate;
        step();
    }

    /// pcg64_next64: step, then XSL-RR output of the new state.
    uint64_t next_uint64() {
        step();
        const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
        const unsigned rot = static_cast<unsigned>(state_ >> 122);
        return (x >> rot) | (x << ((0u - rot) & 63u));
    }

    /// pcg64_next32: returns the low half of a fresh 64-bit output and keeps the high half for
    /// the next call.
    uint32_t next_uint32() {
        if (has_uint32_) {
            has_uint32_ = false;
            return uinteger_;
        }
        const uint64_t next = next_uint64();
        has_uint32_ = true;
        uinteger_ = static_cast<uint32_t>(next >> 32);
        return static_cast<uint32_t>(next & 0xffffffffu);
    }

    /// random_interval (distributions.c): uniform in [0, max] by masked rejection, drawing
    /// next_uint32 when max <= 0xffffffff, else next_uint64.
    uint64_t random_interval(uint64_t max) {
        if (max == 0) return 0;
        uint64_t mask = max;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        mask |= mask >> 32;
        uint64_t value;
        if (max <= 0xffffffffu) {
            while ((value = (next_uint32() & mask)) > max) {
            }
        } else {
            while ((value = (next_uint64() & mask)) > max) {
            }
        }
        return value;
    }

private:
    __extension__ using u128 = unsigned __int128;  // __extension__: silence -Wpedantic
    // PCG_DEFAULT_MULTIPLIER_HIGH:LOW.
    static constexpr u128 kMultiplier =
        (static_cast<u128>(2549297995355413924ull) << 64) | 4865540595714422341ull;

    void step() { state_ = state_ * kMultiplier + inc_; }

    u128 state_ = 0;
    u128 inc_ = 0;
    bool has_uint32_ = false;
    uint32_t uinteger_ = 0;
};

/// Generator.shuffle on a 1-D array (_shuffle_raw with first = 1): for i = n-1 down to 1,
/// swap v[i] with v[random_interval(i)].
template <class T>
void numpy_shuffle(std::vector<T>& v, NumpyPcg64& rng) {
    for (size_t i = v.size(); i-- > 1;) {
        const size_t j = static_cast<size_t>(rng.random_interval(i));
        std::swap(v[i], v[j]);
    }
}

/// rng = Generator(PCG64(seed)); a = arange(n, dtype=uint32); rng.shuffle(a); return a.
inline std::vector<uint32_t> numpy_permutation_u32(uint64_t seed, size_t n) {
    std::vector<uint32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i);
    NumpyPcg64 rng(seed);
    numpy_shuffle(v, rng);
    return v;
}

}  // namespace lathe::data
