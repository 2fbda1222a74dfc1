#!/usr/bin/env python3
"""Differential check of switchyard's byte-level BPE against Hugging Face `tokenizers`.

For a vocabulary whose pre-tokenizer is GPT-2's (tokenizer.ggml.pre = "gpt-2"), builds the
Hugging Face BPE from the GGUF's own vocab and merges (read with llama.cpp's `gguf`
package) and compares token ids on random strings (ASCII, punctuation, contractions,
whitespace runs, accents, CJK, emoji, other scripts) with `switchyard tokenize`.

usage: hf_tokenizers_check.py SWITCHYARD VOCAB.gguf [N_TEXTS] [SEED]
Exits 1 and prints the first differences when any text tokenizes differently.
"""
import json
import random
import subprocess
import sys

from gguf import GGUFReader
from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def strings(reader, name):
    f = reader.fields[name]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def main():
    exe, path = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    reader = GGUFReader(path)
    pre = reader.fields.get("tokenizer.ggml.pre")
    if pre is None or bytes(pre.parts[pre.data[0]]).decode() != "gpt-2":
        sys.exit(f"{path}: this check needs a vocabulary with tokenizer.ggml.pre = gpt-2")
    tokens = strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings(reader, "tokenizer.ggml.merges")]
    ref = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ref.decoder = decoders.ByteLevel()

    pieces = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,!?'\"-()[]{}:;/\\@#$%^&*_+=<>|~`")
    pieces += ["é", "ü", "ß", "中", "文", "日本", "ё", "😀", "🇺🇸", "  ", "   ", "\r\n", "'s", "'ll", "'VE",
               "\u00a0", "١٢٣", "한국어", "ℕ", "\u0300", "12345", "..."]
    bad = []
    for _ in range(n):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        want = ref.encode(text).ids
        run = subprocess.run([exe, "tokenize", "-m", path, "-p", text, "--ids", "--no-bos", "--no-special"],
                             capture_output=True, text=True)
        got = json.loads(run.stdout) if run.returncode == 0 else run.stderr.strip()
        if got != want:
            bad.append((text, got, want))
    for text, got, want in bad[:5]:
        print(f"text {text!r}\n  switchyard   {got}\n  hf tokenizers {want}")
    print(f"{path}: {n - len(bad)} of {n} texts tokenize identically")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
