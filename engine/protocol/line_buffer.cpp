#include "engine/protocol/line_buffer.h"

namespace lathe::protocol {

std::vector<LineBuffer::Item> LineBuffer::feed(std::string_view bytes) {
    std::vector<Item> out;
    while (!bytes.empty()) {
        const std::size_t nl = bytes.find('\n');
        const std::string_view chunk = bytes.substr(0, nl);
        if (discarding_) {
            discarded_ += chunk.size();
        } else if (buffer_.size() + chunk.size() > max_) {
            discarding_ = true;
            discarded_ = buffer_.size() + chunk.size();
            std::string().swap(buffer_);  // give the memory back
        } else {
            buffer_.append(chunk);
        }
        if (nl == std::string_view::npos) break;
        bytes.remove_prefix(nl + 1);
        if (discarding_) {
            ++dropped_;
            out.emplace_back(DecodeError{"dropped a line of " + std::to_string(discarded_) +
                                         " bytes (limit " + std::to_string(max_) + ")"});
            discarding_ = false;
            discarded_ = 0;
            continue;
        }
        if (!buffer_.empty() && buffer_.back() == '\r') buffer_.pop_back();
        if (!buffer_.empty()) out.emplace_back(std::move(buffer_));
        buffer_.clear();
    }
    return out;
}

}  // namespace lathe::protocol
