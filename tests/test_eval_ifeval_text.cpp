// The text measures behind IFEval's checkers: word counts as RegexpTokenizer(r"\w+"), Punkt-style
// sentence splitting, Python's isupper/islower, language identification.
#include "eval/ifeval_text.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

TEST_CASE("words are runs of \\w, Unicode letters and digits included") {
  CHECK(count_words("Hello, world!") == 2);
  CHECK(count_words("it's 3.14") == 4); // it, s, 3, 14
  CHECK(count_words("naïve café über_alles") == 3);
  CHECK(count_words("") == 0);
  CHECK(count_words("日本語 テキスト") == 2);
}

TEST_CASE("sentences end at . ? ! before whitespace, not after abbreviations, initials or decimals") {
  CHECK(count_sentences("One. Two? Three!") == 3);
  CHECK(count_sentences("Mr. Smith met Dr. Jones at 3 p.m. yesterday.") == 1);
  CHECK(count_sentences("The value is 3.14 today. Next.") == 2);
  CHECK(count_sentences("J. R. R. Tolkien wrote it. Then he slept.") == 2);
  CHECK(count_sentences("He said \"stop.\" Then he left.") == 2);
  CHECK(count_sentences("No final punctuation") == 1);
  CHECK(count_sentences("Wait... then what?") == 1);
  CHECK(count_sentences("   ") == 0);
  CHECK(split_sentences("A cat. The dog.") == std::vector<std::string>{"A cat.", "The dog."});
}

TEST_CASE("isupper / islower as Python: some cased letter, none of the other case") {
  CHECK(python_isupper("HELLO, WORLD 123"));
  CHECK_FALSE(python_isupper("HELLO world"));
  CHECK_FALSE(python_isupper("123 !!"));
  CHECK(python_isupper("ÉCOLE"));
  CHECK(python_islower("hello, world 123"));
  CHECK_FALSE(python_islower("Hello"));
  CHECK(python_islower("привет"));
}

TEST_CASE("language identification by script, letters and function words") {
  CHECK(detect_language("The quick brown fox jumps over the lazy dog and it is happy.") == "en");
  CHECK(detect_language("Der schnelle braune Fuchs springt über den faulen Hund, und das ist gut.") == "de");
  CHECK(detect_language("Le renard brun rapide saute par-dessus le chien paresseux et il est content.") == "fr");
  CHECK(detect_language("El rápido zorro marrón salta sobre el perro perezoso y es muy feliz.") == "es");
  CHECK(detect_language("Il cane è molto felice e non ha paura della volpe che corre.") == "it");
  CHECK(detect_language("O cachorro não tem medo da raposa e está muito feliz com você.") == "pt");
  CHECK(detect_language("Tôi rất vui được gặp bạn và cảm ơn bạn rất nhiều.") == "vi");
  CHECK(detect_language("これは日本語の文章です。") == "ja");
  CHECK(detect_language("这是一个中文句子。") == "zh-cn");
  CHECK(detect_language("Это предложение на русском языке.") == "ru");
  CHECK(detect_language("Това е изречение на български език, което ъгълът пази.") == "bg");
  CHECK(detect_language("هذه جملة باللغة العربية.") == "ar");
  CHECK(detect_language("یہ اردو زبان میں ایک جملہ ہے۔") == "ur");
  CHECK(detect_language("मी मराठी भाषेत बोलतो आणि हे वाक्य आहे.") == "mr");
  CHECK(detect_language("ಇದು ಕನ್ನಡ ವಾಕ್ಯ.") == "kn");
  CHECK(detect_language("இது தமிழ் வாக்கியம்.") == "ta");
  CHECK(detect_language("12345 ...") == "");
}
