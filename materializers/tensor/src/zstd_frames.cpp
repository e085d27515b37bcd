// zstd frames for chunked payloads (zstd_frames.hpp).

#include "zstd_frames.hpp"

#include <amphora/error.hpp>

// The frame header parser (ZSTD_getFrameHeader) is in zstd's advanced API.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <memory>
#include <string>

namespace amphora::detail {

namespace {

struct CctxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// A chunk is at most 1 MiB, so no frame of ours needs a window over 2^20;
// a reader refuses larger ones rather than allocate for them.
constexpr int kMaxWindowLog = 20;

ZSTD_CCtx* compressor() {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxFree> c(ZSTD_createCCtx());
  if (!c) throw OutOfResources("cannot create a zstd compression context");
  return c.get();
}

ZSTD_DCtx* decompressor() {
  thread_local std::unique_ptr<ZSTD_DCtx, DctxFree> d = [] {
    std::unique_ptr<ZSTD_DCtx, DctxFree> made(ZSTD_createDCtx());
    if (made) ZSTD_DCtx_setParameter(made.get(), ZSTD_d_windowLogMax, kMaxWindowLog);
    return made;
  }();
  if (!d) throw OutOfResources("cannot create a zstd decompression context");
  return d.get();
}

}  // namespace

std::size_t zstd_frame_bound(std::size_t content) { return ZSTD_compressBound(content); }

void encode_zstd_frame(ConstBytes raw, int level, std::vector<std::byte>& out, std::size_t planes) {
  if (level < kMinZstdLevel || level > kMaxZstdLevel)
    throw InvalidArgument("zstd level " + std::to_string(level) + " is outside " + std::to_string(kMinZstdLevel) +
                          ".." + std::to_string(kMaxZstdLevel) + " (zstd's fast negative levels are not offered)");
  if (raw.empty() || raw.size() > kMaxFrameContent)
    throw InvalidArgument("a zstd chunk holds 1 byte to 1 MiB, not " + std::to_string(raw.size()));
  if (planes == 0 || raw.size() % planes != 0)
    throw InvalidArgument("a zstd chunk of " + std::to_string(raw.size()) + " bytes is not " + std::to_string(planes) +
                          " planes of equal size");
  ZSTD_CCtx* c = compressor();
  ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
  auto set = [&](ZSTD_cParameter p, int v) {
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c, p, v))) throw InvalidArgument("zstd refused a parameter");
  };
  set(ZSTD_c_compressionLevel, level);
  set(ZSTD_c_checksumFlag, 1);
  set(ZSTD_c_contentSizeFlag, 1);
  set(ZSTD_c_dictIDFlag, 0);
  set(ZSTD_c_windowLog, kMaxWindowLog);
  if (planes > 1 && level == 1) {
    // In byte planes the matches level 1 finds are mostly a few bytes that
    // repeat by chance in the noisy planes, each costing more than the
    // literals it replaces: a small table that takes only matches of 7
    // bytes or more stored shuffled float32 weights 3.4% smaller (0.90x of
    // shuffle + deflate's bytes), noise and id differences 1.5% smaller,
    // and halved the weights' save time (docs/FORMAT.md §5.7).
    set(ZSTD_c_hashLog, 6);
    set(ZSTD_c_minMatch, 7);
  }
  ZSTD_CCtx_setPledgedSrcSize(c, raw.size());
  out.resize(zstd_frame_bound(raw.size()));
  // With planes > 1 each plane ends a block, so every block's literals (and
  // their Huffman table) come from one plane: a 128 KiB block across two
  // 64 KiB planes of float32 (the mantissa's noise and the exponent's few
  // values) made the weights' 256 KiB chunks 10% larger than the same
  // planes in blocks of their own. One plane is what ZSTD_compress2 does.
  // Every plane's block headers come on top of compressBound's margin, so
  // a frame of many tiny planes may need more room than it gives.
  ZSTD_outBuffer dst{out.data(), out.size(), 0};
  const std::size_t plane = raw.size() / planes;
  for (std::size_t k = 0; k < planes; ++k) {
    ZSTD_inBuffer src{raw.data() + k * plane, plane, 0};
    const ZSTD_EndDirective mode = k + 1 < planes ? ZSTD_e_flush : ZSTD_e_end;
    std::size_t left;
    do {
      if (dst.pos == dst.size) {
        out.resize(2 * out.size());
        dst.dst = out.data();
        dst.size = out.size();
      }
      left = ZSTD_compressStream2(c, &dst, &src, mode);
      if (ZSTD_isError(left)) throw CorruptData(std::string("zstd could not compress a chunk: ") + ZSTD_getErrorName(left));
    } while (left != 0 || src.pos < src.size);
  }
  out.resize(dst.pos);
}

void decode_zstd_frame(ConstBytes frame, MutableBytes dst, std::string_view where) {
  auto bad = [&](const std::string& why) { throw CorruptData(std::string(where) + ": " + why); };
  if (dst.empty() || dst.size() > kMaxFrameContent) bad("chunk of " + std::to_string(dst.size()) + " bytes");
  if (frame.size() < kMinZstdFrame) bad("zstd frame of " + std::to_string(frame.size()) + " bytes is truncated");
  ZSTD_frameHeader header{};
  const std::size_t need = ZSTD_getFrameHeader(&header, frame.data(), frame.size());
  if (ZSTD_isError(need) || need != 0 || header.frameType != ZSTD_frame)
    bad("not a zstd frame (its header is damaged or truncated)");
  if (header.frameContentSize != dst.size())
    bad(header.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN
            ? "zstd frame does not record its content size"
            : "zstd frame announces " + std::to_string(header.frameContentSize) + " bytes, expected " +
                  std::to_string(dst.size()));
  if (header.dictID != 0) bad("zstd frame needs dictionary " + std::to_string(header.dictID) + ", which no chunk uses");
  if (!header.checksumFlag) bad("zstd frame has no checksum");
  if (header.windowSize > (std::uint64_t{1} << kMaxWindowLog))
    bad("zstd frame asks for a window of " + std::to_string(header.windowSize) + " bytes");
  const std::size_t whole = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(whole)) bad("zstd frame is truncated or damaged");
  if (whole != frame.size())
    bad("zstd frame ends after " + std::to_string(whole) + " of the chunk's " + std::to_string(frame.size()) + " bytes");
  const std::size_t got = ZSTD_decompressDCtx(decompressor(), dst.data(), dst.size(), frame.data(), frame.size());
  if (ZSTD_isError(got)) bad(std::string("zstd frame is corrupt (") + ZSTD_getErrorName(got) + ")");
  if (got != dst.size())
    bad("zstd frame decodes to " + std::to_string(got) + " bytes, expected " + std::to_string(dst.size()));
}

}  // namespace amphora::detail
