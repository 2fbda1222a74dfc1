#!/usr/bin/env python3
"""Random request bodies against a running switchyard server, from several clients at once.

usage: random_requests_check.py PORT MODEL [REQUESTS_PER_CLIENT] [CLIENTS] [SEED]

Each body mixes valid and invalid values of every request field (types, ranges, prompts of
text, token ids and batches, chat messages of every role and content shape), and a third
of the streams are hung up on after a few bytes. Every answer must be a 2xx, a 4xx with an
OpenAI-style error object, or a 503 (queue full); never another 5xx, a dropped connection
on a request that was read to the end, or a server that stops answering. Exits non-zero
with the first failures.
"""
import http.client
import json
import random
import sys
import threading

FIELDS = {
    "max_tokens": [0, 1, 2, 5, -1, 10**9, "3", 2.5, True],
    "max_completion_tokens": [0, 1, 3, -2],
    "n": [1, 2, 3, 0, -1, 100, "2"],
    "temperature": [0, 0.7, 1.5, 2, -0.1, "hot", 1e308],
    "top_p": [0, 0.5, 1, 1.1, -1],
    "top_k": [0, 1, 40, -1, 10**6],
    "min_p": [0, 0.1, 1, 2],
    "seed": [0, 1, -1, 2**63, 2**64, "x"],
    "presence_penalty": [0, 1.5, -2, 3],
    "frequency_penalty": [0, 1.5, -2, 3],
    "repeat_penalty": [1.0, 1.3, 0, -1],
    "logit_bias": [{}, {"1": 100}, {"1": -100}, {"999999": 5}, {"x": 1}, {"2": "a"}, [1]],
    "stop": ["e", ["e", "the"], [], [""], ["\u00e9"], "\n", ["a", "b", "c", "d", "f"], [1]],
    "echo": [True, False, 1],
    "logprobs": [0, 1, 5, 20, 21, True, -1],
    "top_logprobs": [0, 2, 20, 21, -1],
    "stream": [True, False, "yes"],
    "stream_options": [{"include_usage": True}, {"include_usage": False}, {}, "x"],
    "suffix": ["end", ""],
    "best_of": [1, 2],
    "user": ["u", 5],
    "ignore_eos": [True, False],
    "response_format": [{"type": "text"}, {"type": "json_object"}],
    "tools": [[], [{"type": "function", "function": {"name": "f"}}]],
}
PROMPTS = ["A fool", "", " ", "\u00e9\u00e8\u4e2d\U0001F600", "<s>", "</s><s>", "a " * 300,
           ["A", "B"], [], [1, 2, 3], [[1, 2], [3]], [0], [31999], [10**6], [-1], 5, None, ["", "x"]]
CONTENTS = ["hi", "", [{"type": "text", "text": "hi"}], [{"type": "image_url", "image_url": {"url": "x"}}],
            None, 5, [{"type": "text"}]]
ROLES = ["system", "user", "assistant", "developer", "tool", "bogus"]


def random_body(rng, model):
    chat = rng.random() < 0.45
    body = {}
    if rng.random() < 0.97:
        body["model"] = model if rng.random() < 0.97 else "no-such-model"
    if chat:
        messages = []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            m = {"role": rng.choice(ROLES) if rng.random() < 0.3 else "user"}
            if rng.random() < 0.95:
                m["content"] = rng.choice(CONTENTS) if rng.random() < 0.3 else "hi"
            messages.append(m)
        if rng.random() < 0.97:
            body["messages"] = messages
    elif rng.random() < 0.97:
        body["prompt"] = rng.choice(PROMPTS) if rng.random() < 0.5 else "A fool and his money"
    for key, values in FIELDS.items():
        if rng.random() < 0.06:
            body[key] = rng.choice(values)
    if "max_tokens" not in body:
        body["max_tokens"] = rng.choice([0, 1, 4, 16, 64])
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def is_error_object(data):
    try:
        return isinstance(json.loads(data)["error"]["message"], str)
    except (ValueError, KeyError, TypeError):
        return False


def client(port, model, n, seed, failures, lock):
    rng = random.Random(seed)
    for _ in range(n):
        path, body = random_body(rng, model)
        hang_up = body.get("stream") is True and rng.random() < 0.3
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            data = reply.read(rng.randint(1, 200)) if hang_up else reply.read()
            conn.close()
        except Exception as e:  # a dropped connection or a timeout
            with lock:
                failures.append(f"{path} {json.dumps(body)[:300]}: {e!r}")
            continue
        if 200 <= reply.status < 300 or reply.status == 503:
            ok = True
        elif 400 <= reply.status < 500:
            ok = hang_up or is_error_object(data)  # a body read in part is not checked
        else:
            ok = False
        if not ok:
            with lock:
                failures.append(f"{path} {json.dumps(body)[:300]}: HTTP {reply.status} {data[:200]!r}")


def main():
    port, model = int(sys.argv[1]), sys.argv[2]
    per_client = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    clients = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    failures, lock = [], threading.Lock()
    threads = [threading.Thread(target=client, args=(port, model, per_client, seed * 1000 + i, failures, lock))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        alive = conn.getresponse().status == 200
    except OSError:
        alive = False
    if failures or not alive:
        print(f"{len(failures)} of {per_client * clients} requests failed; server alive: {alive}", file=sys.stderr)
        for f in failures[:10]:
            print("  " + f, file=sys.stderr)
        sys.exit(1)
    print(f"{per_client * clients} random requests from {clients} clients: every answer well-formed")


if __name__ == "__main__":
    main()
