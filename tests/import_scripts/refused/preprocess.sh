#!/bin/bash
# A hand-written data preparation script in the style of Megatron-LM's docs: not a training launch.
DATA=/mnt/megatron/corpus
python tools/preprocess_data.py \
  --input "$DATA/wiki.jsonl" \
  --output-prefix /mnt/megatron/data/wiki/wiki \
  --json-keys text \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file /mnt/megatron/tokenizers/gpt2/vocab.json \
  --merge-file /mnt/megatron/tokenizers/gpt2/merges.txt \
  --append-eod \
  --workers 16
