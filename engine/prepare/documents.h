// Reading documents for prepare-data and tokenizer training: UTF-8 text files and folders (a file
// is one document) and JSONL files (one document per line, from a string field), each optionally
// gzip- (.gz) or zstd- (.zst) compressed. Invalid UTF-8 is replaced by U+FFFD and reported with
// the file and the byte offset (in the decompressed stream), never dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lathe::prepare {

enum class SourceFormat { text, jsonl };
enum class Compression { none, gzip, zstd };

struct SourceFile {
    std::string path;
    uint64_t bytes = 0;  ///< on disk
    int64_t mtime_ns = 0;
    SourceFormat format = SourceFormat::text;
    Compression compression = Compression::none;
};

/// Expands files and folders (recursively, sorted by path, hidden names skipped) into source
/// files. *.jsonl and *.json (with .gz or .zst after) are JSONL, everything else text. Throws
/// lathe::Error naming the path for a missing path, an empty folder or an unreadable file.
std::vector<SourceFile> list_sources(const std::vector<std::string>& paths);

/// A stream of decompressed bytes from one file.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    /// Reads up to `n` bytes; 0 at the end. Throws lathe::Error naming the file for a read error
    /// or corrupt compressed data.
    virtual std::size_t read(char* out, std::size_t n) = 0;
    /// Bytes of the file consumed so far (compressed bytes for a compressed file).
    virtual uint64_t consumed() const = 0;
};
std::unique_ptr<ByteSource> open_source(const SourceFile& file);

struct Utf8Problem {
    std::string file;
    uint64_t offset = 0;  ///< byte offset in the (decompressed) file; a summary's first place
    uint64_t count = 1;   ///< places: 1 for one place, all of the file's for a file's summary
};

/// "FILE: invalid UTF-8 at N places, the first at byte B (replaced with U+FFFD)", for a warning.
std::string describe_utf8_problem(const Utf8Problem& problem);

struct Document {
    std::string text;        ///< the text; for a JSON field (FieldKind::json), the value as JSON
    std::size_t source = 0;  ///< index into the source list
    uint64_t index = 0;      ///< the document's number within its source file (empty ones counted)
    uint64_t line = 0;       ///< its line in a JSONL file (1-based); 0 for a text file
    /// For a JSON field: the line's top-level `tools` and `documents` as a JSON object (those
    /// present, keys in the line's order), which a chat template is handed beside `messages`,
    /// as transformers' apply_chat_template(tools=..., documents=...) does; "" when neither.
    std::string context;
};

/// What a JSONL line's field holds: a string (text), or any JSON value (a chat's `messages`),
/// which the reader hands on as JSON text with its objects' keys in the line's order.
enum class FieldKind { string, json };

/// Reads the documents of `sources` in order. Empty documents are skipped (they would be a lone
/// EOS), and numbered (Document::index) so positions stay stable.
class DocumentReader {
public:
    explicit DocumentReader(std::vector<SourceFile> sources, std::string field = "text",
                            FieldKind kind = FieldKind::string);
    ~DocumentReader();
    /// The next document; false after the last. Throws lathe::Error "file:line: reason" for a
    /// JSONL line that is not a JSON object with a string `field` (any `field`, for
    /// FieldKind::json). A text file is read as JSONL when the kind is FieldKind::json.
    bool next(Document& doc);
    /// Bytes of the source files consumed so far (compressed where compressed).
    uint64_t bytes_consumed() const;
    uint64_t bytes_total() const { return bytes_total_; }
    /// Bytes of text read so far (decompressed).
    uint64_t text_bytes() const { return text_bytes_; }
    const std::vector<SourceFile>& sources() const { return sources_; }
    /// Documents returned per source so far (empty ones are skipped, and not counted).
    const std::vector<uint64_t>& documents_per_source() const { return docs_per_source_; }
    /// The first `kMaxProblems` invalid UTF-8 places, and how many there were in all.
    const std::vector<Utf8Problem>& utf8_problems() const { return problems_; }
    uint64_t utf8_problem_count() const { return problem_count_; }
    static constexpr std::size_t kMaxProblems = 100;
    /// Called once for each file that held invalid UTF-8, when the file has been read, with its
    /// first place and its count (for warnings: one line per file, where a file of binary data
    /// held hundreds of thousands of places).
    std::function<void(const Utf8Problem&)> on_problem;

private:
    bool open_next_source();
    bool read_line(std::string& line);
    std::string repair(std::string_view text, uint64_t base_offset);

    std::vector<SourceFile> sources_;
    std::string field_;
    FieldKind kind_ = FieldKind::string;
    std::size_t current_ = 0;
    bool opened_ = false;
    std::unique_ptr<ByteSource> stream_;
    std::string buffer_;
    std::size_t buffer_pos_ = 0;
    uint64_t stream_offset_ = 0;  ///< decompressed offset of buffer_[buffer_pos_]
    uint64_t line_number_ = 0;
    uint64_t done_bytes_ = 0;  ///< on-disk bytes of finished sources
    uint64_t bytes_total_ = 0;
    uint64_t text_bytes_ = 0;
    std::vector<uint64_t> docs_per_source_;
    uint64_t next_index_ = 0;  ///< documents of the current source so far, empty ones included
    std::vector<Utf8Problem> problems_;
    uint64_t problem_count_ = 0;
    Utf8Problem file_problems_{{}, 0, 0};  ///< the current source's, count 0 while it has none
};

/// Splits a document into the non-empty lines SentencePiece trains on.
void split_lines(const std::string& text, std::vector<std::string>& out);

}  // namespace lathe::prepare
