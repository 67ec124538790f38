"""Deterministic synthetic text for golden tests and demo data.

Pure standard library; every generator takes a ``random.Random`` so callers
control the seed. Nothing here touches the network or the file system.

Used by ``tools/make_golden.py`` and ``tools/make_examples.py``.
"""

from __future__ import annotations

import random
import textwrap

# ---------------------------------------------------------------------------
# English
# ---------------------------------------------------------------------------

TOPICS = {
    "cooking": {
        "nouns": ["onion", "garlic", "sourdough starter", "cast-iron pan", "tomato sauce",
                  "risotto", "chicken stock", "pie crust", "oven", "spice blend",
                  "pancake batter", "lemon zest", "rice cooker", "marinade", "dough"],
        "verbs": ["caramelize", "season", "knead", "simmer", "reduce", "roast",
                  "whisk", "proof", "braise", "fold in", "deglaze", "store"],
        "facts": [
            "Salt draws moisture out of vegetables, so add it early when you want them to soften.",
            "A hot pan and dry ingredients are the secret to a good sear.",
            "Resting dough lets the gluten relax, which makes it easier to shape.",
            "Acid such as lemon juice or vinegar brightens a heavy sauce.",
            "Low heat and patience turn onions sweet; high heat only burns them.",
            "Most soups taste better the next day because the flavors have time to blend.",
        ],
    },
    "programming": {
        "nouns": ["Python list", "dictionary", "REST API", "unit test", "Git branch",
                  "SQL query", "Docker image", "virtual environment", "regular expression",
                  "JSON file", "CSV export", "async function", "database index", "log file",
                  "config file"],
        "verbs": ["debug", "refactor", "parse", "deploy", "profile", "sort", "cache",
                  "validate", "serialize", "merge", "benchmark", "document"],
        "facts": [
            "A dictionary lookup in Python is O(1) on average because it is backed by a hash table.",
            "Writing the failing test first makes the bug easy to reproduce later.",
            "Use a virtual environment so that project dependencies do not leak into the system Python.",
            "An index speeds up reads but makes every insert and update slightly slower.",
            "Small, focused commits are much easier to review and to revert.",
            "Never build SQL by string concatenation; use parameterized queries instead.",
            "Profiling before optimizing saves you from guessing where the time goes.",
        ],
    },
    "travel": {
        "nouns": ["train ticket", "hostel", "passport", "night market", "rental car",
                  "travel insurance", "backpack", "museum pass", "ferry", "itinerary",
                  "city map", "local SIM card"],
        "verbs": ["book", "plan", "pack", "explore", "cancel", "budget for", "photograph",
                  "navigate", "visit", "compare"],
        "facts": [
            "Booking trains a few weeks ahead is usually much cheaper than buying at the station.",
            "Carry a photocopy of your passport separately from the original.",
            "Street food stalls with long local queues are usually a safe bet.",
            "Many museums are free on the first Sunday of the month.",
            "A light rain jacket takes little space and saves a lot of trouble.",
        ],
    },
    "science": {
        "nouns": ["photosynthesis", "black hole", "vaccine", "tectonic plate", "enzyme",
                  "electric circuit", "DNA molecule", "solar panel", "ocean current",
                  "neuron", "climate model", "telescope"],
        "verbs": ["measure", "observe", "explain", "simulate", "classify", "predict",
                  "estimate", "compare", "test", "describe"],
        "facts": [
            "Light from the Sun takes a little over eight minutes to reach the Earth.",
            "Enzymes speed up chemical reactions without being consumed by them.",
            "Water expands when it freezes, which is why ice floats.",
            "A vaccine trains the immune system by showing it a harmless piece of a pathogen.",
            "Plate tectonics explains why earthquakes cluster along certain lines.",
            "Sound travels about four times faster in water than in air.",
        ],
    },
    "finance": {
        "nouns": ["monthly budget", "emergency fund", "index fund", "credit card",
                  "mortgage", "savings account", "tax return", "invoice", "pension plan",
                  "exchange rate"],
        "verbs": ["track", "reduce", "invest in", "pay off", "calculate", "forecast",
                  "reconcile", "review", "split", "automate"],
        "facts": [
            "Compound interest rewards starting early more than saving large amounts late.",
            "An emergency fund usually covers three to six months of expenses.",
            "Paying the full credit card balance each month avoids interest entirely.",
            "Diversification lowers risk because assets rarely all fall at the same time.",
        ],
    },
}

