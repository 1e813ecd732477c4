// Chat formats: family recognition from real template text and the exact rendered prompts.
#include "core/error.hpp"
#include "model/chat_template.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::model;

TEST_CASE("families are recognised from their markers and anything else is refused") {
  CHECK(recognise_chat_format("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}{{ '<|eot_id|>' }}") ==
        ChatFormat::llama3);
  CHECK(recognise_chat_format("{{'<|im_start|>' + message.role}}{{'<|im_end|>'}}") == ChatFormat::chatml);
  CHECK(recognise_chat_format("[INST] <<SYS>>\\n{{ system }}") == ChatFormat::llama2);
  CHECK(recognise_chat_format("{{ '[INST] ' + message['content'] + ' [/INST]' }}") == ChatFormat::mistral);
  CHECK_FALSE(recognise_chat_format("{{ messages | tojson }}").has_value());
}

TEST_CASE("rendered prompts match each family's format") {
  const std::vector<ChatMessage> chat{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  CHECK(render_chat({ChatFormat::llama3, "<|begin_of_text|>", "<|eot_id|>"}, chat, true) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        "Hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render_chat({ChatFormat::chatml, "", "<|im_end|>"}, chat, true) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello"
        "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat({ChatFormat::llama2, "<s>", "</s>"}, chat, true) ==
        "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
  CHECK(render_chat({ChatFormat::mistral, "<s>", "</s>"}, chat, true) ==
        "<s>[INST] Be brief.\n\nHi [/INST]Hello</s>[INST] Bye [/INST]");
  CHECK_THROWS_WITH_AS(render_chat({ChatFormat::mistral, "<s>", "</s>"}, {{"assistant", "x"}}, false),
                       doctest::Contains("alternating"), InputError);
}

TEST_CASE("the test models' tokenizer_config carries a llama3-family template") {
  const auto t = load_chat_template(test::testdata_dir() / "models" / "tiny-base");
  CHECK(t.format == ChatFormat::llama3);
  CHECK(t.bos_token == "<|begin_of_text|>");
  test::ScratchDir dir;
  test::write_text(dir / "tokenizer_config.json", R"({"chat_template": "{{ messages | tojson }}"})");
  CHECK_THROWS_WITH_AS(load_chat_template(dir.path()), doctest::Contains("not one optkit recognises"), InputError);
}
