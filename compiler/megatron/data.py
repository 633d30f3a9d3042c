"""Megatron-LM's data preparation at the pinned commit: tools/preprocess_data.py, its output files,
and what they take on disk.

Output naming: `{output_prefix}_{key}_{level}.bin/.idx` with level `document` (tools/preprocess_data.py:
171-174, 454-457); the training step's --data-path names that prefix without the suffix. Token ids
are stored as uint16 when the vocabulary has fewer than 65500 entries, else int32
(megatron/core/datasets/indexed_dataset.py DType.optimal_dtype); the index holds a 9-byte magic,
an 8-byte version, a 1-byte dtype code, two 8-byte counts, then per sequence a 4-byte length and an
8-byte pointer, and per document an 8-byte index (indexed_dataset.py _IndexWriter.write).
"""

from __future__ import annotations

import posixpath
from ..tuples import NamedTuple

PREPROCESS_SCRIPT = "tools/preprocess_data.py"
LEVEL = "document"
MANIFEST_SUFFIX = ".manifest"  # ours: beside each prefix, written last, after both files are complete
DATA_DIR = "data"  # the default output directory is {mount}/data/{name}
# Tokenizers and the files each needs in the spec (build_tokenizer.py at 571370c8).
NEEDS_VOCAB_AND_MERGES = frozenset({"GPT2BPETokenizer"})
NEEDS_MODEL = frozenset({"HuggingFaceTokenizer", "SentencePieceTokenizer", "GPTSentencePieceTokenizer",
                         "Llama2Tokenizer", "TikTokenizer"})
UINT16_LIMIT = 65500  # DType.optimal_dtype: below this vocabulary size, uint16 ids
INDEX_HEADER_BYTES = 9 + 8 + 1 + 8 + 8
# Stated assumptions of the estimates. The two ratios are those of the one corpus measured so far
# (tests/fixtures/e2e-steps: 2,091,186 bytes of JSON lines gave 6000 documents and 397,538 tokens
# of a 1000-entry BPE); a corpus of other text or another tokenizer differs, so the report names them.
TOKENS_PER_INPUT_BYTE = 0.19
INPUT_BYTES_PER_DOCUMENT = 348
# The time of one prefix, measured through the generated prepare.sh on the H200 host (16 CPUs) with
# that corpus 25 times over, 1, 4 and 8 workers (tests/fixtures/prepare-throughput): a fixed 29 s
# (imports of torch, Megatron and datasets before the input is opened, and finalising after), the
# tokenizing at 330,000 tokens/s a worker up to 2.1M tokens/s in all (8 workers reached 2.09M: the
# one process that reads the input and writes the .bin bounds it), then publish's read-back, 15 s.
# A real tokenizer on real text is slower than this 1000-entry BPE: the report says "stated rates".
# These constants were fitted to all four runs (in sample: each within 10 %). Held out
# (tools/fit_prepare_time.py fits three runs and predicts the fourth): +0.4 % (1 worker), +7.6 % (4),
# -5.7 % (8) on the 52 MB corpus, and -21.8 % on the 2 MB one, the only run that tells the fixed cost
# from the rate; tests/test_prepare.py checks both.
STARTUP_SECONDS = 29.0
READ_BACK_SECONDS = 15.0
TOKENS_PER_SECOND_PER_WORKER = 330_000.0
TOKENS_PER_SECOND_MAX = 2_100_000.0


class Prefix(NamedTuple):
    """One output prefix of the preparation: from one input and one JSON key."""

    input: str
    key: str
    stem: str  # the input's file name without its extension: the prefix's first part
    prefix: str  # {output_dir}/{stem}_{key}_document
    weight: float | None


def input_stem(path: str) -> str:
    """wiki.jsonl -> wiki; the name preprocess_data.py's output prefix starts with."""
    name = posixpath.basename(path)
    for suffix in (".jsonl", ".json", ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def prefixes(inputs: list[tuple[str, float | None]], keys: list[str], output_dir: str) -> tuple[Prefix, ...]:
    """The prefixes a preparation writes, input by input and key by key."""
    out = []
    for path, weight in inputs:
        stem = input_stem(path)
        for key in keys:
            out.append(Prefix(path, key, stem, f"{output_dir}/{stem}_{key}_{LEVEL}", weight))
    return tuple(out)


def token_bytes(vocab_size: int | None) -> int:
    """Bytes per stored token id (uint16 or int32); int32 when the vocabulary is unknown."""
    return 2 if vocab_size is not None and vocab_size < UINT16_LIMIT else 4


class DataEstimate(NamedTuple):
    tokens: int
    bin_bytes: int
    idx_bytes: int
    seconds: float


def estimate_prefix(input_bytes: float, vocab_size: int | None, workers: int, documents: int | None = None) -> DataEstimate:
    """What one input's prefix takes on disk and how long prepare.sh takes for it (start, tokenizing,
    read-back), at the stated rates; the index counts one sequence per document (no sentence splitting)."""
    tokens = int(input_bytes * TOKENS_PER_INPUT_BYTE)
    docs = documents if documents is not None else max(1, int(input_bytes // INPUT_BYTES_PER_DOCUMENT))
    idx = INDEX_HEADER_BYTES + docs * (4 + 8) + (docs + 1) * 8
    rate = min(TOKENS_PER_SECOND_PER_WORKER * workers, TOKENS_PER_SECOND_MAX)
    return DataEstimate(tokens, tokens * token_bytes(vocab_size), idx, STARTUP_SECONDS + tokens / rate + READ_BACK_SECONDS)


TOKENIZER_FIELDS = ("type", "vocab_file", "merge_file", "model")


def tokenizer_record(tokenizer: object) -> tuple[tuple[str, str], ...]:
    """The tokenizer as the preparation's manifest records it (`tokenizer_type: …` lines): what
    both steps must agree on."""
    return tuple((f"tokenizer_{f}", str(getattr(tokenizer, f))) for f in TOKENIZER_FIELDS
                 if getattr(tokenizer, f) is not None)
