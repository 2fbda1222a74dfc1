#!/usr/bin/env python3
"""The official OpenAI Python client against a running switchyard server.

usage: openai_client_check.py BASE_URL MODEL   (BASE_URL like http://127.0.0.1:8080/v1)
Exits non-zero with a message on the first check that fails.
"""
import sys

import openai
from openai import OpenAI


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)

    ids = [m.id for m in client.models.list()]
    check(ids == [model], f"models.list() gave {ids}")

    c = client.completions.create(model=model, prompt="A fool and his money", max_tokens=8, temperature=0)
    check(isinstance(c.choices[0].text, str) and c.choices[0].text, "completion text")
    check(c.choices[0].finish_reason in ("stop", "length"), f"finish_reason {c.choices[0].finish_reason}")
    check(c.usage.completion_tokens <= 8 and c.usage.prompt_tokens > 0, f"usage {c.usage}")

    # A long prompt twice: the second time its whole blocks come from the prefix cache, as
    # usage.prompt_tokens_details.cached_tokens says (OpenAI's prompt caching field).
    long_prompt = "And the LORD spake unto Moses, saying, Speak unto the children of Israel, " * 3
    c1 = client.completions.create(model=model, prompt=long_prompt, max_tokens=2, temperature=0)
    c2 = client.completions.create(model=model, prompt=long_prompt, max_tokens=2, temperature=0)
    cached = c2.usage.prompt_tokens_details.cached_tokens if c2.usage.prompt_tokens_details else None
    check(cached is not None and 16 <= cached < c2.usage.prompt_tokens, f"cached tokens {c2.usage}")
    check(c2.choices[0].text == c1.choices[0].text, "the same text from cached blocks")

    streamed = "".join(
        ch.choices[0].text
        for ch in client.completions.create(model=model, prompt="A fool and his money", max_tokens=8, temperature=0, stream=True)
        if ch.choices
    )
    check(streamed == c.choices[0].text, f"streamed completion {streamed!r} != {c.choices[0].text!r}")

    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    msg = r.choices[0].message
    check(msg.role == "assistant" and isinstance(msg.content, str), f"chat message {msg}")
    check(r.object == "chat.completion", f"object {r.object}")

    parts, usage, roles = [], None, []
    stream = client.chat.completions.create(
        model=model, messages=messages, max_tokens=12, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for choice in ch.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            if choice.delta.content:
                parts.append(choice.delta.content)
    check("".join(parts) == msg.content, f"streamed chat {''.join(parts)!r} != {msg.content!r}")
    check(roles == ["assistant"], f"roles in the stream: {roles}")
    check(usage is not None and usage.completion_tokens == r.usage.completion_tokens, f"stream usage {usage} vs {r.usage}")

    r3 = client.chat.completions.create(
        model=model, messages=messages, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2
    )
    content = r3.choices[0].logprobs.content
    check(len(content) == r3.usage.completion_tokens, f"chat logprobs for {len(content)} tokens")
    check(all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in content), f"chat logprobs {content}")
    check(b"".join(bytes(t.bytes) for t in content).decode("utf-8", "replace") == r3.choices[0].message.content,
          "chat logprobs bytes spell the message")
    c2 = client.completions.create(model=model, prompt="A fool and his money", max_tokens=4, temperature=0, logprobs=1)
    lp = c2.choices[0].logprobs
    check("".join(lp.tokens) == c2.choices[0].text and len(lp.token_logprobs) == len(lp.tokens),
          f"completion logprobs {lp}")

    c3 = client.completions.create(model=model, prompt="A fool and his money", max_tokens=0, echo=True, logprobs=1)
    lp3 = c3.choices[0].logprobs
    check(c3.choices[0].text == "A fool and his money" and lp3.token_logprobs[0] is None
          and all(v < 0 for v in lp3.token_logprobs[1:]) and len(lp3.tokens) == c3.usage.prompt_tokens,
          f"prompt log-probabilities {lp3}")

    r2 = client.chat.completions.create(model=model, messages=messages, max_tokens=6, n=2, seed=7, temperature=1.0)
    check([ch.index for ch in r2.choices] == [0, 1], "n=2 choices")

    try:
        client.chat.completions.create(model="no-such-model", messages=messages)
        check(False, "unknown model accepted")
    except openai.NotFoundError as e:
        check(e.body.get("param") == "model" if isinstance(e.body, dict) else True, f"error body {e.body}")
    try:
        client.completions.create(model=model, prompt="hi", max_tokens=100000)
        check(False, "max_tokens beyond the context accepted")
    except openai.BadRequestError as e:
        check("context" in str(e), f"message {e}")
    print("openai client: all checks passed")


if __name__ == "__main__":
    main()
