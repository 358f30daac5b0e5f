// The embedded dataset's generator: a small probabilistic grammar over a fixed toy world, driven by
// splitmix64 (defined here, so the text is identical on every platform and library version).
// [Note: embedded grammar] below says what structure a character-level model can learn from it.
#include "engine/app/data/embedded_dataset.h"

#include <array>
#include <string>

#include "engine/base/core/check.h"

namespace zt::data {

namespace {

// [Note: embedded grammar]
// Each line is one of eight kinds of item about a fixed toy world of eight animals and eight
// people (lower-case ASCII, digits and . , ? : only):
//   story      "the quick foxes chase the birds. then they sleep in the forest."  1-3 sentences;
//              later sentences refer back by a pronoun that agrees with the subject (he/she/it/
//              they), every verb agrees in number, adjectives come from the subject's class, and
//              the verb phrases depend on who acts: each animal eats only its two foods, chases only
//              its prey, sleeps only in its home; people build things, feed an animal one of *that
//              animal's* foods, walk to places (each with its own fixed adjective) or do their trade.
//   questions  "what do goats eat? goats eat grass and bread."  "where does the fish live? ..."
//              "what color is the sky? the sky is blue."  "who bakes bread? the baker bakes bread."
//              The answers are facts of the world, so they are predictable from the question.
//   arithmetic "7 plus 5 is 12."  "9 minus 4 is 5."  (single digits, results never negative)
//   inventory  "the king has two cats, one horse and three dogs. that is six animals." (singular
//              after one, and the total is the sum of the counts)
//   counting   "count: 3 4 5 6 7."  "count down: 9 8 7 6."
// So beyond word frequencies there is agreement, long-range reference, world knowledge and
// arithmetic: the loss of a small model falls far below the text's unigram entropy.

// splitmix64 (Steele, Lea, Flood 2014): a tiny generator with fully specified output.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <typename T, std::size_t N>
  const T& pick(const std::array<T, N>& a) {
    return a[static_cast<std::size_t>(below(static_cast<int>(N)))];
  }
};

struct Verb {
  const char* one;   // after a singular subject: "eats"
  const char* many;  // after a plural subject: "eat"
};

struct Animal {
  const char* one;
  const char* many;
  std::array<const char*, 2> foods;
  const char* home;  // where it lives and sleeps
  int prey;          // index of the animal it chases, -1 if none
  Verb move;
};

struct Person {
  const char* one;
  const char* many;
  const char* pronoun;
  Verb trade;
};

struct Place {
  const char* name;
  const char* adjective;  // always the same one for a place
};

constexpr std::array<Animal, 8> kAnimals = {{
    {"cat", "cats", {"meat", "milk"}, "in the house", 6, {"climbs", "climb"}},
    {"dog", "dogs", {"meat", "bread"}, "in the barn", 0, {"barks", "bark"}},
    {"fox", "foxes", {"meat", "eggs"}, "in the forest", 4, {"hunts", "hunt"}},
    {"horse", "horses", {"grass", "corn"}, "in the field", -1, {"runs", "run"}},
    {"bird", "birds", {"seeds", "corn"}, "in the trees", -1, {"flies", "fly"}},
    {"fish", "fish", {"worms", "bread"}, "in the river", -1, {"swims", "swim"}},
    {"mouse", "mice", {"cheese", "corn"}, "in the wall", -1, {"hides", "hide"}},
    {"goat", "goats", {"grass", "bread"}, "on the hill", -1, {"climbs", "climb"}},
}};
constexpr std::array<Person, 8> kPeople = {{
    {"king", "kings", "he", {"rules the town", "rule the town"}},
    {"queen", "queens", "she", {"rules the town", "rule the town"}},
    {"farmer", "farmers", "he", {"plants corn", "plant corn"}},
    {"baker", "bakers", "she", {"bakes bread", "bake bread"}},
    {"sailor", "sailors", "he", {"sails the sea", "sail the sea"}},
    {"girl", "girls", "she", {"reads a book", "read a book"}},
    {"boy", "boys", "he", {"plays in the field", "play in the field"}},
    {"smith", "smiths", "he", {"makes a sword", "make a sword"}},
}};
constexpr std::array<Place, 8> kPlaces = {{{"town", "busy"},
                                           {"field", "green"},
                                           {"forest", "dark"},
                                           {"river", "cold"},
                                           {"hill", "high"},
                                           {"barn", "old"},
                                           {"sea", "wide"},
                                           {"market", "loud"}}};
constexpr std::array<const char*, 6> kAnimalAdjectives = {"small", "quick", "lazy", "wild", "old", "young"};
constexpr std::array<const char*, 6> kPersonAdjectives = {"wise", "young", "old", "brave", "kind", "tired"};
constexpr std::array<const char*, 6> kThings = {"house", "ship", "boat", "wall", "bridge", "cart"};
constexpr std::array<const char*, 6> kThingAdjectives = {"big", "small", "new", "old", "wooden", "long"};
constexpr std::array<std::array<const char*, 2>, 8> kColors = {{{"sky", "blue"},
                                                                {"grass", "green"},
                                                                {"snow", "white"},
                                                                {"sun", "yellow"},
                                                                {"night", "black"},
                                                                {"blood", "red"},
                                                                {"sea", "blue"},
                                                                {"milk", "white"}}};
constexpr std::array<const char*, 10> kNumberWords = {"zero", "one", "two",   "three", "four",
                                                      "five", "six", "seven", "eight", "nine"};

// The acting subject of a story: an animal or a person, singular or plural.
struct Subject {
  bool animal;
  int index;
  bool plural;
  const char* noun() const {
    return animal ? (plural ? kAnimals[index].many : kAnimals[index].one)
                  : (plural ? kPeople[index].many : kPeople[index].one);
  }
  const char* pronoun() const { return plural ? "they" : animal ? "it" : kPeople[index].pronoun; }
  const char* verb(Verb v) const { return plural ? v.many : v.one; }
};

const char* article_for(const char* word) {
  const char c = word[0];
  return (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') ? "an" : "a";
}

// "the [adjective] noun" for any animal or person, for the object of "sees".
std::string random_noun_phrase(SplitMix64& rng) {
  const Subject s{rng.chance(0.5), rng.below(8), rng.chance(0.4)};
  std::string np = "the ";
  if (rng.chance(0.4)) np += std::string(s.animal ? rng.pick(kAnimalAdjectives) : rng.pick(kPersonAdjectives)) + " ";
  return np + s.noun();
}

// One verb phrase that fits the subject (see [Note: embedded grammar]).
std::string verb_phrase(SplitMix64& rng, const Subject& s) {
  if (s.animal) {
    const Animal& a = kAnimals[s.index];
    int kind = rng.below(4);
    if (kind == 1 && a.prey < 0) kind = 0;
    switch (kind) {
      case 0: return std::string(s.verb({"eats", "eat"})) + " " + rng.pick(a.foods);
      case 1:
        return std::string(s.verb({"chases", "chase"})) + " the " +
               (rng.chance(0.5) ? kAnimals[a.prey].many : kAnimals[a.prey].one);
      case 2: return std::string(s.verb({"sleeps", "sleep"})) + " " + a.home;
      default: return std::string(s.verb(a.move)) + (rng.chance(0.5) ? " at night" : "");
    }
  }
  switch (rng.below(6)) {
    case 0: return std::string(s.verb({"sees", "see"})) + " " + random_noun_phrase(rng);
    case 1: {
      const char* thing = rng.pick(kThings);
      const char* adjective = rng.chance(0.5) ? rng.pick(kThingAdjectives) : nullptr;
      return std::string(s.verb({"builds", "build"})) + " " + article_for(adjective ? adjective : thing) + " " +
             (adjective ? std::string(adjective) + " " : "") + thing;
    }
    case 2: {
      // One draw per statement: the order of evaluation within an expression is unspecified.
      const Animal& a = kAnimals[static_cast<std::size_t>(rng.below(8))];
      const char* fed = rng.chance(0.5) ? a.many : a.one;
      return std::string(s.verb({"feeds", "feed"})) + " the " + fed + " " + rng.pick(a.foods);
    }
    case 3: {
      const Place& p = rng.pick(kPlaces);
      return std::string(s.verb({"walks", "walk"})) + " to the " +
             (rng.chance(0.5) ? std::string(p.adjective) + " " : "") + p.name;
    }
    case 4: return s.verb(kPeople[s.index].trade);
    default: return std::string(s.verb({"sells", "sell"})) + " " + rng.pick(kAnimals[rng.below(8)].foods);
  }
}

std::string story_line(SplitMix64& rng) {
  const Subject s{rng.chance(0.5), rng.below(8), rng.chance(0.4)};
  std::string line = "the ";
  if (rng.chance(0.5)) line += std::string(s.animal ? rng.pick(kAnimalAdjectives) : rng.pick(kPersonAdjectives)) + " ";
  std::string previous = verb_phrase(rng, s);
  line += std::string(s.noun()) + " " + previous + ".";
  const int more = rng.below(3);
  for (int i = 0; i < more; ++i) {
    std::string next = verb_phrase(rng, s);
    for (int retry = 0; retry < 3 && next == previous; ++retry) next = verb_phrase(rng, s);  // no "it runs. it runs."
    line += std::string(rng.chance(0.3) ? " then " : " ") + s.pronoun() + " " + next + ".";
    previous = std::move(next);
  }
  return line;
}

// "what do goats eat? ...", "where does the fish live? ...", colours, and "who <trade>? ...".
std::string question_line(SplitMix64& rng) {
  const int kind = rng.below(4);
  if (kind == 2) {
    const auto& c = rng.pick(kColors);
    return std::string("what color is the ") + c[0] + "? the " + c[0] + " is " + c[1] + ".";
  }
  if (kind == 3) {
    const int who = rng.below(8);
    // The king and the queen share a trade; the answer names either.
    const int answer = (who <= 1) ? rng.below(2) : who;
    return std::string("who ") + kPeople[who].trade.one + "? the " + kPeople[answer].one + " " +
           kPeople[answer].trade.one + ".";
  }
  const Animal& a = kAnimals[static_cast<std::size_t>(rng.below(8))];
  const bool plural = rng.chance(0.5);
  const std::string np = plural ? std::string(a.many) : std::string("the ") + a.one;
  if (kind == 0) {
    return std::string(plural ? "what do " : "what does ") + np + " eat? " + np + (plural ? " eat " : " eats ") +
           a.foods[0] + " and " + a.foods[1] + ".";
  }
  return std::string(plural ? "where do " : "where does ") + np + " live? " + np + (plural ? " live " : " lives ") +
         a.home + ".";
}

std::string arithmetic_line(SplitMix64& rng) {
  int x = rng.below(10), y = rng.below(10);
  if (rng.chance(0.5)) return std::to_string(x) + " plus " + std::to_string(y) + " is " + std::to_string(x + y) + ".";
  if (x < y) std::swap(x, y);
  return std::to_string(x) + " minus " + std::to_string(y) + " is " + std::to_string(x - y) + ".";
}

std::string inventory_line(SplitMix64& rng) {
  const int n_kinds = 2 + rng.below(2);
  std::array<int, 3> kinds{};
  kinds[0] = rng.below(8);
  for (int i = 1; i < n_kinds; ++i) {
    do kinds[static_cast<std::size_t>(i)] = rng.below(8);
    while (kinds[static_cast<std::size_t>(i)] == kinds[0] || (i == 2 && kinds[2] == kinds[1]));
  }
  std::string line = std::string("the ") + kPeople[static_cast<std::size_t>(rng.below(8))].one + " has ";
  int total = 0;
  for (int i = 0; i < n_kinds; ++i) {
    const int count = 1 + rng.below(3);
    total += count;
    const Animal& a = kAnimals[static_cast<std::size_t>(kinds[static_cast<std::size_t>(i)])];
    if (i > 0) line += (i == n_kinds - 1) ? " and " : ", ";
    line += std::string(kNumberWords[count]) + " " + (count == 1 ? a.one : a.many);
  }
  return line + ". that is " + kNumberWords[total] + " animals.";
}

std::string counting_line(SplitMix64& rng) {
  const int length = 4 + rng.below(3);
  const bool down = rng.chance(0.3);
  const int start = down ? length - 1 + rng.below(10 - length + 1) : rng.below(10);
  std::string line = down ? "count down:" : "count:";
  for (int i = 0; i < length; ++i) {
    line += ' ';
    line += std::to_string(down ? start - i : start + i);
  }
  return line + ".";
}

}  // namespace

std::string generate_embedded_text(std::uint64_t seed, std::int64_t n_chars) {
  ZT_CHECK(n_chars >= 0, "n_chars {}", n_chars);
  SplitMix64 rng{seed};
  std::string text;
  text.reserve(static_cast<std::size_t>(n_chars) + 256);
  while (static_cast<std::int64_t>(text.size()) <= n_chars) {
    const int roll = rng.below(100);  // story 40, questions 22, arithmetic 18, inventory 12, counting 8
    if (roll < 40)
      text += story_line(rng);
    else if (roll < 62)
      text += question_line(rng);
    else if (roll < 80)
      text += arithmetic_line(rng);
    else if (roll < 92)
      text += inventory_line(rng);
    else
      text += counting_line(rng);
    text += '\n';
  }
  // Whole lines only: cut after the last newline that fits in n_chars.
  const std::size_t cut = n_chars > 0 ? text.rfind('\n', static_cast<std::size_t>(n_chars - 1)) : std::string::npos;
  text.resize(cut == std::string::npos ? static_cast<std::size_t>(n_chars) : cut + 1);
  return text;
}

}  // namespace zt::data
