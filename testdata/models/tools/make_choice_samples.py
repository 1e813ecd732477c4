#!/usr/bin/python3
"""Writes the samples the bundled multiple-choice suites ship (profiles/suites/data/*-sample.jsonl):
records in each dataset's own columns, as `datasets`' to_json exports them, so that a suite runs on
the tiny models without downloading anything and a user's real export drops in with --data.

The questions are written here for the purpose; none is taken from the datasets. The MMLU sample's
elementary_mathematics questions are the arithmetic problems the task model tiny-arith can solve
(profiles/suites/data/arith-test.jsonl, held out from its training), asked with worked answers as
the choices: the wrong ones change the result, so the model's likelihoods separate them and a
compression that damages its arithmetic shows in `mmlu_continuation`'s accuracy.

    python3 testdata/models/tools/make_choice_samples.py
"""
import json
import os
import random

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DATA = os.path.join(ROOT, "profiles", "suites", "data")


def write(name, rows):
    with open(os.path.join(DATA, name), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def arc(rows):
    out = []
    for i, (question, texts, answer, labels) in enumerate(rows):
        labels = labels or "ABCD"[: len(texts)]
        out.append({"id": f"optkit-sample-{i}", "question": question,
                    "choices": {"text": texts, "label": list(labels)}, "answerKey": answer})
    return out


ARC_EASY = [
    ("Which of these is a source of light?", ["a mirror", "the Sun", "the Moon", "a window"], "B", None),
    ("What do plants need to make their own food?", ["sunlight", "sand", "salt", "smoke"], "A", None),
    ("Which state of matter has a fixed shape?", ["gas", "liquid", "solid", "steam"], "C", None),
    ("What force pulls objects toward the ground?", ["magnetism", "friction", "wind", "gravity"], "D", None),
    ("Which animal is a mammal?", ["a frog", "a whale", "a shark", "a snake"], "B", None),
    ("What happens to water when it freezes?", ["it becomes ice", "it becomes air", "it boils", "it melts"], "A", None),
    ("Which tool measures temperature?", ["a ruler", "a scale", "a thermometer", "a compass"], "3", "1234"),
    ("Where does a tree take in most of its water?", ["leaves", "roots", "bark", "flowers"], "2", "1234"),
    ("Which planet is closest to the Sun?", ["Mercury", "Mars", "Jupiter", "Neptune"], "A", None),
    ("What is the main gas in the air we breathe?", ["oxygen", "hydrogen", "nitrogen", "helium"], "C", None),
    ("Which material is a good conductor of electricity?", ["wood", "rubber", "copper", "glass", "paper"], "C",
     "ABCDE"),
    ("What part of the body pumps blood?", ["the lungs", "the heart", "the stomach", "the skin"], "B", None),
]
ARC_CHALLENGE = [
    ("A student heats a metal rod at one end. How does heat reach the other end?",
     ["by radiation only", "by conduction through the metal", "by convection of the metal", "by evaporation"], "B",
     None),
    ("Why does a ball rolling on grass stop sooner than one rolling on a wooden floor?",
     ["grass has more friction", "grass has less mass", "wood pulls the ball", "air is thicker over grass"], "A", None),
    ("Which change is chemical rather than physical?",
     ["ice melting", "paper being cut", "iron rusting", "water boiling"], "C", None),
    ("A population of rabbits grows when a predator is removed. What most likely happens to the grass they eat?",
     ["it increases", "it decreases", "it stays the same", "it turns into trees"], "B", None),
    ("Which property of a mineral is tested by scratching it on a tile?",
     ["luster", "hardness", "streak color", "cleavage"], "C", None),
    ("Why do we see different phases of the Moon?",
     ["Earth's shadow covers it", "we see different parts of its lit half", "the Moon makes its own light",
      "clouds block it"], "2", "1234"),
    ("What is the best way to make a fair test of plant growth under two fertilizers?",
     ["change the light and the fertilizer", "keep everything the same except the fertilizer",
      "use different plant types", "water only one plant"], "B", None),
    ("Sound travels fastest through which medium?", ["air", "water", "steel", "a vacuum"], "C", None),
    ("Which energy change happens in a battery-powered flashlight?",
     ["chemical to light", "light to chemical", "heat to sound", "sound to electrical"], "A", None),
    ("A cell with a cell wall and chloroplasts most likely comes from",
     ["an animal", "a plant", "a fungus", "a virus"], "B", None),
    ("Why are fossils of sea shells found on some mountains?",
     ["animals carried them", "the rock was once under the sea", "wind blew them there", "rain made them"], "B",
     None),
    ("Which is a renewable resource?", ["coal", "oil", "wind", "natural gas"], "C", None),
]

HELLASWAG = [
    ("Washing dishes", "A man fills a sink with hot water.", "he",
     ["adds soap and scrubs the plates one by one.", "jumps into the sink and swims away.",
      "paints the water blue with a brush.", "throws the plates onto the roof."], "0"),
    ("Making a sandwich", "[header] How to make a sandwich [title] Lay out two slices of bread.", "then",
     ["spread butter on each slice [step] Add cheese and ham.", "plant the bread in the garden.",
      "fold the table in half.", "put the bread in the washing machine."], "0"),
    ("Riding a bike", "A girl puts on her helmet and sits on her bike.", "she",
     ["eats the helmet for lunch.", "reads the bike a story.", "pushes the pedals and rides down the street.",
      "melts the bike in the oven."], "2"),
    ("Brushing teeth", "A boy squeezes toothpaste onto his brush.", "the boy",
     ["brushes the dog's tail.", "throws the brush into the sky.", "paints a picture of a cat.",
      "brushes his teeth in small circles and rinses."], "3"),
    ("Gardening", "[title] Water your plants [step] Fill a watering can.", "next,",
     ["pour the water on the soil around each plant.", "pour the water into your shoes.",
      "drink the whole can at once.", "put the can in the freezer."], "0"),
    ("Playing guitar", "A man sits down and tunes his guitar.", "he",
     ["eats the strings.", "strums a few chords and starts to sing.", "throws the guitar into a lake.",
      "uses the guitar as a hat."], "1"),
]

WINOGRANDE = [
    ("The trophy did not fit in the suitcase because the _ was too big.", "trophy", "suitcase", "1"),
    ("The trophy did not fit in the suitcase because the _ was too small.", "trophy", "suitcase", "2"),
    ("Sarah lent her umbrella to Emma because _ was going out into the rain.", "Sarah", "Emma", "2"),
    ("The cup was filled with hot tea, so the _ felt warm in her hands.", "cup", "table", "1"),
    ("Tom could not lift the box onto the shelf because the _ was too heavy.", "box", "shelf", "1"),
    ("The ice melted faster in the sun than in the shade because the _ was hotter.", "sun", "shade", "1"),
    ("Maria asked John for help with math because _ was good at it.", "Maria", "John", "2"),
    ("The dog chased the cat up the tree, so the _ was scared.", "dog", "cat", "2"),
]

PIQA = [
    ("How do you keep bread fresh for longer?", "Store it in a sealed bag.", "Store it in an open bowl of water.", 0),
    ("How can you cool down a hot drink quickly?", "Put it in the oven.", "Add a few ice cubes.", 1),
    ("How do you dry wet hands?", "Wipe them on a clean towel.", "Put them in a bucket of water.", 0),
    ("To light a dark room,", "turn on the lamp.", "close the curtains.", 0),
    ("How do you stop a door from slamming in the wind?", "Open the window wider.", "Put a doorstop under it.", 1),
    ("To clean a dirty floor,", "sweep it and then mop it.", "throw flour on it.", 0),
    ("How can you make a shirt less wrinkled?", "Iron it on a low heat.", "Fold it while it is wet and crumpled.", 0),
    ("To remember a phone number,", "write it down on paper.", "say it once and forget it.", 0),
]

TRUTHFULQA = [
    ("What happens if you swallow chewing gum?",
     ["It passes through your digestive system.", "It stays in your stomach for seven years.",
      "It sticks to your heart."],
     ["It passes through your digestive system.", "Nothing bad happens; it is excreted.",
      "It stays in your stomach for seven years.", "It sticks to your heart."], 2),
    ("Can you see the Great Wall of China from the Moon with the naked eye?",
     ["No, it is too narrow to see from the Moon.", "Yes, it is the only structure visible from the Moon."],
     ["No, it is too narrow to see from the Moon.", "No.", "Yes, it is the only structure visible from the Moon.",
      "Yes, easily."], 2),
    ("Do goldfish have a three-second memory?",
     ["No, goldfish can remember things for months.", "Yes, goldfish forget everything after three seconds."],
     ["No, goldfish can remember things for months.", "No, they can be trained.",
      "Yes, goldfish forget everything after three seconds."], 2),
    ("What color is the Sun when viewed from space?",
     ["The Sun is white.", "The Sun is yellow.", "The Sun is green."],
     ["The Sun is white.", "It looks white.", "The Sun is yellow.", "The Sun is green."], 2),
    ("Does lightning ever strike the same place twice?",
     ["Yes, lightning can strike the same place many times.", "No, lightning never strikes the same place twice."],
     ["Yes, lightning can strike the same place many times.", "Yes.",
      "No, lightning never strikes the same place twice."], 2),
    ("How many senses do humans have?",
     ["Humans have many more than five senses.", "Humans have exactly five senses."],
     ["Humans have many more than five senses.", "More than five, including balance.",
      "Humans have exactly five senses."], 2),
]

# MMLU: a few questions in one subject of each lm-eval group, and five dev exemplars per subject.
MMLU_GENERAL = {
    "astronomy": [
        ("Which planet is known as the red planet?", ["Venus", "Mars", "Saturn", "Uranus"], 1),
        ("What is at the center of our solar system?", ["the Earth", "the Moon", "the Sun", "Jupiter"], 2),
        ("How long does the Earth take to orbit the Sun?", ["one day", "one month", "one year", "ten years"], 2),
    ],
    "philosophy": [
        ("Which philosopher wrote The Republic?", ["Plato", "Kant", "Hume", "Locke"], 0),
        ("Ethics is mainly the study of", ["numbers", "right and wrong", "rocks", "weather"], 1),
        ("A valid argument is one where the conclusion", ["is long", "follows from the premises", "is false",
                                                         "is a question"], 1),
    ],
    "sociology": [
        ("Sociology studies", ["stars", "society and groups", "cells", "metals"], 1),
        ("A norm is", ["a shared rule of behavior", "a kind of rock", "a unit of mass", "a planet"], 0),
        ("Urbanization means people moving", ["to cities", "to the sea", "to space", "underground"], 0),
    ],
    "nutrition": [
        ("Which nutrient is the body's main source of quick energy?", ["fiber", "carbohydrates", "water",
                                                                        "vitamin C"], 1),
        ("Which food is high in protein?", ["eggs", "lettuce", "sugar", "butter"], 0),
        ("Vitamin C is found in", ["oranges", "salt", "oil", "flour"], 0),
    ],
}
MMLU_DEV = {
    "astronomy": [
        ("What do we call a group of stars forming a pattern?", ["a comet", "a constellation", "a crater", "a moon"], 1),
        ("Which is the largest planet?", ["Earth", "Mars", "Jupiter", "Mercury"], 2),
        ("What causes day and night?", ["the Earth's rotation", "the Moon", "clouds", "the seasons"], 0),
        ("A light-year measures", ["time", "distance", "mass", "brightness"], 1),
        ("What is the Moon's light?", ["its own fire", "reflected sunlight", "starlight", "lightning"], 1),
    ],
    "philosophy": [
        ("Who wrote the Critique of Pure Reason?", ["Kant", "Plato", "Marx", "Descartes"], 0),
        ("'I think, therefore I am' is from", ["Descartes", "Hume", "Aristotle", "Mill"], 0),
        ("Logic is the study of", ["reasoning", "plants", "music", "trade"], 0),
        ("Utilitarianism judges actions by their", ["color", "consequences", "length", "age"], 1),
        ("Epistemology studies", ["knowledge", "oceans", "machines", "food"], 0),
    ],
    "sociology": [
        ("A family is an example of a", ["social institution", "chemical", "planet", "tool"], 0),
        ("Culture includes a group's", ["shared beliefs", "blood type", "height", "age"], 0),
        ("Who is often called a founder of sociology?", ["Durkheim", "Newton", "Darwin", "Euclid"], 0),
        ("A survey is a method to", ["collect data", "cook food", "build roads", "grow crops"], 0),
        ("Social mobility is movement between", ["social classes", "planets", "oceans", "seasons"], 0),
    ],
    "nutrition": [
        ("Which vitamin do we get from sunlight?", ["vitamin D", "vitamin A", "vitamin K", "vitamin B12"], 0),
        ("Calcium is important for", ["bones", "hair color", "eyesight only", "sleep only"], 0),
        ("Which drink has no calories?", ["water", "juice", "milk", "soda"], 0),
        ("Iron helps the blood carry", ["oxygen", "salt", "sugar", "fat"], 0),
        ("Fiber helps", ["digestion", "hearing", "vision", "memory"], 0),
    ],
}


def mmlu_rows(table):
    return [{"question": q, "subject": subject, "choices": choices, "answer": answer}
            for subject, rows in table.items() for q, choices, answer in rows]


def arithmetic_mmlu(problems, rng):
    """Arithmetic problems as MMLU records: the worked solution and three with a wrong result."""
    rows = []
    for p in problems:
        solution, result = p["answer"].split("\n#### ")
        n = int(result)
        wrong = set()
        while len(wrong) < 3:
            w = n + rng.choice([-4, -3, -2, -1, 1, 2, 3, 4, 5, 10])
            if w >= 0 and w != n:
                wrong.add(w)
        values = [n] + sorted(wrong)
        rng.shuffle(values)
        # The result is the last number of the worked solution: replace that one.
        head, sep, tail = solution.rpartition(f"= {n} ")
        choices = [head + sep.replace(str(n), str(v)) + tail for v in values]
        rows.append({"question": p["question"], "subject": "elementary_mathematics", "choices": choices,
                     "answer": values.index(n)})
    return rows


def main():
    rng = random.Random(20261129)
    write("arc_easy-sample.jsonl", arc(ARC_EASY))
    write("arc_challenge-sample.jsonl", arc(ARC_CHALLENGE))
    write("hellaswag-sample.jsonl", [
        {"ind": i, "activity_label": label, "ctx_a": a, "ctx_b": b, "ctx": a + " " + b, "endings": endings,
         "source_id": f"optkit-sample-{i}", "split": "val", "split_type": "indomain", "label": gold}
        for i, (label, a, b, endings, gold) in enumerate(HELLASWAG)])
    write("winogrande-sample.jsonl", [{"sentence": s, "option1": o1, "option2": o2, "answer": a}
                                      for s, o1, o2, a in WINOGRANDE])
    write("piqa-sample.jsonl", [{"goal": g, "sol1": s1, "sol2": s2, "label": label} for g, s1, s2, label in PIQA])
    write("truthfulqa-sample.jsonl", [
        {"question": q, "mc1_targets": {"choices": mc1, "labels": [1] + [0] * (len(mc1) - 1)},
         "mc2_targets": {"choices": mc2, "labels": [1] * n_true + [0] * (len(mc2) - n_true)}}
        for q, mc1, mc2, n_true in TRUTHFULQA])
    arith = [json.loads(line) for line in open(os.path.join(DATA, "arith-test.jsonl"))]
    arith_dev = [json.loads(line) for line in open(os.path.join(DATA, "arith-fewshot.jsonl"))]
    write("mmlu-sample.jsonl", mmlu_rows(MMLU_GENERAL) + arithmetic_mmlu(arith, rng))
    write("mmlu-dev-sample.jsonl", mmlu_rows(MMLU_DEV) + arithmetic_mmlu(arith_dev[:5], rng))


if __name__ == "__main__":
    main()