ADJ = ["simple", "quick", "reliable", "cheap", "safe", "clean", "efficient", "robust",
       "beginner-friendly", "practical", "detailed", "short"]
ADV = ["carefully", "quickly", "step by step", "without breaking anything", "on a budget",
       "in under ten minutes", "for a small team", "at home"]
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Giulia", "Hiro", "Ines",
         "Jonas", "Kofi", "Lena", "Minh", "Nadia", "Omar", "Priya"]
OPENERS = ["Sure!", "Great question.", "Here is a short answer.", "Good idea.",
           "Let me explain.", "Of course.", "In short:", "It depends, but usually:"]
CLOSERS = ["Hope this helps!", "Let me know if you want more detail.",
           "Feel free to ask a follow-up question.", "Good luck!", "",
           "That should be enough to get started."]

QUESTION_PATTERNS = [
    "How do I {verb} a {noun} {adv}?",
    "What is the best way to {verb} my {noun}?",
    "Can you explain how a {noun} works?",
    "Why does my {noun} fail when I try to {verb} it?",
    "Give me a {adj} checklist to {verb} a {noun}.",
    "Is it worth it to {verb} the {noun} {adv}?",
    "What should I know before I {verb} a {noun}?",
    "Compare two ways to {verb} a {noun}.",
    "My friend {name} says you should never {verb} a {noun}. Is that true?",
]
INSTRUCTION_PATTERNS = [
    "Explain how to {verb} a {noun}.",
    "Write a {adj} guide on how to {verb} a {noun} {adv}.",
    "Summarize the following text in one sentence.",
    "List three common mistakes people make when they {verb} a {noun}.",
    "Rewrite the sentence below so that it sounds more formal.",
    "Translate the following sentence into English.",
    "Classify the sentiment of the following review as positive, negative or neutral.",
    "Give a {adj} definition of the term \"{noun}\".",
    "Answer the question using the context.",
    "Write a short email to {name} about the {noun}.",
]
STEP_PATTERNS = [
    "First, {verb} the {noun} {adv}.",
    "Then check that the {noun} is {adj} enough.",
    "Avoid the temptation to {verb} everything at once.",
    "If something goes wrong, {verb} the {noun} again and compare the results.",
    "Keep notes so that {name} can repeat the process later.",
    "Finally, {verb} the {noun} and review what you learned.",
    "A {adj} {noun} makes the next step much easier.",
    "Do not skip this step: it is the one people forget most often.",
]
REVIEWS = [
    "The battery lasts two full days and the screen is gorgeous.",
    "Arrived late, the box was crushed and one part was missing.",
    "It does what it says. Nothing more, nothing less.",
    "Absolutely love it, I already ordered a second one for my sister!",
    "The app keeps crashing whenever I open the settings page.",
    "Decent quality for the price, but the instructions were confusing.",
]


def _fill(rng: random.Random, pattern: str, topic: str | None = None) -> str:
    t = TOPICS[topic or rng.choice(sorted(TOPICS))]
    return pattern.format(
        verb=rng.choice(t["verbs"]), noun=rng.choice(t["nouns"]), adj=rng.choice(ADJ),
        adv=rng.choice(ADV), name=rng.choice(NAMES),
    )


def en_question(rng: random.Random, topic: str | None = None) -> str:
    return _fill(rng, rng.choice(QUESTION_PATTERNS), topic)


