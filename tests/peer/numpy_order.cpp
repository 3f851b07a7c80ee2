// For check_numpy_order.py: `numpy_order SEED N` prints the data loader's shuffled order of N
// instances for seed + epoch = SEED (engine/data/numpy_rng.h); `numpy_order --raw SEED COUNT`
// prints PCG64's first COUNT raw outputs.
#include "engine/data/numpy_rng.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    const bool raw = argc == 4 && std::strcmp(argv[1], "--raw") == 0;
    if (argc != 3 && !raw) {
        std::fprintf(stderr, "usage: numpy_order SEED N | numpy_order --raw SEED COUNT\n");
        return 2;
    }
    const uint64_t seed = std::stoull(argv[raw ? 2 : 1]);
    const std::size_t n = std::stoull(argv[raw ? 3 : 2]);
    if (raw) {
        lathe::data::NumpyPcg64 rng(seed);
        for (std::size_t i = 0; i < n; ++i)
            std::printf("%llu\n", static_cast<unsigned long long>(rng.next_uint64()));
        return 0;
    }
    for (uint32_t v : lathe::data::numpy_permutation_u32(seed, n)) std::printf("%u\n", v);
    return 0;
}
