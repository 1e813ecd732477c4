#include "model/unicode.hpp"

#include "core/error.hpp"
#include "model/unicode_tables.hpp"

#include <algorithm>
#include <span>

namespace optkit::model {

namespace {

namespace ud = unicode_data;

// Hangul syllables compose and decompose algorithmically (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

bool
in_ranges(std::span<const ud::CodeRange> ranges, char32_t code) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), code,
                                   [](char32_t c, const ud::CodeRange& r) { return c < r.first; });
  return it != ranges.begin() && code <= std::prev(it)->last;
}

std::uint8_t
combining_class(char32_t code) {
  const std::span table(ud::combining_classes, ud::combining_classes_count);
  const auto it = std::lower_bound(table.begin(), table.end(), code,
                                   [](const ud::CombiningClass& e, char32_t c) { return e.code < c; });
  return it != table.end() && it->code == code ? it->value : 0;
}

const ud::Decomposition*
find_decomposition(char32_t code) {
  const std::span table(ud::decompositions, ud::decompositions_count);
  const auto it = std::lower_bound(table.begin(), table.end(), code,
                                   [](const ud::Decomposition& e, char32_t c) { return e.code < c; });
  return it != table.end() && it->code == code ? &*it : nullptr;
}

const ud::CompatDecomposition*
find_compat_decomposition(char32_t code) {
  const std::span table(ud::compat_decompositions, ud::compat_decompositions_count);
  const auto it = std::lower_bound(table.begin(), table.end(), code,
                                   [](const ud::CompatDecomposition& e, char32_t c) { return e.code < c; });
  return it != table.end() && it->code == code ? &*it : nullptr;
}

void
decompose(char32_t code, std::u32string& out) {
  if (code >= kSBase && code < kSBase + kSCount) {
    const char32_t s = code - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount)
      out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const auto* d = find_decomposition(code)) {
    decompose(d->first, out);
    if (d->second)
      decompose(d->second, out);
    return;
  }
  out.push_back(code);
}

char32_t
compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  const std::span table(ud::compositions, ud::compositions_count);
  const auto it = std::lower_bound(table.begin(), table.end(), std::pair{first, second},
                                   [](const ud::Composition& e, const std::pair<char32_t, char32_t>& key) {
                                     return std::pair{e.first, e.second} < key;
                                   });
  return it != table.end() && it->first == first && it->second == second ? it->composite : 0;
}

} // namespace

std::u32string
decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    char32_t code = 0, minimum = 0;
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    } else if ((b0 & 0xe0) == 0xc0) {
      length = 2, code = b0 & 0x1f, minimum = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      length = 3, code = b0 & 0x0f, minimum = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      length = 4, code = b0 & 0x07, minimum = 0x10000;
    }
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      valid = (b & 0xc0) == 0x80;
      code = (code << 6) | (b & 0x3f);
    }
    if (!valid || code < minimum || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
      throw InputError("text is not valid UTF-8 at byte " + std::to_string(i));
    out.push_back(code);
    i += length;
  }
  return out;
}

void
append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else if (code < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (code >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (code >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
  }
}

std::string
encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text)
    append_utf8(out, c);
  return out;
}

std::string
repair_utf8(std::string_view bytes) {
  // Each maximal subpart of an ill-formed sequence becomes one U+FFFD (Unicode §3.9, what
  // WHATWG's TextDecoder and Rust's from_utf8_lossy do).
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    if (b0 < 0x80) {
      out.push_back(static_cast<char>(b0));
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xbf; // allowed range of the second byte
    if (b0 >= 0xc2 && b0 <= 0xdf)
      length = 2;
    else if (b0 >= 0xe0 && b0 <= 0xef)
      length = 3, low = b0 == 0xe0 ? 0xa0 : 0x80, high = b0 == 0xed ? 0x9f : 0xbf;
    else if (b0 >= 0xf0 && b0 <= 0xf4)
      length = 4, low = b0 == 0xf0 ? 0x90 : 0x80, high = b0 == 0xf4 ? 0x8f : 0xbf;
    std::size_t valid = 1;
    while (length > 0 && valid < length && i + valid < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + valid]);
      const bool ok = valid == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xbf);
      if (!ok)
        break;
      ++valid;
    }
    if (length > 0 && valid == length) {
      out.append(bytes.substr(i, length));
    } else {
      append_utf8(out, 0xfffd);
    }
    i += valid;
  }
  return out;
}