def en_instruction(rng: random.Random, topic: str | None = None) -> str:
    return _fill(rng, rng.choice(INSTRUCTION_PATTERNS), topic)


def en_sentence(rng: random.Random, topic: str | None = None) -> str:
    topic = topic or rng.choice(sorted(TOPICS))
    if rng.random() < 0.4:
        return rng.choice(TOPICS[topic]["facts"])
    return _fill(rng, rng.choice(STEP_PATTERNS), topic)


def en_paragraph(rng: random.Random, n_min: int = 1, n_max: int = 5,
                 topic: str | None = None) -> str:
    topic = topic or rng.choice(sorted(TOPICS))
    return " ".join(en_sentence(rng, topic) for _ in range(rng.randint(n_min, n_max)))


def en_answer(rng: random.Random, n_min: int = 1, n_max: int = 6,
              topic: str | None = None) -> str:
    """An assistant-style answer: opener, sentences, maybe a numbered list, closer."""
    topic = topic or rng.choice(sorted(TOPICS))
    parts = []
    if rng.random() < 0.6:
        parts.append(rng.choice(OPENERS))
    parts.append(en_paragraph(rng, n_min, n_max, topic))
    out = " ".join(parts)
    if rng.random() < 0.3:
        steps = [f"{i + 1}. {en_sentence(rng, topic)}" for i in range(rng.randint(2, 4))]
        out += "\n\n" + "\n".join(steps)
    closer = rng.choice(CLOSERS)
    if closer:
        out += "\n\n" + closer
    return out


def en_review(rng: random.Random) -> str:
    return rng.choice(REVIEWS)


def en_long(rng: random.Random, n_sentences: int, topic: str | None = None) -> str:
    """A long multi-paragraph text (used for samples beyond the largest unit)."""
    topic = topic or rng.choice(sorted(TOPICS))
    paras = []
    left = n_sentences
    while left > 0:
        k = min(left, rng.randint(3, 6))
        paras.append(" ".join(en_sentence(rng, topic) for _ in range(k)))
        left -= k
    return "\n\n".join(paras)


# ---------------------------------------------------------------------------
# Other languages, emoji
# ---------------------------------------------------------------------------

