// UTF-8 decoding strictness, character classes and NFC (expected strings from Python's
// unicodedata.normalize, written out as code points).
#include "core/error.hpp"
#include "model/unicode.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::model;

TEST_CASE("UTF-8 decoding is strict and encoding inverts it") {
  CHECK(decode_utf8("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80") == U"a\u00e9\u4e2d\U0001F600");
  CHECK(encode_utf8(U"a\u00e9\u4e2d\U0001F600") == "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  CHECK_THROWS_WITH_AS(decode_utf8("ab\xff"), doctest::Contains("byte 2"), InputError);
  CHECK_THROWS_AS(decode_utf8("\xc0\xaf"), InputError);     // overlong '/'
  CHECK_THROWS_AS(decode_utf8("\xed\xa0\x80"), InputError); // surrogate
  CHECK_THROWS_AS(decode_utf8("\xe4\xb8"), InputError);     // truncated
  // a truncated sequence is one maximal subpart: one U+FFFD (as TextDecoder and from_utf8_lossy)
  CHECK(repair_utf8("ok\xe4\xb8 x") == "ok\xef\xbf\xbd x");
  CHECK(repair_utf8("\xff\xc0\xaf") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_CASE("letter, number and whitespace classes follow Unicode categories") {
  CHECK(is_letter(U'\u00e9'));
  CHECK(is_letter(U'\u4e2d'));
  CHECK_FALSE(is_letter(U'1'));
  CHECK(is_number(U'\u0663')); // ARABIC-INDIC DIGIT THREE (Nd)
  CHECK(is_number(U'\u2460')); // CIRCLED DIGIT ONE (No)
  CHECK(is_whitespace(U'\u3000'));
  CHECK(is_whitespace(U'\u00a0'));
  CHECK_FALSE(is_whitespace(U'\u200b')); // zero width space is not White_Space
}

TEST_CASE("NFC composes, reorders marks and leaves composed text alone") {
  CHECK(to_nfc(U"e\u0301") == U"\u00e9");
  CHECK(to_nfc(U"A\u030a") == U"\u00c5");
  CHECK(to_nfc(U"\u212b") == U"\u00c5");             // ANGSTROM SIGN is a singleton
  CHECK(to_nfc(U"a\u0323\u0302") == U"\u1ead");      // dot below + circumflex
  CHECK(to_nfc(U"a\u0302\u0323") == U"\u1ead");      // same after canonical reordering
  CHECK(to_nfc(U"\u1100\u1161\u11a8") == U"\uac01"); // Hangul L V T
  CHECK(to_nfc(U"\u0958") == U"\u0915\u093c");       // composition exclusion stays decomposed
  CHECK(to_nfc(U"caf\u00e9 \u4e2d") == U"caf\u00e9 \u4e2d");
}