bool
is_letter(char32_t code) {
  if (code < 0x80)
    return (code >= 'a' && code <= 'z') || (code >= 'A' && code <= 'Z');
  return in_ranges({ud::letters, ud::letters_count}, code);
}

bool
is_number(char32_t code) {
  if (code < 0x80)
    return code >= '0' && code <= '9';
  return in_ranges({ud::numbers, ud::numbers_count}, code);
}

bool
is_whitespace(char32_t code) {
  switch (code) {
  case 0x09:
  case 0x0a:
  case 0x0b:
  case 0x0c:
  case 0x0d:
  case 0x20:
  case 0x85:
  case 0xa0:
  case 0x1680:
  case 0x2028:
  case 0x2029:
  case 0x202f:
  case 0x205f:
  case 0x3000:
    return true;
  default:
    return code >= 0x2000 && code <= 0x200a;
  }
}

namespace {

// Full decomposition (canonical, or compatibility too) followed by canonical ordering.
std::u32string
decompose_and_order(std::u32string_view text, bool compatibility) {
  std::u32string decomposed;
  decomposed.reserve(text.size());
  for (const char32_t c : text) {
    if (compatibility)
      if (const auto* d = find_compat_decomposition(c)) {
        decomposed.append(ud::compat_expansions + d->offset, d->length);
        continue;
      }
    decompose(c, decomposed);
  }
  // canonical ordering: stable sort of each run of non-starters by combining class
  for (std::size_t i = 0; i < decomposed.size();) {
    if (combining_class(decomposed[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < decomposed.size() && combining_class(decomposed[j]) != 0)
      ++j;
    std::stable_sort(decomposed.begin() + static_cast<std::ptrdiff_t>(i),
                     decomposed.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return decomposed;
}

std::u32string
compose(const std::u32string& decomposed) {
  std::u32string out;
  std::size_t starter = std::u32string::npos;
  int last_class = -1;
  for (const char32_t c : decomposed) {
    const int cls = combining_class(c);
    if (starter != std::u32string::npos && (last_class < cls || (last_class == 0 && out.size() == starter + 1))) {
      if (const char32_t composite = compose_pair(out[starter], c)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      last_class = -1;
    } else {
      last_class = cls;
    }
    out.push_back(c);
    if (cls == 0)
      last_class = 0;
  }
  return out;
}

bool
all_ascii(std::u32string_view text) {
  return std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; });
}

} // namespace

std::u32string
to_nfc(std::u32string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x300; }))
    return std::u32string(text); // nothing below U+0300 decomposes or combines
  return compose(decompose_and_order(text, false));
}

std::u32string
to_nfd(std::u32string_view text) {
  if (all_ascii(text))
    return std::u32string(text);
  return decompose_and_order(text, false);
}

std::u32string
to_nfkc(std::u32string_view text) {
  if (all_ascii(text))
    return std::u32string(text);
  return compose(decompose_and_order(text, true));
}

std::u32string
to_nfkd(std::u32string_view text) {
  if (all_ascii(text))
    return std::u32string(text);
  return decompose_and_order(text, true);
}

bool
is_punctuation(char32_t code) {
  return in_ranges({ud::punctuation, ud::punctuation_count}, code);
}

bool
is_mark(char32_t code) {
  return in_ranges({ud::marks, ud::marks_count}, code);
}

bool
is_nonspacing_mark(char32_t code) {
  return in_ranges({ud::nonspacing_marks, ud::nonspacing_marks_count}, code);
}

bool
is_other(char32_t code) {
  return in_ranges({ud::others, ud::others_count}, code);
}

void
append_lowercase(char32_t code, std::u32string& out) {
  if (code < 0x80) {
    out.push_back(code >= 'A' && code <= 'Z' ? code + 32 : code);
    return;
  }
  const std::span table(ud::lowercase, ud::lowercase_count);
  const auto it = std::lower_bound(table.begin(), table.end(), code,
                                   [](const ud::CaseMapping& e, char32_t c) { return e.code < c; });
  if (it == table.end() || it->code != code) {
    out.push_back(code);
    return;
  }
  out.push_back(it->first);
  if (it->second)
    out.push_back(it->second);
}

} // namespace optkit::model