VI = [
    "Hôm nay trời đẹp quá, chúng ta đi dạo công viên nhé.",
    "Tôi đang học lập trình Python để xử lý dữ liệu.",
    "Bạn có thể giải thích ngắn gọn cách hoạt động của mô hình ngôn ngữ không?",
    "Phở bò Hà Nội có nước dùng trong và thơm mùi quế, hồi.",
    "Đừng quên sao lưu dữ liệu trước khi cập nhật hệ điều hành.",
    "Mỗi sáng tôi uống một ly cà phê sữa đá ở quán đầu ngõ.",
    "Thành phố Hồ Chí Minh rất đông đúc vào giờ tan tầm.",
    "Học một ngôn ngữ mới cần sự kiên nhẫn và luyện tập hằng ngày.",
    "Cảm ơn bạn rất nhiều vì đã giúp đỡ tôi hôm qua!",
    "Vịnh Hạ Long là một trong những kỳ quan thiên nhiên nổi tiếng của Việt Nam.",
    "Giá vé tàu Thống Nhất từ Hà Nội vào Sài Gòn khoảng một triệu đồng.",
    "Nếu gặp lỗi, hãy đọc kỹ thông báo và tìm kiếm trên mạng trước.",
    "Mẹ tôi nấu canh chua cá lóc ngon nhất xóm.",
    "Chúng tôi sẽ họp nhóm lúc chín giờ sáng thứ Hai.",
    "Ngữ pháp tiếng Việt không chia động từ nhưng có nhiều thanh điệu.",
    "Quyển sách này kể về tuổi thơ của một cậu bé ở miền Tây.",
    "Để tiết kiệm điện, hãy tắt đèn khi ra khỏi phòng.",
    "Trận bóng tối qua kết thúc với tỷ số hai – một.",
]
ZH = [
    "今天天气很好，我们去公园散步吧。",
    "我正在学习如何用Python处理数据。",
    "请简要解释一下语言模型是如何工作的。",
    "这家餐厅的小笼包非常有名，每天都要排队。",
    "在更新系统之前，记得先备份重要文件。",
    "长城是中国最著名的古代建筑之一。",
    "学习一门新语言需要耐心和每天的练习。",
    "谢谢你昨天的帮助！",
    "北京的秋天是一年中最舒服的季节。",
    "他每天早上六点起床跑步。",
    "机器学习模型的效果取决于数据的质量。",
    "龘靐齉爩是非常罕见的汉字。",
]
JA = [
    "今日はとても良い天気ですね。",
    "日本語の勉強を毎日少しずつ続けています。",
    "このラーメン屋さんはいつも行列ができています。",
    "東京から大阪まで新幹線で約二時間半です。",
    "会議の資料を明日までに送ってください。",
    "桜の季節になると、公園はお花見の人でいっぱいになります。",
    "データのバックアップを忘れないでください。",
]
KO = [
    "오늘 날씨가 정말 좋네요.",
    "저는 파이썬으로 데이터 분석을 공부하고 있어요.",
    "서울의 지하철은 깨끗하고 편리합니다.",
    "김치찌개는 한국 사람들이 가장 좋아하는 음식 중 하나예요.",
    "내일 회의는 오전 열 시에 시작합니다.",
]
OTHER = [
    "Привет! Как дела? Всё хорошо, спасибо.",
    "Ελληνικά: Καλημέρα, τι κάνεις;",
    "مرحبا بك في عالم البرمجة",
    "שלום עולם",
    "नमस्ते, आप कैसे हैं?",
    "Crème brûlée, jalapeño, naïve façade, Ångström, Straße.",
    "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ　１２３ and ligatures ﬁ ﬂ",
]
EMOJI = ["😀", "😂", "🥲", "😍", "🤔", "🙏", "👍", "👍🏽", "👋🏿", "🔥", "✨", "🎉", "❤️",
         "💡", "🚀", "✅", "❌", "⚠️", "📌", "🐍", "🍜", "☕", "🌧️", "🇻🇳", "🇯🇵",
         "👨‍👩‍👧‍👦", "🧑‍💻", "🏳️‍🌈", "🤖", "🦄", "🥟", "📈", "🧪", "🎧"]
SYMBOLS = ["→", "←", "⇒", "•", "…", "—", "–", "©", "®", "™", "°C", "±", "µs", "½",
           "€", "£", "¥", "₫", "∑", "√", "∞", "≈", "≠", "≤", "≥", "§", "¶", "†",
           "「", "」", "【", "】", "〜", "《", "》"]


def vi_text(rng: random.Random, n_min: int = 1, n_max: int = 3) -> str:
    return " ".join(rng.choice(VI) for _ in range(rng.randint(n_min, n_max)))


def zh_text(rng: random.Random, n_min: int = 1, n_max: int = 3) -> str:
    return "".join(rng.choice(ZH) for _ in range(rng.randint(n_min, n_max)))


def ja_text(rng: random.Random, n_min: int = 1, n_max: int = 2) -> str:
    return "".join(rng.choice(JA) for _ in range(rng.randint(n_min, n_max)))


def ko_text(rng: random.Random, n_min: int = 1, n_max: int = 2) -> str:
    return " ".join(rng.choice(KO) for _ in range(rng.randint(n_min, n_max)))


def emoji(rng: random.Random, k: int = 1) -> str:
    return "".join(rng.choice(EMOJI) for _ in range(k))


def sprinkle_emoji(rng: random.Random, text: str, p: float = 0.5) -> str:
    if rng.random() >= p:
        return text
    mode = rng.random()
    if mode < 0.4:
        return text + " " + emoji(rng, rng.randint(1, 3))
    if mode < 0.7:
        return emoji(rng) + " " + text
    words = text.split(" ")
    i = rng.randint(0, len(words))
    words.insert(i, emoji(rng, rng.randint(1, 2)))
    return " ".join(words)


