"""Recall's encoder (all-MiniLM-L6-v2 in NumPy): what embedding costs, beside the matrix
products of the same forward passes measured in the same run.

Two sets of texts, each embedded --repeat times in this process after one untimed run:
  - decisions: 256 texts of 20 to 60 words, as agents record them (one window each);
  - long texts: 32 texts of about 900 words, each several 256-token windows, as
    `baton index` embeds a corpus.
The floor is the forward's linear layers alone, as matrix products over the same number of
tokens (no padding, no attention, no norms): what BLAS must do whatever the rest costs.

    .venv/bin/python -m bench.embedding [--repeat 7]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np

from baton.recall.embedding import DIMENSIONS, MiniLMEncoder
from bench.common import spread, timed_calls

# The words the texts are drawn from: an engineering decision's vocabulary.
WORDS = tuple(" ".join([
    "the cache keeps retries bounded so postgres never sees a thundering herd after a deploy;",
    "we chose kafka for the signal log because replays must be idempotent and ordered per ticket,",
    "and the graph holds file touches so two agents editing one module hear of it at once",
]).split(" "))
HIDDEN = 4 * DIMENSIONS  # the intermediate layer's width
LAYERS = 6


def texts(count: int, low: int, high: int, seed: int) -> list[str]:
    chosen = random.Random(seed)
    return [" ".join(chosen.choice(WORDS) for _ in range(chosen.randint(low, high))) for _ in range(count)]


def tokens(encoder: MiniLMEncoder, batch: list[str]) -> int:
    """The tokens of every window of batch, as the encoder splits them."""
    encodings = encoder._tokenizer.encode_batch(batch)
    return sum(len(window.ids) for e in encodings for window in (e, *e.overflowing))


def matrix_floor(count: int) -> Callable[[], None]:
    """The forward's linear layers over count tokens: per layer four DIMENSIONS-square
    products (query, key, value, output), one up to HIDDEN and one back."""
    rng = np.random.default_rng(0)
    narrow = rng.standard_normal((count, DIMENSIONS), dtype=np.float32)
    wide = rng.standard_normal((count, HIDDEN), dtype=np.float32)
    square = rng.standard_normal((DIMENSIONS, DIMENSIONS), dtype=np.float32)
    up = rng.standard_normal((DIMENSIONS, HIDDEN), dtype=np.float32)
    down = rng.standard_normal((HIDDEN, DIMENSIONS), dtype=np.float32)

    def run() -> None:
        for _ in range(LAYERS):
            for _ in range(4):
                narrow @ square
            narrow @ up
            wide @ down

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    encoder = MiniLMEncoder.load()
    sets = {"decisions (256 texts, one window each)": texts(256, 20, 60, 1),
            "long texts (32 texts of about 900 words)": texts(32, 850, 950, 2)}
    print(f"{'figure':48} {'median ms':>10} {'p10-p90 ms':>18} {'tokens':>8} {'over floor':>10}")
    for name, batch in sets.items():
        count = tokens(encoder, batch)
        floor_run = matrix_floor(count)
        floor_run()
        floor = timed_calls(floor_run, args.repeat)
        encoder.encode(batch)
        taken = timed_calls(lambda batch=batch: encoder.encode(batch), args.repeat)
        median, low, high = spread(taken)
        floor_median, floor_low, floor_high = spread(floor)
        print(f"{name:48} {median:10.1f} {f'{low:.1f}-{high:.1f}':>18} {count:8,} {median / floor_median:9.2f}x")
        print(f"{'  floor: its linear layers as matrix products':48} {floor_median:10.1f} "
              f"{f'{floor_low:.1f}-{floor_high:.1f}':>18} {count:8,}")


if __name__ == "__main__":
    main()
