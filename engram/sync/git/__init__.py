"""Git sync: the chunk codec, indexes, the Go-format reader and git export/import."""