def multilingual_text(rng: random.Random) -> tuple[str, str]:
    """(lang, text) with a realistic mix of scripts."""
    lang = rng.choice(["en", "vi", "vi", "zh", "ja", "ko", "mixed", "other"])
    if lang == "en":
        text = en_paragraph(rng, 1, 3)
    elif lang == "vi":
        text = vi_text(rng)
    elif lang == "zh":
        text = zh_text(rng)
    elif lang == "ja":
        text = ja_text(rng)
    elif lang == "ko":
        text = ko_text(rng)
    elif lang == "other":
        text = rng.choice(OTHER)
    else:
        text = " ".join([en_sentence(rng), rng.choice(VI), rng.choice(ZH),
                         rng.choice(SYMBOLS), rng.choice(JA)])
    return lang, sprinkle_emoji(rng, text, 0.45)


# ---------------------------------------------------------------------------
# Code
# ---------------------------------------------------------------------------

_IDENT = ["items", "users", "rows", "values", "scores", "records", "names", "prices",
          "events", "tokens", "paths", "lines", "orders", "counts"]
_FUNC = ["load", "parse", "clean", "summarize", "group", "merge", "filter", "normalize",
         "validate", "render", "count", "export", "split", "retry"]


def py_snippet(rng: random.Random, use_tabs: bool | None = None) -> str:
    """A small, syntactically plausible Python function."""
    if use_tabs is None:
        use_tabs = rng.random() < 0.3
    ind = "\t" if use_tabs else "    "
    f = rng.choice(_FUNC)
    a = rng.choice(_IDENT)
    b = rng.choice([x for x in _IDENT if x != a])
    kind = rng.randrange(6)
    if kind == 0:
        body = [
            f"def {f}_{a}({a}: list[dict]) -> dict[str, int]:",
            f'{ind}"""{f.capitalize()} {a} and return a count per key."""',
            f"{ind}result = {{}}",
            f"{ind}for item in {a}:",
            f"{ind}{ind}key = item.get(\"key\", \"unknown\")",
            f"{ind}{ind}result[key] = result.get(key, 0) + 1",
            f"{ind}return result",
        ]
    elif kind == 1:
        body = [
            "import json",
            "",
            f"def {f}_{a}(path):",
            f"{ind}with open(path, encoding=\"utf-8\") as fh:",
            f"{ind}{ind}for n, line in enumerate(fh, 1):",
            f"{ind}{ind}{ind}if not line.strip():",
            f"{ind}{ind}{ind}{ind}continue",
            f"{ind}{ind}{ind}yield n, json.loads(line)",
        ]
    elif kind == 2:
        body = [
            f"class {f.capitalize()}{a.capitalize()}:",
            f"{ind}def __init__(self, {b}=None):",
            f"{ind}{ind}self.{b} = {b} or []",
            "",
            f"{ind}def __repr__(self):",
            f"{ind}{ind}return f\"{f.capitalize()}{a.capitalize()}({{len(self.{b})}} {b})\"",
        ]
    elif kind == 3:
        body = [
            f"def {f}({a}, threshold={rng.choice([0, 1, 10, 0.5, 100])}):",
            f"{ind}return [x for x in {a} if x > threshold]",
            "",
            f"print({f}([{', '.join(str(rng.randint(-5, 50)) for _ in range(rng.randint(2, 6)))}]))",
        ]
    elif kind == 4:
        body = [
            f"CONFIG = {{",
            f"{ind}\"name\": \"{a}\",",
            f"{ind}\"retries\": {rng.randint(1, 5)},",
            f"{ind}\"timeout\": {rng.choice([1.5, 30, 2.0, 0.25])},",
            f"{ind}\"tags\": [\"{a}\", \"{b}\"],",
            f"{ind}\"nested\": {{\"enabled\": {rng.choice(['True', 'False'])}}},",
            "}",
        ]
    else:
        body = [
            f"async def {f}_{b}(session, url):",
            f"{ind}try:",
            f"{ind}{ind}async with session.get(url) as resp:",
            f"{ind}{ind}{ind}resp.raise_for_status()",
            f"{ind}{ind}{ind}return await resp.json()",
            f"{ind}except Exception as exc:  # noqa: BLE001",
            f"{ind}{ind}print(f\"failed {{url}}: {{exc!r}}\")",
            f"{ind}{ind}return None",
        ]
    return "\n".join(body)


