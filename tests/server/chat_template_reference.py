#!/usr/bin/env python3
"""Renders published chat templates with jinja2, the way Hugging Face transformers does.

The reference for ChatTemplateReference.ChatTemplatesMatchJinjaRenderingsOfPublishedTemplates:
each template in TEMPLATES_DIR (the models' own tokenizer.chat_template texts, listed in
SOURCES.md there) is rendered for a fixed set of conversations by jinja2's sandboxed
environment with trim_blocks and lstrip_blocks, raise_exception, strftime_now and a tojson
filter that keeps non-ASCII text, as transformers' apply_chat_template sets it up. The C++ renderer
must give the same text wherever the template accepts the conversation.

usage: chat_template_reference.py TEMPLATES_DIR OUT.json
Writes a JSON array of cases: template file, bos and eos texts, messages,
add_generation_prompt, and either the rendered text or the template's own error.
"""
import json
import os
import sys
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Conversations a server gets: a lone question, a system prompt (also an empty one), several
# turns, text with surrounding whitespace and newlines (templates differ in whether they trim;
# ASCII and beyond) or beyond ASCII, a reply sent back with its reasoning, an assistant turn
# last (rendered with and without the generation prompt), and system messages in odd places.
CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"}],
    [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "Who are you"},
    ],
    [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "  Two lines:\nfirst\nsecond  "},
    ],
    # An empty system prompt, and text beyond ASCII.
    [{"role": "system", "content": ""}, {"role": "user", "content": "Grüße, 你好 🙂"}],
    # A reply sent back with its reasoning (Qwen3 drops it from history replies).
    [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nA greeting.\n</think>\n\nHello!"},
        {"role": "user", "content": "Bye"},
    ],
    [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Name a colour"},
        {"role": "assistant", "content": "Blue"},
    ],
    # System messages beyond the usual one: two at the start, one mid-conversation, one last.
    [
        {"role": "system", "content": "One"},
        {"role": "system", "content": "Two"},
        {"role": "user", "content": "Hi"},
    ],
    [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo"},
        {"role": "system", "content": "Be brief"},
        {"role": "user", "content": "Again"},
    ],
    [{"role": "user", "content": "Hi"}, {"role": "system", "content": "Be brief"}],
    # Whitespace beyond ASCII around the text: Jinja's trim and Python's strip() remove it.
    [
        {"role": "system", "content": "\u00a0Sys\u3000"},
        {"role": "user", "content": "\fHi\x1c"},
        {"role": "assistant", "content": "\u2003ok\u00a0"},
        {"role": "user", "content": "\x0bagain\u3000"},
    ],
]


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    return env


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder = sys.argv[1]
    with open(os.path.join(folder, "tokens.json"), encoding="utf-8") as f:
        tokens = json.load(f)
    env = environment()
    cases = []
    for name in sorted(tokens):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            text = f.read()
        template = env.from_string(text)
        bos, eos = tokens[name]["bos"], tokens[name]["eos"]
        for messages in CONVERSATIONS:
            for gen in (True, False) if messages[-1]["role"] == "assistant" else (True,):
                case = {"template": name, "bos": bos, "eos": eos, "messages": messages, "add_generation_prompt": gen}
                try:
                    case["text"] = template.render(
                        messages=messages, add_generation_prompt=gen, bos_token=bos, eos_token=eos, tools=None
                    )
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
    print(f"{len(cases)} cases from {len(tokens)} templates")


if __name__ == "__main__":
    main()
