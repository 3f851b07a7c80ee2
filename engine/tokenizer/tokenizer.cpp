// load_tokenizer(): reads a tokenizer file and tells its kind by content.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/kinds.h"
#include "engine/util/error.h"
#include "engine/util/hash.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lathe::tokenizer {

namespace {

std::string read_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(path + ": is a folder, not a tokenizer file");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(path + ": cannot open: " + std::strerror(errno));
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

std::string file_id_of(const std::string& bytes) {
    return "fnv1a64:" + fnv1a_hex(bytes);
}

std::string tokenizer_file_id(const std::string& path) {
    return file_id_of(read_file(path));
}

std::string canonical_file_name(std::string_view bytes) {
    // A tokenizer.json is a JSON object; a SentencePiece model is a protobuf (binary).
    const auto first = bytes.find_first_not_of(" \t\r\n");
    return first != std::string_view::npos && bytes[first] == '{' ? "tokenizer.json"
                                                                  : "tokenizer.model";
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
    const std::string bytes = read_file(path);
    if (bytes.empty()) throw Error(path + ": empty, not a tokenizer file");
    if (canonical_file_name(bytes) == "tokenizer.json") return make_hf_bpe(path, bytes);
    return make_sentencepiece(path, bytes);
}

std::string find_tokenizer_file(const std::string& folder) {
    for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
        const auto p = std::filesystem::path(folder) / name;
        std::error_code ec;
        if (std::filesystem::is_regular_file(p, ec)) return p.string();
    }
    return "";
}

}  // namespace lathe::tokenizer