def js_snippet(rng: random.Random) -> str:
    a = rng.choice(_IDENT)
    f = rng.choice(_FUNC)
    return textwrap.dedent(f"""\
        function {f}({a}) {{
          const out = {{}};
          for (const x of {a}) {{
            if (!x) continue;
            out[x.id] = (out[x.id] || 0) + 1;
          }}
          return out;
        }}""")


def c_snippet(rng: random.Random) -> str:
    n = rng.randint(3, 64)
    return (
        "#include <stdio.h>\n\n"
        "int main(void) {\n"
        f"\tint buf[{n}] = {{0}};\n"
        f"\tfor (int i = 0; i < {n}; ++i) {{\n"
        "\t\tbuf[i] = i * i;\n"
        "\t}\n"
        "\tprintf(\"%d\\n\", buf[" + str(n - 1) + "]);\n"
        "\treturn 0;\n"
        "}"
    )


def code_task(rng: random.Random) -> tuple[str, str, str]:
    """(language, task description, code)."""
    r = rng.random()
    if r < 0.7:
        code = py_snippet(rng)
        if rng.random() < 0.25:
            code += "\n\n" + py_snippet(rng)
        lang = "python"
    elif r < 0.85:
        code, lang = js_snippet(rng), "javascript"
    else:
        code, lang = c_snippet(rng), "c"
    task = rng.choice([
        "Write a function that counts items by key.",
        "Fix the bug in the following code.",
        "Add type hints and a docstring.",
        "Explain what this code does.",
        "Refactor this snippet to be more readable.",
        "Write a small example that reads a JSONL file.",
        f"Implement {rng.choice(_FUNC)} for a list of {rng.choice(_IDENT)}.",
    ])
    return lang, task, code


# ---------------------------------------------------------------------------
# A broader everyday-English lexicon (used by the demo data; added after the
# golden cases were fixed, so the generators above are unchanged)
# ---------------------------------------------------------------------------

LEX_NOUNS = """
account address afternoon agency airport album alarm answer apartment apple argument
army article artist audience author autumn baby bakery balcony balloon band bank
basket battery beach bedroom bicycle bill bird birthday blanket boat bottle boundary
bracelet branch bread bridge brother brush bucket budget building bus butter button
cabinet cable cafe cake calendar camera campaign candle canvas captain carpet castle
cat ceiling chair champion channel chapter cheese chemistry chicken child chocolate
church cinema circle classroom client climate clock cloud coach coast coat collection
college colour comment community company computer concert contract conversation cookie
corner cottage council country cousin crowd cup curtain customer dance daughter deadline
decision degree dentist desert design desk detail diary dictionary dinner director
doctor document dog door drawer dream dress driver drum eagle earthquake editor egg
election elephant elevator email engine engineer evening exam exhibition experiment
factory farm farmer festival field film finger fire fish flag flight floor flower
football forest fork fountain friend fridge garage garden gate gift glass glove goal
government grandmother grass guitar gym hair hall hammer harbour hat headline heart
helmet highway hill history holiday homework horse hospital hotel hour house island
jacket journey judge kettle key keyboard kitchen knife ladder lake lamp language laptop
lawyer leaf lecture lesson letter library lion lunch machine magazine manager map
market meal medicine memory message meter microphone minute mirror mistake moment
money monkey month morning mountain mouse museum mushroom neighbour newspaper night
notebook nurse ocean office onion orange orchestra painting paper parcel parent park
party passenger pencil pepper phone photo piano picture pillow pilot planet plate
player pocket poem police politician potato president printer prize problem professor
project pumpkin puzzle queen question radio railway recipe report restaurant river
road rocket roof room rope sailor salad sandwich satellite school scientist season
secret shelf ship shirt shop shoulder singer sister skirt sky sleeve snow soap soldier
song soup spoon square stadium staircase station statue storm story street student
studio subway sugar suitcase summer supermarket surgeon sweater table teacher team
telephone television temple tennis theatre ticket tiger toilet tomato tooth tourist
towel tower town toy tractor traffic train tree truck tunnel umbrella uncle university
valley vegetable village violin volcano waiter wallet war watch waterfall weather
wedding week window winter wire witness wolf woman wood worker writer yard year zoo
""".split()

