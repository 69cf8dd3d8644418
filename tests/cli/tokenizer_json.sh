#!/usr/bin/env bash
# `trainer export` writes the run's tokenizer as a Hugging Face tokenizer.json. A reference reader
# written here from the format's definitions (tokenizers' serialisation of the Lowercase
# normalizer, the Split and ByteLevel pre-tokenizers and the BPE model; GPT-2's bytes_to_unicode)
# encodes the corpus to exactly the ids `trainer tokenize` wrote, with and without lowercasing;
# config.json names [SEP] as bos and eos. Also `trainer tokenize` says what it read and skipped,
# and `trainer generate` reads a tokens run's tokenizer.
# usage: tokenizer_json.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

mkdir -p "$tmp/corpus"
for i in $(seq 1 40); do
  printf "Don't PANIC!! The Answer is %d, or 4%d2nd... (\"quoted\") e-mail: a@b.org; x<y>z {braces} [brackets]\n" "$i" "$i"
  printf 'Unicode stays in words: caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 dash, tabs\tand   spaces; under_score ~tilde `tick` $5 #7 %%9 ^ & * + = | \\ /\n\n'
done > "$tmp/corpus/Apache-2.0"
printf 'binary\0data\n' > "$tmp/corpus/blob"
printf 'skipped: markdown\n' > "$tmp/corpus/readme.md"

check() {  # check LOWERCASE: tokenize, train 2 steps, export, compare the reference's ids with train.bin
  local lc=$1 out="$tmp/$1"
  "$trainer" tokenize --input "$tmp/corpus" --extensions "" --vocab-size 420 --eval-fraction 0 --lowercase "$lc" \
    --out "$out/tok" > "$out.log"
  grep -q "^text: read 1 file (.*) under $tmp/corpus; skipped 2: 1 not matching extensions (.md), 1 binary$" "$out.log" ||
    { echo "no read/skipped line:"; cat "$out.log"; exit 1; }
  local vocab
  vocab=$(sed -n 's/.*vocab_size = \([0-9]*\).*/\1/p' "$out.log")
  cat > "$out/gpt.toml" <<TOML
[run]
out_dir = "$out/runs"
name = "a"
[model]
name = "gpt"
dim = 16
layers = 1
heads = 2
ffn = 32
[data]
name = "tokens"
train_path = "$out/tok/train.bin"
vocab_size = $vocab
seq_len = 8
[train]
steps = 2
micro_batch = 2
[optimizer]
name = "adamw"
[distributed]
world_size = 1
[checkpoint]
every = 2
TOML
  "$trainer" --recipe "$out/gpt.toml" > /dev/null
  mkdir -p "$out/hf"
  "$trainer" export "$out/runs/a" --out "$out/hf/model.safetensors" --config "$out/hf/config.json" > "$out/export.log"
  grep -q "export: wrote $out/hf/tokenizer.json" "$out/export.log"
  # generate finds the same tokenizer (tokenizer.txt beside data.train_path) for a tokens run.
  "$trainer" generate "$out/runs/a" --prompt "Don't PANIC" --tokens 3 --temperature 0 2> /dev/null > "$out/gen.txt"
  if [ "$lc" = true ]; then grep -q "^don ' t panic" "$out/gen.txt"; else grep -q "^Don ' t PANIC" "$out/gen.txt"; fi
  "$py" - "$out/hf/tokenizer.json" "$out/hf/config.json" "$out/tok/train.bin" "$tmp/corpus/Apache-2.0" "$lc" <<'PY'
import json, re, struct, sys

tj = json.load(open(sys.argv[1], encoding="utf-8"))
config = json.load(open(sys.argv[2]))
lowercase = sys.argv[5] == "true"

# GPT-2's bytes_to_unicode (openai/gpt-2 src/encoder.py).
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
byte_char = {b: chr(c) for b, c in zip(bs, cs)}

def normalize(text, spec):
    if spec is None:
        return text
    assert spec["type"] == "Lowercase", spec
    return text.lower()

def split(pieces, step):
    """tokenizers' Split: the pattern's matches Removed or Isolated; empty pieces dropped."""
    assert step["invert"] is False
    pattern = re.compile(step["pattern"]["Regex"])
    out = []
    for p in pieces:
        at = 0
        for m in pattern.finditer(p):
            out.append(p[at:m.start()])
            if step["behavior"] == "Isolated":
                out.append(m.group())
            else:
                assert step["behavior"] == "Removed", step
            at = m.end()
        out.append(p[at:])
    return [p for p in out if p]

def byte_level(pieces, step):
    """ByteLevel without its regex: a space before each piece that lacks one, bytes as characters."""
    assert step["use_regex"] is False
    if step["add_prefix_space"]:
        pieces = [p if p.startswith(" ") else " " + p for p in pieces]
    return ["".join(byte_char[b] for b in p.encode("utf-8")) for p in pieces]

def pre_tokenize(text, spec):
    steps = spec["pretokenizers"] if spec["type"] == "Sequence" else [spec]
    pieces = [text]
    for s in steps:
        pieces = split(pieces, s) if s["type"] == "Split" else byte_level(pieces, s)
    return pieces

model = tj["model"]
assert model["type"] == "BPE" and model["continuing_subword_prefix"] is None and model["end_of_word_suffix"] is None
vocab = model["vocab"]
merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
rank = {pair: r for r, pair in enumerate(merges)}

def bpe(word):
    """BPE as the model applies its merges: the lowest-ranked adjacent pair first, every
    occurrence of it left to right, until no pair has a rank."""
    symbols = list(word)
    while True:
        ranked = [rank[p] for p in zip(symbols, symbols[1:]) if p in rank]
        if not ranked:
            return [vocab[s] for s in symbols]
        a, b = merges[min(ranked)]
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out

def encode(text):
    ids = []
    for piece in pre_tokenize(normalize(text, tj["normalizer"]), tj["pre_tokenizer"]):
        ids += bpe(piece)
    return ids

special = {t["content"]: t["id"] for t in tj["added_tokens"]}
assert special == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}, special
assert all(vocab[k] == v for k, v in special.items())
assert sorted(vocab.values()) == list(range(len(vocab))), "ids are not 0..n-1"
assert (tj["normalizer"] is not None) == lowercase, tj["normalizer"]
assert config["bos_token_id"] == 3 and config["eos_token_id"] == 3 and config["vocab_size"] == len(vocab), config

