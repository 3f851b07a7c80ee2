#include "engine/data/instance_filter.h"

#include <algorithm>

namespace lathe::data {

namespace {

// Visits every repetition, period by period, until `visit` returns false.
template <class F>
void for_each_repetition(const int64_t* ids, int64_t n, int64_t max_period, int64_t min_period,
                         F&& visit) {
    // OLMo-core pads the array with -1 (its mask value) to whole rows of `period` tokens: a full
    // row of padding when n is already a multiple. Row r is compared with row r - 1, and row 0
    // with the last row (np.roll).
    const int64_t top = std::min(max_period, n / 3);
    for (int64_t p = std::max<int64_t>(min_period, 1); p <= top; ++p) {
        const int64_t rows = (n + p - (n % p)) / p;
        auto at = [&](int64_t r, int64_t c) {
            const int64_t i = r * p + c;
            return i < n ? ids[i] : int64_t{-1};
        };
        auto eq = [&](int64_t r, int64_t c) { return at(r, c) == at((r + rows - 1) % rows, c); };
        auto all_eq = [&](int64_t r) {
            for (int64_t c = 0; c < p; ++c)
                if (!eq(r, c)) return false;
            return true;
        };
        for (int64_t r = 0; r < rows;) {
            if (!all_eq(r)) {
                ++r;
                continue;
            }
            const int64_t first = r;
            while (r + 1 < rows && all_eq(r + 1)) ++r;
            const int64_t last = r++;
            // The run reaches back into row first - 1 by the trailing equal tokens of that row's
            // comparison (0 when the whole row is equal, as find_start_last_consecutive_true
            // gives 0 there), and forward by the leading equal tokens of row last + 1's.
            const int64_t before = (first + rows - 1) % rows;
            int64_t trailing = 0;
            while (trailing < p && eq(before, p - 1 - trailing)) ++trailing;
            const int64_t start_offset = trailing < p ? trailing : 0;
            const int64_t after = (last + 1) % rows;
            int64_t leading = 0;
            while (leading < p && eq(after, leading)) ++leading;
            Repetition rep;
            rep.start = (first - 1) * p - start_offset;
            rep.end = (last + 1) * p + leading;
            rep.period = p;
            rep.times = (rep.end - rep.start) / p;
            if (rep.times > 2 && !visit(rep)) return;
        }
    }
}

}  // namespace

std::vector<Repetition> find_periodic_sequences(const int64_t* ids, int64_t n, int64_t max_period,
                                                int64_t min_period) {
    std::vector<Repetition> out;
    for_each_repetition(ids, n, max_period, min_period, [&](const Repetition& r) {
        out.push_back(r);
        return true;
    });
    return out;
}

bool passes_instance_filter(const int64_t* ids, int64_t n, const config::InstanceFilterConfig& f) {
    bool pass = true;
    for_each_repetition(ids, n, f.repetition_max_period, f.repetition_min_period,
                        [&](const Repetition& r) {
                            pass = r.times < f.repetition_max_count;
                            return pass;
                        });
    return pass;
}

}  // namespace lathe::data
