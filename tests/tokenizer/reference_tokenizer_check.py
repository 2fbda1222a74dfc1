#!/usr/bin/env python3
"""Differential check of switchyard's tokenizers against implementations nobody here wrote.

- SentencePiece vocabularies (tokenizer.ggml.model = "llama"): Google's `sentencepiece`,
  with a BPE model proto built from the GGUF's pieces, scores and token types (byte
  fallback, dummy prefix, no whitespace folding: what llama.cpp's SPM tokenizer emulates).
- Byte-level BPE with GPT-2's pre-tokenizer (tokenizer.ggml.pre = "gpt-2"): Hugging Face
  `tokenizers`, built from the GGUF's own vocab and merges.
The GGUF is read with llama.cpp's `gguf` package. Token ids are compared with
`switchyard tokenize --ids --no-bos --no-special` on random strings (ASCII, punctuation,
contractions, whitespace runs, accents, CJK, emoji, other scripts).

usage: reference_tokenizer_check.py SWITCHYARD VOCAB.gguf [N_TEXTS] [SEED]
Exits 1 and prints the first differences when any text tokenizes differently.
"""
import json
import random
import subprocess
import sys

from gguf import GGUFReader


def strings(reader, name):
    f = reader.fields[name]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def numbers(reader, name):
    f = reader.fields[name]
    return [f.parts[i][0] for i in f.data]


def sentencepiece_reference(reader):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 0, 1, 2, -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    kind = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
            3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
            5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}
    for text, score, t in zip(strings(reader, "tokenizer.ggml.tokens"), numbers(reader, "tokenizer.ggml.scores"),
                              numbers(reader, "tokenizer.ggml.token_type")):
        p = m.pieces.add()
        p.piece, p.score, p.type = text, float(score), kind[int(t)]
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    return sp.encode


def gpt2_reference(reader):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokens = strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings(reader, "tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return lambda text: tok.encode(text).ids


def main():
    exe, path = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    reader = GGUFReader(path)
    model = strings(reader, "tokenizer.ggml.model")[0]
    pre = strings(reader, "tokenizer.ggml.pre")[0] if "tokenizer.ggml.pre" in reader.fields else None
    if model == "llama":
        reference = sentencepiece_reference(reader)
    elif model == "gpt2" and pre == "gpt-2":
        reference = gpt2_reference(reader)
    else:
        sys.exit(f"{path}: no reference for tokenizer model {model!r} with pre-tokenizer {pre!r}")

    pieces = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,!?'\"-()[]{}:;/\\@#$%^&*_+=<>|~`")
    pieces += ["é", "ü", "ß", "中", "文", "日本", "ё", "😀", "🇺🇸", "  ", "   ", "\r\n", "'s", "'ll", "'VE",
               "\u00a0", "١٢٣", "한국어", "ℕ", "\u0300", "12345", "...", "▁"]
    bad = []
    for _ in range(n):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        want = reference(text)
        run = subprocess.run([exe, "tokenize", "-m", path, "-p", text, "--ids", "--no-bos", "--no-special"],
                             capture_output=True, text=True)
        got = json.loads(run.stdout) if run.returncode == 0 else run.stderr.strip()
        if got != want:
            bad.append((text, got, want))
    for text, got, want in bad[:5]:
        print(f"text {text!r}\n  switchyard {got}\n  reference  {want}")
    print(f"{path}: {n - len(bad)} of {n} texts tokenize identically")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