# The corpus as the text loader reads it: paragraphs at blank lines, whitespace runs collapsed.
paragraphs = [" ".join(p.split()) for p in open(sys.argv[4], encoding="utf-8").read().split("\n\n")]
expected = []
for p in paragraphs:
    if p:
        expected += encode(p) + [special["[SEP]"]]

blob = open(sys.argv[3], "rb").read()
header = struct.unpack("<256i", blob[:1024])
assert header[0] == 20240520 and header[1] == 1
ours = list(struct.unpack("<%dH" % header[2], blob[1024:1024 + 2 * header[2]]))
assert len(ours) > 1000, len(ours)
if ours != expected:
    first = next(i for i, (a, b) in enumerate(zip(ours, expected)) if a != b) if len(ours) == len(expected) else -1
    sys.exit("ids differ (%d ours, %d reference; first difference at %d)" % (len(ours), len(expected), first))
# The case is as asked: "PANIC" is one token sequence or another.
assert (encode("PANIC") == encode("panic")) == lowercase
print("tokenizer.json: %d tokens, %d merges, %d ids match (lowercase %s)" % (len(vocab), len(merges), len(ours), lowercase))
PY
}
check true
check false

# A folder with no file of the extensions asked for: the error names the flag that asked.
set +e
"$trainer" tokenize --input "$tmp/corpus" --extensions .txt --out "$tmp/none" > /dev/null 2> "$tmp/err.log"
rc=$?
set -e
[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err.log")" -eq 1 ] || { echo "expected one line, exit 2 (got $rc)"; cat "$tmp/err.log"; exit 1; }
grep -q "$tmp/corpus: no text documents in files with extension .txt in this folder (--extensions; .*skipped 3: 3 not matching extensions (.md, none))" "$tmp/err.log" ||
  { echo "expected the flag named:"; cat "$tmp/err.log"; exit 1; }
[ ! -e "$tmp/none" ] || { echo "tokenize left $tmp/none behind"; exit 1; }
echo "tokenizer_json: ok"