LEX_VERBS = """
accept-accepted admire-admired agree-agreed allow-allowed answer-answered appear-appeared
arrange-arranged arrive-arrived ask-asked attach-attached avoid-avoided bake-baked
borrow-borrowed brush-brushed call-called carry-carried celebrate-celebrated change-changed
check-checked clean-cleaned climb-climbed collect-collected complain-complained
complete-completed consider-considered cook-cooked copy-copied count-counted cover-covered
cross-crossed dance-danced decide-decided deliver-delivered describe-described
design-designed destroy-destroyed discover-discovered discuss-discussed dress-dressed
drop-dropped enjoy-enjoyed enter-entered escape-escaped expect-expected explain-explained
fill-filled finish-finished fix-fixed follow-followed gather-gathered guess-guessed
hate-hated help-helped hope-hoped hurry-hurried imagine-imagined improve-improved
invite-invited join-joined jump-jumped kick-kicked kiss-kissed knock-knocked laugh-laughed
learn-learned like-liked listen-listened live-lived look-looked love-loved manage-managed
mark-marked measure-measured miss-missed move-moved need-needed notice-noticed
offer-offered open-opened order-ordered paint-painted pass-passed pick-picked plan-planned
play-played practise-practised prefer-preferred prepare-prepared print-printed
promise-promised protect-protected pull-pulled push-pushed reach-reached receive-received
remember-remembered repair-repaired repeat-repeated reply-replied report-reported
rescue-rescued return-returned save-saved share-shared shout-shouted smile-smiled
solve-solved start-started stay-stayed stop-stopped study-studied suggest-suggested
support-supported surprise-surprised talk-talked taste-tasted thank-thanked touch-touched
travel-travelled try-tried turn-turned use-used visit-visited wait-waited walk-walked
want-wanted wash-washed watch-watched wish-wished wonder-wondered work-worked worry-worried
buy-bought bring-brought build-built catch-caught choose-chose draw-drew drink-drank
drive-drove eat-ate fall-fell feel-felt find-found forget-forgot give-gave grow-grew
hear-heard hide-hid hold-held keep-kept know-knew leave-left lend-lent lose-lost
make-made meet-met pay-paid read-read ride-rode ring-rang run-ran say-said see-saw
sell-sold send-sent shake-shook sing-sang sit-sat sleep-slept speak-spoke spend-spent
stand-stood steal-stole swim-swam take-took teach-taught tell-told think-thought
throw-threw understand-understood wake-woke wear-wore win-won write-wrote
""".split()

LEX_ADJ = """
angry anxious beautiful bitter bright brilliant broken busy calm careful cheerful
clever cloudy cold comfortable crowded curious dangerous dark delicious different
difficult dirty dusty eager early easy elegant empty enormous exciting expensive
famous fancy fast fierce foggy fragile free fresh friendly funny gentle giant glorious
golden graceful grumpy handsome happy healthy heavy helpful honest huge hungry icy
important impossible innocent jealous jolly kind large lazy light little lively lonely
long loud lovely lucky magnificent modern muddy mysterious narrow nervous noisy old
orange patient peaceful perfect plain pleasant polite poor powerful precious pretty
proud purple quiet rainy rapid rare rich rough round rude sad salty scary shiny short
shy silly silver simple sleepy slow small smooth soft sour spicy splendid strange
strong sunny sweet tall tender thick thin tiny tired tough ugly unusual warm weak wealthy
wet wide wild windy wise wonderful wooden young
""".split()

