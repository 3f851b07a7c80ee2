// CRC-32C (Castagnoli): the checksum of Lathe tensor files and of TFRecord framing (TensorBoard),
// with TensorFlow's mask. The one implementation in the tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lathe::run_folder {

/// CRC-32C (reflected polynomial 0x82F63B78), table-driven. `crc` continues an earlier value, so
/// crc32c(b, crc32c(a)) == crc32c(a + b). crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);
inline std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0) {
    return crc32c(data.data(), data.size(), crc);
}

/// TensorFlow's masked CRC: ((c >> 15) | (c << 17)) + 0xA282EAD8. Stored CRCs are masked because
/// a CRC of data that itself contains CRCs is weak.
constexpr std::uint32_t mask_crc(std::uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}
constexpr std::uint32_t unmask_crc(std::uint32_t masked) {
    std::uint32_t rot = masked - 0xA282EAD8u;
    return (rot >> 17) | (rot << 15);
}

}  // namespace lathe::run_folder