LEX_PLACES = """
Amsterdam Athens Bangkok Barcelona Beijing Berlin Bogota Boston Brussels Budapest Cairo
Cape_Town Chicago Copenhagen Da_Nang Delhi Dubai Dublin Edinburgh Florence Geneva Hanoi
Helsinki Ho_Chi_Minh_City Hong_Kong Hue Istanbul Jakarta Kyoto Lagos Lima Lisbon London
Madrid Manila Melbourne Mexico_City Milan Montreal Moscow Mumbai Munich Nairobi Osaka
Oslo Paris Prague Quebec Reykjavik Rome San_Francisco Santiago Seoul Shanghai Singapore
Stockholm Sydney Taipei Tokyo Toronto Vancouver Vienna Warsaw Zurich
""".split()

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]

_FREE_PATTERNS = [
    "{Name} {verb_past} the {adj} {noun} near the {noun2} in {place}.",
    "On {weekday}, {name} and {name2} {verb_past} a {noun} for the {noun2}.",
    "The {noun} in {place} costs about {price} this {month}.",
    "Why did the {adj} {noun} {verb} the {noun2} at {time}?",
    "My {noun} is {adj}, but the {noun2} looks even more {adj2}.",
    "{Name} wants to {verb} the {noun} before {month} {day}.",
    "We {verb_past} {count} {noun}s and {count2} {noun2}s at the {place} {noun3}.",
    "If you {verb} the {noun} too early, the {noun2} becomes {adj}.",
    "The {adj} {noun} was {verb_past} by a {adj2} {noun2} on {month} {day}, {year}.",
    "Please {verb} the {noun} and send me the {noun2} by {time} on {weekday}.",
    "There were {count} {adj} {noun}s waiting outside the {noun2}.",
    "Version {ver} of the {noun} app finally lets you {verb} your {noun2}.",
]


def en_free_sentence(rng: random.Random) -> str:
    """An everyday sentence over a broad lexicon (names, places, dates, prices)."""
    v1, v2 = rng.choice(LEX_VERBS).split("-"), rng.choice(LEX_VERBS).split("-")
    name, name2 = rng.sample(NAMES, 2)
    s = rng.choice(_FREE_PATTERNS).format(
        Name=name, name=name, name2=name2, verb=v1[0], verb_past=v2[1],
        adj=rng.choice(LEX_ADJ), adj2=rng.choice(LEX_ADJ), noun=rng.choice(LEX_NOUNS),
        noun2=rng.choice(LEX_NOUNS), noun3=rng.choice(LEX_NOUNS),
        place=rng.choice(LEX_PLACES).replace("_", " "), weekday=rng.choice(WEEKDAYS),
        month=rng.choice(MONTHS), day=rng.randint(1, 28), year=rng.randint(1990, 2025),
        time=f"{rng.randint(1, 12)}:{rng.choice(['00', '15', '30', '45'])} "
             f"{rng.choice(['a.m.', 'p.m.'])}",
        price=rng.choice([f"${rng.randint(2, 900)}", f"{rng.randint(2, 900)} euros",
                          f"{rng.randint(10, 999)},000 dong", f"£{rng.randint(1, 99)}.{rng.randint(0, 99):02d}"]),
        count=rng.randint(2, 40), count2=rng.randint(2, 40),
        ver=f"{rng.randint(1, 12)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}")
    return s[0].upper() + s[1:]


def en_free_paragraph(rng: random.Random, n_min: int = 2, n_max: int = 6) -> str:
    return " ".join(en_free_sentence(rng) for _ in range(rng.randint(n_min, n_max)))
